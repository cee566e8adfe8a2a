#pragma once
// `planner compare`: the scenario on each hardware option of its `compare` block. Each option's
// search space (or, without a `search` block, the scenario's layout) is evaluated at each of the
// option's node counts, and the best layout at each size is what that option offers: its step,
// throughput, and time, GPU-hours and cost to train. Then which option trains fastest, which
// cheapest, and which meets the deadline for the least money.
#include <string>
#include <vector>

#include "evaluation.h"

namespace trainsim {

struct ComparedOption {
  std::string name;
  const Scenario* scenario = nullptr;  // the option's scenario (its hardware, nodes and price)
  std::vector<Evaluation> best;        // the best layout at each node count that has one, by node count
  std::vector<int> no_fit;             // node counts where no layout fits in memory (or, searching, none is valid)
  std::size_t evaluated = 0;           // layouts considered over every node count
};

// Where one option at one size stands against the others.
struct ComparedPick {
  int option = -1;  // index into the options; -1: none qualifies
  int size = -1;    // index into that option's `best`
};

struct Comparison {
  std::vector<ComparedOption> options;
  // Every option has a price (gpu_hour_usd): money is compared; otherwise GPU-hours are.
  bool priced = false;
  // With the scenario's tokens_total: the shortest time to train, the lowest cost (or fewest
  // GPU-hours) to train, and the same among the sizes that train within the deadline. Without
  // tokens_total: the highest throughput and the most tokens per dollar (or per GPU-hour).
  ComparedPick fastest, cheapest, cheapest_in_deadline;
};

// Evaluates every option of `s.compare` (`threads` for each search; 0: every core).
Comparison compare_hardware(const Scenario& s, int threads);
// Tokens trained per dollar: an hour's tokens (goodput included) over the hour's price of the
// layout's GPUs; 0 where the option has no price.
double tokens_per_dollar(const Scenario& option, const Evaluation& ev);

}  // namespace trainsim

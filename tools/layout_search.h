#pragma once
// Enumerates a scenario's search space, applies the frameworks' constraints, prunes by the memory
// model, simulates what is left (symmetric mode, in parallel) and ranks by the objective.
#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "evaluation.h"

namespace trainsim {

struct Candidate {
  Layout layout;
  int nodes = 0;
};

// Every valid layout of the space for each node count, in a fixed order.
std::vector<Candidate> enumerate_layouts(const Scenario& s);

struct SearchResult {
  std::vector<Evaluation> ranked;   // simulated, best first
  std::vector<Evaluation> oom;      // pruned by memory (memory estimate only)
  std::size_t evaluated = 0;        // layouts considered (valid ones)
  std::size_t pruned_oom = 0;
  // Layouts that fit but were not simulated: even at their step's lower bound they could be
  // neither among the `keep` best nor the best of their node count (SearchOptions::keep), by
  // their index in the candidates.
  std::size_t pruned_bound = 0;
  std::vector<std::size_t> bound_skipped;
  double wall_s = 0;
};

struct SearchOptions {
  int threads = 0;                   // 0: hardware concurrency
  std::size_t shard = 0, shards = 1; // evaluate candidates i with i % shards == shard (MPI)
  // How many of the best layouts the caller reads (besides the best of each node count). With 0
  // every layout that fits is simulated; otherwise a layout whose step's lower bound already
  // ranks it below both is skipped.
  std::size_t keep = 0;
  // With shards: every shard's search calls this between its batches, the same number of times on
  // each, with its keep-th best objective simulated so far and its best at each node count of the
  // candidates (ascending; -infinity for none), and gets back the largest of each over the shards
  // (a collective, such as MPI_Allreduce with MPI_MAX). A layout below the largest keep-th best
  // is below keep layouts of that shard, so below the keep-th best of all, and so for the best of
  // its size: each shard skips by what every shard has simulated. `more`: this shard has layouts
  // left to simulate; returns whether any shard has.
  std::function<bool(std::vector<double>& values, bool more)> share;
  std::function<void(std::size_t done, std::size_t total)> progress;
};

SearchResult search_layouts(const Scenario& s, const std::vector<Candidate>& candidates, const SearchOptions& opt);
// Orders by the scenario's objective, best first (ties broken by the layout description).
void rank_evaluations(const Scenario& s, std::vector<Evaluation>& evs);
double objective_value(const Scenario& s, const Evaluation& ev);  // larger is better
// The best-ranked layout of each node count in `ranked` (best first), by node count.
std::vector<const Evaluation*> best_per_size(const std::vector<Evaluation>& ranked);
// One phrase saying why `loser` ranks below `winner`.
std::string why_lost(const Scenario& s, const Evaluation& winner, const Evaluation& loser);
std::string oom_phrase(const Evaluation& ev);

}  // namespace trainsim

#pragma once
// Kept graphs: each thread keeps the task graphs of its last few runs, keyed by everything a
// graph's structure depends on, so that a step of the same structure (a search's layouts that
// differ only in micro-batch size or recompute) refills one with its own numbers
// (Builder::refill) instead of building it.
#include <cstdint>
#include <vector>

#include "step_graph.h"

namespace trainsim::sim::detail {

// Everything a run's graph and its unchanging numbers (collectives, the optimizer, links,
// interference) depend on: all of the step's inputs but the micro-batch size and the recompute,
// which change only the passes' compute and TP traffic and the activations sent between stages
// (what Builder::refill works out again). The cost model enters by instance: one instance never
// changes. For a run of M micro-batches with period P, by the cut comparison or not.
void graph_key(const StepInput& in, int M, int P, bool cut, std::vector<std::uint64_t>& k);
// A per-thread vector to build keys in.
std::vector<std::uint64_t>& thread_key_scratch();
// The thread's kept workspace built for `key`, or the least recently used one (its key cleared)
// to build into. `found`: it holds a graph for `key`.
BuilderWorkspace& kept_graph(const std::vector<std::uint64_t>& key, bool& found);
// The thread's workspace for runs whose graphs are not kept (full mode, timelines, slow GPUs).
BuilderWorkspace& thread_workspace();

}  // namespace trainsim::sim::detail

#pragma once
// Collective algorithms as flow/phase models. A collective over a group of GPUs becomes one or more
// phases; each phase is a fixed latency (alpha per algorithm step) followed by concurrent flows
// between GPUs, all of which must finish before the next phase. On idle links this reproduces the
// alpha-beta closed forms (ring all-reduce: 2(n-1) alpha + 2(n-1)/n S/B); on shared links the flows
// slow each other down through the engine's max-min sharing.
#include <string>
#include <vector>

namespace trainsim::sim {

enum class CollectiveKind { all_reduce, all_gather, reduce_scatter, all_to_all, send_recv };
enum class Algorithm { automatic, ring, tree, hierarchical, direct };

const char* to_string(CollectiveKind k);
// "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv"; throws std::invalid_argument.
CollectiveKind parse_collective_kind(const std::string& s);
const char* to_string(Algorithm a);
Algorithm parse_algorithm(const std::string& s);

// nccl-tests' bus-bandwidth factors (doc/PERFORMANCE.md): busbw = algbw * factor.
double busbw_factor(CollectiveKind k, int n);

struct FlowSpec {
  int src = 0, dst = 0;
  double bytes = 0;
};
struct Phase {
  double latency_s = 0;
  std::vector<FlowSpec> flows;
};
struct CollectivePlan {
  Algorithm algorithm = Algorithm::ring;
  std::vector<Phase> phases;
};

// What a plan needs to know about where GPUs sit and how slow a step is.
struct PlacementInfo {
  int gpus_per_node = 8;
  double intra_alpha_s = 0;  // per algorithm step inside a node
  double inter_alpha_s = 0;  // per algorithm step across nodes
  double intra_Bps = 0;      // achievable per-GPU bandwidth inside a node (for algorithm choice)
  double inter_Bps = 0;      // achievable per-GPU bandwidth across nodes (for algorithm choice)
  int node_of(int gpu) const { return gpu / gpus_per_node; }
};

// Plans collective `kind` of `bytes` (the per-rank buffer, nccl-tests' "size") over `group`
// (GPU ids in ring order). `automatic` picks the algorithm with the smaller idle-network time, as
// NCCL's tuner picks by its own cost model. Ring collectives use one channel per group member in a
// node, each rotated so that every member's NIC carries one channel across nodes (NCCL's rings).
CollectivePlan plan_collective(CollectiveKind kind, Algorithm algo, double bytes, const std::vector<int>& group,
                               const PlacementInfo& where);

// Idle-network time of a plan under the placement's bandwidths (for algorithm choice and tests).
double idle_time_s(const CollectivePlan& plan, const PlacementInfo& where);

}  // namespace trainsim::sim

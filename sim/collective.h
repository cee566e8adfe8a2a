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
// (GPU ids in ring order). `automatic` runs an all-reduce inside a node on a ring and one across
// nodes on the algorithm NCCL's tuner picks (tuner_picks_tree). Ring collectives use one channel
// per group member in a node, each rotated so that every member's NIC carries one channel across
// nodes (NCCL's rings).
CollectivePlan plan_collective(CollectiveKind kind, Algorithm algo, double bytes, const std::vector<int>& group,
                               const PlacementInfo& where);

// Idle-network time of a plan under the placement's bandwidths (for algorithm choice and tests).
double idle_time_s(const CollectivePlan& plan, const PlacementInfo& where);

// Whether NCCL's tuner (src/graph/tuning.cc) runs an all-reduce of `bytes` over n ranks across
// nodes as a tree rather than a ring. It prices each by its latency plus the bytes at its
// algorithm bandwidth: the tree's bus bandwidth is 0.92 of the ring's and converts to algorithm
// bandwidth by 1/2, the ring's by n / (2 (n - 1)); so, given the ring's time per byte on idle
// links, the tree's is n / (0.92 (n - 1)) times it. The choice follows that model even where the
// flows would run a tree faster (over 2 nodes its chains cut the bytes that cross the network).
bool tuner_picks_tree(double bytes, int n, double ring_latency_s, double ring_per_byte_s, double tree_latency_s);

}  // namespace trainsim::sim

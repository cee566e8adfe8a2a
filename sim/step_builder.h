#pragma once
// Turns one training step of a layout into a task graph on the engine and runs it: per pipeline
// stage the forward, backward and recompute passes in the schedule's order, tensor-parallel
// collectives on the compute path, activation send/recv between stages, data-parallel gradient
// buckets that fire as their gradients become ready in the last backward, ZeRO traffic, and the
// optimizer step.
#include <array>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <string>
#include <memory>
#include <stdexcept>
#include <vector>

#include "collective.h"
#include "cost_model.h"
#include "layout.h"
#include "measured_collective.h"
#include "model_config.h"
#include "precision.h"
#include "topology.h"

namespace trainsim::sim {

enum class SimMode { symmetric, full };

enum Category : std::int16_t { kCompute, kRecompute, kTpComm, kPpComm, kDpComm, kBubble, kOptimizer, kDataWait, kCategories };
const char* category_name(int c);

struct NetworkParams {
  ClusterShape shape;
  double intra_alpha_s = 0;
  double inter_alpha_s = 0;
  // The algorithm of every all-reduce of the step (TP's and the gradients'), as NCCL_ALGO's
  // "allreduce:<algorithm>" forces it; automatic picks by size as NCCL's tuner does. Other
  // collectives run on rings (all-gather, reduce-scatter) or directly (all-to-all, send/recv).
  Algorithm allreduce_algorithm = Algorithm::automatic;
  // Collectives measured inside a node (by kind and group size): a plan for one of them takes the
  // measured time on idle links.
  std::vector<MeasuredCollective> intra_measured;
  // Collectives measured with one rank per node across the network (by group size): a plan for a
  // group with one member per node takes the measured time on idle links.
  std::vector<MeasuredCollective> inter_measured;
};

// Collective plans with their idle-network times, by collective, group and placement. They do not
// depend on the engine, so simulations of one cluster can share them: one simulate_step shares
// them across its steady-state runs, and a caller may keep one across calls (a search thread).
// Not thread-safe.
struct PlanShapeCache {
  struct Shape {
    CollectivePlan plan;
    double idle_latency_s = 0, idle_per_byte_s = 0;
    // Per phase, the indices of its flows ordered by source GPU (then by position), so that a
    // simulation finds the flows of the members it simulates without scanning the others.
    std::vector<std::vector<std::int32_t>> by_source;
    int leaf_share = 0;  // the group's nodes per leaf switch when it spans several, else 0
  };
  // kind, algorithm, first member, stride, size, GPUs per node, nodes per leaf; then alpha inside
  // and across nodes, bandwidth inside and across nodes.
  struct Key {
    std::array<int, 7> ints{};
    std::array<double, 4> reals{};
    bool operator==(const Key& o) const { return ints == o.ints && reals == o.reals; }
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const noexcept;
  };
  std::unordered_map<Key, Shape, KeyHash> shapes;
  // Plans routed onto a symmetric-mode engine's links, by what fixes those links and routes: the
  // layout's TP, DP and PP degrees, the cluster and the network's alphas (step_builder.cpp).
  struct RoutedStore;
  std::shared_ptr<RoutedStore> routed;
};

struct StepInput {
  const ModelConfig* model = nullptr;
  Layout layout;
  Precision precision = Precision::bf16;
  int global_batch = 1;
  const CostModel* cost = nullptr;
  NetworkParams net;
  SimMode mode = SimMode::symmetric;
  bool record_timeline = false;
  // A recorded timeline keeps only these GPUs' tasks (sorted, unique); empty: every simulated GPU's.
  std::vector<int> timeline_gpus;
  // Symmetric mode: read long schedules off their steady state (see simulate_step) instead of
  // simulating every micro-batch.
  bool steady_state = true;
  // The same in full mode; simulate_step passes steady_state on where it runs a step on every GPU
  // that symmetric mode cannot stand for. Off, full mode simulates every micro-batch, the
  // reference the reading is checked against.
  bool steady_state_in_full_mode = false;
  // Plans to reuse across calls (see PlanShapeCache); nullptr: one per call.
  PlanShapeCache* plan_cache = nullptr;
  // Each GPU's sustained speed as a fraction of the profile's (by global GPU index); nullptr: all 1.
  // A GPU's compute-stream work takes 1/speed as long. Symmetric mode gives each stage's
  // representative the slowest speed among that stage's GPUs (as if the slowest GPUs of all stages
  // sat in one pipeline replica, an upper bound on the step); full mode gives every GPU its own.
  const std::vector<double>* gpu_speed = nullptr;
  // Symmetric mode with slow GPUs or NICs: >= 0 gives each stage's representative the slowest
  // speed and NIC rate among that stage's GPUs of this data-parallel replica only (that replica's
  // pipeline, as if every replica were like it: a lower bound on the step, where the default, the
  // slowest of all replicas per stage, is an upper bound).
  int speed_replica = -1;
  // Symmetric mode with one representative per tensor-parallel group (every replica of every
  // stage) rather than one per stage: what simulate_step falls back to where one GPU per stage
  // cannot stand for its stage but one per TP group can stand for its group (replica_mode_misfit).
  bool every_replica = false;
  // Symmetric mode where neither one GPU per stage nor one per TP group can stand for the rest
  // (StepResult::full_because): simulate every GPU instead (true), or throw NeedsEveryGpu (false),
  // for a caller that would rather leave the step out than wait for it.
  bool every_gpu_if_needed = true;
};

// Thrown by simulate_step where symmetric mode does not apply and every_gpu_if_needed is false.
struct NeedsEveryGpu : std::runtime_error {
  explicit NeedsEveryGpu(const char* reason) : std::runtime_error(reason), why(reason) {}
  const char* why;
};

// Where a GPU sits in a layout: its tensor-parallel rank, data-parallel replica and pipeline stage
// (the numbering simulate_step uses).
struct RankCoordinates {
  int tp_rank = 0, replica = 0, stage = 0;
};
RankCoordinates rank_coordinates(const Layout& l, int gpu);

struct TimelineEntry {
  int gpu = 0;
  int stream = 0;  // 0 compute, 1 data-parallel / ZeRO communication, 2 pipeline send/recv
  double start_s = 0, end_s = 0;
  // Its time alone (Engine::uncontended_s): end_s - start_s beyond it is contention, compute slowed
  // by communication beside it or links shared with other flows.
  double uncontended_s = 0;
  std::string name;
  int category = 0;
};

struct StepResult {
  double step_time_s = 0;
  double breakdown_s[kCategories] = {};  // exposed time of GPU 0 (first stage) by category
  int simulated_gpus = 0;
  std::size_t tasks = 0;  // over every run of the step (see simulated_microbatches)
  std::uint64_t events = 0;
  int simulated_microbatches = 0;  // per stage, over every run; fewer than the step's when read off the steady state
  // The step's graph was one kept from an earlier step of the same structure, with its numbers
  // worked out again (simulate_step), rather than built.
  bool graph_reused = false;
  double dp_bytes_per_gpu = 0;  // bytes each GPU sends for gradient/ZeRO collectives per step
  double tp_bytes_per_gpu = 0;
  std::vector<TimelineEntry> timeline;
  // With a recorded timeline: the GPUs simulated, in increasing order (one per stage in symmetric
  // mode, standing for the rest of its stage).
  std::vector<int> timeline_simulated_gpus;
  // With a recorded timeline: the chain of tasks that sets the step, in time order, each starting
  // as the one before it ends (the dependency it waited for last), from zero to the step's end; of
  // every GPU simulated, whatever timeline_gpus keeps.
  std::vector<TimelineEntry> critical_path;
  // Symmetric mode was asked for but does not apply to this step (symmetric_mode_misfit, or a
  // tree all-reduce found while building it): why,
  // and every GPU was simulated instead. nullptr otherwise.
  const char* full_because = nullptr;
  // Symmetric mode was asked for, one GPU per stage could not stand for the rest (why), and one GPU
  // per tensor-parallel group was simulated instead: every replica of every stage, each at its own
  // GPUs' and NICs' speeds. nullptr otherwise.
  const char* every_replica_because = nullptr;
};

// Why one representative GPU per pipeline stage cannot stand for the others of its stage in this
// step, or nullptr where it can. Symmetric mode gives a representative the per-GPU share of its
// node's NICs, as if every GPU of the node did the same work at the same time, and takes the
// representative's own flows of each collective for every member's; both hold when each stage's
// tp x dp GPUs fill whole nodes and the node's GPUs share its NICs evenly. Across nodes, a stage
// that does not fill whole nodes shares them with another stage, whose GPUs send at other times,
// or sits unevenly over its nodes, so that its groups' members do not all see the same links.
// Where the leaf switches' uplinks are oversubscribed (ClusterShape::leaf_uplinks_bind), each leaf
// must be full and each stage must fill whole leaves or a whole part of one (the leaf's stages then
// share its uplinks), for the same reasons one level up. With per-GPU speeds, TP groups that share
// a NIC, or whose pipeline transfers share a leaf's oversubscribed uplinks, must run at one speed:
// a slow one sends while the fast ones wait. simulate_step runs such a step one GPU per TP group
// or in full mode (replica_mode_misfit), and also one whose all-reduce it finds NCCL would run as
// a tree across those uplinks (Builder::cached_plan).
const char* symmetric_mode_misfit(const StepInput& in);

// Why one representative GPU per tensor-parallel group cannot stand for the other GPUs of its group
// where one per stage cannot stand for its stage, or nullptr where it can. Every replica of every
// stage is simulated, each flow between them on its own links, so a ring's edges cross leaf
// switches where they do and a pipeline replica runs at its own pace; each representative stands
// for its group's GPUs, which do the same work at the same time over NICs of their own (the
// per-GPU share of the node's NICs and of the leaf's uplinks, each flow loading them for every GPU
// of its group). That holds where the group lies within one node, each GPU of a node has the same
// share of its NICs whatever the other GPUs of the node do (each its own NIC, a NIC shared within
// a group, or a NIC shared by groups of stages that fill whole nodes, whose representatives then
// share its links at any speeds). On a rail-optimized fabric an edge between representatives on
// different rails goes through the representative on the receiver's rail (PXN), as in full mode.
// A representative runs at its group's slowest GPU (every member waits for it at each TP
// collective) and NIC, so the group's NICs must all run at one speed.
const char* replica_mode_misfit(const StepInput& in);

StepResult simulate_step(const StepInput& in);
int microbatches_per_step(const StepInput& in);

}  // namespace trainsim::sim

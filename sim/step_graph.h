#pragma once
// One run of a training step as a task graph on the engine (simulate_step makes one or more runs
// per step): the Builder places every simulated GPU's passes in its schedule's order, the tensor-
// and data-parallel collectives, the pipeline transfers and the optimizer on the engine, runs it,
// attributes GPU 0's exposed time, and measures how the run's schedule repeats. Its workspace
// (engine and tables) is kept per thread and reused, and a graph built once can be refilled with
// another layout's numbers (kept_graph.h). Internal to the simulator.
#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "collective.h"
#include "engine.h"
#include "flow_paths.h"
#include "measured_collective.h"
#include "step_builder.h"
#include "step_work.h"

namespace trainsim::sim::detail {

// A flow of a cached collective plan: bytes per byte of buffer over a path (a range of links).
struct CachedFlow {
  double bytes = 0;
  std::int32_t path_begin = 0, path_end = 0;
};

struct RankQueues {
  TaskId compute = -1;
  TaskId comm = -1;
};

// GPU 0's compute queue in order, with the fixed compute time of each task by category; the rest
// of a task's time is the tensor-parallel communication fused into it.
struct Gpu0Task {
  TaskId id = -1;
  int nparts = 0;
  int cat[2] = {0, 0};
  double seconds[2] = {0, 0};
  double tp_idle_s = 0;  // the fused TP traffic's time on idle links
};

// A pass whose fused task recurs unchanged on one GPU (same chunk, same kind): worked out once per
// run; its later tasks share the first one's flows in the engine.
struct FusedPass {
  bool set = false;
  TaskSpec spec;
  Gpu0Task rec;
  double tp_bytes = 0;
  TaskId like = -1;  // the run's first task of this pass
};

// Cross-stage hand-offs, indexed by (simulated GPU, virtual stage, micro-batch).
struct Handoffs {
  std::vector<TaskId> fwd_done, bwd_done, fwd_start, bwd_start;
  // A backward's recompute task where it is the pass's first of two (Builder::split_recompute_),
  // else -1.
  std::vector<TaskId> recompute;
  // The last task on the GPU's communication queue once a backward pass is built (only recorded
  // in runs that measure their periodicity).
  std::vector<TaskId> comm_after_bwd;
};

// A Builder's engine and per-run vectors. Reset and reused from run to run (a thread's Builders
// run one at a time), so that the runs of a search reuse their memory instead of allocating it
// again.
struct BuilderWorkspace {
  Engine engine;
  std::vector<int> tp_leaders, dp_leaders, sim_gpus, lane_stream, sim_index, stage_gpus;
  std::vector<TaskId> first;           // build_stage: the first task of the pass just built, per GPU
  std::vector<double> closed_buckets;  // build_stage: buckets closed by the layer just built
  std::vector<TaskId> recompute_first;  // build_stage: a backward's recompute tasks, by GPU
  std::vector<TaskId> tails, gpu0_comm;
  std::vector<std::vector<int>> tp_groups, dp_groups, dp_sim_members;  // per simulated GPU
  std::vector<std::pair<std::array<int, 3>, std::vector<int>>> sim_members;
  std::size_t sim_members_used = 0;
  std::vector<ChunkWork> chunks;
  std::vector<RankQueues> q;
  std::vector<Gpu0Task> gpu0_tasks;
  std::vector<FusedPass> fused_memo;
  std::vector<ProcessorId> proc;
  std::vector<char> is_sim;
  std::vector<double> speed;  // by GPU id: its compute speed in this run
  Handoffs h;
  std::vector<std::int64_t> role;  // per task: its place in the schedule (Builder::role_key), -1 none
  std::vector<std::pair<std::int64_t, TaskId>> frontier[2], transfer_roles;
  std::vector<TaskId> cut_seeds[2];
  // The cut comparison's structure for the cuts it last looked at (Builder::cut_states), kept with
  // the graph: the seeds (the first task after each cut on each simulated GPU), by task the cuts
  // it comes after (bit 2 << c: it descends from cut c's seeds), the tasks before the later cut,
  // and for each cut the tasks before it that a task after it waits for.
  std::vector<TaskId> cut_kept_seeds[2];
  std::vector<std::uint8_t> downstream;
  std::vector<TaskId> before_later, waited_across[2];

  // The built graph's record, for reuse by a later step of the same structure (Builder::refill).
  // A transfer between two simulated GPUs: its latency and bytes, worked out once per pair.
  struct TransferKind {
    int src = 0, dst = 0;
    double latency_s = 0, bytes = 0;
    std::vector<LinkId> path;
    bool dst_simulated = false;
    TaskId like = -1;  // the first transfer of this kind: the later ones share its flow and interference
  };
  std::vector<TransferKind> transfer_kinds;
  std::vector<std::pair<TaskId, std::int32_t>> fused_tasks;     // every fused task, with its slot in fused_memo (-1 none)
  std::vector<std::pair<TaskId, std::int32_t>> transfer_tasks;  // every transfer, with its kind
  std::vector<std::int32_t> gpu0_slot;       // per gpu0_tasks entry: its slot in fused_memo, -1 for other work
  std::vector<std::size_t> cut_gpu0_count;   // per op of GPU 0's order: gpu0_tasks entries made before it
  // Two-period runs: GPU 0's DP and TP bytes as its first forward of each of the last two periods
  // is built, and the gpu0_tasks entries made before it.
  double marker_bytes[2][2] = {};
  std::size_t marker_gpu0_count[2] = {0, 0};
  std::vector<double> tp_prefix;             // refill's scratch: GPU 0's TP bytes over its first i entries
  std::vector<std::pair<double, double>> cut_bytes;  // GPU 0's DP and TP bytes as each op of its order is built
  std::vector<TaskId> cut_diverge;  // by simulated GPU: the first task of the op after its last forward
  bool cut_valid = true;            // the cuts' preconditions the build found
  bool reusable = false;            // every task's numbers come from the record above or do not change
  bool roles_filled = false;        // role holds this graph's roles
  double dp_bytes_gpu0 = 0, tp_bytes_gpu0 = 0;
  std::vector<std::uint64_t> key;  // the inputs it was built for (graph_key); empty when not reusable
};

// Thrown while refilling a kept graph when a routed plan it needs is not cached (a step with a
// fresh plan cache): the graph is built anew.
struct RefillMiss {};

// Thrown while building a symmetric-mode step when a choice made there breaks the mode's premise
// (one GPU per stage standing for the rest): simulate_step runs the step in full mode instead.
struct SymmetricMisfit {
  const char* why;
};

class Builder {
  BuilderWorkspace& ws_;

 public:
  // A collective's plan for a one-byte buffer with the flows of its simulated members already
  // routed (flows of one phase over the same path are one transfer). Every algorithm's flow bytes
  // scale with the buffer and its latencies do not, so one plan serves every size: the flows of a
  // collective of S bytes carry S times the cached bytes.
  struct CachedPhase {
    double latency_s = 0;
    std::int32_t flow_begin = 0, flow_end = 0;
  };
  struct CachedPlan {
    std::vector<CachedPhase> phases;
    std::vector<CachedFlow> flows;
    std::vector<LinkId> paths;
    std::vector<int> members;  // the group's simulated GPUs
    double sent_by_first = 0;  // bytes the first simulated member sends, per byte of buffer
    double idle_latency_s = 0, idle_per_byte_s = 0;  // idle-network time: latency + S * per_byte
    // Where the profile measured this collective: 0 nowhere, 1 inside a node, 2 one GPU per node
    // (looked up in the step's network at each use: plans outlive a step's NetworkParams).
    int measured_in = 0;
    CollectiveKind kind = CollectiveKind::all_reduce;
    int group_size = 0;
  };
  using PlanKey = std::array<int, 5>;  // kind, algorithm, first member, stride, size
  struct PlanKeyHash {
    std::size_t operator()(const PlanKey& k) const noexcept {
      std::size_t h = 0;
      for (int x : k) h = h * 1000003u + static_cast<std::size_t>(static_cast<unsigned>(x));
      return h;
    }
  };
  // Routed plans by (kind, algorithm, first member, stride, size). They hold the engine's link ids,
  // so the runs of one step may share them only where every run creates its links in the same
  // order before routing (see simulate_step).
  using RoutedPlans = std::unordered_map<PlanKey, CachedPlan, PlanKeyHash>;
  // `chunk_cache`: the layout's per-chunk work, filled by the first Builder of a step and reused by
  // the others (it does not depend on the number of micro-batches); nullptr: computed here.
  // `routed`: plans shared with the step's other runs (nullptr: this run's own).
  // `period`: when positive, the run also measures its own periodicity (see Periodicity) over
  // its last two groups of `period` micro-batches, or with `cut`, by the state of the schedule at
  // two cuts `period` micro-batches apart (see measure_cut).
  // `ws`: where the graph is built (its engine and tables).
  // `reuse`: `ws` holds a graph built for the same structure (ws.key is this step's graph_key):
  // only its numbers are worked out again (refill), unless a plan they need is not cached.
  Builder(BuilderWorkspace& ws, const StepInput& in, int microbatches, PlanShapeCache* shapes,
          std::vector<ChunkWork>* chunk_cache = nullptr, RoutedPlans* routed = nullptr, int period = 0, bool cut = false,
          bool reuse = false)
      : ws_(ws), in_(in), L_(in.layout), m_(*in.model), cost_(*in.cost), microbatches_(microbatches), e_(ws.engine),
        plan_cache_(routed ? *routed : own_plans_), shapes_(shapes), chunk_cache_(chunk_cache),
        period_(period > 0 && microbatches >= (cut ? 2 : 3) * period ? period : 0), cut_(cut && period_ > 0), reuse_(reuse) {}

  StepResult run();

  // How the run's last period repeats the one before. Every forward of the last `period`
  // micro-batches and the last `period` backwards of each chunk before the stage's last forward,
  // on every simulated GPU, is compared with the same pass one period earlier, and so is the end
  // of the communication each of those backwards queued: in a periodic schedule each comes exactly
  // `lambda_s` after its predecessor. `deviation_s` is the largest departure from that. The
  // per-period increments of GPU 0's breakdown and byte counts are measured between its first
  // forward of the last two periods. With the cut comparison (measure_cut) the same fields hold
  // the state's shift between the two cuts, and the increments between them.
  struct Periodicity {
    bool measured = false;
    double lambda_s = 0, deviation_s = 0;
    double breakdown_s[kCategories] = {};
    double dp_bytes = 0, tp_bytes = 0;
  };
  const Periodicity& periodicity() const { return periodicity_; }
  // The run reused a kept graph (refill) rather than building one.
  bool refilled() const { return refilled_; }

 private:
  int gpu_of(int t, int d, int s) const { return t + L_.tp * (d + L_.dp * s); }
  // `gpu`'s TP and DP groups, into `g`.
  void tp_group(int gpu, std::vector<int>& g) const {
    const int d = (gpu / L_.tp) % L_.dp, s = gpu / (L_.tp * L_.dp);
    g.clear();
    for (int t = 0; t < L_.tp; ++t) g.push_back(gpu_of(t, d, s));
  }
  void dp_group(int gpu, std::vector<int>& g) const {
    const int t = gpu % L_.tp, s = gpu / (L_.tp * L_.dp);
    g.clear();
    for (int d = 0; d < L_.dp; ++d) g.push_back(gpu_of(t, d, s));
  }
  // Nodes of the group per leaf switch when the group spans several leaves, else 0.
  int group_nodes_per_leaf(const std::vector<int>& g) const {
    const auto& sh = in_.net.shape;
    std::vector<int> nodes;
    nodes.reserve(g.size());
    for (int x : g) nodes.push_back(sh.node_of(x));
    std::sort(nodes.begin(), nodes.end());
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
    const int per_leaf = sh.nodes_per_leaf();
    std::size_t leaves = 0;
    for (std::size_t i = 0; i < nodes.size(); ++i) leaves += i == 0 || nodes[i] / per_leaf != nodes[i - 1] / per_leaf;
    if (leaves < 2) return 0;
    return std::max(1, static_cast<int>(nodes.size() / leaves));
  }
  std::int32_t label(const std::string& s) {
    if (!in_.record_timeline) return 0;
    labels_.push_back(s);
    return static_cast<std::int32_t>(labels_.size() - 1);
  }

  // A piece of work on a compute queue: fixed compute time, then the tensor-parallel collectives it
  // ends with (if any).
  struct Part {
    double seconds = 0;
    int cat = kCompute;
    const CommTotals* tp = nullptr;
  };

  // This layout's chunk work (chunk_work), from the step's other runs where one has worked it out.
  void prepare_chunks();
  TaskId compute_task(int gpu, double dur, int cat, const std::string& name, TaskId extra_dep = -1);
  // Runs `parts` in order on every GPU of `gpus` (one stage, built in lockstep). With one simulated
  // member per TP group the parts become one task per GPU whose flows are the TP traffic; otherwise a
  // compute task per part and GPU, then the part's TP collectives over whole groups. `first[i]` gets
  // the first task of gpus[i], where a pipeline hand-off or a ZeRO-3 gather attaches.
  // `recurs` (a PassKind) with `chunk`: these parts recur unchanged on this chunk, so their fused
  // task is worked out once per GPU and reused.
  void run_parts(const std::vector<int>& gpus, const Part* parts, int nparts, const std::string& name, std::vector<TaskId>& first,
                 int recurs = -1, int chunk = 0);
  void run_parts(const std::vector<int>& gpus, std::initializer_list<Part> parts, const std::string& name,
                 std::vector<TaskId>& first, int recurs = -1, int chunk = 0) {
    run_parts(gpus, parts.begin(), static_cast<int>(parts.size()), name, first, recurs, chunk);
  }
  // Passes that recur unchanged on a chunk: a forward or backward pass whole, and layer by layer
  // (ZeRO-3's forward, and the backward that releases gradient buckets as it goes) the first layer
  // of a backward, with the chunk's embedding or head and the recompute, and every later layer;
  // and a backward's recompute, where it is a task of its own (split_recompute_).
  enum PassKind { kForwardPass, kBackwardPass, kLaterLayerForward, kLaterLayerBackward, kFirstLayerBackward, kRecomputePass, kPassKinds };
  // The parts of a pass of `kind` on chunk work `w` (not kLaterLayerForward's first layer, ZeRO-3's
  // own). `tp` holds the traffic of a part that adds a layer's and the chunk's extras; parts point
  // into it, so a PassParts stays where it was filled.
  struct PassParts {
    Part part[2];
    int n = 0;
    CommTotals tp;
  };
  void pass_parts(int kind, const ChunkWork& w, PassParts& out);
  // The fused task of `parts` on simulated GPU `g`: its spec (duration: the compute, which the
  // processor's slowdown under communication stretches; unslowed: the TP traffic's latencies,
  // which it does not, as in full mode where they are tasks of their own), its GPU-0 record and
  // TP bytes, with its flows into fused_flows_.
  void fused_values(int g, const Part* parts, int nparts, FusedPass& out);
  // A collective (one task per phase) over `members`; it waits for `triggers` and the members'
  // previous task on the chosen queue, and becomes the new tail of that queue for each member.
  TaskId collective(const std::vector<int>& members, CollectiveKind kind, Algorithm algo, double bytes, int count,
                    double extra_latency_s, int cat, bool on_compute_queue, const std::vector<TaskId>& triggers,
                    const std::string& name, double* bytes_sent_by_first = nullptr);
  // Calls of one collective released together and run back to back on the same queue: `count`
  // calls of `bytes` each.
  struct Calls {
    double bytes = 0;
    int count = 1;
  };
  // The same for a chain of calls of different sizes: one task per phase, whose latencies are the
  // calls' latencies summed and whose flows carry the calls' bytes summed (each call rescaled to
  // the measured curve at its own size), as the chain takes on idle links.
  TaskId collective(const std::vector<int>& members, CollectiveKind kind, Algorithm algo, const std::vector<Calls>& calls,
                    double extra_latency_s, int cat, bool on_compute_queue, const std::vector<TaskId>& triggers,
                    const std::string& name, double* bytes_sent_by_first = nullptr);
  // The TP collectives of `t` over every TP group of the stage being built (issued by its leaders).
  void tp_all(const CommTotals& t, const std::string& name);
  std::vector<int>& tp_leaders_ = ws_.tp_leaders;
  // Buckets released together (by one layer's backward) go back to back on the communication
  // queue: one task chain whose latencies and kernel times add up (equal to separate ones on idle
  // links, since each phase's time is its latency plus bytes over bandwidth).
  void grad_collective(int gpu, const std::vector<Calls>& buckets, int bucket_index);
  // The compute queue tails of the simulated members of `gpu`'s data-parallel group, in a
  // scratch vector valid until the next call.
  const std::vector<TaskId>& compute_tails(int gpu);
  std::vector<TaskId>& tails_scratch_ = ws_.tails;
  std::vector<std::vector<int>>& dp_sim_members_ = ws_.dp_sim_members;  // per simulated GPU: its DP group's simulated members
  // The group's members this run simulates, cached by group (valid until the next call).
  const std::vector<int>& sim_members(const std::vector<int>& group);
  void build_stage(int stage, const std::vector<int>& gpus);
  void breakdown(StepResult& r);
  // The recorded timeline (in_.timeline_gpus' tasks) and the critical path.
  void record_timeline(StepResult& r);

  const StepInput& in_;
  const Layout& L_;
  const ModelConfig& m_;
  const CostModel& cost_;
  const int microbatches_;
  Engine& e_;  // the workspace's, reset for each simulation
  std::unique_ptr<PathProvider> paths_;
  PlacementInfo place_;
  std::vector<ChunkWork>& chunks_ = ws_.chunks;  // [stage * vpp + chunk]
  std::vector<int>& sim_gpus_ = ws_.sim_gpus;
  std::vector<RankQueues>& q_ = ws_.q;  // by GPU id
  std::vector<std::string> labels_;
  std::vector<int>& lane_stream_ = ws_.lane_stream;  // per task: stream kind
  int vpp_ = 1;
  Handoffs& h_ = ws_.h;
  std::vector<int>& sim_index_ = ws_.sim_index;  // GPU id -> position in sim_gpus_ (-1 if not simulated)
  // Slot of (GPU, virtual stage, micro-batch); a GPU holds only the virtual stages vs with
  // vs % pp equal to its stage, so vs / pp (its chunk) numbers them.
  std::size_t hidx(int gpu, int vs, int mb) const {
    return (static_cast<std::size_t>(sim_index_[gpu]) * vpp_ + vs / L_.pp) * microbatches_ + mb;
  }
  std::vector<std::vector<int>>& tp_groups_ = ws_.tp_groups;  // per simulated GPU
  std::vector<std::vector<int>>& dp_groups_ = ws_.dp_groups;
  const std::vector<int>& tp_group_of(int gpu) const { return tp_groups_[sim_index_[gpu]]; }
  const std::vector<int>& dp_group_of(int gpu) const { return dp_groups_[sim_index_[gpu]]; }

 private:
  // The algorithm a collective of `kind` runs: the network's for all-reduce, a ring otherwise.
  Algorithm algorithm_for(CollectiveKind kind) const {
    return kind == CollectiveKind::all_reduce ? in_.net.allreduce_algorithm : Algorithm::ring;
  }
  // The plan for `bytes` over `group`; with Algorithm::automatic, a ring inside a node and across
  // nodes the one NCCL's tuner picks at this size (tuner_picks_tree), as plan_collective chooses.
  const CachedPlan& cached_plan(const std::vector<int>& group, CollectiveKind kind, Algorithm algo, double bytes);
  const CachedPlan& unit_plan(const std::vector<int>& group, CollectiveKind kind, Algorithm algo);
  // The factors that give the profile's measured time for `bytes` summed over `count` calls of the
  // plan's collective (none where it was not measured).
  PlanScale plan_scale(const CachedPlan& plan, double bytes, int count) const {
    if (plan.measured_in == 0) return {};
    const MeasuredCollective* m =
        find_measured(plan.measured_in == 1 ? in_.net.intra_measured : in_.net.inter_measured, plan.kind, plan.group_size);
    return m ? measured_scale(*m, bytes / std::max(1, count), plan.idle_latency_s, plan.idle_per_byte_s) : PlanScale{};
  }
  // Every member on its own node (groups are evenly strided, so neighbours tell).
  bool one_per_node(const std::vector<int>& group) const;
  // Members on more than one node.
  bool spans_nodes(const std::vector<int>& group) const;
  // Whether every NIC the stage's GPUs send through runs at one speed.
  bool stage_nics_at_one_speed(int stage) const;
  RoutedPlans own_plans_;
  RoutedPlans& plan_cache_;
  PlanShapeCache* shapes_;
  std::vector<ChunkWork>* chunk_cache_;
  std::vector<char>& is_sim_ = ws_.is_sim;  // by GPU id: simulated in this run
  std::vector<Gpu0Task>& gpu0_tasks_ = ws_.gpu0_tasks;
  std::vector<FusedPass>& fused_memo_ = ws_.fused_memo;  // [simulated GPU][chunk][PassKind]
  // A compute task of `spec` on `g`'s compute queue (its first task, into `first`) with the flows of
  // `like`, or of fused_flows_ where `like` is -1.
  TaskId add_fused_task(int g, const TaskSpec& spec, Gpu0Task rec, TaskId like, TaskId& first, std::int32_t slot);
  bool fuse_tp_ = false;  // one simulated member per TP group: TP traffic rides on the compute task
  // With TP fused, a backward's recompute that has TP traffic of its own (full recompute, TP > 1)
  // is a task of its own before the backward's, so that its traffic runs between the two passes'
  // compute, as it does unfused: a fused task runs all of its compute before its traffic, and a
  // transfer that slows the GPU (comm_compute_interference) would overlap other compute.
  bool split_recompute_ = false;
  // Recorded timelines only: fused tasks of two parts (a recompute and its backward), by task id
  // order, drawn as two slices in proportion to their compute.
  std::vector<Gpu0Task> timeline_parts_;
  // Comm/compute interference: one processor per simulated GPU runs its compute queue's fixed work,
  // slowed by the profile's measured GEMM slowdown while that GPU's communication tasks run. Without
  // a measured slowdown there are no processors and compute runs at full speed.
  double interference_ = 0;
  // Pipeline transfers slow their GPUs by the profile's point-to-point figure where it has one.
  double p2p_interference_ = 0;
  bool any_interference() const { return interference_ > 0 || p2p_interference_ > 0; }
  std::vector<ProcessorId>& proc_ = ws_.proc;  // by GPU id, -1 if none
  // By GPU id: the fraction of the profile's speed its compute stream runs at (StepInput::gpu_speed).
  std::vector<double>& speed_ = ws_.speed;
  void interfere(TaskId t, const std::vector<int>& gpus) {
    if (interference_ <= 0) return;
    for (int g : gpus)
      if (proc_[g] >= 0) e_.add_interference(t, proc_[g], interference_);
  }
  // A pipeline transfer between GPUs a and b (-1: not simulated).
  void interfere_transfer(TaskId t, int a, int b) {
    if (p2p_interference_ <= 0) return;
    for (int g : {a, b})
      if (g >= 0 && proc_[g] >= 0) e_.add_interference(t, proc_[g], p2p_interference_);
  }
  // Scratch for run_parts: the fused task's flows, one per distinct path.
  std::vector<CachedFlow> fused_flows_;
  std::vector<LinkId> fused_paths_;
  void add_fused_flow(const CachedPlan& plan, const CachedFlow& cf, double scale) {
    const LinkId* p = plan.paths.data() + cf.path_begin;
    const std::int32_t n = cf.path_end - cf.path_begin;
    for (CachedFlow& x : fused_flows_)
      if (x.path_end - x.path_begin == n && std::equal(p, p + n, fused_paths_.begin() + x.path_begin)) {
        x.bytes += cf.bytes * scale;
        return;
      }
    CachedFlow f{cf.bytes * scale, static_cast<std::int32_t>(fused_paths_.size()), 0};
    fused_paths_.insert(fused_paths_.end(), p, p + n);
    f.path_end = static_cast<std::int32_t>(fused_paths_.size());
    fused_flows_.push_back(f);
  }
  std::vector<TaskId>& gpu0_comm_ = ws_.gpu0_comm;
  double& dp_bytes_gpu0_ = ws_.dp_bytes_gpu0;
  double& tp_bytes_gpu0_ = ws_.tp_bytes_gpu0;
  std::vector<LinkId> scratch_;
  std::vector<std::int32_t> plan_flows_scratch_;
  std::vector<int> flow_dst_;  // unit_plan's scratch
  std::vector<Calls> calls_scratch_, grad_calls_scratch_, stage_calls_;
  const int period_;
  // Builds the graph into ws_ (recording what refill needs), from an empty engine.
  void build();
  // Works out the numbers of ws_'s graph (built by build() for the same structure) for this step:
  // the fused passes from this step's chunk work, the transfers from its activation size. Throws
  // RefillMiss where a plan is not cached; false where the graph does not fit them.
  bool refill();
  // The bytes of a forward activation (or its gradient) sent between stages, per micro-batch.
  double activation_bytes_sent() const;
  // A transfer's latency and bytes from `src` to `dst` as the profile measured them.
  void transfer_values(BuilderWorkspace::TransferKind& k) const;
  // The cut comparison (measure_cut): each stage's schedule is cut before its forward number
  // n - P v (cut 0) and n (cut 1), n picked by choose_cut; by simulated GPU, the last task of its
  // compute queue before each cut, and the first after it.
  const bool cut_;
  const bool reuse_;
  bool refilling_ = false, refilled_ = false;
  bool cut_valid_ = true;  // the build's preconditions (ws_.cut_valid), then choose_cut's verdict
  std::vector<std::array<TaskId, 2>> cut_last_, cut_first_;
  std::vector<TaskId>& cut_diverge_ = ws_.cut_diverge;
  std::vector<std::pair<double, double>>& cut_bytes_ = ws_.cut_bytes;
  double diverge_s_ = 0;  // when the first task that the run of M + P micro-batches does not share starts
  // Picks the cuts (after the run): the latest forward n whose cut leaves everything before it ended
  // by diverge_s_, with n - P v past every stage's warm-up. Returns false where there is none.
  bool choose_cut();
  // Sets bit first_bit << k in ws_.downstream on everything that descends from *seeds[k] (the
  // seeds included), for k < sets; earliest[k] gets the earliest start among them (-1 if a seed
  // is missing, and then nothing is marked for it).
  void mark_descendants(const std::vector<TaskId>* const* seeds, int sets, std::uint8_t first_bit, double* earliest);
  void fill_roles();  // role_ of every pass of one task and every transfer
  // The states of the two cuts whose first tasks after them are seeds[0] and seeds[1] (see
  // measure_cut), into ws_.frontier by role key; valid[c] is false where a task of cut c's state
  // has no role (or a seed is missing). `end`: when the last task before the later cut ends.
  // Returns valid[1].
  bool cut_states(const std::vector<TaskId> (&seeds)[2], bool (&valid)[2], double* end);
  bool cut_state_valid_[2] = {false, false};
  std::vector<std::int64_t>& role_ = ws_.role;
  // A pass's or transfer's place in the schedule, the same for the pass P micro-batches later but
  // for the micro-batch (the key's last digit): kind 0 forward, 1 backward, 2 forward's transfer,
  // 3 backward's transfer, 4 a backward's recompute of its own.
  std::int64_t role_key(int kind, int gpu, int vs, int mb) const {
    return ((static_cast<std::int64_t>(kind) * static_cast<std::int64_t>(sim_gpus_.size()) + sim_index_[gpu]) * (vpp_ * L_.pp) + vs) *
               microbatches_ + mb;
  }
  void measure_cut();
  Periodicity periodicity_;
  // By period (second-to-last, last): GPU 0's byte counts as its first forward of the period is
  // built, and its breakdown as that forward starts.
  double marker_bytes_[2][2] = {};
  double marker_breakdown_[2][kCategories] = {};
  void measure_periodicity();
};

}  // namespace trainsim::sim::detail

#include "step_builder.h"

#include <unordered_map>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <stdexcept>

#include "engine.h"
#include "layer_ops.h"
#include "memory_model.h"
#include "pipeline_schedule.h"

namespace trainsim::sim {

const char* category_name(int c) {
  static const char* names[kCategories] = {"compute", "recompute", "tp_comm", "pp_comm", "dp_comm", "bubble", "optimizer", "data_wait"};
  return (c >= 0 && c < kCategories) ? names[c] : "?";
}

namespace {

// The pass order of one stage. A search's layouts share a few (pp, vpp, micro-batch count)
// combinations, so each thread keeps the orders it has built.
const std::vector<PipeOp>& stage_order(PipelineKind kind, int pp, int vpp, int m, int stage) {
  using Key = std::array<int, 5>;
  thread_local std::map<Key, std::vector<PipeOp>> cache;
  const Key key{static_cast<int>(kind), pp, vpp, m, stage};
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  if (cache.size() > 4096) cache.clear();
  return cache.emplace(key, pipeline_order(kind, pp, vpp, m, stage)).first->second;
}

// Maps a flow between GPUs to the engine links it crosses.
class PathProvider {
 public:
  virtual ~PathProvider() = default;
  virtual bool simulated(int gpu) const = 0;
  // `group_nodes_per_leaf`: for ring collectives, how many of the group's nodes share a leaf (0 for
  // point-to-point transfers).
  virtual void path(int src, int dst, int group_nodes_per_leaf, std::vector<LinkId>& out) = 0;
};

class FullPaths : public PathProvider {
 public:
  FullPaths(Engine& e, const ClusterShape& s) : topo_(s) { topo_.install(e); }
  bool simulated(int) const override { return true; }
  void path(int src, int dst, int, std::vector<LinkId>& out) override {
    const auto& r = topo_.route(src, dst);
    out.assign(r.begin(), r.end());
  }

 private:
  Topology topo_;
};

// One representative GPU per pipeline stage. Every other GPU does the same work at the same time,
// so each representative gets the per-GPU share of what it shares: its own NVLink port, 1/G of its
// node's NIC capacity (G GPUs per node, all active), and over an oversubscribed fabric the per-GPU
// share of its leaf's uplink for the traffic that leaves the leaf. With degraded NICs each
// representative's NIC share runs at `nic_speed` (by position in `reps`): the slowest NIC among
// those of its stage's GPUs, in every replica or in one (StepInput::speed_replica).
class SymmetricPaths : public PathProvider {
 public:
  SymmetricPaths(Engine& e, const ClusterShape& s, const std::vector<int>& reps, const std::vector<double>& nic_speed)
      : e_(e), s_(s) {
    nic_share_ = s.nic_share_Bps();
    is_rep_.assign(s.gpus(), 0);
    for (int g : reps) is_rep_[g] = 1;
    for (std::size_t i = 0; i < reps.size(); ++i) {
      Links l;
      l.nvl_out = e.add_link(s.nvlink_Bps);
      l.nvl_in = e.add_link(s.nvlink_Bps);
      l.nic_out = e.add_link(nic_share_ * nic_speed[i]);
      l.nic_in = e.add_link(nic_share_ * nic_speed[i]);
      links_[reps[i]] = l;
    }
  }
  bool simulated(int gpu) const override { return gpu < static_cast<int>(is_rep_.size()) && is_rep_[gpu]; }
  void path(int src, int dst, int group_nodes_per_leaf, std::vector<LinkId>& out) override {
    out.clear();
    // A ring neighbour that is not simulated behaves like the source itself.
    const int to = simulated(dst) ? dst : src;
    Links& a = links_.at(src);
    Links& b = links_.at(to);
    if (s_.node_of(src) == s_.node_of(dst)) {
      out = {a.nvl_out, b.nvl_in};
      return;
    }
    out = {a.nic_out, b.nic_in};
    const int per_leaf = s_.nodes_per_leaf();
    if (s_.oversubscription > 1.0 && s_.nodes > per_leaf) {
      const bool p2p_crosses = group_nodes_per_leaf == 0 && s_.node_of(src) / per_leaf != s_.node_of(dst) / per_leaf;
      const bool ring_crosses = group_nodes_per_leaf > 0;
      if (p2p_crosses || ring_crosses) {
        // A ring with L of its nodes in a leaf sends 1/L of its node-crossing traffic up the leaf.
        const int L = ring_crosses ? group_nodes_per_leaf : 1;
        auto key = std::make_pair(src, L);
        auto it = uplink_.find(key);
        if (it == uplink_.end()) it = uplink_.emplace(key, e_.add_link(nic_share_ * L / s_.oversubscription)).first;
        out.push_back(it->second);
      }
    }
  }

 private:
  struct Links {
    LinkId nvl_out = 0, nvl_in = 0, nic_out = 0, nic_in = 0;
  };
  Engine& e_;
  ClusterShape s_;
  double nic_share_ = 0;
  std::map<int, Links> links_;
  std::vector<char> is_rep_;
  std::map<std::pair<int, int>, LinkId> uplink_;
};

struct CommTotals {
  double bytes[3] = {0, 0, 0};  // all_reduce, all_gather, reduce_scatter
  int count[3] = {0, 0, 0};
  bool empty() const { return count[0] + count[1] + count[2] == 0; }
};

void add_comm(CommTotals& t, const Op& op, double times) {
  if (op.comm == TpComm::none) return;
  const int k = op.comm == TpComm::all_reduce ? 0 : op.comm == TpComm::all_gather ? 1 : 2;
  t.bytes[k] += op.comm_bytes * times;
  t.count[k] += static_cast<int>(times);
}

void add_totals(CommTotals& t, const CommTotals& x) {
  for (int k = 0; k < 3; ++k) t.bytes[k] += x.bytes[k], t.count[k] += x.count[k];
}

// A layer's, the embedding's and the head's compute time and TP traffic for one micro-batch on
// one rank. They depend only on the model, the TP degree, sequence parallelism, recompute, the
// micro-batch, the precision and the cost model, so the layouts of a search that share those
// share them.
struct LayerCosts {
  double layer_fwd_s = 0, layer_bwd_s = 0, layer_recompute_s = 0;
  CommTotals layer_fwd, layer_bwd, layer_recompute;
  struct Part {
    double fwd_s = 0, bwd_s = 0;
    CommTotals fwd, bwd;
  } embedding, head;
};

// Work of one model chunk (the layers of one virtual stage) for one micro-batch on one rank.
struct ChunkWork {
  int layers = 0;
  double fwd_s = 0, bwd_s = 0, recompute_s = 0;
  CommTotals tp_fwd, tp_bwd, tp_recompute;
  double layer_bwd_s = 0;       // one layer's backward (for bucketed last backward)
  CommTotals tp_layer_bwd;
  double extra_bwd_s = 0;       // embedding / head backward on top of the layers
  CommTotals tp_extra_bwd;
  double grad_bytes_per_layer = 0;  // fp32 gradients of one layer on one rank
  // The same by parameter tensor, in the order backward completes them (MLP down projection,
  // MLP up projection(s), attention output, fused QKV, then biases and norms): buckets are filled
  // tensor by tensor, as PyTorch DDP and Megatron-LM fill them.
  std::vector<double> layer_tensor_bytes;
  double extra_grad_bytes = 0;      // embedding / head gradients
  double params_per_rank = 0;       // for ZeRO-3 gathers
  // ZeRO-3 gathers a layer's parameters ahead of its forward and of its backward, and the
  // embedding and head parameters once per step.
  double layer_params_per_rank = 0;
  double layer_fwd_s = 0, extra_fwd_s = 0;
  CommTotals tp_layer_fwd, tp_extra_fwd;
};

double ops_time(const CostModel& c, const std::vector<Op>& ops) {
  double t = 0;
  for (const auto& op : ops) t += c.op_time_s(op);
  return t;
}

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

BuilderWorkspace& thread_workspace() {
  thread_local BuilderWorkspace w;
  return w;
}

// Inner vectors of `v` for n entries, each emptied, keeping their memory.
void reuse_rows(std::vector<std::vector<int>>& v, std::size_t n) {
  v.resize(n);
  for (auto& row : v) row.clear();
}

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

  void prepare_chunks();
  // This layout's LayerCosts, from a per-thread cache keyed by everything they depend on.
  const LayerCosts& layer_costs();
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
  // of a backward, with the chunk's embedding or head and the recompute, and every later layer.
  enum PassKind { kForwardPass, kBackwardPass, kLaterLayerForward, kLaterLayerBackward, kFirstLayerBackward, kPassKinds };
  // The parts of a pass of `kind` on chunk work `w` (not kLaterLayerForward's first layer, ZeRO-3's
  // own). `tp` holds the traffic of a part that adds a layer's and the chunk's extras; parts point
  // into it, so a PassParts stays where it was filled.
  struct PassParts {
    Part part[2];
    int n = 0;
    CommTotals tp;
  };
  static void pass_parts(int kind, const ChunkWork& w, PassParts& out);
  // The fused task of `parts` on simulated GPU `g`: its spec (duration: compute plus the TP
  // traffic's latencies), its GPU-0 record and TP bytes, with its flows into fused_flows_.
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
  // The plan for `bytes` over `group`; with Algorithm::automatic, the candidate with the smaller
  // idle-network time at this size, as plan_collective chooses.
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
  // Recorded timelines only: fused tasks of two parts (a recompute and its backward), by task id
  // order, drawn as two slices in proportion to their compute.
  std::vector<Gpu0Task> timeline_parts_;
  // Comm/compute interference: one processor per simulated GPU runs its compute queue's fixed work,
  // slowed by the profile's measured GEMM slowdown while that GPU's communication tasks run. Without
  // a measured slowdown there are no processors and compute runs at full speed.
  double interference_ = 0;
  std::vector<ProcessorId>& proc_ = ws_.proc;  // by GPU id, -1 if none
  // By GPU id: the fraction of the profile's speed its compute stream runs at (StepInput::gpu_speed).
  std::vector<double>& speed_ = ws_.speed;
  void interfere(TaskId t, const std::vector<int>& gpus) {
    if (interference_ <= 0) return;
    for (int g : gpus)
      if (proc_[g] >= 0) e_.add_interference(t, proc_[g], interference_);
  }
  void interfere(TaskId t, int a, int b = -1) {
    if (interference_ <= 0) return;
    for (int g : {a, b})
      if (g >= 0 && proc_[g] >= 0) e_.add_interference(t, proc_[g], interference_);
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
  // 3 backward's transfer.
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

const LayerCosts& Builder::layer_costs() {
  // Cost model instance, model shape, TP, sequence parallelism, recompute, micro-batch, precision.
  using Key = std::array<std::int64_t, 15>;
  struct KeyHash {
    std::size_t operator()(const Key& k) const noexcept {
      std::size_t h = 0;
      for (std::int64_t x : k) h = h * 1000003u + static_cast<std::size_t>(x);
      return h;
    }
  };
  thread_local std::unordered_map<Key, LayerCosts, KeyHash> cache;
  const bool sp = L_.sequence_parallel && L_.tp > 1;
  const Key key{static_cast<std::int64_t>(cost_.instance()), static_cast<int>(m_.family), m_.layers, m_.hidden, m_.heads, m_.kv_heads,
                m_.ffn_hidden, m_.vocab, m_.seq_len, m_.tied_embeddings, L_.tp, sp, static_cast<int>(L_.recompute), L_.micro_batch,
                static_cast<int>(in_.precision)};
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  if (cache.size() > 1024) cache.clear();
  const OpContext ctx{m_, L_.tp, sp, L_.recompute, L_.micro_batch, in_.precision};
  LayerCosts c;
  const LayerOps layer = transformer_layer_ops(ctx);
  c.layer_fwd_s = ops_time(cost_, layer.forward);
  c.layer_bwd_s = ops_time(cost_, layer.backward);
  c.layer_recompute_s = ops_time(cost_, layer.recompute);
  for (const auto& op : layer.forward) add_comm(c.layer_fwd, op, 1);
  for (const auto& op : layer.backward) add_comm(c.layer_bwd, op, 1);
  for (const auto& op : layer.recompute) add_comm(c.layer_recompute, op, 1);
  auto part = [&](const LayerOps& x, LayerCosts::Part& p) {
    p.fwd_s = ops_time(cost_, x.forward);
    p.bwd_s = ops_time(cost_, x.backward);
    for (const auto& op : x.forward) add_comm(p.fwd, op, 1);
    for (const auto& op : x.backward) add_comm(p.bwd, op, 1);
  };
  part(embedding_ops(ctx), c.embedding);
  part(head_ops(ctx), c.head);
  return cache.emplace(key, c).first->second;
}

void Builder::prepare_chunks() {
  const int pp = L_.pp;
  vpp_ = L_.schedule == Schedule::interleaved ? L_.vpp : 1;
  if (chunk_cache_ && !chunk_cache_->empty()) {
    chunks_ = *chunk_cache_;
    return;
  }
  const LayerCosts& lc = layer_costs();
  const double lf = lc.layer_fwd_s, lb = lc.layer_bwd_s, lr = lc.layer_recompute_s;
  const CommTotals &cf = lc.layer_fwd, &cb = lc.layer_bwd, &cr = lc.layer_recompute;
  const ParamCount pc = count_params(m_);
  const double h = m_.hidden;
  const double norm = m_.family == Family::gpt ? 6.0 * h : 2.0 * h;
  const double layer_params = (pc.per_layer - norm) / L_.tp + norm;
  chunks_.assign(pp * vpp_, {});
  for (int s = 0; s < pp; ++s)
    for (int c = 0; c < vpp_; ++c) {
      const int vs = c * pp + s;
      ChunkWork& w = chunks_[s * vpp_ + c];
      w.layers = layers_on_stage(m_.layers, pp * vpp_, vs);
      w.fwd_s = w.layers * lf;
      w.bwd_s = w.layers * lb;
      w.recompute_s = w.layers * lr;
      for (int i = 0; i < 3; ++i) {
        w.tp_fwd.bytes[i] = cf.bytes[i] * w.layers; w.tp_fwd.count[i] = cf.count[i] * w.layers;
        w.tp_bwd.bytes[i] = cb.bytes[i] * w.layers; w.tp_bwd.count[i] = cb.count[i] * w.layers;
        w.tp_recompute.bytes[i] = cr.bytes[i] * w.layers; w.tp_recompute.count[i] = cr.count[i] * w.layers;
        w.tp_layer_bwd.bytes[i] = cb.bytes[i]; w.tp_layer_bwd.count[i] = cb.count[i];
      }
      w.layer_bwd_s = lb;
      w.layer_fwd_s = lf;
      w.tp_layer_fwd = cf;
      w.layer_params_per_rank = layer_params;
      w.grad_bytes_per_layer = 4.0 * layer_params;
      {
        const double f = m_.ffn_hidden, kv = m_.kv_hidden(), t = L_.tp;
        const double up = (m_.family == Family::gpt ? 1.0 : 2.0) * h * f / t;
        w.layer_tensor_bytes = {4.0 * f * h / t, 4.0 * up, 4.0 * h * h / t, 4.0 * h * (h + 2.0 * kv) / t};
        double listed = 0;
        for (double b : w.layer_tensor_bytes) listed += b;
        w.layer_tensor_bytes.push_back(std::max(0.0, w.grad_bytes_per_layer - listed));
      }
      w.params_per_rank = layer_params * w.layers;
      auto add_extra = [&](const LayerCosts::Part& x, double params) {
        w.fwd_s += x.fwd_s;
        w.bwd_s += x.bwd_s;
        w.extra_fwd_s += x.fwd_s;
        w.extra_bwd_s += x.bwd_s;
        for (CommTotals* t : {&w.tp_fwd, &w.tp_extra_fwd}) add_totals(*t, x.fwd);
        for (CommTotals* t : {&w.tp_bwd, &w.tp_extra_bwd}) add_totals(*t, x.bwd);
        w.extra_grad_bytes += 4.0 * params;
        w.params_per_rank += params;
      };
      if (vs == 0) add_extra(lc.embedding, static_cast<double>(pc.embedding) / L_.tp);
      if (vs == pp * vpp_ - 1) {
        double head_params = static_cast<double>(pc.final_norm);
        if (!m_.tied_embeddings) head_params += static_cast<double>(pc.lm_head) / L_.tp;
        else if (pp > 1) head_params += static_cast<double>(m_.vocab) * m_.hidden / L_.tp;
        add_extra(lc.head, head_params);
      }
    }
  if (chunk_cache_) *chunk_cache_ = chunks_;
}

TaskId Builder::compute_task(int gpu, double dur, int cat, const std::string& name, TaskId extra_dep) {
  TaskSpec spec;
  dur /= speed_[gpu];
  spec.duration_s = dur;
  spec.category = static_cast<std::int16_t>(cat);
  spec.lane = gpu;
  spec.label = label(name);
  spec.processor = proc_[gpu];
  spec.sequence = sim_index_[gpu];  // the tasks of a compute queue run one after another
  const TaskId t = e_.add_task(spec);
  lane_stream_.push_back(0);
  RankQueues& q = q_[gpu];
  if (q.compute >= 0) e_.add_dependency(q.compute, t);
  if (extra_dep >= 0) e_.add_dependency(extra_dep, t);
  q.compute = t;
  if (gpu == 0) {
    gpu0_tasks_.push_back({t, 1, {cat, 0}, {dur, 0}});
    ws_.gpu0_slot.push_back(-1);
  }
  return t;
}

void Builder::pass_parts(int kind, const ChunkWork& w, PassParts& out) {
  const Part recompute{w.recompute_s, kRecompute, &w.tp_recompute};
  const bool has_recompute = w.recompute_s > 0;
  out.n = 0;
  switch (kind) {
    case kForwardPass:
      out.part[out.n++] = Part{w.fwd_s, kCompute, &w.tp_fwd};
      return;
    case kBackwardPass:
      if (has_recompute) out.part[out.n++] = recompute;
      out.part[out.n++] = Part{w.bwd_s, kCompute, &w.tp_bwd};
      return;
    case kLaterLayerForward:
      out.tp = w.layers > 0 ? w.tp_layer_fwd : CommTotals{};
      out.part[out.n++] = Part{w.layers > 0 ? w.layer_fwd_s : 0.0, kCompute, &out.tp};
      return;
    case kLaterLayerBackward:
      out.tp = w.layers > 0 ? w.tp_layer_bwd : CommTotals{};
      out.part[out.n++] = Part{w.layers > 0 ? w.layer_bwd_s : 0.0, kCompute, &out.tp};
      return;
    case kFirstLayerBackward:
      out.tp = w.layers > 0 ? w.tp_layer_bwd : CommTotals{};
      for (int i = 0; i < 3; ++i) out.tp.bytes[i] += w.tp_extra_bwd.bytes[i], out.tp.count[i] += w.tp_extra_bwd.count[i];
      if (has_recompute) out.part[out.n++] = recompute;
      out.part[out.n++] = Part{(w.layers > 0 ? w.layer_bwd_s : 0.0) + w.extra_bwd_s, kCompute, &out.tp};
      return;
  }
  throw std::logic_error("unknown pass kind");
}

void Builder::fused_values(int g, const Part* parts, int nparts, FusedPass& out) {
  static const CollectiveKind kinds[3] = {CollectiveKind::all_reduce, CollectiveKind::all_gather, CollectiveKind::reduce_scatter};
  TaskSpec spec;
  spec.category = static_cast<std::int16_t>(parts[0].cat);
  spec.lane = g;
  spec.processor = proc_[g];
  spec.sequence = sim_index_[g];  // the tasks of a compute queue run one after another
  Gpu0Task rec;
  rec.nparts = 0;
  double tp_bytes = 0;
  fused_flows_.clear();
  fused_paths_.clear();
  const double speed = speed_[g];
  for (int pi = 0; pi < nparts; ++pi) {
    const Part& p = parts[pi];
    const double seconds = p.seconds / speed;
    spec.duration_s += seconds;
    if (rec.nparts < 2) rec.cat[rec.nparts] = p.cat, rec.seconds[rec.nparts] = seconds, ++rec.nparts;
    else rec.seconds[1] += seconds;
    if (!p.tp || L_.tp == 1) continue;
    for (int k = 0; k < 3; ++k) {
      if (p.tp->count[k] == 0) continue;
      const CachedPlan& plan = cached_plan(tp_group_of(g), kinds[k], Algorithm::ring, p.tp->bytes[k]);
      tp_bytes += plan.sent_by_first * p.tp->bytes[k];
      const PlanScale sc = plan_scale(plan, p.tp->bytes[k], p.tp->count[k]);
      rec.tp_idle_s += plan.idle_latency_s * sc.latency * p.tp->count[k] + p.tp->bytes[k] * plan.idle_per_byte_s * sc.bytes;
      for (const CachedPhase& ph : plan.phases) {
        spec.duration_s += ph.latency_s * sc.latency * p.tp->count[k];
        for (std::int32_t f = ph.flow_begin; f < ph.flow_end; ++f) add_fused_flow(plan, plan.flows[f], p.tp->bytes[k] * sc.bytes);
      }
    }
  }
  out.spec = spec;
  out.rec = rec;
  out.tp_bytes = tp_bytes;
}

void Builder::run_parts(const std::vector<int>& gpus, const Part* parts, int nparts, const std::string& name,
                        std::vector<TaskId>& first, int recurs, int chunk) {
  first.assign(gpus.size(), -1);
  if (!fuse_tp_) {
    bool head = true;
    for (int pi = 0; pi < nparts; ++pi) {
      const Part& p = parts[pi];
      for (std::size_t i = 0; i < gpus.size(); ++i) {
        const TaskId t = compute_task(gpus[i], p.seconds, p.cat, name);
        if (head) first[i] = t;
      }
      head = false;
      if (p.tp) tp_all(*p.tp, name);
    }
    return;
  }
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const int g = gpus[i];
    const std::int32_t slot =
        recurs >= 0 ? static_cast<std::int32_t>((static_cast<std::size_t>(sim_index_[g]) * vpp_ + chunk) * kPassKinds + recurs) : -1;
    FusedPass* memo = slot >= 0 ? &fused_memo_[slot] : nullptr;
    if (memo && memo->set) {
      TaskSpec spec = memo->spec;
      spec.label = label(name);
      if (g == 0) tp_bytes_gpu0_ += memo->tp_bytes;
      add_fused_task(g, spec, memo->rec, memo->like, first[i], slot);
      continue;
    }
    FusedPass made;
    fused_values(g, parts, nparts, made);
    made.spec.label = label(name);
    if (g == 0) tp_bytes_gpu0_ += made.tp_bytes;
    const TaskId t = add_fused_task(g, made.spec, made.rec, -1, first[i], slot);
    if (memo) {
      *memo = made;
      memo->set = true;
      memo->like = t;
    }
  }
}

TaskId Builder::add_fused_task(int g, const TaskSpec& spec, Gpu0Task rec, TaskId like, TaskId& first, std::int32_t slot) {
  TaskId t;
  if (like >= 0) {
    t = e_.add_task(spec, like);
  } else {
    t = e_.add_task(spec);
    for (const CachedFlow& f : fused_flows_) e_.add_flow(t, f.bytes, fused_paths_.data() + f.path_begin, f.path_end - f.path_begin);
  }
  lane_stream_.push_back(0);
  RankQueues& q = q_[g];
  if (q.compute >= 0) e_.add_dependency(q.compute, t);
  q.compute = t;
  first = t;
  if (in_.record_timeline && rec.nparts == 2) {
    rec.id = t;
    timeline_parts_.push_back(rec);
  }
  ws_.fused_tasks.push_back({t, slot});
  if (slot < 0) ws_.reusable = false;  // numbers refill() could not work out again
  if (g == 0) {
    rec.id = t;
    gpu0_tasks_.push_back(rec);
    ws_.gpu0_slot.push_back(slot);
  }
  return t;
}

const Builder::CachedPlan& Builder::cached_plan(const std::vector<int>& group, CollectiveKind kind, Algorithm algo,
                                                double bytes) {
  if (algo != Algorithm::automatic || kind != CollectiveKind::all_reduce || group.size() < 2)
    return unit_plan(group, kind, algo);
  const CachedPlan& ring = unit_plan(group, kind, Algorithm::ring);
  // Groups are increasing arithmetic progressions of GPU ids: they span nodes when their ends do.
  if (place_.node_of(group.front()) == place_.node_of(group.back())) return ring;
  const CachedPlan& tree = unit_plan(group, kind, Algorithm::tree);
  const auto idle = [bytes](const CachedPlan& p) { return p.idle_latency_s + bytes * p.idle_per_byte_s; };
  return idle(tree) < idle(ring) ? tree : ring;
}

bool Builder::one_per_node(const std::vector<int>& group) const {
  for (std::size_t i = 1; i < group.size(); ++i)
    if (place_.node_of(group[i]) == place_.node_of(group[i - 1])) return false;
  return group.size() > 1;
}

const Builder::CachedPlan& Builder::unit_plan(const std::vector<int>& group, CollectiveKind kind, Algorithm algo) {
  // Identical collectives (same kind and group) recur every micro-batch and bucket: plan and route once.
  // Groups here are arithmetic progressions of GPU ids (TP contiguous, DP and PP strided): the first
  // member, the stride and the size name one.
  const int stride = group.size() > 1 ? group[1] - group[0] : 0;
  const PlanKey key{static_cast<int>(kind), static_cast<int>(algo), group.front(), stride, static_cast<int>(group.size())};
  auto it = plan_cache_.find(key);
  if (it != plan_cache_.end()) return it->second;
  if (refilling_) throw RefillMiss{};  // routing would add links to a graph already built
  for (std::size_t i = 1; i < group.size(); ++i)
    if (group[i] - group[i - 1] != stride) throw std::logic_error("collective group is not evenly strided");
  const PlanShapeCache::Key skey{{key[0], key[1], key[2], key[3], key[4], place_.gpus_per_node, in_.net.shape.nodes_per_leaf()},
                                  {place_.intra_alpha_s, place_.inter_alpha_s, place_.intra_Bps, place_.inter_Bps}};
  auto shape = shapes_->shapes.find(skey);
  if (shape == shapes_->shapes.end()) {
    PlanShapeCache::Shape ps;
    ps.plan = plan_collective(kind, algo, 1.0, group, place_);
    for (const Phase& ph : ps.plan.phases) {
      ps.idle_latency_s += ph.latency_s;
      std::vector<std::int32_t> order(ph.flows.size());
      for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int32_t>(i);
      std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) { return ph.flows[a].src < ph.flows[b].src; });
      ps.by_source.push_back(std::move(order));
    }
    ps.idle_per_byte_s = idle_time_s(ps.plan, place_) - ps.idle_latency_s;
    ps.leaf_share = group_nodes_per_leaf(group);
    shape = shapes_->shapes.emplace(skey, std::move(ps)).first;
  }
  const PlanShapeCache::Shape& sh = shape->second;
  const CollectivePlan& plan = sh.plan;
  CachedPlan c;
  if (place_.node_of(group.front()) == place_.node_of(group.back())) c.measured_in = 1;
  else if (one_per_node(group)) c.measured_in = 2;
  c.kind = kind;
  c.group_size = static_cast<int>(group.size());
  c.idle_latency_s = sh.idle_latency_s;
  c.idle_per_byte_s = sh.idle_per_byte_s;
  c.members = sim_members(group);
  const int leaf_share = sh.leaf_share;
  std::vector<std::int32_t>& mine = plan_flows_scratch_;
  for (std::size_t pi = 0; pi < plan.phases.size(); ++pi) {
    const Phase& ph = plan.phases[pi];
    CachedPhase cp;
    cp.latency_s = ph.latency_s;
    cp.flow_begin = static_cast<std::int32_t>(c.flows.size());
    // The flows leaving the simulated members, in the plan's order.
    const std::vector<std::int32_t>& by_src = sh.by_source[pi];
    mine.clear();
    for (int g : c.members) {
      auto lo = std::lower_bound(by_src.begin(), by_src.end(), g, [&](std::int32_t i, int v) { return ph.flows[i].src < v; });
      for (; lo != by_src.end() && ph.flows[*lo].src == g; ++lo) mine.push_back(*lo);
    }
    std::sort(mine.begin(), mine.end());
    for (std::int32_t fi : mine) {
      const FlowSpec& f = ph.flows[fi];
      if (!c.members.empty() && f.src == c.members.front()) c.sent_by_first += f.bytes;
      paths_->path(f.src, f.dst, place_.node_of(f.src) != place_.node_of(f.dst) ? leaf_share : 0, scratch_);
      bool merged = false;
      for (std::int32_t i = cp.flow_begin; i < static_cast<std::int32_t>(c.flows.size()) && !merged; ++i) {
        CachedFlow& x = c.flows[i];
        if (x.path_end - x.path_begin == static_cast<std::int32_t>(scratch_.size()) &&
            std::equal(scratch_.begin(), scratch_.end(), c.paths.begin() + x.path_begin)) {
          x.bytes += f.bytes;
          merged = true;
        }
      }
      if (merged) continue;
      CachedFlow cf{f.bytes, static_cast<std::int32_t>(c.paths.size()), 0};
      c.paths.insert(c.paths.end(), scratch_.begin(), scratch_.end());
      cf.path_end = static_cast<std::int32_t>(c.paths.size());
      c.flows.push_back(cf);
    }
    cp.flow_end = static_cast<std::int32_t>(c.flows.size());
    c.phases.push_back(cp);
  }
  return plan_cache_.emplace(key, std::move(c)).first->second;
}

TaskId Builder::collective(const std::vector<int>& group, CollectiveKind kind, Algorithm algo, double bytes, int count,
                           double extra_latency_s, int cat, bool on_compute_queue, const std::vector<TaskId>& triggers,
                           const std::string& name, double* sent_by_first) {
  calls_scratch_.assign(1, Calls{bytes / std::max(1, count), std::max(1, count)});
  return collective(group, kind, algo, calls_scratch_, extra_latency_s, cat, on_compute_queue, triggers, name, sent_by_first);
}

TaskId Builder::collective(const std::vector<int>& group, CollectiveKind kind, Algorithm algo, const std::vector<Calls>& calls,
                           double extra_latency_s, int cat, bool on_compute_queue, const std::vector<TaskId>& triggers,
                           const std::string& name, double* sent_by_first) {
  double bytes = 0;
  for (const Calls& c : calls) bytes += c.bytes * c.count;
  const CachedPlan& plan = cached_plan(group, kind, algo, bytes);
  const std::vector<int>& members = plan.members;
  if (sent_by_first) *sent_by_first += plan.sent_by_first * bytes;
  // Latency multiplier (calls x measured latency factor) and rescaled bytes, summed over the calls.
  double latency_factor = 0, scaled_bytes = 0;
  for (const Calls& c : calls) {
    const PlanScale k = plan_scale(plan, c.bytes * c.count, c.count);
    latency_factor += k.latency * c.count;
    scaled_bytes += c.bytes * c.count * k.bytes;
  }
  TaskId prev = -1;
  const std::size_t nphases = std::max<std::size_t>(1, plan.phases.size());
  for (std::size_t pi = 0; pi < nphases; ++pi) {
    TaskSpec spec;
    spec.category = static_cast<std::int16_t>(cat);
    spec.lane = members.front();
    spec.label = label(name);
    const CachedPhase* ph = pi < plan.phases.size() ? &plan.phases[pi] : nullptr;
    // The calls share one task: their latencies add up, and so do their bytes.
    spec.duration_s = (ph ? ph->latency_s * latency_factor : 0.0) + (pi == 0 ? extra_latency_s : 0.0);
    const TaskId t = e_.add_task(spec);
    lane_stream_.push_back(on_compute_queue ? 0 : 1);
    if (ph)
      for (std::int32_t f = ph->flow_begin; f < ph->flow_end; ++f) {
        const CachedFlow& cf = plan.flows[f];
        e_.add_flow(t, cf.bytes * scaled_bytes, plan.paths.data() + cf.path_begin, cf.path_end - cf.path_begin);
      }
    // Communication kernels beside the compute queue slow its GEMMs down.
    if (!on_compute_queue) interfere(t, members);
    if (prev >= 0) {
      e_.add_dependency(prev, t);
    } else {
      for (TaskId tr : triggers)
        if (tr >= 0) e_.add_dependency(tr, t);
      for (int g : members) {
        RankQueues& q = q_[g];
        const TaskId tail = on_compute_queue ? q.compute : q.comm;
        if (tail >= 0) e_.add_dependency(tail, t);
      }
    }
    prev = t;
  }
  for (int g : members) {
    RankQueues& q = q_[g];
    (on_compute_queue ? q.compute : q.comm) = prev;
    if (g == 0) {
      if (on_compute_queue) gpu0_tasks_.push_back({prev, 0, {0, 0}, {0, 0}}), ws_.gpu0_slot.push_back(-1);
      else gpu0_comm_.push_back(prev);
    }
  }
  return prev;
}

void Builder::tp_all(const CommTotals& t, const std::string& name) {
  if (L_.tp == 1 || t.empty()) return;
  static const CollectiveKind kinds[3] = {CollectiveKind::all_reduce, CollectiveKind::all_gather, CollectiveKind::reduce_scatter};
  for (int gpu : tp_leaders_)
    for (int k = 0; k < 3; ++k) {
      if (t.count[k] == 0) continue;
      double sent = 0;
      collective(tp_group_of(gpu), kinds[k], Algorithm::ring, t.bytes[k], t.count[k], 0.0, kTpComm, true, {}, "TP " + name,
                 gpu == 0 ? &sent : nullptr);
      if (gpu == 0) tp_bytes_gpu0_ += sent;
    }
}

// Gradient synchronisation of one bucket: all-reduce (ZeRO-0) or reduce-scatter (ZeRO 1-3), with
// the chosen compression's bytes and kernel cost.
void Builder::grad_collective(int gpu, const std::vector<Calls>& buckets, int bucket_index) {
  if (L_.dp == 1 || buckets.empty()) return;
  const std::vector<int>& group = dp_group_of(gpu);
  const int n = L_.dp;
  const Compression& c = L_.compression;
  const CollectiveKind kind = c.kind == Compression::Kind::topk ? CollectiveKind::all_gather
                              : (L_.zero == 0 || c.kind == Compression::Kind::powersgd) ? CollectiveKind::all_reduce
                                                                                        : CollectiveKind::reduce_scatter;
  // What each bucket puts on the wire, and the compression kernels it runs first.
  std::vector<Calls>& wire = grad_calls_scratch_;
  wire.clear();
  double kernel_s = 0;
  int count = 0;
  for (const Calls& b : buckets) {
    if (b.bytes <= 0) continue;
    double w = b.bytes, k = 0;
    switch (c.kind) {
      case Compression::Kind::none: break;
      case Compression::Kind::fp16: w = b.bytes / 2; k = cost_.compression_time_s(c, b.bytes); break;
      case Compression::Kind::int8: w = b.bytes / 4; k = cost_.compression_time_s(c, b.bytes); break;
      case Compression::Kind::topk:
        // Values (fp32) and int32 indices of the kept fraction, gathered from every rank.
        w = n * c.topk_fraction * b.bytes * 2.0;
        k = cost_.compression_time_s(c, b.bytes) + cost_.memory_time_s(n * c.topk_fraction * b.bytes * 2.0);
        break;
      case Compression::Kind::powersgd: {
        const double side = std::sqrt(b.bytes / 4.0);
        w = 2.0 * side * c.powersgd_rank * 4.0;
        k = cost_.compression_time_s(c, b.bytes);
        break;
      }
    }
    wire.push_back({w, b.count});
    kernel_s += k * b.count;
    count += b.count;
  }
  if (wire.empty()) return;
  double sent = 0;
  std::string name;
  if (in_.record_timeline) {
    name.append("DP ").append(to_string(kind)).append(" bucket ").append(std::to_string(bucket_index));
    if (count > 1) name.append("-").append(std::to_string(bucket_index + count - 1));
  }
  collective(group, kind, in_.net.dp_algorithm, wire, kernel_s, kDpComm, false, compute_tails(gpu), name, gpu == 0 ? &sent : nullptr);
  if (gpu == 0) dp_bytes_gpu0_ += sent;
}

const std::vector<TaskId>& Builder::compute_tails(int gpu) {
  tails_scratch_.clear();
  for (int g : dp_sim_members_[sim_index_[gpu]]) tails_scratch_.push_back(q_[g].compute);
  return tails_scratch_;
}

const std::vector<int>& Builder::sim_members(const std::vector<int>& group) {
  // Groups are arithmetic progressions of GPU ids: the first member, the stride and the size name one.
  const std::array<int, 3> key{group.front(), group.size() > 1 ? group[1] - group[0] : 0, static_cast<int>(group.size())};
  auto& cache = ws_.sim_members;
  for (std::size_t i = 0; i < ws_.sim_members_used; ++i)
    if (cache[i].first == key) return cache[i].second;
  if (ws_.sim_members_used == cache.size()) cache.emplace_back();
  auto& [k, v] = cache[ws_.sim_members_used++];
  k = key;
  v.clear();
  for (int g : group)
    if (is_sim_[g]) v.push_back(g);
  return v;
}

// Builds every simulated GPU of one pipeline stage in lockstep (they run the same order), so that
// a collective can wait for all of its members' work.
void Builder::build_stage(int stage, const std::vector<int>& gpus) {
  const int pp = L_.pp;
  const PipelineKind pk = L_.schedule == Schedule::gpipe ? PipelineKind::gpipe
                          : L_.schedule == Schedule::interleaved ? PipelineKind::interleaved
                                                                 : PipelineKind::one_f_one_b;
  const std::vector<PipeOp>& order = stage_order(pk, pp, vpp_, microbatches_, stage);
  const double bucket_bytes = L_.bucket_MB * 1e6;
  const bool zero3 = L_.zero >= 3 && L_.dp > 1;
  const bool reduce_every_microbatch = L_.zero >= 2;
  // Leaders: the first simulated member of each TP and DP group issues the group's collective.
  auto leaders = [&](bool tp, std::vector<int>& out) {
    out.clear();
    for (int g : gpus) {
      const auto& grp = tp ? tp_group_of(g) : dp_group_of(g);
      for (int x : grp)
        if (paths_->simulated(x)) { if (x == g) out.push_back(g); break; }
    }
  };
  leaders(true, tp_leaders_);
  std::vector<int>& dp_leaders = ws_.dp_leaders;
  leaders(false, dp_leaders);
  // Buckets fill tensor by tensor and close once they hold bucket_MB (a tensor larger than that is
  // a bucket of its own); the buckets a layer closed start when its backward ends.
  double fill = 0;
  int buckets = 0;
  std::vector<double>& closed = ws_.closed_buckets;
  closed.clear();
  auto add_tensor = [&](double bytes) {
    fill += bytes;
    if (fill >= bucket_bytes) {
      closed.push_back(fill);
      fill = 0;
    }
  };
  std::vector<Calls>& calls = stage_calls_;
  auto flush = [&](bool force) {
    if (force && fill > 1e-9) {
      closed.push_back(fill);
      fill = 0;
    }
    // The buckets closed together go as one chain (equal ones in a row as one entry).
    calls.clear();
    for (std::size_t i = 0; i < closed.size();) {
      std::size_t j = i + 1;
      while (j < closed.size() && closed[j] == closed[i]) ++j;
      calls.push_back({closed[i], static_cast<int>(j - i)});
      i = j;
    }
    if (!calls.empty())
      for (int g : dp_leaders) grad_collective(g, calls, buckets);
    buckets += static_cast<int>(closed.size());
    closed.clear();
  };
  // ZeRO-3 gathers parameters on the communication queue: a layer's (into one of two buffers) once
  // the compute queued before the previous layer is done with the buffer, so one layer ahead of
  // use; the embedding and head parameters once per step. A task waits for its layer's gather.
  using Gathers = std::vector<TaskId>;  // by index in `gpus`
  auto zero3_gather = [&](double params, const std::string& name) {
    Gathers out(gpus.size(), -1);
    for (int g : dp_leaders) {
      double sent = 0;
      const auto& group = dp_group_of(g);
      const TaskId t = collective(group, CollectiveKind::all_gather, Algorithm::ring, 2.0 * params, 1, 0.0, kDpComm, false,
                                  compute_tails(g), name, g == 0 ? &sent : nullptr);
      if (g == 0) dp_bytes_gpu0_ += sent;
      for (std::size_t i = 0; i < gpus.size(); ++i)
        if (std::find(group.begin(), group.end(), gpus[i]) != group.end()) out[i] = t;
    }
    return out;
  };
  auto wait_for = [&](const Gathers& gathers, const std::vector<TaskId>& first) {
    for (std::size_t i = 0; i < gpus.size(); ++i)
      if (gathers[i] >= 0) e_.add_dependency(gathers[i], first[i]);
  };
  std::vector<TaskId>& first = ws_.first;
  bool extras_gathered = false;
  // The schedule of M + P micro-batches runs this one's order up to the op after the last forward;
  // that op on is where it diverges (see choose_cut).
  int diverge_pos = -1;
  if (cut_) {
    const int total = microbatches_ * vpp_;
    const int warm = pipeline_warmup(pk, pp, vpp_, microbatches_, stage);
    diverge_pos = total > warm ? warm + 2 * (total - 1 - warm) + 1 : -1;
    if (diverge_pos < 0 || diverge_pos >= static_cast<int>(order.size())) ws_.cut_valid = false;
    if (!gpus.empty() && gpus.front() == 0) {
      cut_bytes_.assign(order.size() + 1, {0.0, 0.0});
      ws_.cut_gpu0_count.assign(order.size() + 1, 0);
    }
  }

  // One simulated GPU, TP fused, nothing gathered per layer and no names: a pass that recurs is its
  // first occurrence's task again, added here without the general path's bookkeeping.
  const bool quick = gpus.size() == 1 && fuse_tp_ && !zero3 && !in_.record_timeline;
  for (std::size_t oi = 0; oi < order.size(); ++oi) {
    const PipeOp& op = order[oi];
    const int vs = op.chunk * pp + stage;
    if (cut_ && !gpus.empty() && gpus.front() == 0) {
      cut_bytes_[oi] = {dp_bytes_gpu0_, tp_bytes_gpu0_};
      ws_.cut_gpu0_count[oi] = gpu0_tasks_.size();
    }
    if (period_ > 0 && !cut_ && stage == 0 && op.forward && op.chunk == 0 && !gpus.empty() && gpus.front() == 0)
      for (int i = 0; i < 2; ++i)
        if (op.microbatch == microbatches_ - (2 - i) * period_) {
          ws_.marker_bytes[i][0] = dp_bytes_gpu0_;
          ws_.marker_bytes[i][1] = tp_bytes_gpu0_;
          ws_.marker_gpu0_count[i] = gpu0_tasks_.size();
        }
    if (quick && (op.forward || !((op.microbatch == microbatches_ - 1 || reduce_every_microbatch) && L_.dp > 1))) {
      const int g = gpus.front();
      const FusedPass& memo =
          fused_memo_[(static_cast<std::size_t>(sim_index_[g]) * vpp_ + op.chunk) * kPassKinds + (op.forward ? kForwardPass : kBackwardPass)];
      if (memo.set) {
        const TaskId t = e_.add_task(memo.spec, memo.like);
        lane_stream_.push_back(0);
        RankQueues& q = q_[g];
        if (q.compute >= 0) e_.add_dependency(q.compute, t);
        q.compute = t;
        const std::int32_t slot = static_cast<std::int32_t>(&memo - fused_memo_.data());
        ws_.fused_tasks.push_back({t, slot});
        if (g == 0) {
          tp_bytes_gpu0_ += memo.tp_bytes;
          gpu0_tasks_.push_back(memo.rec);
          gpu0_tasks_.back().id = t;
          ws_.gpu0_slot.push_back(slot);
        }
        const std::size_t i = (static_cast<std::size_t>(sim_index_[g]) * vpp_ + op.chunk) * microbatches_ + op.microbatch;
        if (op.forward) {
          h_.fwd_start[i] = h_.fwd_done[i] = t;
        } else {
          h_.bwd_start[i] = h_.bwd_done[i] = t;
          if (period_ > 0) h_.comm_after_bwd[i] = q.comm;
        }
        continue;
      }
    }
    const ChunkWork& w = chunks_[stage * vpp_ + op.chunk];
    const std::string tag = !in_.record_timeline ? std::string()
                            : " mb" + std::to_string(op.microbatch) + (vpp_ > 1 ? " c" + std::to_string(op.chunk) : "");
    const int units = std::max(1, w.layers);
    // Task names, built only for a recorded timeline.
    auto named = [&](const char* pass, int layer = -1) {
      if (!in_.record_timeline) return std::string();
      return pass + tag + (layer >= 0 ? " L" + std::to_string(layer) : std::string());
    };
    Gathers cur;
    auto gather_layer = [&](int l, bool with_extras) {
      const double params = (w.layers > 0 ? w.layer_params_per_rank : 0.0) +
                            (with_extras ? w.params_per_rank - w.layers * w.layer_params_per_rank : 0.0);
      return zero3_gather(params, in_.record_timeline ? "ZeRO-3 gather" + tag + " L" + std::to_string(l) : std::string());
    };
    if (zero3) {
      cur = gather_layer(0, !extras_gathered);
      extras_gathered = true;
    }
    if (op.forward) {
      if (!zero3) {
        PassParts pp;
        pass_parts(kForwardPass, w, pp);
        run_parts(gpus, pp.part, pp.n, named("F"), first, kForwardPass, op.chunk);
      } else {
        // Layer by layer, each after its gather (the embedding and head with the first).
        std::vector<TaskId> op_first;
        for (int l = 0; l < units; ++l) {
          const Gathers next = l + 1 < units ? gather_layer(l + 1, false) : Gathers{};
          if (l > 0) {
            PassParts pp;
            pass_parts(kLaterLayerForward, w, pp);
            run_parts(gpus, pp.part, pp.n, named("F", l), first, kLaterLayerForward, op.chunk);
          } else {
            CommTotals t = w.layers > 0 ? w.tp_layer_fwd : CommTotals{};
            for (int i = 0; i < 3; ++i) t.bytes[i] += w.tp_extra_fwd.bytes[i], t.count[i] += w.tp_extra_fwd.count[i];
            const double dur = (w.layers > 0 ? w.layer_fwd_s : 0.0) + w.extra_fwd_s;
            run_parts(gpus, {Part{dur, kCompute, &t}}, named("F", l), first);
          }
          wait_for(cur, first);
          if (l == 0) op_first = first;
          cur = next;
        }
        first = op_first;
      }
      for (std::size_t i = 0; i < gpus.size(); ++i) {
        h_.fwd_start[hidx(gpus[i], vs, op.microbatch)] = first[i];
        h_.fwd_done[hidx(gpus[i], vs, op.microbatch)] = q_[gpus[i]].compute;
      }
      continue;
    }
    const bool last_mb = op.microbatch == microbatches_ - 1;
    if ((last_mb || reduce_every_microbatch) && L_.dp > 1) {
      // Layer by layer, so that full buckets start while the rest of backward runs.
      for (int l = 0; l < units; ++l) {
        const Gathers next = zero3 && l + 1 < units ? gather_layer(l + 1, false) : Gathers{};
        const int kind = l == 0 ? kFirstLayerBackward : kLaterLayerBackward;
        PassParts pp;
        pass_parts(kind, w, pp);
        run_parts(gpus, pp.part, pp.n, named("B", l), first, kind, op.chunk);
        if (zero3) wait_for(cur, first);
        cur = next;
        if (l == 0) {
          for (std::size_t i = 0; i < gpus.size(); ++i) h_.bwd_start[hidx(gpus[i], vs, op.microbatch)] = first[i];
        }
        if (w.layers > 0)
          for (double b : w.layer_tensor_bytes) add_tensor(b);
        if (l == units - 1 && w.extra_grad_bytes > 0) add_tensor(w.extra_grad_bytes);
        flush(false);
      }
      if (reduce_every_microbatch) flush(true);
    } else {
      PassParts pp;
      pass_parts(kBackwardPass, w, pp);
      run_parts(gpus, pp.part, pp.n, named("B"), first, kBackwardPass, op.chunk);
      for (std::size_t i = 0; i < gpus.size(); ++i) h_.bwd_start[hidx(gpus[i], vs, op.microbatch)] = first[i];
    }
    for (int g : gpus) h_.bwd_done[hidx(g, vs, op.microbatch)] = q_[g].compute;
    if (period_ > 0)
      for (int g : gpus) h_.comm_after_bwd[hidx(g, vs, op.microbatch)] = q_[g].comm;
  }
  if (cut_ && diverge_pos >= 0 && diverge_pos < static_cast<int>(order.size())) {
    const PipeOp& op = order[diverge_pos];
    for (int g : gpus) {
      const std::size_t i = hidx(g, op.chunk * pp + stage, op.microbatch);
      cut_diverge_[sim_index_[g]] = op.forward ? h_.fwd_start[i] : h_.bwd_start[i];
    }
  }
  flush(true);
}

double Builder::activation_bytes_sent() const {
  return static_cast<double>(L_.micro_batch) * m_.seq_len * m_.hidden * activation_bytes(in_.precision) /
         ((L_.sequence_parallel && L_.tp > 1) ? L_.tp : 1);
}

void Builder::transfer_values(BuilderWorkspace::TransferKind& k) const {
  const double act_bytes = activation_bytes_sent();
  const bool inside = place_.node_of(k.src) == place_.node_of(k.dst);
  // A point-to-point transfer inside a node, where the profile measured one: its time on an idle
  // NVLink port (alpha + S / port rate) rescaled to the measurement.
  const MeasuredCollective* measured = find_measured(inside ? in_.net.intra_measured : in_.net.inter_measured, CollectiveKind::send_recv, 2);
  PlanScale sc;
  if (inside && measured)
    sc = measured_scale(*measured, act_bytes, place_.intra_alpha_s, place_.intra_Bps > 0 ? 1.0 / place_.intra_Bps : 0.0);
  else if (!inside && measured)
    sc = measured_scale(*measured, act_bytes, place_.inter_alpha_s, place_.inter_Bps > 0 ? 1.0 / place_.inter_Bps : 0.0);
  k.latency_s = (inside ? place_.intra_alpha_s : place_.inter_alpha_s) * sc.latency;
  k.bytes = act_bytes * sc.bytes;
}

bool Builder::refill() {
  refilling_ = true;
  speed_.assign(in_.net.shape.gpus(), 1.0);  // kept graphs are of steps without GPU speeds
  // Every fused pass again from this step's chunk work, into the memo its tasks were made from;
  // the first task of each holds the flows the others share.
  const std::size_t per_gpu = static_cast<std::size_t>(vpp_) * kPassKinds;
  for (std::size_t slot = 0; slot < fused_memo_.size(); ++slot) {
    FusedPass& memo = fused_memo_[slot];
    if (!memo.set) continue;
    const int g = sim_gpus_[slot / per_gpu], chunk = static_cast<int>((slot / kPassKinds) % vpp_);
    const int kind = static_cast<int>(slot % kPassKinds);
    PassParts pp;
    pass_parts(kind, chunks_[(g / (L_.tp * L_.dp)) * vpp_ + chunk], pp);
    const TaskId like = memo.like;
    fused_values(g, pp.part, pp.n, memo);
    memo.like = like;
    if (static_cast<int>(fused_flows_.size()) != e_.flow_count(like)) return false;
    for (std::size_t f = 0; f < fused_flows_.size(); ++f) e_.set_flow_bytes(like, static_cast<int>(f), fused_flows_[f].bytes);
  }
  for (const auto& [t, slot] : ws_.fused_tasks) e_.respec(t, fused_memo_[slot].spec.duration_s, fused_memo_[slot].spec.category);
  for (BuilderWorkspace::TransferKind& k : ws_.transfer_kinds) {
    transfer_values(k);
    if (k.dst != k.src) e_.set_flow_bytes(k.like, 0, k.bytes);
  }
  for (const auto& [t, kind] : ws_.transfer_tasks) e_.respec(t, ws_.transfer_kinds[kind].latency_s, kPpComm);
  // GPU 0's records, and its TP bytes summed in the order they were built.
  std::vector<double>& prefix = ws_.tp_prefix;
  prefix.assign(gpu0_tasks_.size() + 1, 0.0);
  for (std::size_t i = 0; i < gpu0_tasks_.size(); ++i) {
    const std::int32_t slot = ws_.gpu0_slot[i];
    prefix[i + 1] = prefix[i];
    if (slot < 0) continue;
    const TaskId id = gpu0_tasks_[i].id;
    gpu0_tasks_[i] = fused_memo_[slot].rec;
    gpu0_tasks_[i].id = id;
    prefix[i + 1] += fused_memo_[slot].tp_bytes;
  }
  tp_bytes_gpu0_ = prefix.back();
  for (std::size_t op = 0; op + 1 < ws_.cut_gpu0_count.size(); ++op) cut_bytes_[op].second = prefix[ws_.cut_gpu0_count[op]];
  for (int i = 0; i < 2; ++i) ws_.marker_bytes[i][1] = prefix[ws_.marker_gpu0_count[i]];
  refilling_ = false;
  return true;
}

void Builder::build() {
  const auto& sh = in_.net.shape;
  e_.reset();
  ws_.key.clear();
  ws_.reusable = fuse_tp_ && in_.mode == SimMode::symmetric && !in_.gpu_speed && in_.speed_replica < 0;
  ws_.roles_filled = false;
  ws_.cut_valid = true;
  for (auto& k : ws_.cut_kept_seeds) k.clear();
  for (auto* v : {&ws_.sim_gpus, &ws_.lane_stream}) v->clear();
  ws_.gpu0_tasks.clear();
  ws_.gpu0_comm.clear();
  ws_.sim_members_used = 0;
  ws_.fused_tasks.clear();
  ws_.transfer_tasks.clear();
  ws_.transfer_kinds.clear();
  ws_.gpu0_slot.clear();
  ws_.cut_gpu0_count.clear();
  ws_.marker_gpu0_count[0] = ws_.marker_gpu0_count[1] = 0;
  std::fill(&ws_.marker_bytes[0][0], &ws_.marker_bytes[0][0] + 4, 0.0);
  dp_bytes_gpu0_ = tp_bytes_gpu0_ = 0;
  if (in_.mode == SimMode::full) {
    for (int g = 0; g < sh.gpus(); ++g) sim_gpus_.push_back(g);
    paths_ = std::make_unique<FullPaths>(e_, sh);
  } else {
    for (int s = 0; s < L_.pp; ++s) sim_gpus_.push_back(gpu_of(0, 0, s));
    std::vector<double> nic_speed(L_.pp, 1.0);
    if (!sh.nic_speed.empty())
      for (int s = 0; s < L_.pp; ++s)
        for (int d = 0; d < L_.dp; ++d)
          if (in_.speed_replica < 0 || d == in_.speed_replica)
            for (int t = 0; t < L_.tp; ++t) nic_speed[s] = std::min(nic_speed[s], sh.nic_speed_of(sh.nic_of(gpu_of(t, d, s))));
    paths_ = std::make_unique<SymmetricPaths>(e_, sh, sim_gpus_, nic_speed);
  }
  q_.assign(sh.gpus(), RankQueues{});
  proc_.assign(sh.gpus(), -1);
  if (interference_ > 0)
    for (int g : sim_gpus_) proc_[g] = e_.add_processor();
  speed_.assign(sh.gpus(), 1.0);
  if (in_.gpu_speed) {
    const std::vector<double>& given = *in_.gpu_speed;
    if (static_cast<int>(given.size()) != sh.gpus()) throw std::invalid_argument("gpu_speed needs one speed per GPU");
    for (double x : given)
      if (!(x > 0)) throw std::invalid_argument("GPU speeds must be positive");
    if (in_.mode == SimMode::full) {
      speed_ = given;
    } else {
      if (in_.speed_replica >= L_.dp) throw std::invalid_argument("speed_replica is not a replica of the layout");
      for (int s = 0; s < L_.pp; ++s) {
        double slowest = 1e300;
        for (int d = 0; d < L_.dp; ++d)
          if (in_.speed_replica < 0 || d == in_.speed_replica)
            for (int t = 0; t < L_.tp; ++t) slowest = std::min(slowest, given[gpu_of(t, d, s)]);
        speed_[gpu_of(0, 0, s)] = slowest;
      }
    }
  }
  sim_index_.assign(sh.gpus(), -1);
  is_sim_.assign(sh.gpus(), 0);
  for (int g : sim_gpus_) is_sim_[g] = 1;
  reuse_rows(tp_groups_, sim_gpus_.size());
  reuse_rows(dp_groups_, sim_gpus_.size());
  reuse_rows(dp_sim_members_, sim_gpus_.size());
  for (std::size_t i = 0; i < sim_gpus_.size(); ++i) {
    sim_index_[sim_gpus_[i]] = static_cast<int>(i);
    tp_group(sim_gpus_[i], tp_groups_[i]);
    dp_group(sim_gpus_[i], dp_groups_[i]);
    for (int g : dp_groups_[i])
      if (is_sim_[g]) dp_sim_members_[i].push_back(g);
  }
  const std::size_t slots = sim_gpus_.size() * vpp_ * microbatches_;
  h_.fwd_done.assign(slots, -1);
  h_.bwd_done.assign(slots, -1);
  h_.fwd_start.assign(slots, -1);
  h_.bwd_start.assign(slots, -1);
  h_.comm_after_bwd.assign(period_ > 0 ? slots : 0, -1);
  cut_bytes_.clear();
  cut_diverge_.assign(cut_ ? sim_gpus_.size() : 0, -1);
  ws_.transfer_roles.clear();
  fused_memo_.resize(sim_gpus_.size() * vpp_ * kPassKinds);
  for (FusedPass& f : fused_memo_) f.set = false;
  // Room for the graph up front (a hint: the vectors grow past it if needed): a chunk's forward
  // and backward of one micro-batch on a simulated GPU make about four tasks (the interleaved 175B
  // step: 2,447 tasks for 8 GPUs x 24 micro-batches x 3 chunks), dependencies twice that; five
  // and ten leave room for the step's other tasks.
  e_.reserve(sim_gpus_.size() * microbatches_ * vpp_ * 5, sim_gpus_.size() * microbatches_ * vpp_ * 10);

  // Activation and gradient transfers between consecutive virtual stages are added once every
  // stage is built: each runs from the producer's last task to the consumer's first.
  const int pp = L_.pp;
  const int V = pp * vpp_;
  std::vector<int>& gpus = ws_.stage_gpus;
  for (int s = 0; s < pp; ++s) {
    gpus.clear();
    for (int g : sim_gpus_)
      if (g / (L_.tp * L_.dp) == s) gpus.push_back(g);
    build_stage(s, gpus);
  }

  // A transfer's task and flow depend only on its two GPUs: worked out once per pair (few pairs,
  // each stage with its neighbours: a list).
  auto& transfer_kinds = ws_.transfer_kinds;
  transfer_kinds.reserve(2 * sim_gpus_.size() * vpp_);
  auto transfer_kind = [&](int g, int dst) -> std::int32_t {
    for (std::size_t i = 0; i < transfer_kinds.size(); ++i)
      if (transfer_kinds[i].src == g && transfer_kinds[i].dst == dst) return static_cast<std::int32_t>(i);
    BuilderWorkspace::TransferKind& k = transfer_kinds.emplace_back();
    k.src = g;
    k.dst = dst;
    transfer_values(k);
    if (dst != g) paths_->path(g, dst, 0, k.path);
    k.dst_simulated = paths_->simulated(dst);
    return static_cast<std::int32_t>(transfer_kinds.size() - 1);
  };
  auto transfer = [&](std::int32_t kind_index, TaskId from, TaskId to, const char* kind, int mb, std::int64_t role) {
    BuilderWorkspace::TransferKind& k = transfer_kinds[kind_index];
    const int g = k.src, dst = k.dst;
    TaskSpec spec;
    spec.lane = g;
    spec.category = kPpComm;
    if (in_.record_timeline) spec.label = label(std::string("PP send ") + kind + " mb" + std::to_string(mb));
    spec.duration_s = k.latency_s;
    TaskId t;
    if (k.like >= 0) {
      t = e_.add_task(spec, k.like);
    } else {
      t = k.like = e_.add_task(spec);
      if (dst != g) e_.add_flow(t, k.bytes, k.path.data(), static_cast<int>(k.path.size()));
      interfere(t, g, k.dst_simulated && dst != g ? dst : -1);
    }
    lane_stream_.push_back(2);
    ws_.transfer_tasks.push_back({t, kind_index});
    if (cut_) ws_.transfer_roles.push_back({role, t});
    e_.add_dependency(from, t);
    e_.add_dependency(t, to);
  };
  for (int g : sim_gpus_) {
    const int stage = g / (L_.tp * L_.dp);
    for (int c = 0; c < vpp_; ++c) {
      const int vs = c * pp + stage;
      const int next = vs < V - 1 ? g + ((vs + 1) % pp - stage) * L_.tp * L_.dp : -1;
      const int prev = vs > 0 ? g + ((vs - 1) % pp - stage) * L_.tp * L_.dp : -1;
      // The kinds are looked up once per chunk.
      const std::int32_t to_next = next >= 0 && paths_->simulated(next) ? transfer_kind(g, next) : -1;
      const std::int32_t to_prev = prev >= 0 && paths_->simulated(prev) ? transfer_kind(g, prev) : -1;
      // Slots and role keys of micro-batch 0; micro-batch mb is mb further on.
      const std::size_t own = hidx(g, vs, 0);
      const std::size_t after = to_next >= 0 ? hidx(next, vs + 1, 0) : 0, before = to_prev >= 0 ? hidx(prev, vs - 1, 0) : 0;
      const std::int64_t fwd_role = cut_ ? role_key(2, g, vs, 0) : -1, bwd_role = cut_ ? role_key(3, g, vs, 0) : -1;
      for (int mb = 0; mb < microbatches_; ++mb) {
        if (to_next >= 0) transfer(to_next, h_.fwd_done[own + mb], h_.fwd_start[after + mb], "F", mb, cut_ ? fwd_role + mb : -1);
        if (to_prev >= 0) transfer(to_prev, h_.bwd_done[own + mb], h_.bwd_start[before + mb], "B", mb, cut_ ? bwd_role + mb : -1);
      }
    }
  }

  // Optimizer: Adam over this rank's (possibly sharded) parameters once every gradient is reduced,
  // then ZeRO-1/2 gather the updated bf16 parameters.
  for (int g : sim_gpus_) {
    const int stage = g / (L_.tp * L_.dp);
    double params = 0;
    for (int c = 0; c < vpp_; ++c) params += chunks_[stage * vpp_ + c].params_per_rank;
    const double shard = L_.zero >= 1 ? params / L_.dp : params;
    compute_task(g, cost_.adam_time_s(shard), kOptimizer, "optimizer", q_[g].comm);
    if ((L_.zero == 1 || L_.zero == 2) && L_.dp > 1) {
      const std::vector<int>& group = dp_group_of(g);
      if (group.front() == g || !paths_->simulated(group.front())) {
        double sent = 0;
        static const std::string name = "ZeRO param all_gather";
        ws_.tails.assign(1, q_[g].compute);
        collective(group, CollectiveKind::all_gather, Algorithm::ring, 2.0 * params, 1, 0.0, kDpComm, false, ws_.tails, name,
                   g == 0 ? &sent : nullptr);
        if (g == 0) dp_bytes_gpu0_ += sent;
      }
    }
  }

}

StepResult Builder::run() {
  const auto& sh = in_.net.shape;
  if (L_.gpus() != sh.gpus()) throw std::invalid_argument("layout GPU count does not match the cluster");
  place_.gpus_per_node = sh.gpus_per_node;
  place_.intra_alpha_s = in_.net.intra_alpha_s;
  place_.inter_alpha_s = in_.net.inter_alpha_s;
  place_.intra_Bps = sh.nvlink_Bps;
  place_.inter_Bps = sh.nic_share_Bps();
  prepare_chunks();

  fuse_tp_ = in_.mode == SimMode::symmetric || L_.tp == 1;
  interference_ = cost_.hardware().comm_compute_interference;
  if (reuse_) {
    try {
      refilled_ = refill();
    } catch (const RefillMiss&) {
      refilled_ = false;
    }
    refilling_ = false;
  }
  if (!refilled_) build();
  cut_valid_ = ws_.cut_valid;
  if (period_ > 0 && !cut_) std::copy(&ws_.marker_bytes[0][0], &ws_.marker_bytes[0][0] + 4, &marker_bytes_[0][0]);
  cut_last_.assign(cut_ ? sim_gpus_.size() : 0, {-1, -1});
  cut_first_.assign(cut_ ? sim_gpus_.size() : 0, {-1, -1});
  e_.run();

  StepResult r;
  r.step_time_s = e_.makespan();
  r.simulated_gpus = static_cast<int>(sim_gpus_.size());
  r.tasks = e_.task_count();
  r.events = e_.events_processed();
  r.dp_bytes_per_gpu = dp_bytes_gpu0_;
  r.tp_bytes_per_gpu = tp_bytes_gpu0_;
  if (cut_) cut_valid_ = cut_valid_ && choose_cut();
  breakdown(r);
  if (cut_) measure_cut();
  else if (period_ > 0) measure_periodicity();
  if (in_.record_timeline) {
    std::size_t part = 0;
    for (std::size_t t = 0; t < e_.task_count(); ++t) {
      const TaskSpec& s = e_.spec(static_cast<TaskId>(t));
      if (e_.finish(static_cast<TaskId>(t)) <= e_.start(static_cast<TaskId>(t)) && s.label == 0) continue;
      TimelineEntry te;
      te.gpu = s.lane;
      te.stream = lane_stream_[t];
      te.start_s = e_.start(static_cast<TaskId>(t));
      te.end_s = e_.finish(static_cast<TaskId>(t));
      te.name = labels_[s.label];
      te.category = s.category;
      while (part < timeline_parts_.size() && timeline_parts_[part].id < static_cast<TaskId>(t)) ++part;
      if (part < timeline_parts_.size() && timeline_parts_[part].id == static_cast<TaskId>(t)) {
        const Gpu0Task& g = timeline_parts_[part];
        const double total = g.seconds[0] + g.seconds[1];
        if (total > 0 && g.cat[0] != g.cat[1]) {
          TimelineEntry first = te;
          first.end_s = te.start_s + (te.end_s - te.start_s) * g.seconds[0] / total;
          first.name += std::string(" ") + category_name(g.cat[0]);
          first.category = g.cat[0];
          te.start_s = first.end_s;
          te.category = g.cat[1];
          r.timeline.push_back(std::move(first));
        }
      }
      r.timeline.push_back(std::move(te));
    }
  }
  return r;
}

// Exposed time of GPU 0's compute queue: its own work by category; each idle gap goes to what the
// next task waited for (the part of the gap during which that transfer or collective was running
// is communication, the rest is pipeline bubble); the tail after its last task goes to the
// collective still running, or to the bubble while other stages finish.
void Builder::breakdown(StepResult& r) {
  double* b = r.breakdown_s;
  double t = 0;
  auto attribute_wait = [&](double from, double to, TaskId waited) {
    if (to <= from) return;
    // Look through zero-length hand-off tasks to the transfer or collective behind them.
    while (waited >= 0 && e_.finish(waited) <= e_.start(waited) && e_.binding_predecessor(waited) >= 0)
      waited = e_.binding_predecessor(waited);
    if (waited >= 0) {
      const int cat = e_.spec(waited).category;
      if (cat == kPpComm || cat == kDpComm || cat == kTpComm) {
        // A queue of collectives runs back to back: the wait covers every one of them that ran
        // during the gap, not only the last.
        double covered_from = e_.start(waited);
        for (TaskId t = waited; e_.binding_predecessor(t) >= 0;) {
          const TaskId p = e_.binding_predecessor(t);
          if (e_.spec(p).category != cat || e_.finish(p) < e_.start(t) - 1e-12) break;
          covered_from = e_.start(p);
          t = p;
        }
        const double busy_from = std::max(from, covered_from);
        const double busy = std::max(0.0, to - busy_from);
        b[cat] += busy;
        b[kBubble] += (to - from) - busy;
        return;
      }
    }
    b[kBubble] += to - from;
  };
  // The periodicity's markers: the breakdown as GPU 0's first forward of each of the last two
  // periods starts, or, for the cut comparison, as the last task before each cut ends (before any
  // wait for the first task after it).
  TaskId markers[2] = {-1, -1};
  if (period_ > 0 && sim_index_[0] >= 0)
    for (int i = 0; i < 2; ++i)
      markers[i] = cut_ ? cut_first_[sim_index_[0]][i] : h_.fwd_start[hidx(0, 0, microbatches_ - (2 - i) * period_)];
  for (const Gpu0Task& g : gpu0_tasks_) {
    const TaskId task = g.id;
    const double s = e_.start(task), f = e_.finish(task);
    if (cut_)
      for (int i = 0; i < 2; ++i)
        if (task == markers[i]) std::copy(b, b + kCategories, marker_breakdown_[i]);
    if (s > t) attribute_wait(t, s, e_.binding_predecessor(task));
    if (!cut_)
      for (int i = 0; i < 2; ++i)
        if (task == markers[i]) std::copy(b, b + kCategories, marker_breakdown_[i]);
    const double span = f - std::max(s, t);
    if (g.nparts == 0) {
      b[e_.spec(task).category] += span;
    } else {
      // Fixed compute by category; whatever the task took beyond it is its fused TP traffic, and,
      // with comm-compute interference, compute slowed by the NCCL kernels beside it: TP is
      // charged up to its idle-link time, the rest to the task's categories in proportion to
      // their compute (a backward's slowdown is not its recompute's).
      double fixed = 0;
      for (int i = 0; i < g.nparts; ++i) b[g.cat[i]] += g.seconds[i], fixed += g.seconds[i];
      const double beyond = std::max(0.0, span - fixed);
      const double tp = interference_ > 0 ? std::min(beyond, g.tp_idle_s) : beyond;
      b[kTpComm] += tp;
      if (fixed > 0)
        for (int i = 0; i < g.nparts; ++i) b[g.cat[i]] += (beyond - tp) * (g.seconds[i] / fixed);
      else
        b[g.cat[0]] += beyond - tp;
    }
    t = std::max(t, f);
  }
  if (r.step_time_s > t) {
    TaskId last_comm = gpu0_comm_.empty() ? -1 : gpu0_comm_.back();
    if (last_comm >= 0 && e_.finish(last_comm) > t) {
      // The tail waits on communication queued behind the optimizer or the last backward.
      const double end = std::min(r.step_time_s, e_.finish(last_comm));
      b[kDpComm] += end - t;
      t = end;
    }
    b[kBubble] += r.step_time_s - t;
  }
}

void Builder::mark_descendants(const std::vector<TaskId>* const* seeds, int sets, std::uint8_t first_bit, double* earliest) {
  std::vector<std::uint8_t>& down = ws_.downstream;
  if (down.size() != e_.task_count()) down.assign(e_.task_count(), 0);
  std::uint8_t* dn = down.data();
  std::uint8_t mask = 0;
  for (int k = 0; k < sets; ++k) {
    const std::uint8_t bit = static_cast<std::uint8_t>(first_bit << k);
    earliest[k] = std::numeric_limits<double>::infinity();
    for (TaskId f : *seeds[k]) {
      if (f < 0) {
        earliest[k] = -1.0;
        break;
      }
      dn[f] |= bit;
    }
    if (earliest[k] >= 0) mask |= bit;
  }
  // The engine completes a task only after every task it waits for: its completion order is a
  // topological order of the graph, so one pass over it carries the bits to every descendant.
  const std::vector<TaskId>& order = e_.completion_order();
  const TaskId* o = order.data();
  for (std::size_t i = 0, n = order.size(); i < n; ++i) {
    const TaskId t = o[i];
    const std::uint8_t bits = dn[t] & mask;
    if (!bits) continue;
    const double st = e_.start(t);
    for (int k = 0; k < sets; ++k)
      if (bits & (first_bit << k)) earliest[k] = std::min(earliest[k], st);
    e_.for_each_successor(t, [dn, bits](TaskId s) { dn[s] |= bits; });
  }
}

void Builder::fill_roles() {
  role_.assign(e_.task_count(), -1);
  for (int g : sim_gpus_) {
    const int stage = g / (L_.tp * L_.dp);
    for (int c = 0; c < vpp_; ++c) {
      const int vs = c * L_.pp + stage;
      const std::size_t base = hidx(g, vs, 0);
      const std::int64_t fwd_role = role_key(0, g, vs, 0), bwd_role = role_key(1, g, vs, 0);
      for (int mb = 0; mb < microbatches_; ++mb) {
        // Passes of one task only: a pass built layer by layer has no single task to compare.
        const std::size_t i = base + mb;
        if (h_.fwd_start[i] >= 0 && h_.fwd_start[i] == h_.fwd_done[i]) role_[h_.fwd_start[i]] = fwd_role + mb;
        if (h_.bwd_start[i] >= 0 && h_.bwd_start[i] == h_.bwd_done[i]) role_[h_.bwd_start[i]] = bwd_role + mb;
      }
    }
  }
  for (const auto& [key, t] : ws_.transfer_roles) role_[t] = key;
}

bool Builder::cut_states(const std::vector<TaskId> (&seeds)[2], bool (&valid)[2], double* end) {
  // Which tasks come after each cut, and which before it are waited for across it, depend on the
  // graph alone: worked out when the seeds change, kept with the graph.
  for (int c = 0; c < 2; ++c) {
    valid[c] = std::find(seeds[c].begin(), seeds[c].end(), -1) == seeds[c].end();
    ws_.frontier[c].clear();
  }
  if (!valid[1]) return false;
  std::vector<std::uint8_t>& down = ws_.downstream;
  if (seeds[0] != ws_.cut_kept_seeds[0] || seeds[1] != ws_.cut_kept_seeds[1] || down.size() != e_.task_count()) {
    down.assign(e_.task_count(), 0);
    double unused[2];
    const std::vector<TaskId>* sets[2] = {&seeds[0], &seeds[1]};
    mark_descendants(sets, 2, 2, unused);
    const std::uint8_t* dn = down.data();
    ws_.before_later.clear();
    for (auto& w : ws_.waited_across) w.clear();
    for (TaskId t = 0, n = static_cast<TaskId>(e_.task_count()); t < n; ++t) {
      const std::uint8_t before = static_cast<std::uint8_t>(~dn[t] & 6);  // bit 2 << c: before cut c
      if (!before) continue;
      if (before & 4) ws_.before_later.push_back(t);
      std::uint8_t across = 0;
      e_.for_each_successor(t, [dn, &across](TaskId s) { across |= dn[s]; });
      across &= before;
      for (int c = 0; c < 2; ++c)
        if (across & (2 << c)) ws_.waited_across[c].push_back(t);
    }
    for (int c = 0; c < 2; ++c) ws_.cut_kept_seeds[c] = seeds[c];
  }
  // Everything after a cut starts once one of its seeds has: the earliest start after it is the
  // seeds' earliest. A task before the cut is part of its state if one after it waits for it, or
  // if it is still running then.
  double after[2];
  for (int c = 0; c < 2; ++c) {
    after[c] = std::numeric_limits<double>::infinity();
    if (valid[c])
      for (TaskId t : seeds[c]) after[c] = std::min(after[c], e_.start(t));
  }
  const std::uint8_t* dn = down.data();
  const std::int64_t* role = role_.data();
  auto take = [&](int c, TaskId t) {
    if (role[t] < 0) valid[c] = false;  // a task with no counterpart a period away
    else ws_.frontier[c].push_back({role[t], t});
  };
  double last = 0;
  for (TaskId t : ws_.before_later) {
    const double f = e_.finish(t);
    last = std::max(last, f);
    if (f > after[1]) take(1, t);
    if (!(dn[t] & 2) && f > after[0]) take(0, t);
  }
  for (int c = 0; c < 2; ++c) {
    for (TaskId t : ws_.waited_across[c]) take(c, t);
    auto& state = ws_.frontier[c];
    std::sort(state.begin(), state.end());
    state.erase(std::unique(state.begin(), state.end()), state.end());
  }
  *end = last;
  return valid[1];
}

bool Builder::choose_cut() {
  if (sim_index_[0] < 0 || cut_bytes_.empty()) return false;
  // The first task that the run of M + P micro-batches does not share starts when the earliest of
  // its seeds does (everything descending from them starts after one has ended).
  diverge_s_ = std::numeric_limits<double>::infinity();
  for (TaskId t : cut_diverge_) {
    if (t < 0) return false;
    diverge_s_ = std::min(diverge_s_, e_.start(t));
  }
  if (!ws_.roles_filled) {
    fill_roles();
    ws_.roles_filled = true;
  }
  const int P = period_, v = vpp_, total = microbatches_ * v;
  const PipelineKind pk = L_.schedule == Schedule::interleaved ? PipelineKind::interleaved : PipelineKind::one_f_one_b;
  std::vector<int> warm(sim_gpus_.size());
  int longest = 0;
  for (std::size_t gi = 0; gi < sim_gpus_.size(); ++gi) {
    warm[gi] = pipeline_warmup(pk, L_.pp, v, microbatches_, sim_gpus_[gi] / (L_.tp * L_.dp));
    longest = std::max(longest, warm[gi]);
  }
  // The task of op `pos` of `gpu`'s order: its first, or its last.
  auto op_task = [&](int gpu, const std::vector<PipeOp>& order, int pos, bool last) {
    const PipeOp& op = order[pos];
    const std::size_t i = hidx(gpu, op.chunk * L_.pp + gpu / (L_.tp * L_.dp), op.microbatch);
    return op.forward ? (last ? h_.fwd_done[i] : h_.fwd_start[i]) : (last ? h_.bwd_done[i] : h_.bwd_start[i]);
  };
  std::vector<TaskId> seeds(sim_gpus_.size());
  std::vector<TaskId> (&both)[2] = ws_.cut_seeds;
  int exact_tries = 0;
  for (int nb = total - 1 - v; nb - P * v >= longest + 1 && exact_tries < 4; --nb) {
    // A quick bound first: the two ops before each stage's cut and the transfers they send.
    double end = 0;
    for (std::size_t gi = 0; gi < sim_gpus_.size(); ++gi) {
      const int g = sim_gpus_[gi];
      const std::vector<PipeOp>& order = stage_order(pk, L_.pp, v, microbatches_, g / (L_.tp * L_.dp));
      const int pos = warm[gi] + 2 * (nb - warm[gi]);
      for (int k = 1; k <= 2; ++k) {
        const TaskId t = op_task(g, order, pos - k, true);
        end = std::max(end, e_.finish(t));
        e_.for_each_successor(t, [&](TaskId s) {
          if (lane_stream_[s] == 2) end = std::max(end, e_.finish(s));
        });
      }
      seeds[gi] = op_task(g, order, pos, false);
    }
    if (!(end < diverge_s_)) continue;
    // Then exactly: everything that does not descend from the cut has ended (its state is kept
    // for measure_cut).
    ++exact_tries;
    both[1] = seeds;
    both[0].resize(sim_gpus_.size());
    for (std::size_t gi = 0; gi < sim_gpus_.size(); ++gi) {
      const int g = sim_gpus_[gi];
      const std::vector<PipeOp>& order = stage_order(pk, L_.pp, v, microbatches_, g / (L_.tp * L_.dp));
      both[0][gi] = op_task(g, order, warm[gi] + 2 * (nb - P * v - warm[gi]), false);
    }
    double x_end = 0;
    if (!cut_states(both, cut_state_valid_, &x_end)) return false;
    if (!(x_end < diverge_s_)) continue;
    for (int c = 0; c < 2; ++c) {
      const int n = c == 1 ? nb : nb - P * v;
      for (std::size_t gi = 0; gi < sim_gpus_.size(); ++gi) {
        const int g = sim_gpus_[gi];
        const std::vector<PipeOp>& order = stage_order(pk, L_.pp, v, microbatches_, g / (L_.tp * L_.dp));
        const int pos = warm[gi] + 2 * (n - warm[gi]);
        cut_last_[gi][c] = op_task(g, order, pos - 1, true);
        cut_first_[gi][c] = op_task(g, order, pos, false);
        if (g == 0) marker_bytes_[c][0] = cut_bytes_[pos].first, marker_bytes_[c][1] = cut_bytes_[pos].second;
      }
    }
    return true;
  }
  return false;
}

void Builder::measure_cut() {
  // A schedule of fixed durations is a max-plus linear system: what runs after a cut (a set X of
  // tasks holding every dependency of its members) depends only on when the tasks of X that others
  // wait for end (the cut's frontier). With comm/compute interference and shared links it also
  // depends on the tasks of X still running once the rest has begun, so their starts and ends are
  // part of the cut's state too. Each stage is cut before a forward of its steady phase, where the
  // order that follows is the same a period (P micro-batches, P v forwards) later. The run of
  // M + P micro-batches is this run up to the time the first task of this run's cool-down starts
  // (its orders are the same up to there, and the simulation deterministic), and the later cut's
  // tasks have all ended by then. So if the later cut's state is the earlier one's exactly lambda
  // later, the longer run after its later cut is this run after its earlier cut, lambda later, and
  // by induction the step grows by lambda a period. X is everything that does not descend from the
  // first task after the cut on some stage.
  Periodicity& p = periodicity_;
  if (!cut_valid_ || sim_index_[0] < 0) return;
  const int P = period_, M = microbatches_;
  // Both states were collected by choose_cut.
  if (!cut_state_valid_[0]) return;
  // The two states pair up, micro-batch for micro-batch P apart (keys shift by P in their last
  // digit, so sorted keys pair in order).
  const auto& a = ws_.frontier[0];
  const auto& b = ws_.frontier[1];
  if (a.empty() || a.size() != b.size()) return;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (b[i].first % M < P || b[i].first - P != a[i].first) return;
  const std::size_t g0 = static_cast<std::size_t>(sim_index_[0]);
  p.lambda_s = e_.finish(cut_last_[g0][1]) - e_.finish(cut_last_[g0][0]);
  double dev = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    dev = std::max(dev, std::abs(e_.finish(b[i].second) - e_.finish(a[i].second) - p.lambda_s));
    dev = std::max(dev, std::abs(e_.start(b[i].second) - e_.start(a[i].second) - p.lambda_s));
  }
  p.deviation_s = dev;
  for (int c = 0; c < kCategories; ++c) p.breakdown_s[c] = marker_breakdown_[1][c] - marker_breakdown_[0][c];
  p.dp_bytes = marker_bytes_[1][0] - marker_bytes_[0][0];
  p.tp_bytes = marker_bytes_[1][1] - marker_bytes_[0][1];
  p.measured = true;
}

void Builder::measure_periodicity() {
  Periodicity& p = periodicity_;
  const int P = period_, M = microbatches_;
  if (sim_index_[0] < 0) return;
  const PipelineKind pk = L_.schedule == Schedule::interleaved ? PipelineKind::interleaved : PipelineKind::one_f_one_b;
  auto start = [&](const std::vector<TaskId>& firsts, int gpu, int vs, int mb) { return e_.start(firsts[hidx(gpu, vs, mb)]); };
  p.lambda_s = start(h_.fwd_start, 0, 0, M - P) - start(h_.fwd_start, 0, 0, M - 2 * P);
  double dev = 0;
  auto repeats = [&](double now, double before) { dev = std::max(dev, std::abs(now - before - p.lambda_s)); };
  for (int g : sim_gpus_) {
    const int stage = g / (L_.tp * L_.dp);
    const std::vector<PipeOp>& order = stage_order(pk, L_.pp, vpp_, M, stage);
    std::size_t last_forward = 0;
    for (std::size_t i = 0; i < order.size(); ++i)
      if (order[i].forward) last_forward = i;
    // Every forward of the last P micro-batches; the last P backwards of each chunk that come
    // before the stage's last forward (a longer schedule runs them the same way), and the
    // communication queued by then (ZeRO-2/3 traffic that could fall behind the compute).
    std::vector<int> taken(vpp_, 0);
    for (std::size_t i = last_forward; i-- > 0;) {
      const PipeOp& op = order[i];
      if (op.forward || op.microbatch < P || taken[op.chunk] == P) continue;
      ++taken[op.chunk];
      const int vs = op.chunk * L_.pp + stage, k = op.microbatch;
      repeats(start(h_.bwd_start, g, vs, k), start(h_.bwd_start, g, vs, k - P));
      const TaskId c0 = h_.comm_after_bwd[hidx(g, vs, k)], c1 = h_.comm_after_bwd[hidx(g, vs, k - P)];
      if (c0 != c1 && c1 >= 0) repeats(e_.finish(c0), e_.finish(c1));
    }
    for (int c = 0; c < vpp_; ++c)
      for (int k = M - P; k < M; ++k) repeats(start(h_.fwd_start, g, c * L_.pp + stage, k), start(h_.fwd_start, g, c * L_.pp + stage, k - P));
  }
  p.deviation_s = dev;
  for (int c = 0; c < kCategories; ++c) p.breakdown_s[c] = marker_breakdown_[1][c] - marker_breakdown_[0][c];
  p.dp_bytes = marker_bytes_[1][0] - marker_bytes_[0][0];
  p.tp_bytes = marker_bytes_[1][1] - marker_bytes_[0][1];
  p.measured = true;
}

}  // namespace

struct PlanShapeCache::RoutedStore {
  // TP, DP, PP, nodes, GPUs per node, NICs per node, fabric, NICs per leaf; NVLink and NIC rate,
  // oversubscription, alpha inside and across nodes, per-GPU rate inside and across nodes.
  using Key = std::pair<std::array<int, 8>, std::array<double, 7>>;
  std::map<Key, Builder::RoutedPlans> by_context;
};

std::size_t PlanShapeCache::KeyHash::operator()(const Key& k) const noexcept {
  std::size_t h = 0;
  for (int x : k.ints) h = h * 1000003u + static_cast<std::size_t>(static_cast<unsigned>(x));
  for (double x : k.reals) h = h * 1000003u ^ std::hash<double>{}(x);
  return h;
}

int microbatches_per_step(const StepInput& in) {
  return std::max(1, in.global_batch / (in.layout.dp * in.layout.micro_batch));
}

RankCoordinates rank_coordinates(const Layout& l, int gpu) {
  // The inverse of Builder::gpu_of: gpu = t + tp (d + dp s).
  RankCoordinates c;
  c.tp_rank = gpu % l.tp;
  c.replica = (gpu / l.tp) % l.dp;
  c.stage = gpu / (l.tp * l.dp);
  return c;
}

namespace {

void put(std::vector<std::uint64_t>& k, double x) {
  std::uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  k.push_back(b);
}
void put(std::vector<std::uint64_t>& k, std::int64_t x) { k.push_back(static_cast<std::uint64_t>(x)); }

void put_measured(std::vector<std::uint64_t>& k, const std::vector<MeasuredCollective>& v) {
  put(k, static_cast<std::int64_t>(v.size()));
  for (const MeasuredCollective& m : v) {
    put(k, static_cast<std::int64_t>(m.kind));
    put(k, static_cast<std::int64_t>(m.gpus));
    put(k, static_cast<std::int64_t>(m.segments.size()));
    for (const MeasuredSegment& g : m.segments) {
      put(k, g.min_bytes);
      put(k, g.max_bytes);
      put(k, g.alpha_s);
      put(k, g.busbw_Bps);
    }
  }
}

// Everything a run's graph and its unchanging numbers (collectives, the optimizer, links,
// interference) depend on: all of the step's inputs but the micro-batch size and the recompute,
// which change only the passes' compute and TP traffic and the activations sent between stages
// (what Builder::refill works out again). The cost model enters by instance: one instance never
// changes.
void graph_key(const StepInput& in, int M, int P, bool cut, std::vector<std::uint64_t>& k) {
  k.clear();
  const ModelConfig& m = *in.model;
  const Layout& L = in.layout;
  const ClusterShape& sh = in.net.shape;
  for (std::int64_t x : {static_cast<std::int64_t>(in.cost->instance()), static_cast<std::int64_t>(m.family),
                         static_cast<std::int64_t>(m.layers), static_cast<std::int64_t>(m.hidden), static_cast<std::int64_t>(m.heads),
                         static_cast<std::int64_t>(m.kv_heads), static_cast<std::int64_t>(m.ffn_hidden), static_cast<std::int64_t>(m.vocab),
                         static_cast<std::int64_t>(m.seq_len), static_cast<std::int64_t>(m.tied_embeddings),
                         static_cast<std::int64_t>(m.vocab_divisible_by), static_cast<std::int64_t>(L.tp), static_cast<std::int64_t>(L.pp),
                         static_cast<std::int64_t>(L.dp), static_cast<std::int64_t>(L.vpp), static_cast<std::int64_t>(L.sequence_parallel),
                         static_cast<std::int64_t>(L.zero), static_cast<std::int64_t>(L.compression.kind),
                         static_cast<std::int64_t>(L.compression.powersgd_rank), static_cast<std::int64_t>(L.schedule),
                         static_cast<std::int64_t>(in.precision), static_cast<std::int64_t>(M), static_cast<std::int64_t>(P), static_cast<std::int64_t>(cut),
                         static_cast<std::int64_t>(in.mode), static_cast<std::int64_t>(sh.nodes), static_cast<std::int64_t>(sh.gpus_per_node),
                         static_cast<std::int64_t>(sh.nics_per_node), static_cast<std::int64_t>(sh.fabric),
                         static_cast<std::int64_t>(sh.nics_per_leaf), static_cast<std::int64_t>(in.net.dp_algorithm)})
    put(k, x);
  for (double x : {L.bucket_MB, L.compression.topk_fraction, sh.nvlink_Bps, sh.nic_Bps, sh.oversubscription, in.net.intra_alpha_s,
                   in.net.inter_alpha_s})
    put(k, x);
  put(k, static_cast<std::int64_t>(sh.nic_speed.size()));
  for (double x : sh.nic_speed) put(k, x);
  put_measured(k, in.net.intra_measured);
  put_measured(k, in.net.inter_measured);
}

std::vector<std::uint64_t>& thread_key_scratch() {
  thread_local std::vector<std::uint64_t> k;
  return k;
}

// Each thread keeps the graphs of its last few runs: the workspace built for `key`, or the
// least recently used one (its key cleared) to build into. `found`: it holds a graph for `key`.
BuilderWorkspace& kept_graph(const std::vector<std::uint64_t>& key, bool& found) {
  constexpr std::size_t kKept = 4;
  struct Kept {
    std::unique_ptr<BuilderWorkspace> ws;
    std::uint64_t used = 0;
  };
  thread_local std::vector<Kept> kept;
  thread_local std::uint64_t clock = 0;
  ++clock;
  for (Kept& k : kept)
    if (k.ws->key == key) {
      k.used = clock;
      found = true;
      return *k.ws;
    }
  found = false;
  Kept* slot = nullptr;
  if (kept.size() < kKept) {
    slot = &kept.emplace_back();
    slot->ws = std::make_unique<BuilderWorkspace>();
  } else {
    slot = &*std::min_element(kept.begin(), kept.end(), [](const Kept& a, const Kept& b) { return a.used < b.used; });
  }
  slot->used = clock;
  slot->ws->key.clear();
  return *slot->ws;
}

}  // namespace

StepResult simulate_step(const StepInput& in) {
  if (!in.model || !in.cost) throw std::invalid_argument("simulate_step needs a model and a cost model");
  const int m = microbatches_per_step(in);
  // Steady state. In symmetric mode every micro-batch of a stage is the same work, so once the
  // pipeline is full the 1F1B and interleaved schedules repeat: every pass starts a fixed period
  // after the same pass P micro-batches earlier (P = 1 when one stage's compute sets the pace, 2
  // when transfers alternate with it; pp or 2 pp for the interleaved schedule, whose micro-batches
  // come in groups of pp). A schedule of M micro-batches runs exactly as one of m > M up to each
  // stage's last forward (every stage's order is the same up to there), and what follows (the
  // cool-down, the last backward's buckets, the optimizer) starts from the same state shifted by
  // whole periods. So one run of M micro-batches, with m - M a multiple of P, gives the step at m
  // as its own step plus (m - M) / P periods, when its last period is seen to repeat the one
  // before on every stage: every pass of the period (every forward of the last P micro-batches,
  // the last P backwards of each chunk before the stage's last forward) starts, and the
  // communication queued by each of those backwards ends, one period after the same event P
  // micro-batches earlier, to 1e-9 of the step. (Once the whole state of a schedule of fixed
  // durations repeats shifted by the period, everything after it does: it is a max-plus linear
  // system.) M is at least pp + 2P + 1, and at least 3P: the pipeline takes pp micro-batches to
  // fill, and one period is compared with the one before. The two more are found, not derived: on
  // every layout tried (1F1B up to 35 stages, interleaved, ZeRO-1/2/3) the first periods after
  // the fill differ only in the first backwards to reach each stage, and two micro-batches more
  // let them settle; where a schedule needs longer, the check fails and the next try or every
  // micro-batch is simulated instead. For the interleaved schedule (P a multiple of pp, m too)
  // that makes M = 4 pp, past the 2 pp where it stops running every forward first.
  // With the measured comm-compute interference a stage's lag can build up slowly, so a drift is
  // accepted when, kept up over every remaining period, it would move the step by under 1e-3.
  // P = 2q is tried when P = q does not repeat; when neither does, or M would not be shorter
  // than m, every micro-batch is simulated. Before these, interleaved layouts of ZeRO 0/1 try the
  // state at two cuts a period apart (Builder::measure_cut), which needs one period fewer (3 pp for
  // the 175B layout) and accepts only an exact repeat. GPipe is always simulated in full: its forward phase
  // has no back-pressure, so each stage runs at its own rate and the schedule never settles into
  // one period (its stashed activations keep m small anyway).
  PlanShapeCache local;
  PlanShapeCache& shapes = in.plan_cache ? *in.plan_cache : local;
  std::vector<ChunkWork> chunks;
  // Every run of this step creates its engine links in the same order before it routes anything,
  // unless symmetric mode adds leaf uplinks as routes first need them (an oversubscribed fabric
  // wider than a leaf): then each run routes its own plans.
  const ClusterShape& cs = in.net.shape;
  const bool share_plans = in.mode == SimMode::full || !(cs.oversubscription > 1.0 && cs.nodes > cs.nodes_per_leaf());
  Builder::RoutedPlans step_plans;
  Builder::RoutedPlans* routed = share_plans ? &step_plans : nullptr;
  // A symmetric-mode run creates its links in a fixed order from the layout's degrees and the
  // cluster alone, so its routed plans serve every later step with the same ones (the layouts of a
  // search that differ in micro-batch, schedule, ZeRO or buckets).
  if (share_plans && in.mode == SimMode::symmetric) {
    const Layout& L = in.layout;
    const PlanShapeCache::RoutedStore::Key key{
        {L.tp, L.dp, L.pp, cs.nodes, cs.gpus_per_node, cs.nics_per_node, static_cast<int>(cs.fabric), cs.nics_per_leaf},
        {cs.nvlink_Bps, cs.nic_Bps, cs.oversubscription, in.net.intra_alpha_s, in.net.inter_alpha_s, cs.nvlink_Bps, cs.nic_share_Bps()}};
    if (!shapes.routed) shapes.routed = std::make_shared<PlanShapeCache::RoutedStore>();
    auto& store = shapes.routed->by_context;
    if (store.size() > 256 && store.find(key) == store.end()) store.clear();
    routed = &store[key];
  }
  const int pp = in.layout.pp;
  const bool interleaved = in.layout.schedule == Schedule::interleaved;
  const int m0 = pp + 2, q = interleaved ? pp : 1;  // see above
  int simulated = 0;  // micro-batches per stage, tasks and events over every run
  std::size_t tasks = 0;
  std::uint64_t events = 0;
  // A run of M micro-batches (with period P, and the cut comparison or not). Its graph is kept for
  // the steps of the same structure that follow on this thread (the layouts of a search that
  // differ only in micro-batch size or recompute), and taken from there when one was.
  struct Ran {
    StepResult r;
    Builder::Periodicity per;
  };
  const bool keepable = in.mode == SimMode::symmetric && !in.record_timeline && !in.gpu_speed && in.speed_replica < 0;
  auto run = [&](int M, int P, bool cut) {
    std::vector<std::uint64_t>& key = thread_key_scratch();
    bool kept = false;
    if (keepable) graph_key(in, M, P, cut, key);
    BuilderWorkspace& ws = keepable ? kept_graph(key, kept) : thread_workspace();
    Builder b(ws, in, M, &shapes, &chunks, routed, P, cut, kept);
    Ran out;
    try {
      out.r = b.run();
    } catch (...) {
      ws.key.clear();
      throw;
    }
    if (keepable && ws.key.empty() && ws.reusable) ws.key = key;
    out.r.graph_reused = b.refilled();
    out.per = b.periodicity();
    return out;
  };
  if (in.mode == SimMode::symmetric && !in.record_timeline && in.steady_state && in.layout.schedule != Schedule::gpipe) {
    // The run of M micro-batches gives the step at m when it shows its schedule repeating with
    // period P: its step plus (m - M) / P periods. `drift`: a slow drift is accepted (above).
    auto read_off = [&](StepResult& r, const Builder::Periodicity& per, int M, int P, bool drift) {
      const double periods = static_cast<double>(m - M) / P;
      const double T = r.step_time_s;
      const bool periodic = per.deviation_s <= 1e-9 * T;
      const bool slow_drift = drift && in.cost->hardware().comm_compute_interference > 0 &&
                              per.deviation_s * periods * (periods + 1) / 2 <= 1e-3 * T;
      if (!per.measured || !(periodic || slow_drift)) return false;
      r.step_time_s += periods * per.lambda_s;
      for (int c = 0; c < kCategories; ++c) r.breakdown_s[c] = std::max(0.0, r.breakdown_s[c] + periods * per.breakdown_s[c]);
      r.dp_bytes_per_gpu += periods * per.dp_bytes;
      r.tp_bytes_per_gpu += periods * per.tp_bytes;
      r.simulated_microbatches = simulated;
      r.tasks = tasks;
      r.events = events;
      return true;
    };
    // First the cut comparison (Builder::measure_cut), on the fewest micro-batches it allows: its
    // earlier cut, before forward (M - P) v - 1, in every stage's steady phase (past stage 0's
    // warm-up, the longest). Where nothing but the pipeline's hand-offs crosses a cut (no ZeRO-2/3
    // traffic per micro-batch).
    if (in.layout.zero <= 1) {
      // The fewest micro-batches that leave room for the cuts (Builder::choose_cut): the later
      // one at most v forwards before the last, the earlier one P v forwards before it and past
      // stage 0's warm-up (the longest), M a multiple of P away from m, with room to spare of half
      // a pipeline's worth of forwards (pp v / 2): the later cut moves back until what precedes it
      // has ended before the cool-down starts, which on the layouts tried took up to that, and the
      // earlier one must find the schedule settled. Found, not derived: where it is too little,
      // the check fails and the two-period reading runs. Tried where it takes fewer micro-batches
      // than that reading.
      const int P = q, v = interleaved ? in.layout.vpp : 1;
      const PipelineKind kind = interleaved ? PipelineKind::interleaved : PipelineKind::one_f_one_b;
      const int warm = pipeline_warmup(kind, pp, v, std::max(m, pp + 1), 0);
      const int room = (pp * v + 1) / 2;
      int M = 2 * P;
      while ((M - P) * v - 1 - v < warm + 1 + room) M += P;
      M += ((m - M) % P + P) % P;
      int M_two = std::max(m0 + 2 * P - 1, 3 * P);
      M_two += ((m - M_two) % P + P) % P;
      if (M < M_two && M < m) {
        Ran ran = run(M, P, true);
        StepResult& r = ran.r;
        simulated += M;
        tasks += r.tasks;
        events += r.events;
        // Only an exact repeat: the argument holds for the state as it is, not for a drift.
        if (read_off(r, ran.per, M, P, false)) return r;
      }
    }
    for (int P = q; P <= 2 * q; P *= 2) {
      int M = std::max(m0 + 2 * P - 1, 3 * P);
      M += ((m - M) % P + P) % P;
      // Only worth it while the runs cost fewer micro-batches than the step itself.
      if (simulated + M >= m) break;
      Ran ran = run(M, P, false);
      StepResult& r = ran.r;
      simulated += M;
      tasks += r.tasks;
      events += r.events;
      if (read_off(r, ran.per, M, P, true)) return r;
    }
  }
  StepResult r = run(m, 0, false).r;
  r.simulated_microbatches = simulated + m;
  r.tasks += tasks;
  r.events += events;
  return r;
}

}  // namespace trainsim::sim

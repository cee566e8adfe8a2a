#include "step_builder.h"

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <stdexcept>

#include "kept_graph.h"
#include "pipeline_schedule.h"
#include "step_graph.h"

namespace trainsim::sim {

using detail::Builder;
using detail::BuilderWorkspace;

const char* category_name(int c) {
  static const char* names[kCategories] = {"compute", "recompute", "tp_comm", "pp_comm", "dp_comm", "bubble", "optimizer", "data_wait"};
  return (c >= 0 && c < kCategories) ? names[c] : "?";
}

struct PlanShapeCache::RoutedStore {
  // TP, DP, PP, nodes, GPUs per node, NICs per node, fabric, NICs per leaf, one representative per
  // TP group or per stage, collectives capped at another replica's NICs (SymmetricPaths); NVLink
  // and NIC rate, oversubscription, alpha inside and across nodes, per-GPU rate inside and across
  // nodes.
  using Key = std::pair<std::array<int, 10>, std::array<double, 7>>;
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

// Whether TP groups that share a NIC (groups smaller than the GPUs on one NIC) run at different
// speeds (given per-GPU speeds).
static bool tp_groups_sharing_a_nic_differ(const StepInput& in) {
  const ClusterShape& cs = in.net.shape;
  const int tp = in.layout.tp, gpn = cs.gpus_per_node;
  if (!in.gpu_speed || static_cast<int>(in.gpu_speed->size()) != cs.gpus()) return false;
  if (cs.nodes == 1 || cs.nics_per_node >= gpn || gpn % cs.nics_per_node != 0 || gpn % tp != 0) return false;
  const int share = gpn / cs.nics_per_node;
  if (tp >= share) return false;
  // A group waits for its slowest GPU at every TP collective.
  const std::vector<double>& speed = *in.gpu_speed;
  auto group_speed = [&](int g) { return *std::min_element(speed.begin() + g, speed.begin() + g + tp); };
  for (int g = 0; g < cs.gpus(); g += share)
    for (int k = tp; k < share; k += tp)
      if (group_speed(g + k) != group_speed(g)) return true;
  return false;
}

// Whether TP groups whose pipeline transfers cross the uplinks of one leaf switch run at different
// speeds (given per-GPU speeds, on a fabric whose uplinks are oversubscribed). Replicas at one
// speed send their transfers together and split the uplinks; a slow one's transfers come when
// the fast ones have sent theirs and get more of them.
static bool tp_groups_sharing_uplinks_differ(const StepInput& in) {
  const ClusterShape& cs = in.net.shape;
  const int tp = in.layout.tp, dp = in.layout.dp, pp = in.layout.pp;
  if (!in.gpu_speed || static_cast<int>(in.gpu_speed->size()) != cs.gpus()) return false;
  if (cs.nodes == 1 || pp == 1 || !cs.leaf_uplinks_bind()) return false;
  const std::vector<double>& speed = *in.gpu_speed;
  const int per_leaf = cs.nodes_per_leaf(), stage_gpus = tp * dp;
  auto leaf = [&](int gpu) { return cs.node_of(gpu) / per_leaf; };
  std::vector<double> leaf_speed(static_cast<std::size_t>((cs.nodes + per_leaf - 1) / per_leaf), -1.0);
  for (int s = 0; s < pp; ++s)
    for (int d = 0; d < dp; ++d) {
      const int g = tp * d + stage_gpus * s;
      const bool crosses = (s + 1 < pp && leaf(g) != leaf(g + stage_gpus)) || (s > 0 && leaf(g) != leaf(g - stage_gpus));
      if (!crosses) continue;
      const double v = *std::min_element(speed.begin() + g, speed.begin() + g + tp);
      double& seen = leaf_speed[static_cast<std::size_t>(leaf(g))];
      if (seen < 0) seen = v;
      else if (seen != v) return true;
    }
  return false;
}

const char* symmetric_mode_misfit(const StepInput& in) {
  const ClusterShape& cs = in.net.shape;
  const int stage_gpus = in.layout.tp * in.layout.dp;
  if (cs.nodes > 1 && stage_gpus % cs.gpus_per_node != 0) return "a pipeline stage's GPUs do not fill whole nodes";
  // A representative takes 1/G of its node's NIC capacity; where the node's GPUs do not divide
  // evenly over its NICs, some share a NIC with more GPUs than others and pace their rings.
  if (cs.nodes > 1 && cs.nics_per_node < cs.gpus_per_node && cs.gpus_per_node % cs.nics_per_node != 0)
    return "the node's GPUs do not spread evenly over its NICs";
  // Symmetric mode gives every GPU of a leaf the same share of its uplinks. That holds where each
  // stage is whole leaves (its traffic between leaves the only traffic on their uplinks; the
  // leaves then all full) or a whole part of one leaf (the leaf's stages share its uplinks, each
  // for its own GPUs; a last leaf part full holds fewer stages and has uplinks for fewer nodes).
  if (cs.leaf_uplinks_bind()) {
    const int per_leaf = cs.nodes_per_leaf();
    const int stage_nodes = stage_gpus / cs.gpus_per_node;
    if (stage_nodes % per_leaf != 0 && per_leaf % stage_nodes != 0)
      return cs.nodes % per_leaf != 0 ? "the nodes do not fill whole leaf switches of the oversubscribed fabric"
                                      : "pipeline stages straddle leaf switches of the oversubscribed fabric";
  }
  // TP groups smaller than the GPUs on a NIC share it; at one speed they send alike, each its 1/G.
  // A slow group beside fast ones sends while they wait and gets more of the NIC than that.
  if (tp_groups_sharing_a_nic_differ(in)) return "tensor-parallel groups sharing a NIC run at different speeds";
  if (tp_groups_sharing_uplinks_differ(in))
    return "tensor-parallel groups whose pipeline transfers share a leaf's uplinks run at different speeds";
  return nullptr;
}

const char* replica_mode_misfit(const StepInput& in) {
  const ClusterShape& cs = in.net.shape;
  const int tp = in.layout.tp, gpn = cs.gpus_per_node;
  if (cs.nodes == 1) return nullptr;
  if (tp > gpn || gpn % tp != 0) return "a tensor-parallel group spans nodes";
  // A representative's flows all run at its group's slowest NIC; the group's other GPUs send at
  // their own NICs' rates, and their rings then finish at different times.
  if (!cs.nic_speed.empty())
    for (int g = 0; g < cs.gpus(); g += tp)
      for (int t = 1; t < tp; ++t)
        if (cs.nic_speed_of(cs.nic_of(g + t)) != cs.nic_speed_of(cs.nic_of(g)))
          return "a tensor-parallel group's NICs run at different speeds";
  if (cs.nics_per_node < gpn) {
    if (gpn % cs.nics_per_node != 0) return "the node's GPUs do not spread evenly over its NICs";
    // TP groups that share a NIC (groups smaller than the GPUs on it) share its links in this mode
    // (SymmetricPaths), whenever each sends, so they may run at different speeds. Where stages
    // share a node as well, a ring's hop leaves or enters the node at some members and stays on
    // NVLink at others, and NCCL's tree within and across the node differs from member to member
    // (0.2-0.6% off on random layouts): every GPU.
    const int share = gpn / cs.nics_per_node;
    if (tp % share != 0 && (tp * in.layout.dp) % gpn != 0) return "a pipeline stage's GPUs do not fill whole nodes";
  }
  return nullptr;
}

namespace {

// The step in the mode `in` asks for. Symmetric mode throws detail::SymmetricMisfit where a choice
// made while building the step breaks its premise.
StepResult simulate_in_mode(const StepInput& in) {
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
  const bool share_plans = in.mode == SimMode::full || !cs.leaf_uplinks_bind();
  Builder::RoutedPlans step_plans;
  Builder::RoutedPlans* routed = share_plans ? &step_plans : nullptr;
  // A symmetric-mode run creates its links in a fixed order from the layout's degrees and the
  // cluster alone, so its routed plans serve every later step with the same ones (the layouts of a
  // search that differ in micro-batch, schedule, ZeRO or buckets).
  if (share_plans && in.mode == SimMode::symmetric) {
    const Layout& L = in.layout;
    const PlanShapeCache::RoutedStore::Key key{
        {L.tp, L.dp, L.pp, cs.nodes, cs.gpus_per_node, cs.nics_per_node, static_cast<int>(cs.fabric), cs.nics_per_leaf, in.every_replica,
         !in.every_replica && in.speed_replica >= 0 && !cs.nic_speed.empty()},
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
    std::vector<std::uint64_t>& key = detail::thread_key_scratch();
    bool kept = false;
    if (keepable) detail::graph_key(in, M, P, cut, key);
    BuilderWorkspace& ws = keepable ? detail::kept_graph(key, kept) : detail::thread_workspace();
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
  const bool read_steady_state = in.mode == SimMode::symmetric ? in.steady_state : in.steady_state_in_full_mode;
  if (read_steady_state && !in.record_timeline && in.layout.schedule != Schedule::gpipe) {
    // The run of M micro-batches gives the step at m when it shows its schedule repeating with
    // period P: its step plus (m - M) / P periods. `drift`: a slow drift is accepted (above).
    auto read_off = [&](StepResult& r, const Builder::Periodicity& per, int M, int P, bool drift) {
      const double periods = static_cast<double>(m - M) / P;
      const double T = r.step_time_s;
      const bool periodic = per.deviation_s <= 1e-9 * T;
      const HardwareProfile& hw = in.cost->hardware();
      const bool slow_drift = drift && (hw.comm_compute_interference > 0 || hw.pipeline_transfer_interference() > 0) &&
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
      // the check fails and the two-period reading runs. Tried where it takes no more micro-batches
      // than that reading: it reads exact repeats that the two-period reading, under the
      // comm/compute slowdown, can see as a drift (its last period set apart by the run's end).
      const int P = q, v = interleaved ? in.layout.vpp : 1;
      const PipelineKind kind = interleaved ? PipelineKind::interleaved : PipelineKind::one_f_one_b;
      const int warm = pipeline_warmup(kind, pp, v, std::max(m, pp + 1), 0);
      const int room = (pp * v + 1) / 2;
      int M = 2 * P;
      while ((M - P) * v - 1 - v < warm + 1 + room) M += P;
      M += ((m - M) % P + P) % P;
      int M_two = std::max(m0 + 2 * P - 1, 3 * P);
      M_two += ((m - M_two) % P + P) % P;
      if (M <= M_two && M < m) {
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

}  // namespace

StepResult simulate_step(const StepInput& in) {
  if (!in.model || !in.cost) throw std::invalid_argument("simulate_step needs a model and a cost model");
  if (in.mode != SimMode::symmetric || in.every_replica) return simulate_in_mode(in);
  const char* why = symmetric_mode_misfit(in);
  if (!why) {
    try {
      return simulate_in_mode(in);
    } catch (const detail::SymmetricMisfit& misfit) {
      why = misfit.why;
    }
  }
  if (!replica_mode_misfit(in)) {
    StepInput each = in;
    each.every_replica = true;
    each.speed_replica = -1;  // every replica at its own speeds
    try {
      StepResult r = simulate_in_mode(each);
      r.every_replica_because = why;
      return r;
    } catch (const detail::SymmetricMisfit&) {
      // A choice made while building the step breaks this premise too: every GPU, below.
    }
  }
  if (!in.every_gpu_if_needed) throw NeedsEveryGpu(why);
  StepInput full = in;
  full.mode = SimMode::full;
  full.speed_replica = -1;
  full.steady_state_in_full_mode = in.steady_state;
  StepResult r = simulate_in_mode(full);
  r.full_because = why;
  return r;
}

}  // namespace trainsim::sim


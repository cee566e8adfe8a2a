#include "step_graph.h"

#include <algorithm>
#include <stdexcept>

#include "kept_graph.h"

namespace trainsim::sim::detail {

namespace {

// Inner vectors of `v` for n entries, each emptied, keeping their memory.
void reuse_rows(std::vector<std::vector<int>>& v, std::size_t n) {
  v.resize(n);
  for (auto& row : v) row.clear();
}

}  // namespace

void Builder::prepare_chunks() {
  vpp_ = L_.schedule == Schedule::interleaved ? L_.vpp : 1;
  if (chunk_cache_ && !chunk_cache_->empty()) {
    chunks_ = *chunk_cache_;
    return;
  }
  chunk_work(in_, vpp_, chunks_);
  if (chunk_cache_) *chunk_cache_ = chunks_;
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
    // One representative per stage (replica 0's first TP rank), or per TP group of every replica.
    // Each runs at the slowest NIC among the GPUs it stands for: its stage's (every replica's, or
    // those of speed_replica only) or its group's.
    const int replicas = in_.every_replica ? L_.dp : 1;
    for (int s = 0; s < L_.pp; ++s)
      for (int d = 0; d < replicas; ++d) sim_gpus_.push_back(gpu_of(0, d, s));
    // With one replica's speeds, a data-parallel collective still crosses every replica's NICs and
    // runs at the slowest of them (ring_speed, by stage).
    std::vector<double> nic_speed(sim_gpus_.size(), 1.0), ring_speed;
    if (!sh.nic_speed.empty()) {
      const bool one_replica = !in_.every_replica && in_.speed_replica >= 0;
      if (one_replica) ring_speed.assign(sim_gpus_.size(), 1.0);
      for (int s = 0; s < L_.pp; ++s)
        for (int d = 0; d < L_.dp; ++d)
          for (int t = 0; t < L_.tp; ++t) {
            const double speed = sh.nic_speed_of(sh.nic_of(gpu_of(t, d, s)));
            if (in_.every_replica || in_.speed_replica < 0 || d == in_.speed_replica) {
              double& slowest = nic_speed[s * replicas + (in_.every_replica ? d : 0)];
              slowest = std::min(slowest, speed);
            }
            if (one_replica) ring_speed[s] = std::min(ring_speed[s], speed);
          }
    }
    paths_ = std::make_unique<SymmetricPaths>(e_, sh, sim_gpus_, nic_speed, ring_speed);
  }
  q_.assign(sh.gpus(), RankQueues{});
  proc_.assign(sh.gpus(), -1);
  if (any_interference())
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
      // A representative's compute runs at the slowest of the GPUs it stands for (as its NIC above).
      for (int g : sim_gpus_) speed_[g] = 1e300;
      for (int s = 0; s < L_.pp; ++s)
        for (int d = 0; d < L_.dp; ++d)
          if (in_.every_replica || in_.speed_replica < 0 || d == in_.speed_replica) {
            double& slowest = speed_[gpu_of(0, in_.every_replica ? d : 0, s)];
            for (int t = 0; t < L_.tp; ++t) slowest = std::min(slowest, given[gpu_of(t, d, s)]);
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
  h_.recompute.assign(slots, -1);
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
      interfere_transfer(t, g, k.dst_simulated && dst != g ? dst : -1);
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

  // Tied word embedding over a pipeline: the last stage keeps a copy of the embedding for the
  // logits, and the two copies' fp32 gradients are summed, an all-reduce between the first and the
  // last stage's GPUs of the same TP rank and replica, once both stages' data-parallel reductions
  // are done and before either updates them (Megatron-LM's finalize_model_grads; the step runner
  // does the same). Two ranks: a ring and NCCL's tree both send each rank's bytes once each way,
  // so a ring is taken unless the scenario forces trees.
  if (L_.pp > 1 && m_.tied_embeddings) {
    const double bytes = 4.0 * static_cast<double>(m_.vocab) * m_.hidden / L_.tp;
    const int last = (L_.pp - 1) * L_.tp * L_.dp;
    const Algorithm algo = in_.net.allreduce_algorithm == Algorithm::tree ? Algorithm::tree : Algorithm::ring;
    static const std::string name = "tied embedding grad all_reduce";
    for (int g : sim_gpus_) {
      if (g >= L_.tp * L_.dp || !paths_->simulated(g + last)) continue;
      const std::vector<int> pair{g, g + last};
      // After each stage's last backward (its compute queue's tail) and its gradients' collectives
      // (its communication queue's, which the collective waits for itself).
      const std::vector<TaskId> backwards{q_[g].compute, q_[g + last].compute};
      double sent = 0;
      collective(pair, CollectiveKind::all_reduce, algo, bytes, 1, 0.0, kDpComm, false, backwards, name, g == 0 ? &sent : nullptr);
      dp_bytes_gpu0_ += sent;
    }
  }

  // Optimizer: Adam over this rank's (possibly sharded) parameters once its gradients are reduced,
  // then ZeRO-1/2 gather the updated bf16 parameters once every member has updated its shard. The
  // gather is issued after the group's last simulated member's update, so that no member's update
  // waits for it (it becomes the tail of every member's communication queue).
  for (int g : sim_gpus_) {
    const int stage = g / (L_.tp * L_.dp);
    double params = 0;
    for (int c = 0; c < vpp_; ++c) params += chunks_[stage * vpp_ + c].params_per_rank;
    const double shard = L_.zero >= 1 ? params / L_.dp : params;
    compute_task(g, cost_.adam_time_s(shard), kOptimizer, "optimizer", q_[g].comm);
    if ((L_.zero == 1 || L_.zero == 2) && L_.dp > 1 && dp_sim_members_[sim_index_[g]].back() == g) {
      const bool has_gpu0 = dp_sim_members_[sim_index_[g]].front() == 0;
      double sent = 0;
      static const std::string name = "ZeRO param all_gather";
      collective(dp_group_of(g), CollectiveKind::all_gather, Algorithm::ring, 2.0 * params, 1, 0.0, kDpComm, false,
                 compute_tails(g), name, has_gpu0 ? &sent : nullptr);
      if (has_gpu0) dp_bytes_gpu0_ += sent;
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
  split_recompute_ = fuse_tp_ && L_.tp > 1 && L_.recompute == Recompute::full;
  interference_ = cost_.hardware().comm_compute_interference;
  p2p_interference_ = cost_.hardware().pipeline_transfer_interference();
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
  if (in_.record_timeline) record_timeline(r);
  return r;
}

void Builder::record_timeline(StepResult& r) {
  r.timeline_simulated_gpus = sim_gpus_;
  std::sort(r.timeline_simulated_gpus.begin(), r.timeline_simulated_gpus.end());
  // A task's entries: one, or two for a fused task of two parts of different categories (a
  // recompute and its backward), its time split between them in proportion to their compute.
  const auto parts_of = [this](TaskId t) -> const Gpu0Task* {
    const auto it = std::lower_bound(timeline_parts_.begin(), timeline_parts_.end(), t,
                                     [](const Gpu0Task& g, TaskId id) { return g.id < id; });
    return it != timeline_parts_.end() && it->id == t ? &*it : nullptr;
  };
  const auto emit = [&](TaskId t, std::vector<TimelineEntry>& out) {
    const TaskSpec& s = e_.spec(t);
    TimelineEntry te;
    te.gpu = s.lane;
    te.stream = lane_stream_[t];
    te.start_s = e_.start(t);
    te.end_s = e_.finish(t);
    te.uncontended_s = e_.uncontended_s(t);
    te.name = labels_[s.label];
    te.category = s.category;
    if (const Gpu0Task* g = parts_of(t)) {
      const double total = g->seconds[0] + g->seconds[1];
      if (total > 0 && g->cat[0] != g->cat[1]) {
        TimelineEntry first = te;
        first.end_s = te.start_s + (te.end_s - te.start_s) * g->seconds[0] / total;
        first.uncontended_s = te.uncontended_s * g->seconds[0] / total;
        te.uncontended_s -= first.uncontended_s;
        first.name += std::string(" ") + category_name(g->cat[0]);
        first.category = g->cat[0];
        te.start_s = first.end_s;
        te.category = g->cat[1];
        out.push_back(std::move(first));
      }
    }
    out.push_back(std::move(te));
  };
  const std::vector<int>& only = in_.timeline_gpus;
  for (TaskId t = 0, n = static_cast<TaskId>(e_.task_count()); t < n; ++t) {
    const TaskSpec& s = e_.spec(t);
    if (e_.finish(t) <= e_.start(t) && s.label == 0) continue;
    if (!only.empty() && !std::binary_search(only.begin(), only.end(), s.lane)) continue;
    emit(t, r.timeline);
  }
  // The critical path: from the task that ends the step, back through the dependency whose end let
  // each task start (a task starts as soon as the last of its dependencies ends), to one that
  // started at zero. Its tasks follow one another without a gap, so their times add up to the step.
  const std::vector<TaskId>& order = e_.completion_order();
  TaskId last = -1;
  for (TaskId t : order)
    if (last < 0 || e_.finish(t) > e_.finish(last)) last = t;
  std::vector<TaskId> path;
  for (TaskId t = last; t >= 0; t = e_.binding_predecessor(t))
    if (e_.finish(t) > e_.start(t)) path.push_back(t);
  for (auto it = path.rbegin(); it != path.rend(); ++it) emit(*it, r.critical_path);
}

}  // namespace trainsim::sim::detail

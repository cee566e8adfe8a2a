#include "step_graph.h"

#include <algorithm>
#include <stdexcept>

#include "pipeline_schedule.h"

namespace trainsim::sim::detail {

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
  const bool has_recompute = w.recompute_s > 0 && !split_recompute_;  // else a pass of its own
  out.n = 0;
  switch (kind) {
    case kRecomputePass:
      out.part[out.n++] = recompute;
      return;
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
      const CachedPlan& plan = cached_plan(tp_group_of(g), kinds[k], algorithm_for(kinds[k]), p.tp->bytes[k]);
      tp_bytes += plan.sent_by_first * p.tp->bytes[k];
      const PlanScale sc = plan_scale(plan, p.tp->bytes[k], p.tp->count[k]);
      rec.tp_idle_s += plan.idle_latency_s * sc.latency * p.tp->count[k] + p.tp->bytes[k] * plan.idle_per_byte_s * sc.bytes;
      for (const CachedPhase& ph : plan.phases) {
        spec.unslowed_s += ph.latency_s * sc.latency * p.tp->count[k];
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


// Builds every simulated GPU of one pipeline stage in lockstep (they run the same order), so that
// a collective can wait for all of its members' work.
void Builder::build_stage(int stage, const std::vector<int>& gpus) {
  const int pp = L_.pp;
  const PipelineKind pk = L_.schedule == Schedule::gpipe ? PipelineKind::gpipe
                          : L_.schedule == Schedule::interleaved ? PipelineKind::interleaved
                                                                 : PipelineKind::one_f_one_b;
  const std::vector<PipeOp>& order = cached_pipeline_order(pk, pp, vpp_, microbatches_, stage);
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
    if (quick && (op.forward || (!split_recompute_ && !((op.microbatch == microbatches_ - 1 || reduce_every_microbatch) && L_.dp > 1)))) {
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
    // A recompute of its own first (split_recompute_): the pass starts with it.
    std::vector<TaskId>& recomputed = ws_.recompute_first;
    recomputed.assign(gpus.size(), -1);
    // ZeRO-3's gather of the second layer waits for the compute queued before the first layer's
    // work, the recompute being part of it: queued ahead of a recompute of its own.
    Gathers second;
    const bool second_first = zero3 && split_recompute_ && units > 1;
    if (second_first) second = gather_layer(1, false);
    if (split_recompute_) {
      PassParts pp;
      pass_parts(kRecomputePass, w, pp);
      run_parts(gpus, pp.part, pp.n, named("B"), recomputed, kRecomputePass, op.chunk);
      if (zero3) wait_for(cur, recomputed);
    }
    auto pass_start = [&](std::size_t i, const std::vector<TaskId>& first) { return split_recompute_ ? recomputed[i] : first[i]; };
    const bool last_mb = op.microbatch == microbatches_ - 1;
    if ((last_mb || reduce_every_microbatch) && L_.dp > 1) {
      // Layer by layer, so that full buckets start while the rest of backward runs.
      for (int l = 0; l < units; ++l) {
        const Gathers next = l == 0 && second_first ? second : zero3 && l + 1 < units ? gather_layer(l + 1, false) : Gathers{};
        const int kind = l == 0 ? kFirstLayerBackward : kLaterLayerBackward;
        PassParts pp;
        pass_parts(kind, w, pp);
        run_parts(gpus, pp.part, pp.n, named("B", l), first, kind, op.chunk);
        if (zero3) wait_for(cur, first);
        cur = next;
        if (l == 0) {
          for (std::size_t i = 0; i < gpus.size(); ++i) h_.bwd_start[hidx(gpus[i], vs, op.microbatch)] = pass_start(i, first);
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
      for (std::size_t i = 0; i < gpus.size(); ++i) {
        h_.bwd_start[hidx(gpus[i], vs, op.microbatch)] = pass_start(i, first);
        if (split_recompute_) h_.recompute[hidx(gpus[i], vs, op.microbatch)] = recomputed[i];
      }
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

}  // namespace trainsim::sim::detail

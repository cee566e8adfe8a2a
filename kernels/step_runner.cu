#include "step_runner.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "clock_monitor.h"
#include "runner_kernels.h"
#include "step_run.h"

namespace trainsim::gpu {

namespace detail {

namespace {

float median_of(std::vector<float> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

// The pipeline's messages (bf16 [T, h] activations and their gradients) are posted as
// pipeline_exchange.h groups them. Each (chunk, micro-batch) holds an activation slot from its
// forward (or the receive of its input) to its backward.
void StepRun::run_schedule(unsigned seed0) {
  std::vector<std::vector<int>> slot_at(vpp, std::vector<int>(m, -1));
  std::vector<int> free_slots, head_at(m, -1), free_heads;
  for (int i = slots - 1; i >= 0; --i) free_slots.push_back(i);
  for (int i = static_cast<int>(head_states.size()) - 1; i >= 0; --i) free_heads.push_back(i);
  auto slot_for = [&](int ch, int mb) {
    int& sl = slot_at[ch][mb];
    if (sl < 0) {
      sl = free_slots.back();
      free_slots.pop_back();
    }
    return sl;
  };
  int bi = 0;  // backward passes run; their gradients alternate between dx_buf[0] and [1]
  for (const PipeExchange& e : exchanges) {
    if (pp > 1 && !(e.send.empty() && e.recv.empty())) {
      std::vector<P2pMessage> sends, recvs;
      for (const PipeMessage& msg : e.send) {
        // A forward's output (from virtual stage to_vstage - 1, one of ours), or the previous
        // backward's d(input).
        const int ch = (msg.to_vstage - 1) / pp;
        void* buf = msg.gradient ? static_cast<void*>(dx_buf[(bi + 1) % 2])
                                 : acts[slot_at[ch][msg.microbatch]][chunk_layers[ch].second].x;
        sends.push_back({buf, act_bytes, msg.peer});
      }
      for (const PipeMessage& msg : e.recv) {
        const int ch = msg.to_vstage / pp;
        void* buf = msg.gradient ? static_cast<void*>(dx_buf[bi % 2]) : acts[slot_for(ch, msg.microbatch)][0].x;
        recvs.push_back({buf, act_bytes, msg.peer});
      }
      c.pp_comm->send_recv(sends, recvs, st);
    }
    for (int k = e.first_pass; k < e.first_pass + e.passes; ++k) {
      const PipePass& p = passes[k];
      const int sl = slot_for(p.chunk, p.microbatch);
      if (last && p.chunk == vpp - 1) {
        int& hs = head_at[p.microbatch];
        if (p.forward) {
          hs = free_heads.back();
          free_heads.pop_back();
        }
        use_head_state(hs);
        if (!p.forward) free_heads.push_back(hs);
      }
      if (p.forward) {
        phase_timer.time(0, st, [&] { forward_pass(p.chunk, sl, seed0 + p.microbatch); });
      } else {
        dx = dx_buf[bi % 2];
        phase_timer.time(1, st, [&] { backward_pass(p.chunk, sl, seed0 + p.microbatch, p.microbatch == m - 1); });
        ++bi;
        free_slots.push_back(sl);
        slot_at[p.chunk][p.microbatch] = -1;
      }
    }
  }
  if (pp > 1) final_bucket();
}

RunnerResult StepRun::run() {
  std::vector<KernelTiming>& kinds = r.kernels;
  std::vector<float> step_ms, opt_ms, gemm_ms, attn_ms, fwd_ms, bwd_ms;
  std::vector<std::vector<float>> shape_ms;  // per GEMM shape, per timed step
  std::vector<std::vector<float>> kind_ms;   // per other kernel, per timed step
  std::vector<float> ew_ms;
  cudaEvent_t e0, e1, e2, comm_done;
  TRAINSIM_CUDA(cudaEventCreate(&e0));
  TRAINSIM_CUDA(cudaEventCreate(&e1));
  TRAINSIM_CUDA(cudaEventCreate(&e2));
  TRAINSIM_CUDA(cudaEventCreateWithFlags(&comm_done, cudaEventDisableTiming));
  const int total = c.warmup_steps + c.timed_steps;
  for (int step = 0; step < total; ++step) {
    if (step == c.warmup_steps) r.timed_begin_wall_s = wall_clock_s();
    TRAINSIM_CUDA(cudaMemsetAsync(loss, 0, 4, st));
    TRAINSIM_CUDA(cudaEventRecord(e0, st));
    // Replica r runs micro-batches r*m .. r*m+m-1 of the step's dp*m (dropout seeds by that index).
    pending_begin = pending_end = n;
    buckets = buckets_in_step = 0;
    run_schedule(seed_base + static_cast<unsigned>(replica * m));
    seed_base += static_cast<unsigned>(dp * m);
    if (c.comm) {
      // The optimizer waits for the last bucket.
      TRAINSIM_CUDA(cudaEventRecord(comm_done, comm_st));
      TRAINSIM_CUDA(cudaStreamWaitEvent(st, comm_done, 0));
    }
    r.buckets = buckets_in_step;
    // The first (warm-up) step's gradient, after the replicas' sum: what the update will use.
    // Under ZeRO only this replica's shares are summed: its part of the squared norm (shares left
    // over and held by every replica count 1/dp here), which the replicas add up.
    if (step == 0) {
      // Squares over the flat range [lo, hi), whose gradients start at g, with replicated
      // parameters counted 1/tp and the last stage's copy of the word embedding not at all.
      auto weighted_sq = [&](const float* g, size_t lo, size_t hi) {
        double sum = checksum(g, hi - lo, sums, st, true);
        auto part = [&](size_t b, size_t len) {
          const size_t x = std::max(lo, b), y = std::min(hi, b + len);
          return x < y ? checksum(g + (x - lo), y - x, sums, st, true) : 0.0;
        };
        if (tp > 1)
          for (auto [b, len] : layout.replicated) sum -= (1.0 - 1.0 / tp) * part(b, len);
        if (pp > 1 && tied && last && !first) sum -= part(wte, static_cast<size_t>(Vl) * h);
        return sum;
      };
      r.first_grad_sq = 0;
      if (zs == 0) r.first_grad_sq = weighted_sq(grad, 0, n);
      size_t so = 0;
      for (const auto& o : layout.owned) {
        r.first_grad_sq += weighted_sq(zs >= 2 ? grad + so : grad + o.off, o.off, o.off + o.len) / (o.leftover ? dp : 1);
        so += o.len;
      }
    }
    TRAINSIM_CUDA(cudaEventRecord(e1, st));
    if (zs >= 1) {
      // Adam on this replica's share; then, below ZeRO-3, every replica's updated bf16 share to
      // all (ZeRO-3 gathers the weights where they are used).
      size_t so = 0;
      for (const auto& o : layout.owned) {
        adam_update(master + so, mom + so, var + so, zs >= 2 ? grad + so : grad + o.off, zs >= 3 ? W + so : W + o.off, o.len, 1e-4f, st);
        so += o.len;
      }
      if (zs < 3)
        for (auto [b, e] : layout.bucket_ranges) {
          const size_t sh = (e - b) / dp;
          if (sh) c.comm->all_gather(W + b + replica * sh, W + b, sh * sizeof(bf16), st);
        }
      std::fill(w_at.begin(), w_at.end(), nullptr);  // the next step gathers the updated weights
      w_holder = {-1, -1, -1};
      cur_unit = -1;
    } else {
      adam_update(master, mom, var, grad, W, n, 1e-4f, st);
    }
    TRAINSIM_CUDA(cudaMemsetAsync(grad, 0, (zs >= 2 ? shard : n) * 4, st));
    TRAINSIM_CUDA(cudaEventRecord(e2, st));
    TRAINSIM_CUDA(cudaEventSynchronize(e2));
    const auto kernels = kernel_timer.collect();
    const auto phases = phase_timer.collect();
    const auto others = ew_timer.collect();
    if (step >= c.warmup_steps) {
      const std::vector<float>& by_shape = kernel_timer.tag_sums();
      shape_ms.resize(r.gemms.size());
      for (std::size_t g = 0; g < r.gemms.size(); ++g) {
        shape_ms[g].push_back(g < by_shape.size() ? by_shape[g] : 0.0f);
        r.gemms[g].calls_per_step = g < kernel_timer.tag_counts().size() ? kernel_timer.tag_counts()[g] : 0;
      }
      kind_ms.resize(kinds.size());
      for (std::size_t k = 0; k < kinds.size(); ++k) {
        kind_ms[k].push_back(k < ew_timer.tag_sums().size() ? ew_timer.tag_sums()[k] : 0.0f);
        kinds[k].calls_per_step = k < ew_timer.tag_counts().size() ? ew_timer.tag_counts()[k] : 0;
      }
      ew_ms.push_back(others[0]);
      gemm_ms.push_back(kernels[0]);
      attn_ms.push_back(kernels[1]);
      fwd_ms.push_back(phases[0]);
      bwd_ms.push_back(phases[1]);
    }
    float ms = 0, ms_opt = 0;
    TRAINSIM_CUDA(cudaEventElapsedTime(&ms, e0, e2));
    TRAINSIM_CUDA(cudaEventElapsedTime(&ms_opt, e1, e2));
    float host_loss = 0;
    TRAINSIM_CUDA(cudaMemcpy(&host_loss, loss, 4, cudaMemcpyDeviceToHost));
    if (!last || tr != 0) host_loss = 0;  // one rank per replica reports its loss
    if (step == 0) r.first_loss = host_loss;
    r.last_loss = host_loss;
    if (step >= c.warmup_steps) {
      step_ms.push_back(ms);
      opt_ms.push_back(ms_opt);
    }
  }
  r.timed_end_wall_s = wall_clock_s();
  if (zs >= 3) {
    // The whole model's weights: each bucket gathered in turn.
    r.param_checksum = 0;
    for (int b = 0; b < nb; ++b) {
      use_weights(b, -1);
      r.param_checksum += checksum(w_at[b], layout.buckets[b].len, sums, st);
    }
  } else {
    r.param_checksum = checksum(W, n, sums, st);
  }
  size_t free_b = 0, total_b = 0;
  TRAINSIM_CUDA(cudaMemGetInfo(&free_b, &total_b));
  r.device_used_bytes = static_cast<double>(total_b - free_b);
  r.allocated_bytes = arena.total();
  std::sort(step_ms.begin(), step_ms.end());
  std::sort(opt_ms.begin(), opt_ms.end());
  r.step_ms = step_ms[step_ms.size() / 2];
  r.step_ms_min = step_ms.front();
  r.step_ms_max = step_ms.back();
  r.optimizer_ms = opt_ms[opt_ms.size() / 2];
  r.gemm_ms = median_of(gemm_ms);
  for (std::size_t g = 0; g < r.gemms.size() && g < shape_ms.size(); ++g) r.gemms[g].ms_per_step = median_of(shape_ms[g]);
  r.attention_ms = median_of(attn_ms);
  r.elementwise_ms = median_of(ew_ms);
  for (std::size_t k = 0; k < kinds.size() && k < kind_ms.size(); ++k) kinds[k].ms_per_step = median_of(kind_ms[k]);
  r.forward_ms = median_of(fwd_ms);
  r.backward_ms = median_of(bwd_ms);
  r.finite = std::isfinite(r.first_loss) && std::isfinite(r.last_loss) && std::isfinite(r.first_grad_sq);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaEventDestroy(e2);
  cudaEventDestroy(comm_done);
  return r;
}

}  // namespace detail

RunnerResult run_gpt_training(const RunnerConfig& c) {
  if (!c.agree_setup) {
    detail::StepRun run(c);
    return run.run();
  }
  // Every buffer is allocated while the run is set up, before its first collective: the ranks
  // agree there whether all of them set up (a rank that failed for any reason says so first).
  std::unique_ptr<detail::StepRun> run;
  std::exception_ptr failed;
  try {
    run = std::make_unique<detail::StepRun>(c);
  } catch (...) {
    failed = std::current_exception();
  }
  const bool all = c.agree_setup(!failed);
  if (failed) std::rethrow_exception(failed);
  if (!all) {
    run.reset();
    throw PeerSetupFailed();
  }
  // Past the agreement a rank cannot stop alone without the others waiting for it: an allocation
  // that fails later (cuBLAS's or NCCL's own: the runner's buffers, its checksums' scratch
  // included, are all set up) is an error that ends the job, not a DeviceOutOfMemory that a caller
  // would record and go on from.
  try {
    return run->run();
  } catch (const DeviceOutOfMemory& e) {
    throw std::runtime_error(std::string(e.what()) + ", during the step, after the ranks agreed that their buffers fit");
  }
}

}  // namespace trainsim::gpu

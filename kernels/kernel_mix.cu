#include "kernel_mix.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "attention.h"
#include "lt_matmul.h"
#include "runner_kernels.h"
#include "timing.h"

namespace trainsim::gpu {

namespace {

double wall_now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Load calls and element-wise kernel groups per cycle whose load share, at the times given, is
// nearest `share`: one of the two counts is 1.
void cycle_counts(double share, double load_us, double group_us, int& loads, int& groups) {
  if (share <= 0) {
    loads = 0;
    groups = 1;
    return;
  }
  const double r = share / (1 - share) * group_us / load_us;  // loads / groups
  if (r >= 1) {
    groups = 1;
    loads = std::min(512, static_cast<int>(std::lround(r)));
  } else {
    loads = 1;
    groups = std::min(512, static_cast<int>(std::lround(1 / r)));
  }
}

// The unfused causal attention's buffers and handle for one shape; run() enqueues its forward then
// backward.
class AttentionLoad {
 public:
  AttentionLoad(const KernelMixLoad& l, cudaStream_t st) : st_(st) {
    if (l.kv_group < 1 || l.heads % l.kv_group != 0) throw std::invalid_argument("kernel mix: heads must be a multiple of the K/V group");
    a_.batch_heads = l.batch * l.heads;
    a_.seq = l.seq;
    a_.head_dim = l.head_dim;
    a_.group = l.kv_group;
    const size_t sd = static_cast<size_t>(a_.batch_heads) * l.seq * l.head_dim, ss = static_cast<size_t>(a_.batch_heads) * l.seq * l.seq;
    const size_t skv = sd / l.kv_group;
    for (auto* b : {&q_, &o_, &do_, &dq_}) *b = DeviceBuffer(sd * 2);
    for (auto* b : {&k_, &v_, &dk_, &dv_}) *b = DeviceBuffer(skv * 2);
    p_ = DeviceBuffer(ss * 2);
    ds_ = DeviceBuffer(ss * 2);
    fill_random_bf16(q_.get(), sd, 1, 1.0f, st);
    fill_random_bf16(k_.get(), skv, 2, 1.0f, st);
    fill_random_bf16(v_.get(), skv, 3, 1.0f, st);
    fill_random_bf16(do_.get(), sd, 4, 1.0f, st);
    if (cublasCreate(&h_) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cublasCreate failed");
    cublasSetStream(h_, st);
  }
  ~AttentionLoad() { cublasDestroy(h_); }
  AttentionLoad(const AttentionLoad&) = delete;
  AttentionLoad& operator=(const AttentionLoad&) = delete;
  void run() {
    const AttentionBuffers b{q_.get(), k_.get(), v_.get(), p_.get(), nullptr, nullptr, o_.get()};
    attention_forward(h_, a_, b, 7, 0.0f, st_);
    attention_backward(h_, a_, b, do_.get(), ds_.get(), dq_.get(), dk_.get(), dv_.get(), 0.0f, st_);
  }

 private:
  cudaStream_t st_;
  cublasHandle_t h_ = nullptr;
  AttentionShape a_;
  DeviceBuffer q_, k_, v_, o_, p_, ds_, do_, dq_, dk_, dv_;
};

}  // namespace

KernelMixResult bench_kernel_mix(const std::vector<double>& shares, double settle_s, double timed_s, const KernelMixLoad& load,
                                 const ElementwiseLayer& layer) {
  KernelMixResult res;
  const int T = layer.tokens, h = layer.hidden, f = layer.ffn, seq = layer.seq(), d = layer.head_dim(), a = layer.heads(),
            kvh = layer.kv_heads(), kv = kvh * d;
  if (T % seq != 0 || h % d != 0) throw std::invalid_argument("kernel mix: tokens must be whole sequences and hidden whole heads");
  const int bsz = T / seq;
  res.tokens = T;
  res.hidden = h;
  res.ffn = f;
  res.gpt = layer.gpt;
  const int gm = load.gm, gn = load.gn, gk = load.gk;
  const size_t Th = static_cast<size_t>(T) * h, Tkv = static_cast<size_t>(T) * kv, Tf = static_cast<size_t>(T) * f;
  using bf = __nv_bfloat16;
  cudaStream_t st;
  TRAINSIM_CUDA(cudaStreamCreate(&st));
  // Llama-style: gu, sw, dgu the SwiGLU's; GPT-style: gu the MLP's input, gelu_in and out
  // [T, f] (sw and dgu), din [T, f], masks, biases and the fp32 gradients of norms and biases.
  const bool gpt = layer.gpt;
  DeviceBuffer x(Th * 2), y(Th * 2), z(Th * 2), g(h * 2), rstd(T * 4), dg(h * 4), qkv((Th + 2 * Tkv) * 2), q(Th * 2), k(Tkv * 2),
      v(Tkv * 2), gu((gpt ? 1 : 2) * Tf * 2), sw(Tf * 2), dgu((gpt ? 1 : 2) * Tf * 2);
  DeviceBuffer lnb, mean, db, mask, bias_h, bias_qkv, dbias_qkv, bias_f, dbias_f, din, rows, dqkv;
  if (gpt) {
    lnb = DeviceBuffer(h * 2), mean = DeviceBuffer(T * 4), db = DeviceBuffer(h * 4), mask = DeviceBuffer(Th), bias_h = DeviceBuffer(h * 2);
    bias_qkv = DeviceBuffer(3 * h * 2), dbias_qkv = DeviceBuffer(3 * h * 4), bias_f = DeviceBuffer(f * 2), dbias_f = DeviceBuffer(f * 4);
    din = DeviceBuffer(Tf * 2), rows = DeviceBuffer(Th * 2), dqkv = DeviceBuffer(3 * Th * 2);
    for (auto* buf : {&lnb, &bias_h, &bias_qkv, &bias_f}) fill_random_bf16(buf->get(), buf->bytes() / 2, 8, 0.02f, st);
    for (auto* buf : {&db, &dbias_qkv, &dbias_f}) TRAINSIM_CUDA(cudaMemset(buf->get(), 0, buf->bytes()));
    TRAINSIM_CUDA(cudaMemset(mask.get(), 1, mask.bytes()));
  }
  for (auto* buf : {&x, &y, &z, &g, &qkv, &q, &k, &v, &gu, &sw}) fill_random_bf16(buf->get(), buf->bytes() / 2, 5, 1.0f, st);
  TRAINSIM_CUDA(cudaMemset(dg.get(), 0, dg.bytes()));
  // The load: a GEMM on training-magnitude operands, or the attention's forward and backward.
  DeviceBuffer ga, gb, gc;
  std::unique_ptr<LtMatmul> mm;
  std::unique_ptr<AttentionLoad> attention;
  std::function<void()> run_load;
  if (load.attention) {
    attention = std::make_unique<AttentionLoad>(load, st);
    run_load = [&] { attention->run(); };
    res.load_flop = 12.0 * load.batch * load.heads * static_cast<double>(load.seq) * load.seq * load.head_dim;
    res.load = "causal attention forward and backward (unfused, no dropout), " + std::to_string(load.batch) + " x " +
               std::to_string(load.seq) + " tokens, " + std::to_string(load.heads) + " heads of " + std::to_string(load.head_dim) + ", " +
               std::to_string(load.kv_group) + " query heads per K/V head";
  } else {
    ga = DeviceBuffer(static_cast<size_t>(gm) * gk * 2);
    gb = DeviceBuffer(static_cast<size_t>(gk) * gn * 2);
    gc = DeviceBuffer(static_cast<size_t>(gm) * gn * 2);
    fill_random_bf16(ga.get(), ga.bytes() / 2, 7, 1.0f, st);    // activations
    fill_random_bf16(gb.get(), gb.bytes() / 2, 6, 0.035f, st);  // weights at training magnitude
    mm = std::make_unique<LtMatmul>(st);
    run_load = [&] { mm->gemm(false, false, gm, gn, gk, ga.get(), gb.get(), gc.get(), false); };
    res.load_flop = 2.0 * gm * gn * static_cast<double>(gk);
    res.load = "bf16 GEMM " + std::to_string(gm) + " x " + std::to_string(gn) + " x " + std::to_string(gk);
  }
  using Kernels = std::vector<std::pair<const char*, std::function<void()>>>;
  // GPT-style: forward then backward, as one layer calls them (mean and rstd from the forward).
  const Kernels gpt_kernels = {
      {"layernorm*2", [&] {
         layernorm_forward(x.get<bf>(), g.get<bf>(), lnb.get<bf>(), y.get<bf>(), mean.get<float>(), rstd.get<float>(), T, h, st);
         layernorm_forward(z.get<bf>(), g.get<bf>(), lnb.get<bf>(), y.get<bf>(), mean.get<float>(), rstd.get<float>(), T, h, st);
       }},
      {"qkv_bias_split", [&] { split_heads(qkv.get<bf>(), bias_qkv.get<bf>(), q.get<bf>(), k.get<bf>(), v.get<bf>(), bsz, seq, a, d, st); }},
      {"attention_merge_heads", [&] { heads_to_rows(q.get<bf>(), rows.get<bf>(), bsz, seq, a, d, st); }},
      {"bias_dropout_residual*2", [&] {
         for (int i = 0; i < 2; ++i)
           bias_dropout_residual(rows.get<bf>(), bias_h.get<bf>(), x.get<bf>(), z.get<bf>(), mask.get<unsigned char>(), T, h, 11 + i, st);
       }},
      {"bias_gelu", [&] { bias_gelu(gu.get<bf>(), bias_f.get<bf>(), sw.get<bf>(), dgu.get<bf>(), T, f, st); }},
      {"layernorm.bwd*2", [&] {
         for (int i = 0; i < 2; ++i)
           layernorm_backward(z.get<bf>(), x.get<bf>(), g.get<bf>(), mean.get<float>(), rstd.get<float>(), y.get<bf>(), dg.get<float>(),
                              db.get<float>(), T, h, st);
       }},
      {"dropout_residual.bwd*2", [&] {
         for (int i = 0; i < 2; ++i) dropout_backward(z.get<bf>(), mask.get<unsigned char>(), y.get<bf>(), Th, st);
       }},
      {"gelu_bias.bwd", [&] {
         gelu_backward(dgu.get<bf>(), sw.get<bf>(), din.get<bf>(), Tf, st);
         column_sum(din.get<bf>(), dbias_f.get<float>(), T, f, st);
       }},
      {"attention_split_heads.bwd", [&] { rows_to_heads(rows.get<bf>(), q.get<bf>(), bsz, seq, a, d, st); }},
      {"qkv_merge_bias.bwd", [&] {
         merge_qkv_grad(q.get<bf>(), k.get<bf>(), v.get<bf>(), dqkv.get<bf>(), bsz, seq, a, d, st);
         column_sum(dqkv.get<bf>(), dbias_qkv.get<float>(), T, 3 * h, st);
       }},
  };
  const Kernels llama_kernels = {
      {"rmsnorm", [&] { rmsnorm_forward(x.get<bf>(), g.get<bf>(), y.get<bf>(), rstd.get<float>(), T, h, st); }},
      {"rmsnorm.bwd", [&] { rmsnorm_backward(z.get<bf>(), x.get<bf>(), g.get<bf>(), rstd.get<float>(), y.get<bf>(), dg.get<float>(), T, h, st); }},
      {"qkv_split", [&] { split_qkv_gqa(qkv.get<bf>(), q.get<bf>(), k.get<bf>(), v.get<bf>(), bsz, seq, a, kvh, d, st); }},
      {"rope", [&] { rope(q.get<bf>(), bsz * a, seq, d, false, st); }},
      {"residual", [&] { residual_add(x.get<bf>(), y.get<bf>(), z.get<bf>(), Th, st); }},
      {"swiglu", [&] { swiglu(gu.get<bf>(), sw.get<bf>(), T, f, st); }},
      {"swiglu.bwd", [&] { swiglu_backward(sw.get<bf>(), gu.get<bf>(), dgu.get<bf>(), T, f, st); }},
  };
  const Kernels& kernels = gpt ? gpt_kernels : llama_kernels;
  const int K = static_cast<int>(kernels.size());
  for (const auto& kn : kernels) res.kernels.push_back(kn.first);
  // Alone: one call between events, as the mix times them, at the full clock (the GPU idle before).
  TRAINSIM_CUDA(cudaStreamSynchronize(st));
  for (const auto& kn : kernels) res.alone_us.push_back(time_median_us(st, 2, 10, kn.second));
  res.load_alone_us = time_median_us(st, 2, 10, run_load);
  double group_us = 0;
  for (double t : res.alone_us) group_us += t;

  // Cycles are paced two ahead of the GPU: before cycle i is launched, cycle i - 2 has ended, and
  // its events are read. Each slot holds one event per call boundary.
  constexpr int kSlots = 3;
  std::vector<std::vector<cudaEvent_t>> slot(kSlots);
  auto make_events = [&](int n) {
    for (auto& s : slot) {
      for (cudaEvent_t e : s) cudaEventDestroy(e);
      s.assign(n, nullptr);
      for (cudaEvent_t& e : s) TRAINSIM_CUDA(cudaEventCreate(&e));
    }
  };
  for (double share : shares) {
    KernelMixPoint p;
    p.target_share = share;
    cycle_counts(share, res.load_alone_us, group_us, p.loads, p.groups);
    const int calls = p.loads + p.groups * K;
    make_events(calls + 1);
    std::vector<double> load_times;
    std::vector<std::vector<double>> kernel_times(K);
    double load_total = 0, all_total = 0;
    // Reads a finished cycle's events into the samples.
    auto collect = [&](const std::vector<cudaEvent_t>& ev) {
      for (int c = 0; c < calls; ++c) {
        float ms = 0;
        TRAINSIM_CUDA(cudaEventElapsedTime(&ms, ev[c], ev[c + 1]));
        const double us = 1000.0 * ms;
        all_total += us;
        if (c < p.loads) {
          load_times.push_back(us);
          load_total += us;
        } else {
          kernel_times[(c - p.loads) % K].push_back(us);
        }
      }
      ++p.cycles;
    };
    for (int phase = 0; phase < 2; ++phase) {
      const bool timed = phase == 1;
      const double until = wall_now_s() + (timed ? timed_s : settle_s);
      if (timed) p.wall_begin_s = wall_now_s();
      long i = 0;
      for (; wall_now_s() < until; ++i) {
        auto& ev = slot[i % kSlots];
        if (i >= kSlots - 1) {
          auto& done = slot[(i - (kSlots - 1)) % kSlots];
          TRAINSIM_CUDA(cudaEventSynchronize(done[calls]));
          if (timed) collect(done);
        }
        // Every boundary is recorded while timing; while settling only the cycle's end, for pacing.
        int e = 0;
        if (timed) TRAINSIM_CUDA(cudaEventRecord(ev[e], st));
        ++e;
        for (int c = 0; c < p.loads; ++c, ++e) {
          run_load();
          if (timed) TRAINSIM_CUDA(cudaEventRecord(ev[e], st));
        }
        for (int b = 0; b < p.groups; ++b)
          for (int kk = 0; kk < K; ++kk, ++e) {
            kernels[kk].second();
            if (timed || e == calls) TRAINSIM_CUDA(cudaEventRecord(ev[e], st));
          }
      }
      // The cycles still in flight.
      for (long j = std::max(0L, i - (kSlots - 1)); j < i; ++j) {
        TRAINSIM_CUDA(cudaEventSynchronize(slot[j % kSlots][calls]));
        if (timed) collect(slot[j % kSlots]);
      }
      if (timed) p.wall_end_s = wall_now_s();
    }
    p.load_share = all_total > 0 ? load_total / all_total : 0;
    p.load_us = median(load_times);
    for (int kk = 0; kk < K && p.groups > 0; ++kk) p.kernel_us.push_back(median(kernel_times[kk]));
    res.points.push_back(p);
  }
  for (auto& s : slot)
    for (cudaEvent_t e : s) cudaEventDestroy(e);
  cudaStreamDestroy(st);
  return res;
}

}  // namespace trainsim::gpu

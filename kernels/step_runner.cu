#include "step_runner.h"

#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "attention.h"
#include "cuda_compat.h"
#include "grad_comm.h"
#include "lt_matmul.h"
#include "runner_kernels.h"
#include "timing.h"

namespace trainsim::gpu {

namespace {

// Every device allocation of the runner goes through here, so the total is known.
class Arena {
 public:
  template <class T>
  T* take(size_t count) {
    bufs_.emplace_back(count * sizeof(T));
    total_ += count * sizeof(T);
    return bufs_.back().get<T>();
  }
  double total() const { return static_cast<double>(total_); }

 private:
  std::vector<DeviceBuffer> bufs_;
  size_t total_ = 0;
};

struct LayerParams {
  size_t ln1_g, ln1_b, wqkv, bqkv, wo, bo, ln2_g, ln2_b, w1, b1, w2, b2;  // offsets into the flat parameter array
};

// What one layer keeps for backward (Korthikanti et al.'s 34 s b h + 5 a s^2 b bytes).
struct LayerActs {
  bf16 *x = nullptr, *ln1 = nullptr, *q = nullptr, *k = nullptr, *v = nullptr, *ctx = nullptr, *xmid = nullptr,
       *ln2 = nullptr, *gin = nullptr, *gout = nullptr;
  unsigned char *mask_attn = nullptr, *mask_mlp = nullptr;
  float *mean1 = nullptr, *rstd1 = nullptr, *mean2 = nullptr, *rstd2 = nullptr;
  bf16 *p = nullptr, *pd = nullptr;  // attention probabilities and their dropout output
  unsigned char* pmask = nullptr;
};

}  // namespace

RunnerResult run_gpt_training(const RunnerConfig& c) {
  const int L = c.layers, h = c.hidden, a = c.heads, d = h / a, f = c.ffn, V = c.vocab, s = c.seq, bsz = c.micro_batch;
  const int T = bsz * s;
  const int dp = c.comm ? c.comm->size() : 1, replica = c.comm ? c.comm->rank() : 0;
  const size_t Th = static_cast<size_t>(T) * h, Tf = static_cast<size_t>(T) * f;
  const size_t S2 = static_cast<size_t>(bsz) * a * s * s;  // attention scores elements
  cudaStream_t st, comm_st;
  TRAINSIM_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  TRAINSIM_CUDA(cudaStreamCreateWithFlags(&comm_st, cudaStreamNonBlocking));
  cublasHandle_t cb;
  if (cublasCreate(&cb) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cublasCreate failed");
  cublasSetStream(cb, st);
  Arena arena;
  RunnerResult r;
  {
    LtMatmul mm(st);
    // Parameters: one flat array in each precision (bf16 compute copy, fp32 master, moments, grads).
    std::vector<LayerParams> lp(L);
    size_t n = 0;
    auto place = [&](size_t count) { const size_t o = n; n += count; return o; };
    const size_t wte = place(static_cast<size_t>(V) * h), wpe = place(static_cast<size_t>(s) * h);
    for (auto& p : lp) {
      p.ln1_g = place(h); p.ln1_b = place(h);
      p.wqkv = place(static_cast<size_t>(h) * 3 * h); p.bqkv = place(3 * h);
      p.wo = place(static_cast<size_t>(h) * h); p.bo = place(h);
      p.ln2_g = place(h); p.ln2_b = place(h);
      p.w1 = place(static_cast<size_t>(h) * f); p.b1 = place(f);
      p.w2 = place(static_cast<size_t>(f) * h); p.b2 = place(h);
    }
    const size_t lnf_g = place(h), lnf_b = place(h);
    // Gradient buckets, in the order backward completes them (see launch_bucket below): the layers
    // from the last, closing a bucket once it holds bucket_MB, then the rest with the embeddings.
    const size_t bucket_elems = std::max<size_t>(1, static_cast<size_t>(c.bucket_MB * 1e6 / 4));
    std::vector<std::pair<size_t, size_t>> bucket_ranges;
    {
      size_t pe = n;
      for (int l = L - 1; l >= 0; --l)
        if (pe - lp[l].ln1_g >= bucket_elems) { bucket_ranges.push_back({lp[l].ln1_g, pe}); pe = lp[l].ln1_g; }
      if (pe > 0) bucket_ranges.push_back({0, pe});
    }
    // ZeRO-1: this replica's share of each bucket (an equal block per replica; the few elements
    // left over are all-reduced and updated by every replica).
    const bool zero1 = c.zero == 1 && c.comm && dp > 1;
    struct Owned {
      size_t off, len;
      bool leftover;  // held and updated by every replica
    };
    std::vector<Owned> owned;
    size_t shard = n;
    if (zero1) {
      shard = 0;
      for (auto [b, e] : bucket_ranges) {
        const size_t sh = (e - b) / dp, rem = (e - b) - sh * dp;
        if (sh) owned.push_back({b + replica * sh, sh, false});
        if (rem) owned.push_back({b + dp * sh, rem, true});
      }
      for (const auto& o : owned) shard += o.len;
    }
    bf16* W = arena.take<bf16>(n);
    float* master = arena.take<float>(shard);
    float* mom = arena.take<float>(shard);
    float* var = arena.take<float>(shard);
    float* grad = arena.take<float>(n);
    const bool topk = c.topk_fraction > 0 && c.comm && dp > 1;
    float* residual = topk ? arena.take<float>(n) : nullptr;  // Top-K's unsent remainder
    if (topk) TRAINSIM_CUDA(cudaMemsetAsync(residual, 0, n * 4, st));
    // Initialisation: N(0, 0.02)-like uniform weights, LayerNorm gains 1 and biases 0 (into a
    // temporary full copy under ZeRO-1, whose owned slices become the master shard).
    DeviceBuffer init_full(zero1 ? n * 4 : 0);
    float* init = zero1 ? init_full.get<float>() : master;
    fill_random_f32(init, n, 1234, 0.02f * std::sqrt(3.0f), st);
    std::vector<float> ones(std::max(h, f), 1.0f), zeros(std::max(3 * h, f), 0.0f);
    auto set = [&](size_t off, const std::vector<float>& v, size_t count) {
      TRAINSIM_CUDA(cudaMemcpyAsync(init + off, v.data(), count * 4, cudaMemcpyHostToDevice, st));
    };
    for (auto& p : lp) {
      set(p.ln1_g, ones, h); set(p.ln1_b, zeros, h); set(p.ln2_g, ones, h); set(p.ln2_b, zeros, h);
      set(p.bqkv, zeros, 3 * h); set(p.bo, zeros, h); set(p.b1, zeros, f); set(p.b2, zeros, h);
    }
    set(lnf_g, ones, h); set(lnf_b, zeros, h);
    TRAINSIM_CUDA(cudaMemsetAsync(mom, 0, shard * 4, st));
    TRAINSIM_CUDA(cudaMemsetAsync(var, 0, shard * 4, st));
    cast_to_bf16(init, W, n, st);
    if (zero1) {
      size_t so = 0;
      for (const auto& o : owned) {
        TRAINSIM_CUDA(cudaMemcpyAsync(master + so, init + o.off, o.len * 4, cudaMemcpyDeviceToDevice, st));
        so += o.len;
      }
      TRAINSIM_CUDA(cudaStreamSynchronize(st));
      init_full = DeviceBuffer();
    }

    // Activations kept for backward, per layer (or only the layer inputs under full recompute).
    const bool keep_scores = c.recompute == 0, keep_layers = c.recompute != 2;
    std::vector<LayerActs> acts(L + 1);
    auto alloc_layer = [&](LayerActs& x, bool scores) {
      x.ln1 = arena.take<bf16>(Th); x.q = arena.take<bf16>(Th); x.k = arena.take<bf16>(Th); x.v = arena.take<bf16>(Th);
      x.ctx = arena.take<bf16>(Th); x.xmid = arena.take<bf16>(Th); x.ln2 = arena.take<bf16>(Th);
      x.gin = arena.take<bf16>(Tf); x.gout = arena.take<bf16>(Tf);
      x.mask_attn = arena.take<unsigned char>(Th); x.mask_mlp = arena.take<unsigned char>(Th);
      x.mean1 = arena.take<float>(T); x.rstd1 = arena.take<float>(T); x.mean2 = arena.take<float>(T); x.rstd2 = arena.take<float>(T);
      if (scores) { x.p = arena.take<bf16>(S2); x.pd = arena.take<bf16>(S2); x.pmask = arena.take<unsigned char>(S2); }
    };
    for (int l = 0; l <= L; ++l) acts[l].x = arena.take<bf16>(Th);  // layer inputs (acts[L].x: final norm input)
    for (int l = 0; l < L; ++l)
      if (keep_layers) alloc_layer(acts[l], keep_scores);
    LayerActs work;  // one layer's working set for recomputation
    if (!keep_layers) alloc_layer(work, true);
    bf16 *sp = nullptr, *spd = nullptr;
    unsigned char* spmask = nullptr;
    if (!keep_scores && keep_layers) { sp = arena.take<bf16>(S2); spd = arena.take<bf16>(S2); spmask = arena.take<unsigned char>(S2); }
    unsigned char* emb_mask = arena.take<unsigned char>(Th);
    bf16* lnf = arena.take<bf16>(Th);
    float *meanf = arena.take<float>(T), *rstdf = arena.take<float>(T);
    bf16* logits = arena.take<bf16>(static_cast<size_t>(T) * V);
    float* logits32 = arena.take<float>(static_cast<size_t>(T) * V);
    // Scratch: GEMM outputs before their element-wise epilogue, and the gradients of one layer.
    bf16* s_wide = arena.take<bf16>(std::max(Th * 3, Tf));  // qkv_raw, fc1_raw; dqkv
    bf16* s_h = arena.take<bf16>(Th);                       // attn / fc2 output before bias-dropout-residual
    bf16 *dx = arena.take<bf16>(Th), *dtmp = arena.take<bf16>(Th), *dln = arena.take<bf16>(Th);
    bf16 *dq = arena.take<bf16>(Th), *dk = arena.take<bf16>(Th), *dv = arena.take<bf16>(Th), *dctx = arena.take<bf16>(Th);
    bf16* dff = arena.take<bf16>(Tf);
    bf16* dS = arena.take<bf16>(S2);
    int* tokens = arena.take<int>(T);
    float* loss = arena.take<float>(1);
    {
      std::vector<int> tok(T);
      for (int i = 0; i < T; ++i) tok[i] = static_cast<int>((1103515245u * static_cast<unsigned>(i) + 12345u) % static_cast<unsigned>(V));
      TRAINSIM_CUDA(cudaMemcpyAsync(tokens, tok.data(), T * 4, cudaMemcpyHostToDevice, st));
      TRAINSIM_CUDA(cudaStreamSynchronize(st));
    }
    auto Wp = [&](size_t off) { return W + off; };
    auto Gp = [&](size_t off) { return grad + off; };
    const AttentionShape shape{bsz * a, s, d};
    unsigned seed_base = 1;

    // Forward of layer l from acts[l].x into acts[l+1].x, writing the kept tensors into `x`.
    auto layer_forward = [&](int l, LayerActs& x, bf16* p, bf16* pd, unsigned char* pm, unsigned seed) {
      const LayerParams& P = lp[l];
      layernorm_forward(acts[l].x, Wp(P.ln1_g), Wp(P.ln1_b), x.ln1, x.mean1, x.rstd1, T, h, st);
      mm.gemm(false, false, T, 3 * h, h, x.ln1, Wp(P.wqkv), s_wide, false);
      split_heads(s_wide, Wp(P.bqkv), x.q, x.k, x.v, bsz, s, a, d, st);
      attention_forward(cb, shape, AttentionBuffers{x.q, x.k, x.v, p, pd, pm, dctx}, seed * 4 + 1, kDropout, st);
      heads_to_rows(dctx, x.ctx, bsz, s, a, d, st);
      mm.gemm(false, false, T, h, h, x.ctx, Wp(P.wo), s_h, false);
      bias_dropout_residual(s_h, Wp(P.bo), acts[l].x, x.xmid, x.mask_attn, T, h, seed * 4 + 2, st);
      layernorm_forward(x.xmid, Wp(P.ln2_g), Wp(P.ln2_b), x.ln2, x.mean2, x.rstd2, T, h, st);
      mm.gemm(false, false, T, f, h, x.ln2, Wp(P.w1), s_wide, false);
      bias_gelu(s_wide, Wp(P.b1), x.gin, x.gout, T, f, st);
      mm.gemm(false, false, T, h, f, x.gout, Wp(P.w2), s_h, false);
      bias_dropout_residual(s_h, Wp(P.b2), x.xmid, acts[l + 1].x, x.mask_mlp, T, h, seed * 4 + 3, st);
    };
    // Recomputes only the attention core of layer l (selective recompute).
    auto attention_core = [&](LayerActs& x, bf16* p, bf16* pd, unsigned char* pm, unsigned seed) {
      attention_forward(cb, shape, AttentionBuffers{x.q, x.k, x.v, p, pd, pm, dq}, seed * 4 + 1, kDropout, st);
    };
    // Backward of layer l: dx holds d(acts[l+1].x) on entry and d(acts[l].x) on exit.
    auto layer_backward = [&](int l, LayerActs& x, bf16* p, bf16* pd, unsigned char* pm) {
      const LayerParams& P = lp[l];
      // MLP: out = xmid + drop(gout W2 + b2)
      dropout_backward(dx, x.mask_mlp, dtmp, Th, st);
      column_sum(dtmp, Gp(P.b2), T, h, st);
      mm.gemm(true, false, f, h, T, x.gout, dtmp, Gp(P.w2), true, 1.0f, 1.0f);
      mm.gemm(false, true, T, f, h, dtmp, Wp(P.w2), dff, false);
      gelu_backward(dff, x.gin, dff, Tf, st);
      column_sum(dff, Gp(P.b1), T, f, st);
      mm.gemm(true, false, h, f, T, x.ln2, dff, Gp(P.w1), true, 1.0f, 1.0f);
      mm.gemm(false, true, T, h, f, dff, Wp(P.w1), dln, false);
      layernorm_backward(dln, x.xmid, Wp(P.ln2_g), x.mean2, x.rstd2, dtmp, Gp(P.ln2_g), Gp(P.ln2_b), T, h, st);
      add_inplace(dx, dtmp, Th, st);  // dx = d(xmid)
      // Attention: xmid = x + drop(ctx Wo + bo)
      dropout_backward(dx, x.mask_attn, dtmp, Th, st);
      column_sum(dtmp, Gp(P.bo), T, h, st);
      mm.gemm(true, false, h, h, T, x.ctx, dtmp, Gp(P.wo), true, 1.0f, 1.0f);
      mm.gemm(false, true, T, h, h, dtmp, Wp(P.wo), dln, false);
      rows_to_heads(dln, dctx, bsz, s, a, d, st);
      attention_backward(cb, shape, AttentionBuffers{x.q, x.k, x.v, p, pd, pm, nullptr}, dctx, dS, dq, dk, dv, kDropout, st);
      merge_qkv_grad(dq, dk, dv, s_wide, bsz, s, a, d, st);
      column_sum(s_wide, Gp(P.bqkv), T, 3 * h, st);
      mm.gemm(true, false, h, 3 * h, T, x.ln1, s_wide, Gp(P.wqkv), true, 1.0f, 1.0f);
      mm.gemm(false, true, T, h, 3 * h, s_wide, Wp(P.wqkv), dln, false);
      layernorm_backward(dln, acts[l].x, Wp(P.ln1_g), x.mean1, x.rstd1, dtmp, Gp(P.ln1_g), Gp(P.ln1_b), T, h, st);
      add_inplace(dx, dtmp, Th, st);
    };

    // Data-parallel buckets: gradients of [pending_begin, pending_end) are final and not yet summed.
    // The flat array holds wte, wpe, layers 0..L-1, final norm: backward finishes the final norm and
    // layer L-1 first, the embeddings last, so every bucket is one contiguous range.
    size_t pending_begin = n, pending_end = n;
    std::vector<cudaEvent_t> bucket_events;
    Int8AllReduce int8;
    TopKAllGather topk_ag;
    int buckets = 0;
    auto launch_bucket = [&](bool force) {
      if (!c.comm || pending_begin >= pending_end) return;
      if (!force && pending_end - pending_begin < bucket_elems) return;
      if (buckets >= static_cast<int>(bucket_events.size())) {
        bucket_events.emplace_back();
        TRAINSIM_CUDA(cudaEventCreateWithFlags(&bucket_events.back(), cudaEventDisableTiming));
      }
      TRAINSIM_CUDA(cudaEventRecord(bucket_events[buckets], st));
      TRAINSIM_CUDA(cudaStreamWaitEvent(comm_st, bucket_events[buckets], 0));
      if (buckets >= static_cast<int>(bucket_ranges.size()) || bucket_ranges[buckets] != std::make_pair(pending_begin, pending_end))
        throw std::logic_error("step runner: gradient bucket differs from the planned layout");
      const size_t len = pending_end - pending_begin;
      if (zero1) {
        const size_t sh = len / dp, rem = len - sh * dp;
        if (sh) c.comm->reduce_scatter_sum(grad + pending_begin, grad + pending_begin + replica * sh, sh, comm_st);
        if (rem) c.comm->all_reduce_sum(grad + pending_begin + dp * sh, rem, comm_st);
      } else if (topk) {
        topk_ag.run(*c.comm, grad + pending_begin, residual + pending_begin, len, c.topk_fraction, comm_st);
      } else if (c.int8_compression) {
        int8.run(*c.comm, grad + pending_begin, len, comm_st);
      } else {
        c.comm->all_reduce_sum(grad + pending_begin, len, comm_st);
      }
      ++buckets;
      pending_end = pending_begin;
    };

    auto micro_step = [&](unsigned seed, bool last) {
      embed_forward(tokens, Wp(wte), Wp(wpe), acts[0].x, emb_mask, T, h, s, seed * 1000, st);
      for (int l = 0; l < L; ++l) {
        LayerActs& x = keep_layers ? acts[l] : work;
        bf16* p = keep_scores ? x.p : keep_layers ? sp : work.p;
        bf16* pd = keep_scores ? x.pd : keep_layers ? spd : work.pd;
        unsigned char* pm = keep_scores ? x.pmask : keep_layers ? spmask : work.pmask;
        layer_forward(l, x, p, pd, pm, seed * 1000 + l + 1);
      }
      layernorm_forward(acts[L].x, Wp(lnf_g), Wp(lnf_b), lnf, meanf, rstdf, T, h, st);
      mm.gemm(false, true, T, V, h, lnf, Wp(wte), logits, false);
      // Mean over every token of the step, across replicas too: the summed gradients are the mean's.
      cross_entropy(logits, logits32, tokens, loss, T, V, 1.0f / (static_cast<float>(T) * c.microbatches * dp), st);
      // Backward through the head (logits now hold d(logits)).
      mm.gemm(true, false, V, h, T, logits, lnf, Gp(wte), true, 1.0f, 1.0f);
      mm.gemm(false, false, T, h, V, logits, Wp(wte), dln, false);
      layernorm_backward(dln, acts[L].x, Wp(lnf_g), meanf, rstdf, dx, Gp(lnf_g), Gp(lnf_b), T, h, st);
      for (int l = L - 1; l >= 0; --l) {
        const unsigned seed_l = seed * 1000 + l + 1;
        if (c.recompute == 2) {
          layer_forward(l, work, work.p, work.pd, work.pmask, seed_l);
          layer_backward(l, work, work.p, work.pd, work.pmask);
        } else if (c.recompute == 1) {
          attention_core(acts[l], sp, spd, spmask, seed_l);
          layer_backward(l, acts[l], sp, spd, spmask);
        } else {
          layer_backward(l, acts[l], acts[l].p, acts[l].pd, acts[l].pmask);
        }
        if (last) {
          pending_begin = lp[l].ln1_g;
          launch_bucket(false);
        }
      }
      embed_backward(dx, emb_mask, tokens, Gp(wte), Gp(wpe), T, h, s, st);
      if (last) {
        pending_begin = 0;
        launch_bucket(true);
      }
    };

    std::vector<float> step_ms, opt_ms;
    cudaEvent_t e0, e1, e2, comm_done;
    TRAINSIM_CUDA(cudaEventCreate(&e0));
    TRAINSIM_CUDA(cudaEventCreate(&e1));
    TRAINSIM_CUDA(cudaEventCreate(&e2));
    TRAINSIM_CUDA(cudaEventCreateWithFlags(&comm_done, cudaEventDisableTiming));
    const int total = c.warmup_steps + c.timed_steps;
    for (int step = 0; step < total; ++step) {
      TRAINSIM_CUDA(cudaMemsetAsync(loss, 0, 4, st));
      TRAINSIM_CUDA(cudaEventRecord(e0, st));
      // Replica r runs micro-batches r*m .. r*m+m-1 of the step's dp*m (dropout seeds by that index).
      for (int mb = 0; mb < c.microbatches; ++mb) {
        pending_begin = pending_end = n;
        buckets = 0;
        micro_step(seed_base + static_cast<unsigned>(replica * c.microbatches + mb), mb == c.microbatches - 1);
      }
      seed_base += static_cast<unsigned>(dp * c.microbatches);
      if (c.comm) {
        // The optimizer waits for the last bucket.
        TRAINSIM_CUDA(cudaEventRecord(comm_done, comm_st));
        TRAINSIM_CUDA(cudaStreamWaitEvent(st, comm_done, 0));
      }
      r.buckets = buckets;
      // The first (warm-up) step's gradient, after the replicas' sum: what the update will use.
      // Under ZeRO-1 only this replica's shares are summed: its part of the squared norm (shares left
      // over and held by every replica count 1/dp here), which the replicas add up.
      if (step == 0 && !zero1) r.first_grad_sq = checksum(grad, n, st, true);
      if (step == 0 && zero1) {
        r.first_grad_sq = 0;
        for (const auto& o : owned) r.first_grad_sq += checksum(grad + o.off, o.len, st, true) / (o.leftover ? dp : 1);
      }
      TRAINSIM_CUDA(cudaEventRecord(e1, st));
      if (zero1) {
        // Adam on this replica's share, then every replica's updated bf16 share to all.
        size_t so = 0;
        for (const auto& o : owned) {
          adam_update(master + so, mom + so, var + so, grad + o.off, W + o.off, o.len, 1e-4f, st);
          so += o.len;
        }
        for (auto [b, e] : bucket_ranges) {
          const size_t sh = (e - b) / dp;
          if (sh) c.comm->all_gather(W + b + replica * sh, W + b, sh * sizeof(bf16), st);
        }
      } else {
        adam_update(master, mom, var, grad, W, n, 1e-4f, st);
      }
      TRAINSIM_CUDA(cudaMemsetAsync(grad, 0, n * 4, st));
      TRAINSIM_CUDA(cudaEventRecord(e2, st));
      TRAINSIM_CUDA(cudaEventSynchronize(e2));
      float ms = 0, ms_opt = 0;
      TRAINSIM_CUDA(cudaEventElapsedTime(&ms, e0, e2));
      TRAINSIM_CUDA(cudaEventElapsedTime(&ms_opt, e1, e2));
      float host_loss = 0;
      TRAINSIM_CUDA(cudaMemcpy(&host_loss, loss, 4, cudaMemcpyDeviceToHost));
      if (step == 0) r.first_loss = host_loss;
      r.last_loss = host_loss;
      if (step >= c.warmup_steps) {
        step_ms.push_back(ms);
        opt_ms.push_back(ms_opt);
      }
    }
    r.param_checksum = checksum(W, n, st);
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
    r.finite = std::isfinite(r.first_loss) && std::isfinite(r.last_loss);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaEventDestroy(e2);
    cudaEventDestroy(comm_done);
    for (auto ev : bucket_events) cudaEventDestroy(ev);
  }
  cublasDestroy(cb);
  cudaStreamDestroy(st);
  cudaStreamDestroy(comm_st);
  return r;
}

}  // namespace trainsim::gpu

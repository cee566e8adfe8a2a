#include "step_run.h"

#include <algorithm>
#include <cmath>

#include "runner_kernels.h"

namespace trainsim::gpu::detail {

std::array<float, EventTimer::kClasses> EventTimer::collect() {
  std::array<float, kClasses> sums{};
  std::fill(tag_sums_.begin(), tag_sums_.end(), 0.0f);
  std::fill(tag_counts_.begin(), tag_counts_.end(), 0);
  for (std::size_t i = 0; i < used_; ++i) {
    float ms = 0;
    TRAINSIM_CUDA(cudaEventElapsedTime(&ms, ev_[2 * i], ev_[2 * i + 1]));
    sums[cls_[i]] += ms;
    if (tag_[i] >= 0) {
      if (static_cast<std::size_t>(tag_[i]) >= tag_sums_.size()) {
        tag_sums_.resize(tag_[i] + 1, 0.0f);
        tag_counts_.resize(tag_[i] + 1, 0);
      }
      tag_sums_[tag_[i]] += ms;
      ++tag_counts_[tag_[i]];
    }
  }
  used_ = 0;
  return sums;
}

RunStreams::RunStreams() {
  TRAINSIM_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  TRAINSIM_CUDA(cudaStreamCreateWithFlags(&comm_st, cudaStreamNonBlocking));
  if (cublasCreate(&cb) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cublasCreate failed");
  cublasSetStream(cb, st);
}

RunStreams::~RunStreams() {
  cublasDestroy(cb);
  cudaStreamDestroy(st);
  cudaStreamDestroy(comm_st);
}

StepRun::StepRun(const RunnerConfig& config) : c(config) {
  set_shapes();
  streams = std::make_unique<RunStreams>();
  st = streams->st, comm_st = streams->comm_st, cb = streams->cb;
  mm = std::make_unique<LtMatmul>(st);
  // Parameters: one flat array in each precision (bf16 compute copy, fp32 master, moments, grads),
  // this rank's shard of this stage's tensors. ZeRO (with replicas): stage 1 keeps only the owned
  // fp32 master weights and Adam moments; stage 2 also only the owned fp32 gradients, every
  // micro-batch's bucket reduce-scattered from a working buffer into them; stage 3 also only the
  // owned bf16 weights, each bucket's weights all-gathered before use (the next one prefetched)
  // and dropped after.
  zs = c.comm && dp > 1 ? c.zero : 0;
  ParamShape ps;
  ps.hidden = h, ps.seq = s, ps.heads_width = hl, ps.mlp_width = fl, ps.qkv_width = qkv_w, ps.vocab_rows = Vl, ps.layers = L;
  ps.llama = llama, ps.tied = tied, ps.first = first, ps.last = last;
  ps.bucket_MB = c.bucket_MB, ps.zero = zs, ps.replicas = dp, ps.replica = replica;
  layout = plan_params(ps);
  n = layout.n, wte = layout.wte, wpe = layout.wpe, lnf_g = layout.lnf_g, lnf_b = layout.lnf_b, head = layout.head;
  has_wte = layout.has_wte;
  bucket_elems = layout.bucket_elems;
  nb = static_cast<int>(layout.bucket_ranges.size());
  shard = layout.shard;
  if (c.repeat_gemm < 1 || c.repeat_attention < 1)
    throw std::invalid_argument("step runner: GEMM and attention calls run at least once each (repeat_gemm, repeat_attention)");
  if (zs >= 2 && pp > 1) throw std::invalid_argument("step runner: ZeRO-2/3 with pipeline stages is not supported");
  if (zs >= 1 && (c.int8_compression || c.topk_fraction > 0))
    throw std::invalid_argument("step runner: ZeRO with gradient compression is not supported");
  W = arena.take<bf16>(zs >= 3 ? shard : n);
  master = arena.take<float>(shard);
  mom = arena.take<float>(shard);
  var = arena.take<float>(shard);
  grad = arena.take<float>(zs >= 2 ? shard : n);
  sums = arena.take<double>(kChecksumPartials);
  topk = c.topk_fraction > 0 && c.comm && dp > 1;
  residual = topk ? arena.take<float>(n) : nullptr;
  if (topk) TRAINSIM_CUDA(cudaMemsetAsync(residual, 0, n * 4, st));
  size_t other_len = 0, max_sh = 0;
  for (int b = 0; b + 1 < nb; ++b) other_len = std::max(other_len, layout.bucket_ranges[b].second - layout.bucket_ranges[b].first);
  for (const auto& B : layout.buckets) max_sh = std::max(max_sh, B.sh);
  const size_t final_len = layout.bucket_ranges.back().second - layout.bucket_ranges.back().first;
  if (zs >= 2) {
    if (nb > 1) gslot[0] = arena.take<float>(other_len), gslot[1] = arena.take<float>(other_len);
    gslot[2] = arena.take<float>(final_len);
    rs_out = arena.take<float>(std::max<size_t>(max_sh, 1));
  }
  if (zs >= 3) {
    if (nb > 1) wslot[0] = arena.take<bf16>(other_len), wslot[1] = arena.take<bf16>(other_len);
    wslot[2] = arena.take<bf16>(final_len);
  }
  initialise_parameters();
  allocate_activations();
  reserve_compression_buffers(std::max(other_len, final_len));
  w_at.assign(nb, nullptr);
  g_at.assign(nb, nullptr);
  shape = AttentionShape{bsz * al, s, d};
  if (tp > 1) { shape.heads = al; shape.heads_total = a; shape.head_offset = tr * al; }
  shape.group = al / kvhl;
  dropout = llama ? 0.0f : kDropout;
  loss_scale = 1.0f / (static_cast<float>(T) * m * dp);
  for (auto* e : {&gfree[0], &gfree[1], &gfree[2], &wready[0], &wready[1], &wready[2], &wfree})
    TRAINSIM_CUDA(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
  act_bytes = Th * sizeof(bf16);
  exchanges = pipeline_exchanges(passes, pp, vpp, stage, c.warmup);
}

// The compression buffers for the largest bucket, which the step would otherwise allocate at its
// first bucket: allocated while the run is set up, before its first collective, so that the ranks'
// agreement covers them. (The GEMM autotuner takes no device memory of its own: lt_matmul.cu.)
void StepRun::reserve_compression_buffers(size_t largest_bucket) {
  if (!c.comm || dp <= 1) return;
  if (topk) topk_ag.reserve(largest_bucket, dp, c.topk_fraction);
  else if (c.int8_compression && zs == 0) int8.reserve(largest_bucket, dp);
}

StepRun::~StepRun() {
  for (auto ev : bucket_events) cudaEventDestroy(ev);
  for (auto ev : gfree) cudaEventDestroy(ev);
  for (auto ev : wready) cudaEventDestroy(ev);
  if (wfree) cudaEventDestroy(wfree);
}

void StepRun::set_shapes() {
  h = c.hidden, a = c.heads, d = h / a, f = c.ffn, V = c.vocab, s = c.seq, bsz = c.micro_batch;
  llama = c.llama, tied = c.tied_embeddings;
  kvh = c.kv_heads > 0 ? c.kv_heads : a;
  T = bsz * s;
  dp = c.comm ? c.comm->size() : 1, replica = c.comm ? c.comm->rank() : 0;
  tp = c.tp_comm ? c.tp_comm->size() : 1, tr = c.tp_comm ? c.tp_comm->rank() : 0;
  pp = c.pp_comm ? c.pp_comm->size() : 1, stage = c.pp_comm ? c.pp_comm->rank() : 0;
  first = stage == 0, last = stage == pp - 1;
  chunk_layers = c.chunk_layers;
  if (chunk_layers.empty())
    chunk_layers.push_back(c.stage_layers > 0 ? std::make_pair(c.stage_first_layer, c.stage_layers) : std::make_pair(0, c.layers));
  vpp = static_cast<int>(chunk_layers.size());
  chunk_begin = {0};
  glob.clear();
  for (auto [g0, count] : chunk_layers) {
    for (int i = 0; i < count; ++i) glob.push_back(g0 + i);
    chunk_begin.push_back(chunk_begin.back() + count);
  }
  L = static_cast<int>(glob.size());
  if (a % tp != 0 || f % tp != 0 || kvh % tp != 0 || a % kvh != 0)
    throw std::invalid_argument("step runner: tensor parallelism " + std::to_string(tp) +
                                " must divide the heads, the K/V heads and the MLP width, and the K/V heads the heads");
  if (!llama && kvh != a) throw std::invalid_argument("step runner: gpt layers have as many K/V heads as heads");
  if (pp > 1 && tied && !c.embed_comm && (first || last))
    throw std::invalid_argument("step runner: a pipeline's first and last stage need the tied embedding's group");
  al = a / tp, hl = al * d, fl = f / tp;
  kvhl = kvh / tp, kvl = kvhl * d;
  qkv_w = llama ? hl + 2 * kvl : 3 * hl;
  fc1_w = llama ? 2 * fl : fl;  // llama: gate and up
  v0 = static_cast<int>(static_cast<long long>(V) * tr / tp);
  Vl = static_cast<int>(static_cast<long long>(V) * (tr + 1) / tp) - v0;
  m = c.microbatches;
  // The passes this stage runs, in order: given by the pipeline's schedule, or on one stage each
  // micro-batch's forward and backward in turn.
  passes = c.passes;
  if (passes.empty()) {
    if (pp > 1) throw std::invalid_argument("step runner: a pipeline stage needs its schedule (RunnerConfig::passes)");
    for (int i = 0; i < m; ++i) passes.push_back({true, i, 0}), passes.push_back({false, i, 0});
  }
  // Activation slots, shared by the chunks (each sized for the largest): the most passes whose
  // forward has run and backward not yet.
  slots = 0;
  {
    int live = 0;
    std::vector<std::vector<int>> state(vpp, std::vector<int>(m, 0));  // 0 none, 1 forward run, 2 backward run
    for (const auto& p : passes) {
      if (p.chunk < 0 || p.chunk >= vpp || p.microbatch < 0 || p.microbatch >= m || state[p.chunk][p.microbatch] != (p.forward ? 0 : 1))
        throw std::invalid_argument("step runner: the schedule runs a pass out of order or twice");
      state[p.chunk][p.microbatch] = p.forward ? 1 : 2;
      live += p.forward ? 1 : -1;
      slots = std::max(slots, live);
    }
    for (const auto& cs : state)
      for (int x : cs)
        if (x != 2) throw std::invalid_argument("step runner: the schedule leaves a pass out");
  }
  Th = static_cast<size_t>(T) * h, Thl = static_cast<size_t>(T) * hl, Tfl = static_cast<size_t>(T) * fl;
  Tkvl = static_cast<size_t>(T) * kvl;
  S2 = static_cast<size_t>(bsz) * al * s * s;  // attention scores elements
}

// N(0, 0.02)-like uniform weights by their index in the whole model, so that any layout starts
// from one GPU's weights; LayerNorm gains 1 and biases 0 (into a temporary full copy under ZeRO,
// whose owned slices become the master shard).
void StepRun::initialise_parameters() {
  // Where each tensor starts in the whole model's flat array (one GPU's layout).
  const size_t gh = h, gf = f, gkv = static_cast<size_t>(kvh) * d;
  const size_t g_layer = llama ? 2 * gh + gh * (gh + 2 * gkv) + gh * gh + 3 * gh * gf
                               : 4 * gh + 3 * gh * gh + 3 * gh + gh * gh + gh + gh * gf + gf + gf * gh + gh;
  const size_t g_layers = static_cast<size_t>(V) * gh + (llama ? 0 : static_cast<size_t>(s) * gh);
  const size_t g_head = g_layers + static_cast<size_t>(c.layers) * g_layer + (llama ? gh : 2 * gh);
  DeviceBuffer init_full(zs >= 1 ? n * 4 : 0);
  float* init = zs >= 1 ? init_full.get<float>() : master;
  {
    const float scale = 0.02f * std::sqrt(3.0f);
    auto fill = [&](size_t dst, size_t dst_stride, size_t rows, size_t cols, size_t src, size_t src_stride) {
      fill_random_slice(init + dst, dst_stride, rows, cols, src, src_stride, 1234, scale, st);
    };
    if (wte != kNoParam) fill(wte, h, Vl, h, static_cast<size_t>(v0) * h, h);
    if (head != kNoParam && head != wte) fill(head, h, Vl, h, g_head + static_cast<size_t>(v0) * h, h);
    if (wpe != kNoParam) fill(wpe, h, s, h, static_cast<size_t>(V) * h, h);
    for (int l = 0; l < L; ++l) {
      const LayerParams& p = lp[l];
      const size_t g = g_layers + static_cast<size_t>(glob[l]) * g_layer;
      if (llama) {
        const size_t qw = gh + 2 * gkv;  // [h, h + 2kv]: Q, K, V side by side
        const size_t g_wqkv = g + gh, g_wo = g_wqkv + gh * qw, g_w1 = g_wo + gh * gh + gh, g_w2 = g_w1 + 2 * gh * gf;
        const size_t qkw = static_cast<size_t>(qkv_w);
        fill(p.wqkv, qkw, h, hl, g_wqkv + static_cast<size_t>(tr) * hl, qw);                      // this rank's Q heads
        fill(p.wqkv + hl, qkw, h, kvl, g_wqkv + gh + static_cast<size_t>(tr) * kvl, qw);          // its K heads
        fill(p.wqkv + hl + kvl, qkw, h, kvl, g_wqkv + gh + gkv + static_cast<size_t>(tr) * kvl, qw);  // its V heads
        fill(p.wo, h, hl, h, g_wo + static_cast<size_t>(tr) * hl * gh, h);                         // rows of [h, h]
        fill(p.w1, 2 * static_cast<size_t>(fl), h, fl, g_w1 + static_cast<size_t>(tr) * fl, 2 * gf);        // gate columns
        fill(p.w1 + fl, 2 * static_cast<size_t>(fl), h, fl, g_w1 + gf + static_cast<size_t>(tr) * fl, 2 * gf);  // up columns
        fill(p.w2, h, fl, h, g_w2 + static_cast<size_t>(tr) * fl * gh, h);                         // rows of [f, h]
      } else {
        const size_t g_wqkv = g + 2 * gh, g_wo = g_wqkv + 3 * gh * gh + 3 * gh, g_w1 = g_wo + gh * gh + 3 * gh, g_w2 = g_w1 + gh * gf + gf;
        for (int j = 0; j < 3; ++j)  // this rank's heads of Q, K and V: columns of [h, 3h]
          fill(p.wqkv + static_cast<size_t>(j) * hl, 3 * static_cast<size_t>(hl), h, hl, g_wqkv + j * gh + static_cast<size_t>(tr) * hl, 3 * gh);
        fill(p.wo, h, hl, h, g_wo + static_cast<size_t>(tr) * hl * gh, h);      // rows of [h, h]
        fill(p.w1, fl, h, fl, g_w1 + static_cast<size_t>(tr) * fl, gf);         // columns of [h, f]
        fill(p.w2, h, fl, h, g_w2 + static_cast<size_t>(tr) * fl * gh, h);      // rows of [f, h]
      }
    }
  }
  std::vector<float> ones(std::max(h, f), 1.0f), zeros(std::max(3 * h, f), 0.0f);
  auto set = [&](size_t off, const std::vector<float>& v, size_t count) {
    TRAINSIM_CUDA(cudaMemcpyAsync(init + off, v.data(), count * 4, cudaMemcpyHostToDevice, st));
  };
  for (auto& p : lp) {
    set(p.ln1_g, ones, h);
    set(p.ln2_g, ones, h);
    if (llama) continue;
    set(p.ln1_b, zeros, h); set(p.ln2_b, zeros, h);
    set(p.bqkv, zeros, 3 * hl); set(p.bo, zeros, h); set(p.b1, zeros, fl); set(p.b2, zeros, h);
  }
  if (last) set(lnf_g, ones, h);
  if (lnf_b != kNoParam) set(lnf_b, zeros, h);
  TRAINSIM_CUDA(cudaMemsetAsync(mom, 0, shard * 4, st));
  TRAINSIM_CUDA(cudaMemsetAsync(var, 0, shard * 4, st));
  if (zs < 3) cast_to_bf16(init, W, n, st);
  if (zs >= 1) {
    size_t so = 0;
    for (const auto& o : layout.owned) {
      TRAINSIM_CUDA(cudaMemcpyAsync(master + so, init + o.off, o.len * 4, cudaMemcpyDeviceToDevice, st));
      if (zs >= 3) cast_to_bf16(init + o.off, W + so, o.len, st);
      so += o.len;
    }
    TRAINSIM_CUDA(cudaStreamSynchronize(st));
    init_full = DeviceBuffer();
  }
  TRAINSIM_CUDA(cudaStreamSynchronize(st));
}

// Activations kept for backward, per in-flight micro-batch and layer (or only the layer inputs
// under full recompute), the head's state, and the scratch of one layer's forward and backward.
void StepRun::allocate_activations() {
  // Activations kept for backward, per in-flight micro-batch and layer (or only the layer inputs
  // under full recompute).
  keep_scores = c.recompute == 0, keep_layers = c.recompute != 2;
  max_chunk = 0;
  for (auto [g0, count] : chunk_layers) max_chunk = std::max(max_chunk, count);
  acts.assign(slots, std::vector<LayerActs>(max_chunk + 1));
  for (auto& slot : acts) {
    for (int j = 0; j <= max_chunk; ++j) slot[j].x = arena.take<bf16>(Th);
    for (int j = 0; j < max_chunk; ++j)
      if (keep_layers) alloc_layer(slot[j], keep_scores);
  }
  if (!keep_layers) alloc_layer(work, true);
  if (!keep_scores && keep_layers) {
    sp = arena.take<bf16>(S2);
    if (!llama) { spd = arena.take<bf16>(S2); spmask = arena.take<unsigned char>(S2); }
  }
  emb_mask.assign(first && !llama ? slots : 0, nullptr);
  for (auto& em : emb_mask) em = arena.take<unsigned char>(Th);
  // The head's state for each micro-batch between its forward and backward: one where the last
  // chunk's backward follows its forward at once (1F1B, the interleaved steady state), more where
  // forwards run ahead.
  if (last) {
    int live = 0, most = 0;
    for (const auto& p : passes)
      if (p.chunk == vpp - 1) most = std::max(most, live += p.forward ? 1 : -1);
    head_states.resize(most);
    for (auto& hs : head_states) {
      hs.lnf = arena.take<bf16>(Th);
      if (!llama) hs.meanf = arena.take<float>(T);
      hs.rstdf = arena.take<float>(T);
      hs.logits = arena.take<bf16>(static_cast<size_t>(T) * Vl);
      hs.logits32 = arena.take<float>(static_cast<size_t>(T) * Vl);
    }
  }
  ce_stats = last && tp > 1 ? arena.take<float>(static_cast<size_t>(T) * 3 * (tp + 1)) : nullptr;
  s_wide = arena.take<bf16>(std::max(static_cast<size_t>(T) * qkv_w, static_cast<size_t>(T) * fc1_w));
  s_h = arena.take<bf16>(Th);
  dx_buf[0] = arena.take<bf16>(Th);
  dx_buf[1] = arena.take<bf16>(Th);
  dx = dx_buf[0];
  dtmp = arena.take<bf16>(Th), dln = arena.take<bf16>(Th);
  dq = arena.take<bf16>(Thl), dk = arena.take<bf16>(llama ? Tkvl : Thl), dv = arena.take<bf16>(llama ? Tkvl : Thl);
  dctx = arena.take<bf16>(Thl);
  dff = arena.take<bf16>(Tfl);
  dS = arena.take<bf16>(S2);
  tokens = arena.take<int>(T);
  loss = arena.take<float>(1);
  {
    std::vector<int> tok(T);
    for (int i = 0; i < T; ++i) tok[i] = static_cast<int>((1103515245u * static_cast<unsigned>(i) + 12345u) % static_cast<unsigned>(V));
    TRAINSIM_CUDA(cudaMemcpyAsync(tokens, tok.data(), T * 4, cudaMemcpyHostToDevice, st));
    TRAINSIM_CUDA(cudaStreamSynchronize(st));
  }
}

// llama keeps no dropout masks, no LayerNorm means and no dropped-out scores; its MLP input
// (gin) is the gate and up outputs side by side.
void StepRun::alloc_layer(LayerActs& x, bool scores) {
  x.ln1 = arena.take<bf16>(Th); x.q = arena.take<bf16>(Thl); x.k = arena.take<bf16>(llama ? Tkvl : Thl);
  x.v = arena.take<bf16>(llama ? Tkvl : Thl);
  x.ctx = arena.take<bf16>(Thl); x.xmid = arena.take<bf16>(Th); x.ln2 = arena.take<bf16>(Th);
  x.gin = arena.take<bf16>(llama ? 2 * Tfl : Tfl); x.gout = arena.take<bf16>(Tfl);
  x.rstd1 = arena.take<float>(T); x.rstd2 = arena.take<float>(T);
  if (!llama) {
    x.mask_attn = arena.take<unsigned char>(Th); x.mask_mlp = arena.take<unsigned char>(Th);
    x.mean1 = arena.take<float>(T); x.mean2 = arena.take<float>(T);
  }
  if (scores) {
    x.p = arena.take<bf16>(S2);
    if (!llama) { x.pd = arena.take<bf16>(S2); x.pmask = arena.take<unsigned char>(S2); }
  }
}

void StepRun::gemm(bool ta, bool tb, int M, int N, int K, const void* A, const void* B, void* C, bool c32, float alpha, float beta) {
  std::vector<GemmTiming>& shapes = r.gemms;
  auto call = [&] {
    for (int i = 0; i < c.repeat_gemm; ++i) mm->gemm(ta, tb, M, N, K, A, B, C, c32, alpha, beta);
  };
  if (!c.time_kernel_classes) return call();
  int tag = 0;
  while (tag < static_cast<int>(shapes.size()) &&
         !(shapes[tag].ta == ta && shapes[tag].tb == tb && shapes[tag].m == M && shapes[tag].n == N && shapes[tag].k == K &&
           shapes[tag].fp32_out == c32 && shapes[tag].accumulate == (beta != 0.0f)))
    ++tag;
  if (tag == static_cast<int>(shapes.size())) shapes.push_back({ta, tb, M, N, K, c32, beta != 0.0f, 0, 0});
  kernel_timer.time(0, st, call, tag);
}

}  // namespace trainsim::gpu::detail

#include "step_runner.h"

#include <cublas_v2.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>
#include <string>
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

// Sums the GPU time of bracketed work by class over one step: an event pair around each bracket,
// read once the step has been synchronised.
class EventTimer {
 public:
  static constexpr int kClasses = 4;
  EventTimer() = default;
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  ~EventTimer() {
    for (auto e : ev_) cudaEventDestroy(e);
  }
  // `tag` >= 0 also sums the bracket under that tag (tag_sums()).
  template <class F>
  void time(int cls, cudaStream_t st, F&& fn, int tag = -1) {
    if (2 * used_ + 2 > ev_.size()) {
      for (int i = 0; i < 2; ++i) {
        ev_.emplace_back();
        TRAINSIM_CUDA(cudaEventCreate(&ev_.back()));
      }
      cls_.push_back(cls);
      tag_.push_back(tag);
    }
    cls_[used_] = cls;
    tag_[used_] = tag;
    TRAINSIM_CUDA(cudaEventRecord(ev_[2 * used_], st));
    fn();
    TRAINSIM_CUDA(cudaEventRecord(ev_[2 * used_ + 1], st));
    ++used_;
  }
  // Per-class sums in ms of the brackets since the last call, and per tag into tag_sums(); the
  // stream must be synchronised.
  std::array<float, kClasses> collect() {
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
  const std::vector<float>& tag_sums() const { return tag_sums_; }
  const std::vector<int>& tag_counts() const { return tag_counts_; }

 private:
  std::vector<cudaEvent_t> ev_;
  std::vector<int> cls_, tag_;
  std::vector<float> tag_sums_;
  std::vector<int> tag_counts_;
  std::size_t used_ = 0;
};

float median_of(std::vector<float> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

RunnerResult run_gpt_training(const RunnerConfig& c) {
  const int h = c.hidden, a = c.heads, d = h / a, f = c.ffn, V = c.vocab, s = c.seq, bsz = c.micro_batch;
  const bool llama = c.llama, tied = c.tied_embeddings;
  const int kvh = c.kv_heads > 0 ? c.kv_heads : a;  // K/V heads
  const int T = bsz * s;
  const int dp = c.comm ? c.comm->size() : 1, replica = c.comm ? c.comm->rank() : 0;
  const int tp = c.tp_comm ? c.tp_comm->size() : 1, tr = c.tp_comm ? c.tp_comm->rank() : 0;
  const int pp = c.pp_comm ? c.pp_comm->size() : 1, stage = c.pp_comm ? c.pp_comm->rank() : 0;
  const bool first = stage == 0, last = stage == pp - 1;
  // This stage's chunks of layers, each (first layer in the whole model, count); the local layer
  // index runs over them in order.
  std::vector<std::pair<int, int>> chunk_layers = c.chunk_layers;
  if (chunk_layers.empty())
    chunk_layers.push_back(c.stage_layers > 0 ? std::make_pair(c.stage_first_layer, c.stage_layers) : std::make_pair(0, c.layers));
  const int vpp = static_cast<int>(chunk_layers.size());
  std::vector<int> chunk_begin{0}, glob;  // each chunk's first local layer; each local layer's index in the model
  for (auto [g0, count] : chunk_layers) {
    for (int i = 0; i < count; ++i) glob.push_back(g0 + i);
    chunk_begin.push_back(chunk_begin.back() + count);
  }
  const int L = static_cast<int>(glob.size());
  if (a % tp != 0 || f % tp != 0 || kvh % tp != 0 || a % kvh != 0)
    throw std::invalid_argument("step runner: tensor parallelism " + std::to_string(tp) +
                                " must divide the heads, the K/V heads and the MLP width, and the K/V heads the heads");
  if (!llama && kvh != a) throw std::invalid_argument("step runner: gpt layers have as many K/V heads as heads");
  if (pp > 1 && tied && !c.embed_comm && (first || last))
    throw std::invalid_argument("step runner: a pipeline's first and last stage need the tied embedding's group");
  const int al = a / tp, hl = al * d, fl = f / tp;  // this rank's heads, their width, its MLP columns
  const int kvhl = kvh / tp, kvl = kvhl * d;        // its K/V heads and their width
  const int qkv_w = llama ? hl + 2 * kvl : 3 * hl;  // its columns of the QKV projection
  const int fc1_w = llama ? 2 * fl : fl;            // of the first MLP projection (llama: gate and up)
  const int v0 = static_cast<int>(static_cast<long long>(V) * tr / tp);
  const int Vl = static_cast<int>(static_cast<long long>(V) * (tr + 1) / tp) - v0;  // its vocabulary rows
  const int m = c.microbatches;
  // The passes this stage runs, in order: given by the pipeline's schedule, or on one stage each
  // micro-batch's forward and backward in turn.
  std::vector<PipePass> passes = c.passes;
  if (passes.empty()) {
    if (pp > 1) throw std::invalid_argument("step runner: a pipeline stage needs its schedule (RunnerConfig::passes)");
    for (int i = 0; i < m; ++i) passes.push_back({true, i, 0}), passes.push_back({false, i, 0});
  }
  // Activation slots, shared by the chunks (each sized for the largest): the most passes whose
  // forward has run and backward not yet.
  int slots = 0;
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
  const size_t Th = static_cast<size_t>(T) * h, Thl = static_cast<size_t>(T) * hl, Tfl = static_cast<size_t>(T) * fl;
  const size_t Tkvl = static_cast<size_t>(T) * kvl;
  const size_t S2 = static_cast<size_t>(bsz) * al * s * s;  // attention scores elements
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
    // Parameters: one flat array in each precision (bf16 compute copy, fp32 master, moments, grads),
    // this rank's shard of this stage's tensors.
    std::vector<LayerParams> lp(L);
    size_t n = 0;
    auto place = [&](size_t count) { const size_t o = n; n += count; return o; };
    constexpr size_t kNone = ~size_t{0};
    // gpt: LayerNorms with biases, biased projections, learned positions. llama: RMSNorm gains,
    // no biases, rotary positions, gate and up projections side by side. Absent tensors: kNone.
    // The word embedding is on stage 0 and, tied, also on the last stage, which computes the logits
    // with it; untied, the last stage has its own output projection.
    const bool has_wte = first || (last && tied);
    const size_t wte = has_wte ? place(static_cast<size_t>(Vl) * h) : kNone;
    const size_t wpe = first && !llama ? place(static_cast<size_t>(s) * h) : kNone;
    for (auto& p : lp) {
      p = LayerParams{kNone, kNone, kNone, kNone, kNone, kNone, kNone, kNone, kNone, kNone, kNone, kNone};
      p.ln1_g = place(h);
      if (!llama) p.ln1_b = place(h);
      p.wqkv = place(static_cast<size_t>(h) * qkv_w);
      if (!llama) p.bqkv = place(qkv_w);
      p.wo = place(static_cast<size_t>(hl) * h);
      if (!llama) p.bo = place(h);
      p.ln2_g = place(h);
      if (!llama) p.ln2_b = place(h);
      p.w1 = place(static_cast<size_t>(h) * fc1_w);
      if (!llama) p.b1 = place(fl);
      p.w2 = place(static_cast<size_t>(fl) * h);
      if (!llama) p.b2 = place(h);
    }
    const size_t lnf_g = last ? place(h) : kNone, lnf_b = last && !llama ? place(h) : kNone;
    const size_t head = !last ? kNone : tied ? wte : place(static_cast<size_t>(Vl) * h);  // the logits' weights
    // Where each tensor starts in the whole model's flat array (one GPU's layout), for initialisation.
    const size_t gh = h, gf = f, gkv = static_cast<size_t>(kvh) * d;
    const size_t g_layer = llama ? 2 * gh + gh * (gh + 2 * gkv) + gh * gh + 3 * gh * gf
                                 : 4 * gh + 3 * gh * gh + 3 * gh + gh * gh + gh + gh * gf + gf + gf * gh + gh;
    const size_t g_layers = static_cast<size_t>(V) * gh + (llama ? 0 : static_cast<size_t>(s) * gh);
    const size_t g_head = g_layers + static_cast<size_t>(c.layers) * g_layer + (llama ? gh : 2 * gh);
    // Parameters every tensor-parallel rank holds whole (weight 1/tp in the gradient norm).
    std::vector<std::pair<size_t, size_t>> replicated;
    if (wpe != kNone) replicated.push_back({wpe, static_cast<size_t>(s) * h});
    for (const auto& p : lp) {
      if (llama) {
        replicated.push_back({p.ln1_g, gh});
        replicated.push_back({p.ln2_g, gh});
      } else {
        replicated.push_back({p.ln1_g, 2 * gh});
        replicated.push_back({p.bo, 3 * gh});  // bo, ln2_g, ln2_b
        replicated.push_back({p.b2, gh});
      }
    }
    if (last) replicated.push_back({lnf_g, llama ? gh : 2 * gh});
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
    // ZeRO (with replicas): each replica owns an equal block of every bucket; the few elements left
    // over are held, summed and updated by every replica. Stage 1 keeps only the owned fp32 master
    // weights and Adam moments. Stage 2 also keeps only the owned fp32 gradients: every
    // micro-batch's bucket is reduce-scattered from a working buffer into them. Stage 3 also keeps
    // only the owned bf16 weights; each bucket's weights are all-gathered before use (the next one
    // prefetched) and dropped after.
    const int zs = c.comm && dp > 1 ? c.zero : 0;
    if (zs < 0 || zs > 3) throw std::invalid_argument("step runner: ZeRO stage must be 0-3");
    if (zs >= 2 && pp > 1) throw std::invalid_argument("step runner: ZeRO-2/3 with pipeline stages is not supported");
    if (zs >= 1 && (c.int8_compression || c.topk_fraction > 0))
      throw std::invalid_argument("step runner: ZeRO with gradient compression is not supported");
    struct Bucket {
      size_t begin, len, sh, rem;  // elements; sh per replica, rem left over
      size_t so_main, so_left;     // where this replica's block and the leftover sit in the shard arrays
    };
    const int nb = static_cast<int>(bucket_ranges.size());  // in the order backward completes them
    std::vector<Bucket> bk(nb);
    struct Owned {
      size_t off, len;
      bool leftover;  // held and updated by every replica
    };
    std::vector<Owned> owned;
    size_t shard = n;
    if (zs >= 1) {
      shard = 0;
      for (int b = 0; b < nb; ++b) {
        const auto [lo, hi] = bucket_ranges[b];
        Bucket& B = bk[b];
        B.begin = lo;
        B.len = hi - lo;
        B.sh = B.len / dp;
        B.rem = B.len - B.sh * dp;
        B.so_main = shard;
        if (B.sh) owned.push_back({lo + replica * B.sh, B.sh, false});
        shard += B.sh;
        B.so_left = shard;
        if (B.rem) owned.push_back({lo + dp * B.sh, B.rem, true});
        shard += B.rem;
      }
    }
    // The bucket that holds flat offset `off` (buckets are contiguous, in descending order).
    auto bucket_of = [&](size_t off) {
      for (int b = 0; b < nb; ++b)
        if (off >= bucket_ranges[b].first && off < bucket_ranges[b].second) return b;
      throw std::logic_error("step runner: parameter offset outside every bucket");
    };
    bf16* W = arena.take<bf16>(zs >= 3 ? shard : n);  // ZeRO-3: the owned blocks only
    float* master = arena.take<float>(shard);
    float* mom = arena.take<float>(shard);
    float* var = arena.take<float>(shard);
    float* grad = arena.take<float>(zs >= 2 ? shard : n);  // ZeRO-2/3: the owned blocks, accumulated over micro-batches
    const bool topk = c.topk_fraction > 0 && c.comm && dp > 1;
    float* residual = topk ? arena.take<float>(n) : nullptr;  // Top-K's unsent remainder
    if (topk) TRAINSIM_CUDA(cudaMemsetAsync(residual, 0, n * 4, st));
    // ZeRO-2/3 working buffers: the bucket holding the embeddings (the last to finish, and under
    // tied embeddings also the first touched, by the logits) has its own; the others take turns in
    // two, so that one bucket's gradients are computed while the previous one is reduced.
    size_t other_len = 0, max_sh = 0;
    for (int b = 0; b + 1 < nb; ++b) other_len = std::max(other_len, bucket_ranges[b].second - bucket_ranges[b].first);
    for (const auto& B : bk) max_sh = std::max(max_sh, B.sh);
    const size_t final_len = bucket_ranges.back().second - bucket_ranges.back().first;
    std::array<float*, 3> gslot{};  // two in turn, then the final bucket's
    float* rs_out = nullptr;        // a reduce-scatter's output before it is added to the owned gradients
    std::array<bf16*, 3> wslot{};   // ZeRO-3 gathered weights, in the same arrangement
    if (zs >= 2) {
      if (nb > 1) gslot[0] = arena.take<float>(other_len), gslot[1] = arena.take<float>(other_len);
      gslot[2] = arena.take<float>(final_len);
      rs_out = arena.take<float>(std::max<size_t>(max_sh, 1));
    }
    if (zs >= 3) {
      if (nb > 1) wslot[0] = arena.take<bf16>(other_len), wslot[1] = arena.take<bf16>(other_len);
      wslot[2] = arena.take<bf16>(final_len);
    }
    auto slot_index = [&](int b) { return b == nb - 1 ? 2 : b % 2; };
    // Initialisation: N(0, 0.02)-like uniform weights by their index in the whole model, LayerNorm
    // gains 1 and biases 0 (into a temporary full copy under ZeRO, whose owned slices become the
    // master shard).
    DeviceBuffer init_full(zs >= 1 ? n * 4 : 0);
    float* init = zs >= 1 ? init_full.get<float>() : master;
    {
      const float scale = 0.02f * std::sqrt(3.0f);
      auto fill = [&](size_t dst, size_t dst_stride, size_t rows, size_t cols, size_t src, size_t src_stride) {
        fill_random_slice(init + dst, dst_stride, rows, cols, src, src_stride, 1234, scale, st);
      };
      if (wte != kNone) fill(wte, h, Vl, h, static_cast<size_t>(v0) * h, h);
      if (head != kNone && head != wte) fill(head, h, Vl, h, g_head + static_cast<size_t>(v0) * h, h);
      if (wpe != kNone) fill(wpe, h, s, h, static_cast<size_t>(V) * h, h);
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
    if (lnf_b != kNone) set(lnf_b, zeros, h);
    TRAINSIM_CUDA(cudaMemsetAsync(mom, 0, shard * 4, st));
    TRAINSIM_CUDA(cudaMemsetAsync(var, 0, shard * 4, st));
    if (zs < 3) cast_to_bf16(init, W, n, st);
    if (zs >= 1) {
      size_t so = 0;
      for (const auto& o : owned) {
        TRAINSIM_CUDA(cudaMemcpyAsync(master + so, init + o.off, o.len * 4, cudaMemcpyDeviceToDevice, st));
        if (zs >= 3) cast_to_bf16(init + o.off, W + so, o.len, st);
        so += o.len;
      }
      TRAINSIM_CUDA(cudaStreamSynchronize(st));
      init_full = DeviceBuffer();
    }
    TRAINSIM_CUDA(cudaStreamSynchronize(st));

    // Activations kept for backward, per in-flight micro-batch and layer (or only the layer inputs
    // under full recompute).
    const bool keep_scores = c.recompute == 0, keep_layers = c.recompute != 2;
    // acts[slot][j]: the input of layer j of the chunk using the slot (j = its layer count: the
    // output) and what that layer keeps.
    int max_chunk = 0;
    for (auto [g0, count] : chunk_layers) max_chunk = std::max(max_chunk, count);
    std::vector<std::vector<LayerActs>> acts(slots, std::vector<LayerActs>(max_chunk + 1));
    // llama keeps no dropout masks, no LayerNorm means and no dropped-out scores; its MLP input
    // (gin) is the gate and up outputs side by side.
    auto alloc_layer = [&](LayerActs& x, bool scores) {
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
    };
    for (auto& slot : acts) {
      for (int j = 0; j <= max_chunk; ++j) slot[j].x = arena.take<bf16>(Th);
      for (int j = 0; j < max_chunk; ++j)
        if (keep_layers) alloc_layer(slot[j], keep_scores);
    }
    LayerActs work;  // one layer's working set for recomputation
    if (!keep_layers) alloc_layer(work, true);
    bf16 *sp = nullptr, *spd = nullptr;
    unsigned char* spmask = nullptr;
    if (!keep_scores && keep_layers) {
      sp = arena.take<bf16>(S2);
      if (!llama) { spd = arena.take<bf16>(S2); spmask = arena.take<unsigned char>(S2); }
    }
    std::vector<unsigned char*> emb_mask(first && !llama ? slots : 0);
    for (auto& em : emb_mask) em = arena.take<unsigned char>(Th);
    // What the head keeps from its forward to its backward (the final norm's output and statistics,
    // the logits that the loss turns into their gradient), for each micro-batch between the two:
    // one where the last chunk's backward follows its forward at once (1F1B, the interleaved steady
    // state), more where forwards run ahead.
    struct HeadState {
      bf16 *lnf = nullptr, *logits = nullptr;
      float *meanf = nullptr, *rstdf = nullptr, *logits32 = nullptr;
    };
    std::vector<HeadState> head_states;
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
    bf16 *lnf = nullptr, *logits = nullptr;  // the head state in use
    float *meanf = nullptr, *rstdf = nullptr, *logits32 = nullptr;
    auto use_head_state = [&](int i) {
      const HeadState& hs = head_states.at(i);
      lnf = hs.lnf, logits = hs.logits, meanf = hs.meanf, rstdf = hs.rstdf, logits32 = hs.logits32;
    };
    float* ce_stats = last && tp > 1 ? arena.take<float>(static_cast<size_t>(T) * 3 * (tp + 1)) : nullptr;
    // Scratch: GEMM outputs before their element-wise epilogue, and the gradients of one layer.
    bf16* s_wide = arena.take<bf16>(std::max(static_cast<size_t>(T) * qkv_w, static_cast<size_t>(T) * fc1_w));  // qkv_raw, fc1_raw; dqkv, d(gate, up)
    bf16* s_h = arena.take<bf16>(Th);                         // attn / fc2 output before bias-dropout-residual
    // d(activation) of the backward pass running (in turn in two buffers: one pass's gradient is
    // sent while the next one's arrives).
    bf16* dx_buf[2] = {arena.take<bf16>(Th), arena.take<bf16>(Th)};
    bf16* dx = dx_buf[0];
    bf16 *dtmp = arena.take<bf16>(Th), *dln = arena.take<bf16>(Th);
    bf16 *dq = arena.take<bf16>(Thl), *dk = arena.take<bf16>(llama ? Tkvl : Thl), *dv = arena.take<bf16>(llama ? Tkvl : Thl);
    bf16* dctx = arena.take<bf16>(Thl);
    bf16* dff = arena.take<bf16>(Tfl);
    bf16* dS = arena.take<bf16>(S2);
    int* tokens = arena.take<int>(T);
    float* loss = arena.take<float>(1);
    {
      std::vector<int> tok(T);
      for (int i = 0; i < T; ++i) tok[i] = static_cast<int>((1103515245u * static_cast<unsigned>(i) + 12345u) % static_cast<unsigned>(V));
      TRAINSIM_CUDA(cudaMemcpyAsync(tokens, tok.data(), T * 4, cudaMemcpyHostToDevice, st));
      TRAINSIM_CUDA(cudaStreamSynchronize(st));
    }
    // Where a parameter's weights and gradient are: in the flat arrays, or under ZeRO-3 (weights)
    // and ZeRO-2/3 (gradients) in the working buffer its bucket occupies at the moment.
    std::vector<bf16*> w_at(nb, nullptr);
    std::vector<float*> g_at(nb, nullptr);
    auto Wp = [&](size_t off) -> bf16* {
      if (zs < 3) return W + off;
      const int b = bucket_of(off);
      if (!w_at[b]) throw std::logic_error("step runner: weights used before their bucket was gathered");
      return w_at[b] + (off - bucket_ranges[b].first);
    };
    auto Gp = [&](size_t off) -> float* {
      if (zs < 2) return grad + off;
      const int b = bucket_of(off);
      if (!g_at[b]) throw std::logic_error("step runner: gradient written outside its bucket's working buffer");
      return g_at[b] + (off - bucket_ranges[b].first);
    };
    AttentionShape shape{bsz * al, s, d};
    if (tp > 1) { shape.heads = al; shape.heads_total = a; shape.head_offset = tr * al; }
    shape.group = al / kvhl;
    const float dropout = llama ? 0.0f : kDropout;
    // Optional timing of the GEMMs and of attention inside the step (events around each call),
    // to compare with the model's GEMM and attention times; the rest of the step is the other kernels
    // and communication.
    EventTimer kernel_timer;  // class 0 GEMM, 1 attention
    auto timed = [&](int cls, auto&& fn) {
      if (!c.time_kernel_classes) return fn();
      kernel_timer.time(cls, st, fn);
    };
    EventTimer phase_timer;  // class 0 forward passes, 1 backward passes (with their recomputation)
    // Each GEMM call also under its shape's tag: the shapes as RunnerResult::gemms lists them.
    std::vector<GemmTiming>& shapes = r.gemms;
    auto gemm = [&](bool ta, bool tb, int M, int N, int K, const void* A, const void* B, void* C, bool c32, float alpha = 1.0f,
                    float beta = 0.0f) {
      if (!c.time_kernel_classes) return mm.gemm(ta, tb, M, N, K, A, B, C, c32, alpha, beta);
      int tag = 0;
      while (tag < static_cast<int>(shapes.size()) &&
             !(shapes[tag].ta == ta && shapes[tag].tb == tb && shapes[tag].m == M && shapes[tag].n == N && shapes[tag].k == K &&
               shapes[tag].fp32_out == c32 && shapes[tag].accumulate == (beta != 0.0f)))
        ++tag;
      if (tag == static_cast<int>(shapes.size())) shapes.push_back({ta, tb, M, N, K, c32, beta != 0.0f, 0, 0});
      kernel_timer.time(0, st, [&] { mm.gemm(ta, tb, M, N, K, A, B, C, c32, alpha, beta); }, tag);
    };
    // Every other kernel (or group of calls the cost model prices as one op) under the model's
    // kernel name.
    EventTimer ew_timer;
    std::vector<KernelTiming>& kinds = r.kernels;
    auto ew = [&](const char* name, auto&& fn) {
      if (!c.time_kernel_classes) return fn();
      int tag = 0;
      while (tag < static_cast<int>(kinds.size()) && kinds[tag].name != name) ++tag;
      if (tag == static_cast<int>(kinds.size())) kinds.push_back({name, 0, 0});
      ew_timer.time(0, st, fn, tag);
    };
    auto attn_fwd = [&](auto... args) { timed(1, [&] { attention_forward(args...); }); };
    auto attn_bwd = [&](auto... args) { timed(1, [&] { attention_backward(args...); }); };
    // Tensor-parallel sums of partial results (nothing to do on one rank).
    auto tp_sum = [&](bf16* x, size_t count) {
      if (tp > 1) c.tp_comm->all_reduce_bf16_sum(x, count, st);
    };
    unsigned seed_base = 1;

    // Forward of local layer l (the chunk's layer j) from A[j].x into A[j+1].x, writing the kept
    // tensors into `x`.
    auto layer_forward = [&](std::vector<LayerActs>& A, int j, int l, LayerActs& x, bf16* p, bf16* pd, unsigned char* pm, unsigned seed) {
      const LayerParams& P = lp[l];
      if (llama) {
        ew("rmsnorm", [&] { rmsnorm_forward(A[j].x, Wp(P.ln1_g), x.ln1, x.rstd1, T, h, st); });
        gemm(false, false, T, qkv_w, h, x.ln1, Wp(P.wqkv), s_wide, false);
        ew("qkv_split", [&] { split_qkv_gqa(s_wide, x.q, x.k, x.v, bsz, s, al, kvhl, d, st); });
        ew("rope", [&] {
          rope(x.q, bsz * al, s, d, false, st);
          rope(x.k, bsz * kvhl, s, d, false, st);
        });
        attn_fwd(cb, shape, AttentionBuffers{x.q, x.k, x.v, p, nullptr, nullptr, dctx}, 0, 0.0f, st);
        ew("attention_merge_heads", [&] { heads_to_rows(dctx, x.ctx, bsz, s, al, d, st); });
        gemm(false, false, T, h, hl, x.ctx, Wp(P.wo), s_h, false);
        tp_sum(s_h, Th);
        ew("residual", [&] { residual_add(s_h, A[j].x, x.xmid, Th, st); });
        ew("rmsnorm", [&] { rmsnorm_forward(x.xmid, Wp(P.ln2_g), x.ln2, x.rstd2, T, h, st); });
        gemm(false, false, T, fc1_w, h, x.ln2, Wp(P.w1), x.gin, false);
        ew("swiglu", [&] { swiglu(x.gin, x.gout, T, fl, st); });
        gemm(false, false, T, h, fl, x.gout, Wp(P.w2), s_h, false);
        tp_sum(s_h, Th);
        ew("residual", [&] { residual_add(s_h, x.xmid, A[j + 1].x, Th, st); });
        return;
      }
      ew("layernorm", [&] { layernorm_forward(A[j].x, Wp(P.ln1_g), Wp(P.ln1_b), x.ln1, x.mean1, x.rstd1, T, h, st); });
      gemm(false, false, T, 3 * hl, h, x.ln1, Wp(P.wqkv), s_wide, false);
      ew("qkv_bias_split", [&] { split_heads(s_wide, Wp(P.bqkv), x.q, x.k, x.v, bsz, s, al, d, st); });
      attn_fwd(cb, shape, AttentionBuffers{x.q, x.k, x.v, p, pd, pm, dctx}, seed * 4 + 1, kDropout, st);
      ew("attention_merge_heads", [&] { heads_to_rows(dctx, x.ctx, bsz, s, al, d, st); });
      gemm(false, false, T, h, hl, x.ctx, Wp(P.wo), s_h, false);
      tp_sum(s_h, Th);
      ew("bias_dropout_residual", [&] { bias_dropout_residual(s_h, Wp(P.bo), A[j].x, x.xmid, x.mask_attn, T, h, seed * 4 + 2, st); });
      ew("layernorm", [&] { layernorm_forward(x.xmid, Wp(P.ln2_g), Wp(P.ln2_b), x.ln2, x.mean2, x.rstd2, T, h, st); });
      gemm(false, false, T, fl, h, x.ln2, Wp(P.w1), s_wide, false);
      ew("bias_gelu", [&] { bias_gelu(s_wide, Wp(P.b1), x.gin, x.gout, T, fl, st); });
      gemm(false, false, T, h, fl, x.gout, Wp(P.w2), s_h, false);
      tp_sum(s_h, Th);
      ew("bias_dropout_residual", [&] { bias_dropout_residual(s_h, Wp(P.b2), x.xmid, A[j + 1].x, x.mask_mlp, T, h, seed * 4 + 3, st); });
    };
    // Recomputes only the attention core of layer l (selective recompute).
    auto attention_core = [&](LayerActs& x, bf16* p, bf16* pd, unsigned char* pm, unsigned seed) {
      attn_fwd(cb, shape, AttentionBuffers{x.q, x.k, x.v, p, pd, pm, dq}, seed * 4 + 1, dropout, st);
    };
    // Backward of local layer l (the chunk's layer j): dx holds d(A[j+1].x) on entry and d(A[j].x)
    // on exit.
    auto layer_backward = [&](std::vector<LayerActs>& A, int j, int l, LayerActs& x, bf16* p, bf16* pd, unsigned char* pm) {
      const LayerParams& P = lp[l];
      if (llama) {
        // MLP: out = xmid + swiglu(ln2 W1) W2; dx is also the branch's gradient (no dropout).
        gemm(true, false, fl, h, T, x.gout, dx, Gp(P.w2), true, 1.0f, 1.0f);
        gemm(false, true, T, fl, h, dx, Wp(P.w2), dff, false);
        ew("swiglu.bwd", [&] { swiglu_backward(dff, x.gin, s_wide, T, fl, st); });
        gemm(true, false, h, fc1_w, T, x.ln2, s_wide, Gp(P.w1), true, 1.0f, 1.0f);
        gemm(false, true, T, h, fc1_w, s_wide, Wp(P.w1), dln, false);
        tp_sum(dln, Th);
        ew("rmsnorm.bwd", [&] {
          rmsnorm_backward(dln, x.xmid, Wp(P.ln2_g), x.rstd2, dtmp, Gp(P.ln2_g), T, h, st);
          add_inplace(dx, dtmp, Th, st);  // dx = d(xmid)
        });
        // Attention: xmid = x + ctx Wo
        gemm(true, false, hl, h, T, x.ctx, dx, Gp(P.wo), true, 1.0f, 1.0f);
        gemm(false, true, T, hl, h, dx, Wp(P.wo), dln, false);
        ew("attention_split_heads.bwd", [&] { rows_to_heads(dln, dctx, bsz, s, al, d, st); });
        attn_bwd(cb, shape, AttentionBuffers{x.q, x.k, x.v, p, nullptr, nullptr, nullptr}, dctx, dS, dq, dk, dv, 0.0f, st);
        ew("rope.bwd", [&] {
          rope(dq, bsz * al, s, d, true, st);
          rope(dk, bsz * kvhl, s, d, true, st);
        });
        ew("qkv_merge.bwd", [&] { merge_qkv_gqa_grad(dq, dk, dv, s_wide, bsz, s, al, kvhl, d, st); });
        gemm(true, false, h, qkv_w, T, x.ln1, s_wide, Gp(P.wqkv), true, 1.0f, 1.0f);
        gemm(false, true, T, h, qkv_w, s_wide, Wp(P.wqkv), dln, false);
        tp_sum(dln, Th);
        ew("rmsnorm.bwd", [&] {
          rmsnorm_backward(dln, A[j].x, Wp(P.ln1_g), x.rstd1, dtmp, Gp(P.ln1_g), T, h, st);
          add_inplace(dx, dtmp, Th, st);
        });
        return;
      }
      // MLP: out = xmid + drop(gout W2 + b2)
      ew("dropout_residual.bwd", [&] {
        dropout_backward(dx, x.mask_mlp, dtmp, Th, st);
        column_sum(dtmp, Gp(P.b2), T, h, st);
      });
      gemm(true, false, fl, h, T, x.gout, dtmp, Gp(P.w2), true, 1.0f, 1.0f);
      gemm(false, true, T, fl, h, dtmp, Wp(P.w2), dff, false);
      ew("gelu_bias.bwd", [&] {
        gelu_backward(dff, x.gin, dff, Tfl, st);
        column_sum(dff, Gp(P.b1), T, fl, st);
      });
      gemm(true, false, h, fl, T, x.ln2, dff, Gp(P.w1), true, 1.0f, 1.0f);
      gemm(false, true, T, h, fl, dff, Wp(P.w1), dln, false);
      tp_sum(dln, Th);
      ew("layernorm.bwd", [&] {
        layernorm_backward(dln, x.xmid, Wp(P.ln2_g), x.mean2, x.rstd2, dtmp, Gp(P.ln2_g), Gp(P.ln2_b), T, h, st);
        add_inplace(dx, dtmp, Th, st);  // dx = d(xmid)
      });
      // Attention: xmid = x + drop(ctx Wo + bo)
      ew("dropout_residual.bwd", [&] {
        dropout_backward(dx, x.mask_attn, dtmp, Th, st);
        column_sum(dtmp, Gp(P.bo), T, h, st);
      });
      gemm(true, false, hl, h, T, x.ctx, dtmp, Gp(P.wo), true, 1.0f, 1.0f);
      gemm(false, true, T, hl, h, dtmp, Wp(P.wo), dln, false);
      ew("attention_split_heads.bwd", [&] { rows_to_heads(dln, dctx, bsz, s, al, d, st); });
      attn_bwd(cb, shape, AttentionBuffers{x.q, x.k, x.v, p, pd, pm, nullptr}, dctx, dS, dq, dk, dv, kDropout, st);
      ew("qkv_merge_bias.bwd", [&] {
        merge_qkv_grad(dq, dk, dv, s_wide, bsz, s, al, d, st);
        column_sum(s_wide, Gp(P.bqkv), T, 3 * hl, st);
      });
      gemm(true, false, h, 3 * hl, T, x.ln1, s_wide, Gp(P.wqkv), true, 1.0f, 1.0f);
      gemm(false, true, T, h, 3 * hl, s_wide, Wp(P.wqkv), dln, false);
      tp_sum(dln, Th);
      ew("layernorm.bwd", [&] {
        layernorm_backward(dln, A[j].x, Wp(P.ln1_g), x.mean1, x.rstd1, dtmp, Gp(P.ln1_g), Gp(P.ln1_b), T, h, st);
        add_inplace(dx, dtmp, Th, st);
      });
    };

    // Data-parallel buckets: gradients of [pending_begin, pending_end) are final and not yet summed.
    // The flat array holds the embeddings, the stage's layers, the final norm: backward finishes the
    // final norm and the last layer first, the embeddings last, so every bucket is one contiguous range.
    size_t pending_begin = n, pending_end = n;
    std::vector<cudaEvent_t> bucket_events;
    Int8AllReduce int8;
    TopKAllGather topk_ag;
    int buckets = 0, buckets_in_step = 0;
    // ZeRO-2/3: a working buffer may be zeroed for its next bucket once the reduction of its
    // previous one has read it.
    std::array<cudaEvent_t, 3> gfree{}, wready{};
    std::array<bool, 3> gfree_pending{};
    cudaEvent_t wfree;
    for (auto* e : {&gfree[0], &gfree[1], &gfree[2], &wready[0], &wready[1], &wready[2], &wfree})
      TRAINSIM_CUDA(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
    auto open_grad_bucket = [&](int b) {
      if (zs < 2 || g_at[b]) return;
      const int i = slot_index(b);
      if (gfree_pending[i]) TRAINSIM_CUDA(cudaStreamWaitEvent(st, gfree[i], 0));
      g_at[b] = gslot[i];
      TRAINSIM_CUDA(cudaMemsetAsync(gslot[i], 0, bk[b].len * sizeof(float), st));
    };
    // ZeRO-3: bucket b's weights gathered into its working buffer (the turn-taking ones alternate,
    // so neighbouring buckets never share one), after the compute queued so far is done with the
    // buffer's previous bucket.
    std::array<int, 3> w_holder{-1, -1, -1};
    int cur_unit = -1;
    auto gather_weights = [&](int b) {
      if (zs < 3 || w_at[b]) return;
      const int i = slot_index(b);
      if (w_holder[i] >= 0) {
        if (w_holder[i] == cur_unit) throw std::logic_error("step runner: a gather would overwrite the weights in use");
        w_at[w_holder[i]] = nullptr;
      }
      TRAINSIM_CUDA(cudaEventRecord(wfree, st));
      TRAINSIM_CUDA(cudaStreamWaitEvent(comm_st, wfree, 0));
      const Bucket& B = bk[b];
      if (B.sh) c.comm->all_gather(W + B.so_main, wslot[i], B.sh * sizeof(bf16), comm_st);
      if (B.rem)
        TRAINSIM_CUDA(cudaMemcpyAsync(wslot[i] + dp * B.sh, W + B.so_left, B.rem * sizeof(bf16), cudaMemcpyDeviceToDevice, comm_st));
      TRAINSIM_CUDA(cudaEventRecord(wready[i], comm_st));
      w_holder[i] = b;
      w_at[b] = wslot[i];
    };
    // Makes bucket b's weights usable by the compute stream and prefetches bucket `next`.
    auto use_weights = [&](int b, int next) {
      if (zs < 3) return;
      gather_weights(b);
      cur_unit = b;
      TRAINSIM_CUDA(cudaStreamWaitEvent(st, wready[slot_index(b)], 0));
      if (next >= 0 && next < nb) gather_weights(next);
    };
    auto use_weights_of = [&](size_t off) {
      if (zs >= 3 && !w_at[bucket_of(off)]) use_weights(bucket_of(off), -1);
    };
    auto launch_bucket = [&](bool force) {
      if (!c.comm || pending_begin >= pending_end) return;
      if (!force && pending_end - pending_begin < bucket_elems) return;
      if (buckets_in_step >= static_cast<int>(bucket_events.size())) {
        bucket_events.emplace_back();
        TRAINSIM_CUDA(cudaEventCreateWithFlags(&bucket_events.back(), cudaEventDisableTiming));
      }
      TRAINSIM_CUDA(cudaEventRecord(bucket_events[buckets_in_step], st));
      TRAINSIM_CUDA(cudaStreamWaitEvent(comm_st, bucket_events[buckets_in_step], 0));
      if (buckets >= nb || bucket_ranges[buckets] != std::make_pair(pending_begin, pending_end))
        throw std::logic_error("step runner: gradient bucket differs from the planned layout");
      const size_t len = pending_end - pending_begin;
      if (zs >= 2) {
        // This micro-batch's bucket, summed into the owned blocks.
        const Bucket& B = bk[buckets];
        float* slot = g_at[buckets];
        if (B.sh) {
          c.comm->reduce_scatter_sum(slot, rs_out, B.sh, comm_st);
          add_inplace(grad + B.so_main, rs_out, B.sh, comm_st);
        }
        if (B.rem) {
          c.comm->all_reduce_sum(slot + dp * B.sh, B.rem, comm_st);
          add_inplace(grad + B.so_left, slot + dp * B.sh, B.rem, comm_st);
        }
        const int i = slot_index(buckets);
        TRAINSIM_CUDA(cudaEventRecord(gfree[i], comm_st));
        gfree_pending[i] = true;
        g_at[buckets] = nullptr;
      } else if (zs == 1) {
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
      ++buckets_in_step;
      pending_end = pending_begin;
    };
    // The rest of the gradients, with the embeddings; in a pipeline the two copies of the word
    // embedding's gradient are summed first (after the schedule: stage 0 finishes last).
    auto final_bucket = [&] {
      if (pp > 1 && tied && has_wte) c.embed_comm->all_reduce_sum(grad + wte, static_cast<size_t>(Vl) * h, st);
      pending_begin = 0;
      launch_bucket(true);
    };

    const float loss_scale = 1.0f / (static_cast<float>(T) * m * dp);
    // Forward of one micro-batch on this stage, into the slot's activations (stage 0 embeds the
    // tokens; the others have received their input into slot[0].x); the last stage ends with the
    // loss and d(logits).
    auto forward_pass = [&](int ch, int slot_i, unsigned seed) {
      std::vector<LayerActs>& A = acts[slot_i];
      const int cn = chunk_layers[ch].second, lb = chunk_begin[ch];
      const bool embeds = first && ch == 0, heads = last && ch == vpp - 1;
      if (embeds) use_weights(nb - 1, nb - 2);  // ZeRO-3: the embeddings' bucket, and the next one ahead
      if (embeds && llama) {
        ew("embedding", [&] { embed_lookup(tokens, Wp(wte), A[0].x, T, h, v0, Vl, st); });
        tp_sum(A[0].x, Th);
      } else if (embeds) {
        if (tp == 1) {
          ew("embedding", [&] { embed_forward(tokens, Wp(wte), Wp(wpe), A[0].x, emb_mask[slot_i], T, h, s, seed * 1000, st); });
        } else {
          embed_lookup(tokens, Wp(wte), s_h, T, h, v0, Vl, st);
          tp_sum(s_h, Th);
          embed_finish(s_h, Wp(wpe), A[0].x, emb_mask[slot_i], T, h, s, seed * 1000, st);
        }
      }
      for (int j = 0; j < cn; ++j) {
        const int l = lb + j;
        LayerActs& x = keep_layers ? A[j] : work;
        bf16* p = keep_scores ? x.p : keep_layers ? sp : work.p;
        bf16* pd = keep_scores ? x.pd : keep_layers ? spd : work.pd;
        unsigned char* pm = keep_scores ? x.pmask : keep_layers ? spmask : work.pmask;
        if (zs >= 3 && bucket_of(lp[l].ln1_g) != cur_unit) use_weights(bucket_of(lp[l].ln1_g), bucket_of(lp[l].ln1_g) - 1);
        layer_forward(A, j, l, x, p, pd, pm, seed * 1000 + glob[l] + 1);
      }
      if (heads) {
        use_weights_of(lnf_g);
        use_weights_of(head);
        if (llama) ew("rmsnorm", [&] { rmsnorm_forward(A[cn].x, Wp(lnf_g), lnf, rstdf, T, h, st); });
        else ew("layernorm", [&] { layernorm_forward(A[cn].x, Wp(lnf_g), Wp(lnf_b), lnf, meanf, rstdf, T, h, st); });
        gemm(false, true, T, Vl, h, lnf, Wp(head), logits, false);
        // Mean over every token of the step, across replicas too: the summed gradients are the mean's.
        if (tp == 1) {
          ew("cross_entropy", [&] { cross_entropy(logits, logits32, tokens, loss, T, V, loss_scale, st); });
        } else {
          float* all = ce_stats + static_cast<size_t>(T) * 3;
          cross_entropy_stats(logits, logits32, tokens, ce_stats, T, v0, Vl, st);
          c.tp_comm->all_gather(ce_stats, all, static_cast<size_t>(T) * 3 * sizeof(float), st);
          cross_entropy_finish(logits, logits32, tokens, all, tp, loss, T, v0, Vl, loss_scale, st);
        }
      }
    };
    // Backward of one micro-batch through chunk ch (the last virtual stage from d(logits); the
    // others from d(output) received into dx), leaving d(input) in dx. In a chunk's last
    // micro-batch, buckets are launched as their layers finish.
    auto backward_pass = [&](int ch, int slot_i, unsigned seed, bool last_mb) {
      std::vector<LayerActs>& A = acts[slot_i];
      const int cn = chunk_layers[ch].second, lb = chunk_begin[ch];
      const bool embeds = first && ch == 0, heads = last && ch == vpp - 1;
      // Buckets are summed in the step's last micro-batch, under ZeRO-2/3 in every one.
      const bool reduce_now = last_mb || zs >= 2;
      if (zs >= 2) {
        pending_begin = pending_end = n;
        buckets = 0;
      }
      open_grad_bucket(nb - 1);  // ZeRO-2/3: the embeddings' bucket and the first one
      open_grad_bucket(0);
      if (heads) {
        if (zs >= 3) use_weights(bucket_of(lnf_g), bucket_of(lnf_g) + 1);
        use_weights_of(head);
        // Backward through the head (logits now hold d(logits)).
        gemm(true, false, Vl, h, T, logits, lnf, Gp(head), true, 1.0f, 1.0f);
        gemm(false, false, T, h, Vl, logits, Wp(head), dln, false);
        tp_sum(dln, Th);
        if (llama) ew("rmsnorm.bwd", [&] { rmsnorm_backward(dln, A[cn].x, Wp(lnf_g), rstdf, dx, Gp(lnf_g), T, h, st); });
        else ew("layernorm.bwd", [&] { layernorm_backward(dln, A[cn].x, Wp(lnf_g), meanf, rstdf, dx, Gp(lnf_g), Gp(lnf_b), T, h, st); });
      }
      for (int j = cn - 1; j >= 0; --j) {
        const int l = lb + j;
        const unsigned seed_l = seed * 1000 + glob[l] + 1;
        if (zs >= 2) {
          const int u = bucket_of(lp[l].ln1_g);
          if (zs >= 3 && u != cur_unit) use_weights(u, u + 1);
          open_grad_bucket(u);
        }
        if (c.recompute == 2) {
          layer_forward(A, j, l, work, work.p, work.pd, work.pmask, seed_l);
          layer_backward(A, j, l, work, work.p, work.pd, work.pmask);
        } else if (c.recompute == 1) {
          attention_core(A[j], sp, spd, spmask, seed_l);
          layer_backward(A, j, l, A[j], sp, spd, spmask);
        } else {
          layer_backward(A, j, l, A[j], A[j].p, A[j].pd, A[j].pmask);
        }
        if (reduce_now) {
          pending_begin = lp[l].ln1_g;
          launch_bucket(false);
        }
      }
      if (embeds && llama) ew("embedding.bwd", [&] { embed_rows_backward(dx, tokens, Gp(wte), T, h, v0, Vl, st); });
      else if (embeds) ew("embedding.bwd", [&] { embed_backward(dx, emb_mask[slot_i], tokens, Gp(wte), Gp(wpe), T, h, s, st, v0, Vl); });
      if (reduce_now && pp == 1) final_bucket();
    };
    // One optimizer step's passes in the schedule's order, with the pipeline's messages (bf16
    // [T, h] activations and their gradients) posted as pipeline_exchange.h groups them. Each
    // (chunk, micro-batch) holds an activation slot from its forward (or the receive of its input)
    // to its backward.
    const size_t act_bytes = Th * sizeof(bf16);
    const std::vector<PipeExchange> exchanges = pipeline_exchanges(passes, pp, vpp, stage, c.warmup);
    auto run_schedule = [&](unsigned seed0) {
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
    };

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
          double sum = checksum(g, hi - lo, st, true);
          auto part = [&](size_t b, size_t len) {
            const size_t x = std::max(lo, b), y = std::min(hi, b + len);
            return x < y ? checksum(g + (x - lo), y - x, st, true) : 0.0;
          };
          if (tp > 1)
            for (auto [b, len] : replicated) sum -= (1.0 - 1.0 / tp) * part(b, len);
          if (pp > 1 && tied && last && !first) sum -= part(wte, static_cast<size_t>(Vl) * h);
          return sum;
        };
        r.first_grad_sq = 0;
        if (zs == 0) r.first_grad_sq = weighted_sq(grad, 0, n);
        size_t so = 0;
        for (const auto& o : owned) {
          r.first_grad_sq += weighted_sq(zs >= 2 ? grad + so : grad + o.off, o.off, o.off + o.len) / (o.leftover ? dp : 1);
          so += o.len;
        }
      }
      TRAINSIM_CUDA(cudaEventRecord(e1, st));
      if (zs >= 1) {
        // Adam on this replica's share; then, below ZeRO-3, every replica's updated bf16 share to
        // all (ZeRO-3 gathers the weights where they are used).
        size_t so = 0;
        for (const auto& o : owned) {
          adam_update(master + so, mom + so, var + so, zs >= 2 ? grad + so : grad + o.off, zs >= 3 ? W + so : W + o.off, o.len, 1e-4f, st);
          so += o.len;
        }
        if (zs < 3)
          for (auto [b, e] : bucket_ranges) {
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
    if (zs >= 3) {
      // The whole model's weights: each bucket gathered in turn.
      r.param_checksum = 0;
      for (int b = 0; b < nb; ++b) {
        use_weights(b, -1);
        r.param_checksum += checksum(w_at[b], bk[b].len, st);
      }
    } else {
      r.param_checksum = checksum(W, n, st);
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
    for (auto ev : bucket_events) cudaEventDestroy(ev);
    for (auto ev : gfree) cudaEventDestroy(ev);
    for (auto ev : wready) cudaEventDestroy(ev);
    cudaEventDestroy(wfree);
  }
  cublasDestroy(cb);
  cudaStreamDestroy(st);
  cudaStreamDestroy(comm_st);
  return r;
}

}  // namespace trainsim::gpu

#pragma once
// One rank's run of real training steps (run_gpt_training): its shapes, its parameters, optimizer
// state and activations on the device, the layer kernels of its forward and backward passes, its
// gradient buckets and ZeRO shards, and the schedule of passes and messages it runs. Internal to
// the runner: step_run_setup.cu lays out and allocates, step_run_layers.cu runs the passes,
// step_run_buckets.cu sums and shards the gradients, step_runner.cu runs the steps and reports.
#include <cublas_v2.h>

#include <array>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "attention.h"
#include "cuda_compat.h"
#include "grad_comm.h"
#include "lt_matmul.h"
#include "pipeline_exchange.h"
#include "runner_kernels.h"
#include "runner_params.h"
#include "step_runner.h"
#include "timing.h"

namespace trainsim::gpu::detail {

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
  std::array<float, kClasses> collect();
  const std::vector<float>& tag_sums() const { return tag_sums_; }
  const std::vector<int>& tag_counts() const { return tag_counts_; }

 private:
  std::vector<cudaEvent_t> ev_;
  std::vector<int> cls_, tag_;
  std::vector<float> tag_sums_;
  std::vector<int> tag_counts_;
  std::size_t used_ = 0;
};

// The compute and communication streams and the cuBLAS handle of a run.
struct RunStreams {
  cudaStream_t st = nullptr, comm_st = nullptr;
  cublasHandle_t cb = nullptr;
  RunStreams();
  ~RunStreams();
  RunStreams(const RunStreams&) = delete;
  RunStreams& operator=(const RunStreams&) = delete;
};

class StepRun {
 public:
  // Checks the configuration, lays out and initialises this rank's parameters and allocates its
  // optimizer state, activations and scratch (step_run_setup.cu).
  explicit StepRun(const RunnerConfig& c);
  ~StepRun();
  StepRun(const StepRun&) = delete;
  StepRun& operator=(const StepRun&) = delete;
  // Runs the configuration's warm-up and timed steps and reports them (step_runner.cu).
  RunnerResult run();

 private:
  // step_run_setup.cu
  void set_shapes();
  void check_schedule();
  void initialise_parameters();
  void allocate_activations();
  void reserve_compression_buffers(size_t largest_bucket);
  void alloc_layer(LayerActs& x, bool scores);

  // step_run_layers.cu: one layer's forward, its attention core alone (selective recompute) and its
  // backward; a micro-batch's forward and backward pass through one chunk of layers.
  void layer_forward(std::vector<LayerActs>& A, int j, int l, LayerActs& x, bf16* p, bf16* pd, unsigned char* pm, unsigned seed);
  void attention_core(LayerActs& x, bf16* p, bf16* pd, unsigned char* pm, unsigned seed);
  void layer_backward(std::vector<LayerActs>& A, int j, int l, LayerActs& x, bf16* p, bf16* pd, unsigned char* pm);
  void forward_pass(int ch, int slot_i, unsigned seed);
  void backward_pass(int ch, int slot_i, unsigned seed, bool last_mb);

  // step_run_buckets.cu: data-parallel buckets and ZeRO shards: a bucket's ZeRO-2/3 working buffer,
  // its ZeRO-3 weights gathered (and the next bucket's ahead), a full bucket launched on the
  // communication stream, and the last one with the embeddings.
  void open_grad_bucket(int b);
  void gather_weights(int b);
  void use_weights(int b, int next);
  void use_weights_of(size_t off);
  void launch_bucket(bool force);
  void final_bucket();

  // step_runner.cu: one optimizer step's passes in the schedule's order, with the pipeline's
  // messages.
  void run_schedule(unsigned seed0);

  // Where a parameter's weights and gradient are: in the flat arrays, or under ZeRO-3 (weights)
  // and ZeRO-2/3 (gradients) in the working buffer its bucket occupies at the moment.
  bf16* Wp(size_t off) {
    if (zs < 3) return W + off;
    const int b = layout.bucket_of(off);
    if (!w_at[b]) throw std::logic_error("step runner: weights used before their bucket was gathered");
    return w_at[b] + (off - layout.bucket_ranges[b].first);
  }
  float* Gp(size_t off) {
    if (zs < 2) return grad + off;
    const int b = layout.bucket_of(off);
    if (!g_at[b]) throw std::logic_error("step runner: gradient written outside its bucket's working buffer");
    return g_at[b] + (off - layout.bucket_ranges[b].first);
  }
  int slot_index(int b) const { return b == nb - 1 ? 2 : b % 2; }
  // Optional timing of the GEMMs and of attention inside the step (events around each call), to
  // compare with the model's GEMM and attention times; the rest of the step is the other kernels
  // and communication.
  template <class F>
  void timed(int cls, F&& fn) {
    if (!c.time_kernel_classes) return fn();
    kernel_timer.time(cls, st, fn);
  }
  // Each GEMM call also under its shape's tag: the shapes as RunnerResult::gemms lists them.
  void gemm(bool ta, bool tb, int M, int N, int K, const void* A, const void* B, void* C, bool c32, float alpha = 1.0f,
            float beta = 0.0f);
  // Every other kernel (or group of calls the cost model prices as one op) under the model's
  // kernel name.
  template <class F>
  void ew(const char* name, F&& fn) {
    if (!c.time_kernel_classes) return fn();
    std::vector<KernelTiming>& kinds = r.kernels;
    int tag = 0;
    while (tag < static_cast<int>(kinds.size()) && kinds[tag].name != name) ++tag;
    if (tag == static_cast<int>(kinds.size())) kinds.push_back({name, 0, 0});
    ew_timer.time(0, st, fn, tag);
  }
  template <class... Args>
  void attn_fwd(Args... args) {
    timed(1, [&] {
      for (int i = 0; i < c.repeat_attention; ++i) attention_forward(args...);
    });
  }
  template <class... Args>
  void attn_bwd(Args... args) {
    timed(1, [&] {
      for (int i = 0; i < c.repeat_attention; ++i) attention_backward(args...);
    });
  }
  // Tensor-parallel sums of partial results (nothing to do on one rank).
  void tp_sum(bf16* x, size_t count) {
    if (tp > 1) c.tp_comm->all_reduce_bf16_sum(x, count, st);
  }

  const RunnerConfig& c;
  std::unique_ptr<RunStreams> streams;  // made once the configuration is checked; destroyed last
  cudaStream_t st = nullptr, comm_st = nullptr;
  cublasHandle_t cb = nullptr;
  Arena arena;
  RunnerResult r;
  std::unique_ptr<LtMatmul> mm;

  // Shapes (set_shapes).
  int h, a, d, f, V, s, bsz;
  bool llama, tied;
  int kvh;  // K/V heads
  int T;
  int dp, replica, tp, tr, pp, stage;
  bool first, last;
  // This stage's chunks of layers, each (first layer in the whole model, count); the local layer
  // index runs over them in order.
  std::vector<std::pair<int, int>> chunk_layers;
  int vpp;
  std::vector<int> chunk_begin, glob;  // each chunk's first local layer; each local layer's index in the model
  int L;
  int al, hl, fl;    // this rank's heads, their width, its MLP columns
  int kvhl, kvl;     // its K/V heads and their width
  int qkv_w, fc1_w;  // its columns of the QKV projection, of the first MLP projection
  int v0, Vl;        // its vocabulary rows
  int m;
  // The passes this stage runs, in order, and the most whose forward has run and backward not yet
  // (its activation slots, shared by the chunks).
  std::vector<PipePass> passes;
  int slots = 0;
  size_t Th, Thl, Tfl, Tkvl, S2;

  // Parameters, optimizer state and gradients (runner_params.h has where each tensor sits).
  ParamLayout layout;
  std::vector<LayerParams>& lp = layout.layers;
  size_t n = 0, wte = kNoParam, wpe = kNoParam, lnf_g = kNoParam, lnf_b = kNoParam, head = kNoParam;
  bool has_wte = false;
  size_t bucket_elems = 0;
  int zs = 0;  // ZeRO stage (0 without replicas)
  int nb = 0;  // buckets, in the order backward completes them
  size_t shard = 0;
  bf16* W = nullptr;  // ZeRO-3: the owned blocks only
  float *master = nullptr, *mom = nullptr, *var = nullptr;
  float* grad = nullptr;  // ZeRO-2/3: the owned blocks, accumulated over micro-batches
  double* sums = nullptr;  // the checksums' block partials (kChecksumPartials)
  bool topk = false;
  float* residual = nullptr;  // Top-K's unsent remainder
  // ZeRO-2/3 working buffers: the bucket holding the embeddings (the last to finish, and under
  // tied embeddings also the first touched, by the logits) has its own; the others take turns in
  // two, so that one bucket's gradients are computed while the previous one is reduced.
  std::array<float*, 3> gslot{};  // two in turn, then the final bucket's
  float* rs_out = nullptr;        // a reduce-scatter's output before it is added to the owned gradients
  std::array<bf16*, 3> wslot{};   // ZeRO-3 gathered weights, in the same arrangement

  // Activations and scratch (allocate_activations).
  bool keep_scores = false, keep_layers = false;
  int max_chunk = 0;
  // acts[slot][j]: the input of layer j of the chunk using the slot (j = its layer count: the
  // output) and what that layer keeps.
  std::vector<std::vector<LayerActs>> acts;
  LayerActs work;  // one layer's working set for recomputation
  bf16 *sp = nullptr, *spd = nullptr;
  unsigned char* spmask = nullptr;
  std::vector<unsigned char*> emb_mask;
  // What the head keeps from its forward to its backward (the final norm's output and statistics,
  // the logits that the loss turns into their gradient), for each micro-batch between the two.
  struct HeadState {
    bf16 *lnf = nullptr, *logits = nullptr;
    float *meanf = nullptr, *rstdf = nullptr, *logits32 = nullptr;
  };
  std::vector<HeadState> head_states;
  bf16 *lnf = nullptr, *logits = nullptr;  // the head state in use
  float *meanf = nullptr, *rstdf = nullptr, *logits32 = nullptr;
  void use_head_state(int i) {
    const HeadState& hs = head_states.at(i);
    lnf = hs.lnf, logits = hs.logits, meanf = hs.meanf, rstdf = hs.rstdf, logits32 = hs.logits32;
  }
  float* ce_stats = nullptr;
  // Scratch: GEMM outputs before their element-wise epilogue, and the gradients of one layer.
  bf16* s_wide = nullptr;  // qkv_raw, fc1_raw; dqkv, d(gate, up)
  bf16* s_h = nullptr;     // attn / fc2 output before bias-dropout-residual
  // d(activation) of the backward pass running (in turn in two buffers: one pass's gradient is
  // sent while the next one's arrives).
  bf16* dx_buf[2] = {nullptr, nullptr};
  bf16* dx = nullptr;
  bf16 *dtmp = nullptr, *dln = nullptr, *dq = nullptr, *dk = nullptr, *dv = nullptr, *dctx = nullptr, *dff = nullptr, *dS = nullptr;
  int* tokens = nullptr;
  float* loss = nullptr;
  std::vector<bf16*> w_at;
  std::vector<float*> g_at;
  AttentionShape shape;
  float dropout = 0;
  EventTimer kernel_timer;  // class 0 GEMM, 1 attention
  EventTimer phase_timer;   // class 0 forward passes, 1 backward passes (with their recomputation)
  EventTimer ew_timer;
  unsigned seed_base = 1;
  float loss_scale = 0;

  // Gradient buckets (step_run_buckets.cu): gradients of [pending_begin, pending_end) are final and
  // not yet summed. The flat array holds the embeddings, the stage's layers, the final norm:
  // backward finishes the final norm and the last layer first, the embeddings last, so every
  // bucket is one contiguous range.
  size_t pending_begin = 0, pending_end = 0;
  std::vector<cudaEvent_t> bucket_events;
  Int8AllReduce int8;
  TopKAllGather topk_ag;
  int buckets = 0, buckets_in_step = 0;
  // ZeRO-2/3: a working buffer may be zeroed for its next bucket once the reduction of its
  // previous one has read it. ZeRO-3: which bucket's weights each buffer holds, and the bucket in
  // use.
  std::array<cudaEvent_t, 3> gfree{}, wready{};
  std::array<bool, 3> gfree_pending{};
  cudaEvent_t wfree = nullptr;
  std::array<int, 3> w_holder{-1, -1, -1};
  int cur_unit = -1;

  // The schedule's messages, as pipeline_exchange.h groups them.
  size_t act_bytes = 0;
  std::vector<PipeExchange> exchanges;
};

}  // namespace trainsim::gpu::detail

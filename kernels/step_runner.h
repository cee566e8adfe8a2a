#pragma once
// Runs real training steps of a GPT-style (or Llama-style, see RunnerConfig::llama) model: embedding with dropout, per layer
// LayerNorm, QKV GEMM, causal attention with dropout, output projection, bias-dropout-residual,
// LayerNorm, GELU MLP, bias-dropout-residual; final LayerNorm, tied logits, fp32 cross-entropy;
// the backward pass with the chosen recompute policy; fp32 gradient accumulation over micro-batches;
// mixed-precision Adam. Parameters, gradients, optimizer states and kept activations are really
// allocated as the memory model accounts them.
//
// Data parallelism: with a GradComm of `size` replicas, each runs `microbatches` micro-batches of its
// own (dropout seeds numbered so that the replicas together run exactly what one replica with
// size x microbatches would), and in the last micro-batch's backward the fp32 gradients are summed
// in buckets of `bucket_MB`, in reverse layer order, each launched on a communication stream as soon
// as its layers' gradients are final, overlapping the rest of backward.
//
// Tensor parallelism (Megatron-LM): with a tensor-parallel group of t ranks, each holds a/t heads
// (its columns of the QKV projection, its rows of the output projection), f/t columns of the first
// MLP projection and rows of the second, and a contiguous share of the vocabulary (embedding rows,
// logits columns, a vocabulary-parallel cross-entropy). The partial outputs of the output and second
// MLP projections are summed (bf16 all-reduce) in forward, and the input gradients of the QKV and
// first MLP projections in backward; norms and the row-parallel biases are replicated.
//
// Pipeline parallelism: with a pipeline group of p ranks, the rank of stage i runs its chunks of
// layers (one, [stage_first_layer, stage_first_layer + stage_layers), or with interleaving the
// chunk_layers of virtual stages i, p + i, 2p + i, ...), stage 0 the embedding, the last stage the
// final norm, logits and loss, with a copy of the tied word embedding whose gradient is summed with
// stage 0's (embed_comm). The passes run in the order the schedule gives (`passes`: 1F1B or
// interleaved 1F1B as the simulator orders them); activations and their gradients go between
// stages by send/recv, grouped as pipeline_exchange.h says. Each chunk keeps as many micro-batches'
// activations as the schedule has in flight on it.
//
// Parameters are initialised by their index in the whole model's flat array, so any layout starts
// from the same weights as one GPU, and dropout draws what one GPU would: a layout's losses and
// summed gradients match a one-GPU run of the same micro-batches up to rounding.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "pipeline_exchange.h"

namespace trainsim::gpu {

class GradComm;

struct RunnerConfig {
  int layers = 0, hidden = 0, heads = 0, ffn = 0, vocab = 0, seq = 0;
  int micro_batch = 1;
  int microbatches = 1;  // gradient accumulation steps per optimizer step
  int recompute = 0;     // 0 none, 1 selective (attention core), 2 full
  int warmup_steps = 2;
  int timed_steps = 5;
  GradComm* comm = nullptr;  // data-parallel replicas; nullptr: one
  double bucket_MB = 25;
  bool int8_compression = false;  // buckets summed by an INT8 all-reduce (grad_comm.h)
  double topk_fraction = 0;       // > 0: Top-K with error feedback, kept values all-gathered (grad_comm.h)
  // ZeRO-1 (with replicas): each bucket is reduce-scattered, each replica keeps the fp32 master
  // weights and Adam moments of its share of every bucket only, updates that share, and the bf16
  // weights are all-gathered bucket by bucket.
  int zero = 0;
  GradComm* tp_comm = nullptr;     // tensor-parallel group; nullptr: one rank
  GradComm* pp_comm = nullptr;     // pipeline, rank = stage; nullptr: one stage
  GradComm* embed_comm = nullptr;  // pipeline's first and last stage (tied word embedding); pp > 1
  int stage_first_layer = 0, stage_layers = 0;  // this stage's layers; stage_layers 0: all
  // Interleaving: this stage's chunks, each (first layer in the model, layers), in chunk order
  // (empty: the one chunk above).
  std::vector<std::pair<int, int>> chunk_layers;
  // The schedule of this stage (required with pp > 1; on one stage each micro-batch's forward and
  // backward in turn), and how many forwards it runs before its first backward.
  std::vector<PipePass> passes;
  int warmup = 0;
  // Llama-style layers: RMSNorm, rotary positions, SwiGLU MLP (ffn is the gate's and the up
  // projection's width each), no biases, no dropout, kv_heads K/V heads (0: as many as heads).
  bool llama = false;
  int kv_heads = 0;
  bool tied_embeddings = true;  // false: the logits have their own weights (on the last stage)
  // Times every GEMM, attention and other kernel call of the forward and backward passes with
  // events around it (a few microseconds of overhead each), into RunnerResult::gemm_ms,
  // attention_ms, elementwise_ms and their per-shape and per-kernel lists.
  bool time_kernel_classes = false;
  // A diagnostic of where a step's power goes: every GEMM call (repeat_gemm) or every attention
  // forward and backward (repeat_attention) runs this many times back to back, so that the step's
  // added time and energy are that class's own, in the step. A repeated GEMM that accumulates adds
  // its product again (the weight gradients come out scaled, which Adam all but ignores); the
  // attention's calls overwrite their outputs. Step times are then not the layout's.
  int repeat_gemm = 1, repeat_attention = 1;
  // Ranks that run one step together: called on every rank once its buffers are allocated, before
  // any communication, with whether its set-up succeeded; returns whether every rank's did (the
  // caller agrees across ranks). A rank whose set-up failed then throws what failed it
  // (DeviceOutOfMemory where its buffers did not fit), the others PeerSetupFailed, so that none
  // waits in a collective for one that stopped. Unset: this rank's error is thrown at once.
  std::function<bool(bool)> agree_setup;
};

// One GEMM shape of the step as the runner calls it (A m x k, B k x n, transposed as flagged; fp32
// output, accumulated into when `accumulate`), and its time per step inside the step.
struct GemmTiming {
  bool ta = false, tb = false;
  int m = 0, n = 0, k = 0;
  bool fp32_out = false, accumulate = false;
  int calls_per_step = 0;
  double ms_per_step = 0;  // median over timed steps
};

// One element-wise or row-wise kernel of the step (or the group of calls the cost model prices as
// one op), under the cost model's kernel name, and its time per step inside the step.
struct KernelTiming {
  std::string name;
  int calls_per_step = 0;  // brackets per step (a group of calls counts once)
  double ms_per_step = 0;  // median over timed steps
};

struct RunnerResult {
  double step_ms = 0;          // median over timed steps
  double step_ms_min = 0, step_ms_max = 0;
  double optimizer_ms = 0;     // zeroing gradients + Adam, median
  double gemm_ms = 0, attention_ms = 0;  // with time_kernel_classes: their time within the step, median
  std::vector<GemmTiming> gemms;         // with time_kernel_classes: each GEMM shape's time, first called first
  // With time_kernel_classes: every other kernel of the forward and backward passes, bracketed
  // like the GEMMs; their sum, and each kernel name's time, first called first.
  double elementwise_ms = 0;
  std::vector<KernelTiming> kernels;
  // The step's phases on the compute stream, medians: forward passes, backward passes (with any
  // recomputation and the waits for pipeline hand-offs inside them), and optimizer_ms. The rest of
  // the step is waiting for the last gradient buckets and hand-offs between passes.
  double forward_ms = 0, backward_ms = 0;
  double allocated_bytes = 0;  // everything the runner allocated
  double device_used_bytes = 0;  // total - free at the end of the last step (context, workspaces included)
  // This replica's loss (each replica sees its own micro-batches), reported by the rank of the last
  // stage with tensor-parallel rank 0 and 0 elsewhere, so that a sum over all ranks is the global loss.
  double first_loss = 0, last_loss = 0;
  bool finite = false;
  int buckets = 0;             // gradient buckets summed per step (data parallel)
  double param_checksum = 0;   // sum of the bf16 weights after the last step
  // This rank's part of the squared norm of the first step's summed gradient, before the update:
  // replicated parameters count 1/t on each of t tensor-parallel ranks, the last stage's copy of the
  // word embedding not at all, ZeRO-1 shares as owned. Summed over one replica's ranks (over all
  // ranks under ZeRO-1), the model's squared gradient norm.
  double first_grad_sq = 0;
  // When the timed steps began and ended (wall_clock_s of clock_monitor.h): the host waits for
  // every step's end, so this window holds the timed steps and nothing else.
  double timed_begin_wall_s = 0, timed_end_wall_s = 0;
};

// Throws DeviceOutOfMemory when this rank's buffers do not fit, PeerSetupFailed when another rank
// could not set up (RunnerConfig::agree_setup), std::runtime_error on other CUDA errors.
RunnerResult run_gpt_training(const RunnerConfig& c);

}  // namespace trainsim::gpu

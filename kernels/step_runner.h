#pragma once
// Runs real training steps of a GPT-style model on one GPU: embedding with dropout, per layer
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
#include <string>

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
};

struct RunnerResult {
  double step_ms = 0;          // median over timed steps
  double step_ms_min = 0, step_ms_max = 0;
  double optimizer_ms = 0;     // zeroing gradients + Adam, median
  double allocated_bytes = 0;  // everything the runner allocated
  double device_used_bytes = 0;  // total - free at the end of the last step (context, workspaces included)
  double first_loss = 0, last_loss = 0;  // this replica's loss (each replica sees its own micro-batches)
  bool finite = false;
  int buckets = 0;             // gradient buckets summed per step (data parallel)
  double param_checksum = 0;   // sum of the bf16 weights after the last step
  double first_grad_sq = 0;    // squared norm of the first step's summed gradient, before the update
};

// Throws std::runtime_error on CUDA errors, or when the model does not fit.
RunnerResult run_gpt_training(const RunnerConfig& c);

}  // namespace trainsim::gpu

#pragma once
#include <string>
#include <vector>

#include "layout.h"
#include "model_config.h"
#include "precision.h"

namespace trainsim {

// How the cost model times an op: GEMMs from the GEMM efficiency table, attention from the
// attention rate, memory-bound ops from bytes over achieved bandwidth.
enum class OpKind { gemm, attention, memory };

// A tensor-parallel collective an op implies, on the full (un-sharded) activation of `bytes`.
enum class TpComm { none, all_reduce, all_gather, reduce_scatter };

struct Op {
  std::string name;
  std::string kernel;  // memory-bound ops: the kernel class whose calibrated bandwidth times it
  OpKind kind = OpKind::memory;
  double m = 0, n = 0, k = 0;  // GEMM shape on one TP rank
  double flops = 0;            // executed on one TP rank
  double bytes = 0;            // device-memory bytes read + written on one TP rank
  double width = 0;            // memory-bound ops: the model's hidden size (picks the calibrated shape family)
  // Attention: query heads per K/V head (grouped-query attention), and whether dropout is applied
  // to the probabilities (gpt) or not (llama): both pick the calibrated attention shapes.
  double kv_group = 1;
  // GEMM: its output is added into an fp32 buffer (a weight gradient: mixed precision keeps fp32
  // gradients, into which each micro-batch's is accumulated).
  bool accumulate = false;
  bool dropout = true;
  TpComm comm = TpComm::none;  // collective issued after this op (before it for all_gather)
  double comm_bytes = 0;
};

// One transformer layer on one TP rank for one micro-batch, in execution order.
struct LayerOps {
  std::vector<Op> forward;
  std::vector<Op> backward;
  std::vector<Op> recompute;  // forward work re-run at the start of backward (selective or full)
};

struct OpContext {
  const ModelConfig& model;
  int tp = 1;
  bool sequence_parallel = false;
  Recompute recompute = Recompute::none;
  int micro_batch = 1;
  Precision precision = Precision::bf16;
};

LayerOps transformer_layer_ops(const OpContext& c);
// Token (+ position) embedding on the first stage.
LayerOps embedding_ops(const OpContext& c);
// Final norm, logits GEMM (vocabulary split over TP) and cross-entropy on the last stage.
LayerOps head_ops(const OpContext& c);

double total_flops(const std::vector<Op>& ops);
const char* to_string(TpComm c);

}  // namespace trainsim

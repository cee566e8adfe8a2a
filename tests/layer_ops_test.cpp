// Per-layer operations: FLOPs against closed forms and the communication each op implies.
#include <gtest/gtest.h>

#include <set>

#include "layer_ops.h"
#include "memory_kernels.h"
#include "model_presets.h"

using namespace trainsim;

namespace {
double gemm_flops(const std::vector<Op>& ops) {
  double f = 0;
  for (const auto& op : ops)
    if (op.kind == OpKind::gemm) f += op.flops;
  return f;
}
int count(const std::vector<Op>& ops, TpComm c) {
  int n = 0;
  for (const auto& op : ops) n += op.comm == c;
  return n;
}
}  // namespace

TEST(LayerOps, GemmFlopsAreTwoPerParameterPerToken) {
  // Forward GEMMs of one llama layer do 2 FLOPs per weight per token: 2 * b s * (4 h^2 + 3 h f)
  // for Llama-2-7B with b = 1, s = 4096 (kv = h). Backward does twice that.
  const ModelConfig m = *find_model_preset("llama2-7b");
  OpContext c{m, 1, false, Recompute::none, 1, Precision::bf16};
  const LayerOps L = transformer_layer_ops(c);
  const double h = 4096, f = 11008, tokens = 4096;
  EXPECT_DOUBLE_EQ(gemm_flops(L.forward), 2 * tokens * (4 * h * h + 3 * h * f));
  EXPECT_DOUBLE_EQ(gemm_flops(L.backward), 2 * gemm_flops(L.forward));
}

TEST(LayerOps, TensorParallelSplitsFlopsEvenly) {
  const ModelConfig m = *find_model_preset("gpt-1.3b");
  OpContext one{m, 1, false, Recompute::none, 2, Precision::bf16};
  OpContext four{m, 4, false, Recompute::none, 2, Precision::bf16};
  EXPECT_DOUBLE_EQ(total_flops(transformer_layer_ops(four).forward) * 4, total_flops(transformer_layer_ops(one).forward));
}

TEST(LayerOps, MegatronCommunicationPattern) {
  // Without SP: two all-reduces forward (after attention and MLP), two backward. With SP: two
  // all-gathers and two reduce-scatters each way. Each moves the full b s h activation.
  const ModelConfig m = *find_model_preset("gpt-1.3b");
  OpContext tp{m, 8, false, Recompute::none, 1, Precision::bf16};
  const LayerOps a = transformer_layer_ops(tp);
  EXPECT_EQ(count(a.forward, TpComm::all_reduce), 2);
  EXPECT_EQ(count(a.backward, TpComm::all_reduce), 2);
  OpContext sp{m, 8, true, Recompute::none, 1, Precision::bf16};
  const LayerOps b = transformer_layer_ops(sp);
  EXPECT_EQ(count(b.forward, TpComm::all_gather), 2);
  EXPECT_EQ(count(b.forward, TpComm::reduce_scatter), 2);
  EXPECT_EQ(count(b.backward, TpComm::all_gather), 2);
  EXPECT_EQ(count(b.backward, TpComm::reduce_scatter), 2);
  for (const auto& op : b.forward) {
    if (op.comm != TpComm::none) {
      EXPECT_DOUBLE_EQ(op.comm_bytes, 2048.0 * 2048 * 2);
    }
  }
  OpContext none{m, 1, false, Recompute::none, 1, Precision::bf16};
  EXPECT_EQ(count(transformer_layer_ops(none).forward, TpComm::all_reduce), 0);
}

TEST(LayerOps, RecomputePolicies) {
  // Full recompute re-runs the whole forward (with its TP collectives); selective only attention.
  const ModelConfig m = *find_model_preset("gpt-1.3b");
  OpContext full{m, 2, false, Recompute::full, 1, Precision::bf16};
  const LayerOps f = transformer_layer_ops(full);
  EXPECT_DOUBLE_EQ(total_flops(f.recompute), total_flops(f.forward));
  EXPECT_EQ(count(f.recompute, TpComm::all_reduce), 2);
  OpContext sel{m, 2, false, Recompute::selective, 1, Precision::bf16};
  const LayerOps s = transformer_layer_ops(sel);
  ASSERT_EQ(s.recompute.size(), 1u);
  EXPECT_EQ(s.recompute[0].kind, OpKind::attention);
  // Attention core: 4 b s^2 h / t FLOPs = 4 * 2048^2 * 2048 / 2.
  EXPECT_DOUBLE_EQ(s.recompute[0].flops, 4.0 * 2048 * 2048 * 2048 / 2);
  OpContext no{m, 2, false, Recompute::none, 1, Precision::bf16};
  EXPECT_TRUE(transformer_layer_ops(no).recompute.empty());
}

TEST(LayerOps, HeadSplitsVocabularyOverTp) {
  const ModelConfig m = *find_model_preset("llama3-8b");
  OpContext c{m, 4, true, Recompute::none, 1, Precision::bf16};
  const LayerOps h = head_ops(c);
  // logits: 2 * b s * h * V / t.
  EXPECT_DOUBLE_EQ(gemm_flops(h.forward), 2.0 * 8192 * 4096 * 128256 / 4);
}

TEST(LayerOps, EveryMemoryBoundOpIsPricedByAKernelTheProfilesName) {
  // A profile's gpu.memory_kernels accepts only memory_kernel_names(); each memory-bound op of
  // either family, under any TP degree, sequence parallelism and recompute, names one of them,
  // and every name but the optimizer's (priced by the cost model itself) is some op's.
  std::set<std::string> used;
  for (const char* preset : {"gpt-1.3b", "llama3-8b", "llama2-7b"})
    for (const int tp : {1, 8})
      for (const bool sp : {false, true})
        for (const Recompute r : {Recompute::none, Recompute::selective, Recompute::full}) {
          if (sp && tp == 1) continue;
          const ModelConfig m = *find_model_preset(preset);  // OpContext keeps a reference to it
          const OpContext c{m, tp, sp, r, 2, Precision::bf16};
          for (const LayerOps& L : {transformer_layer_ops(c), embedding_ops(c), head_ops(c)})
            for (const auto* ops : {&L.forward, &L.backward, &L.recompute})
              for (const Op& op : *ops)
                if (op.kind == OpKind::memory) {
                  EXPECT_TRUE(is_memory_kernel(op.kernel)) << preset << " " << op.name << " priced as \"" << op.kernel << "\"";
                  used.insert(op.kernel);
                }
        }
  for (const std::string& k : memory_kernel_names()) {
    if (k == "adam") continue;
    EXPECT_TRUE(used.count(k)) << k << " is listed but no op is priced by it";
  }
}

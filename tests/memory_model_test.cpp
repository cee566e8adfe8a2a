// Memory terms against Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
// Transformer Models", section 4) and the ZeRO paper's bytes per parameter.
#include <gtest/gtest.h>

#include "memory_model.h"
#include "model_presets.h"

using namespace trainsim;

namespace {
// A GPT layer with round numbers: s = 2048, b = 1, h = 4096, a = 32 heads, f = 4h.
ModelConfig gpt_layer() {
  ModelConfig m;
  m.name = "gpt-test";
  m.family = Family::gpt;
  m.layers = 32;
  m.hidden = 4096;
  m.heads = 32;
  m.kv_heads = 32;
  m.ffn_hidden = 4 * 4096;
  m.vocab = 51200;
  m.seq_len = 2048;
  m.tied_embeddings = true;
  return m;
}
constexpr double s = 2048, b = 1, h = 4096, a = 32;
}  // namespace

TEST(ActivationMemory, KorthikantiNoParallelism) {
  // Per layer, no TP, no recompute: s b h (34 + 5 a s / h) bytes.
  // = 2048 * 4096 * (34 + 5 * 32 * 2048 / 4096) = 8,388,608 * 114 = 956,301,312.
  const auto act = layer_activation_bytes(gpt_layer(), 1, false, Recompute::none, 1);
  EXPECT_DOUBLE_EQ(act.total, s * b * h * (34 + 5 * a * s / h));
  EXPECT_DOUBLE_EQ(act.total, 956301312.0);
}

TEST(ActivationMemory, KorthikantiTensorParallel) {
  // TP t = 8 without SP: s b h (10 + 24/t + 5 a s / (h t)).
  const double t = 8;
  const auto act = layer_activation_bytes(gpt_layer(), 8, false, Recompute::none, 1);
  EXPECT_DOUBLE_EQ(act.total, s * b * h * (10 + 24 / t + 5 * a * s / (h * t)));
}

TEST(ActivationMemory, KorthikantiSequenceParallel) {
  // TP + SP: s b h / t (34 + 5 a s / h).
  const double t = 8;
  const auto act = layer_activation_bytes(gpt_layer(), 8, true, Recompute::none, 1);
  EXPECT_DOUBLE_EQ(act.total, s * b * h / t * (34 + 5 * a * s / h));
}

TEST(ActivationMemory, KorthikantiSelectiveRecompute) {
  // Selective recompute drops the 5 a s^2 b terms: with TP + SP, 34 s b h / t; without SP,
  // s b h (10 + 24 / t).
  const double t = 8;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(gpt_layer(), 8, true, Recompute::selective, 1).total, 34 * s * b * h / t);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(gpt_layer(), 8, false, Recompute::selective, 1).total, s * b * h * (10 + 24 / t));
}

TEST(ActivationMemory, FullRecomputeKeepsLayerInput) {
  // Full recompute keeps only the layer input, 2 s b h bytes (split over t with SP).
  EXPECT_DOUBLE_EQ(layer_activation_bytes(gpt_layer(), 1, false, Recompute::full, 1).total, 2 * s * b * h);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(gpt_layer(), 8, true, Recompute::full, 1).total, 2 * s * b * h / 8);
}

TEST(ActivationMemory, ScalesWithMicroBatch) {
  const auto one = layer_activation_bytes(gpt_layer(), 2, true, Recompute::selective, 1);
  const auto four = layer_activation_bytes(gpt_layer(), 2, true, Recompute::selective, 4);
  EXPECT_DOUBLE_EQ(four.total, 4 * one.total);
}

TEST(ActivationMemory, LlamaHasNoDropoutTerms) {
  // Llama 2 7B layer (h = 4096, f = 11008, kv = h, no dropout), no TP:
  // replicated 8h, sharded Q,K 2h + 2kv, V 2kv, out-proj input 2h, SwiGLU 6f; scores 2 a s.
  const ModelConfig m = *find_model_preset("llama2-7b");
  const double S = 4096, f = 11008;
  const double per_token = 8 * h + (2 * h + 2 * h + 2 * h + 2 * h) + 6 * f + 2 * a * S;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, 1, false, Recompute::none, 1).total, S * per_token);
}

TEST(InflightMicrobatches, ClosedForms) {
  // GPipe keeps all m; 1F1B keeps p - stage (at most m); interleaved (Megatron) keeps
  // 2 (p - stage - 1) + (v - 1) p + 1 chunks.
  EXPECT_EQ(inflight_microbatches(Schedule::gpipe, 4, 1, 16, 0), 16);
  EXPECT_EQ(inflight_microbatches(Schedule::one_f_one_b, 4, 1, 16, 0), 4);
  EXPECT_EQ(inflight_microbatches(Schedule::one_f_one_b, 4, 1, 16, 3), 1);
  EXPECT_EQ(inflight_microbatches(Schedule::one_f_one_b, 8, 1, 3, 0), 3);
  EXPECT_EQ(inflight_microbatches(Schedule::interleaved, 4, 2, 16, 0), 2 * 3 + 1 * 4 + 1);
  // Korthikanti: the first stage of an interleaved pipeline holds L (1 + (p - 1) / (p v)) layers'
  // activations: with p = 4, v = 2 and L/(p v) layers per chunk, 11 chunks = L * 11/8.
  EXPECT_EQ(inflight_microbatches(Schedule::interleaved, 4, 2, 16, 0), 11);
}

TEST(StateMemory, ZeroStagesShardStates) {
  // One stage, no TP: Phi parameters. Bytes per parameter: 2 (bf16 weights) + 4 (fp32 gradients)
  // + 12 (fp32 master, momentum, variance) = 18. ZeRO-1 divides the 12 by dp, ZeRO-2 also the 4,
  // ZeRO-3 also the 2.
  const ModelConfig m = *find_model_preset("llama2-7b");
  const double phi = static_cast<double>(count_params(m).total);
  Layout l;
  l.dp = 8;
  for (int z = 0; z <= 3; ++z) {
    l.zero = z;
    const auto r = estimate_memory({m, l, Precision::bf16, 64, 141e9});
    const auto& p = r.peak();
    EXPECT_DOUBLE_EQ(p.optimizer_bytes, 12 * phi / (z >= 1 ? 8 : 1)) << z;
    EXPECT_DOUBLE_EQ(p.grads_bytes, 4 * phi / (z >= 2 ? 8 : 1)) << z;
    EXPECT_DOUBLE_EQ(p.params_bytes, 2 * phi / (z >= 3 ? 8 : 1)) << z;
  }
}

TEST(StateMemory, PipelineStagesSplitLayersAndKeepEmbeddings) {
  const ModelConfig m = *find_model_preset("llama2-7b");
  // 32 layers over 4 stages: 8 each. Stage 0 adds the embedding, the last stage the head.
  for (int st = 0; st < 4; ++st) EXPECT_EQ(layers_on_stage(32, 4, st), 8);
  const ParamCount pc = count_params(m);
  EXPECT_DOUBLE_EQ(stage_params_per_rank(m, 1, 4, 0), 8.0 * pc.per_layer + pc.embedding);
  EXPECT_DOUBLE_EQ(stage_params_per_rank(m, 1, 4, 3), 8.0 * pc.per_layer + pc.final_norm + pc.lm_head);
  // 30 layers over 4 stages: the two extra layers go to the middle stages.
  EXPECT_EQ(layers_on_stage(30, 4, 0), 7);
  EXPECT_EQ(layers_on_stage(30, 4, 1), 8);
  EXPECT_EQ(layers_on_stage(30, 4, 2), 8);
  EXPECT_EQ(layers_on_stage(30, 4, 3), 7);
}

TEST(StateMemory, OomVerdictAndPeakStage) {
  // Llama 2 70B without any parallelism needs 18 bytes x 69e9 parameters > 141 GB.
  const ModelConfig m = *find_model_preset("llama2-70b");
  Layout l;
  const auto r = estimate_memory({m, l, Precision::bf16, 8, 141e9});
  EXPECT_TRUE(r.oom);
  EXPECT_GT(r.peak().peak_bytes, 18 * 68e9);
  // With 1F1B the first stage holds the most micro-batches.
  Layout pp;
  pp.pp = 4;
  pp.tp = 8;
  pp.dp = 1;
  pp.sequence_parallel = true;
  pp.recompute = Recompute::selective;
  const auto r2 = estimate_memory({m, pp, Precision::bf16, 32, 141e9});
  EXPECT_EQ(r2.peak_stage, 0);
  EXPECT_FALSE(r2.oom);
  EXPECT_GT(r2.per_stage[0].activations_bytes, r2.per_stage[2].activations_bytes);
}

TEST(StateMemory, WorkspaceAllowanceIsStated) {
  // Without measured runtime memory: the fixed allowance plus 5% of activations and buffers.
  const ModelConfig m = *find_model_preset("gpt-125m");
  Layout l;
  const auto r = estimate_memory({m, l, Precision::bf16, 8, 80e9});
  const auto& p = r.peak();
  EXPECT_DOUBLE_EQ(p.runtime_bytes, kFixedWorkspaceBytes);
  EXPECT_FALSE(p.runtime_measured);
  EXPECT_DOUBLE_EQ(p.fragmentation_bytes, kFragmentationFraction * (p.activations_bytes + p.buffers_bytes));
  EXPECT_DOUBLE_EQ(p.workspace_bytes, p.runtime_bytes + p.fragmentation_bytes);
  EXPECT_DOUBLE_EQ(p.peak_bytes, p.params_bytes + p.grads_bytes + p.optimizer_bytes + p.activations_bytes + p.buffers_bytes + p.workspace_bytes);
  EXPECT_DOUBLE_EQ(p.arena_peak_bytes(), p.peak_bytes - p.fragmentation_bytes);
}

TEST(StateMemory, CommunicatorsAreTheGroupsARankBelongsTo) {
  // One GPU: none. Data parallel only: the world is the data-parallel group. Otherwise the world
  // plus tensor, data and pipeline groups of more than one rank, plus the embedding group on the
  // first and last stage.
  auto lay = [](int tp, int pp, int dp) {
    Layout l;
    l.tp = tp;
    l.pp = pp;
    l.dp = dp;
    return l;
  };
  EXPECT_EQ(nccl_communicators(lay(1, 1, 1), 0), 0);
  EXPECT_EQ(nccl_communicators(lay(1, 1, 8), 0), 1);
  EXPECT_EQ(nccl_communicators(lay(8, 1, 1), 0), 2);
  EXPECT_EQ(nccl_communicators(lay(8, 1, 4), 0), 3);
  EXPECT_EQ(nccl_communicators(lay(1, 2, 1), 0), 3);
  EXPECT_EQ(nccl_communicators(lay(1, 2, 1), 1), 3);
  EXPECT_EQ(nccl_communicators(lay(8, 4, 2), 0), 5);  // world, tp, dp, pp, embedding
  EXPECT_EQ(nccl_communicators(lay(8, 4, 2), 1), 4);
  EXPECT_EQ(nccl_communicators(lay(8, 4, 2), 3), 5);
}

TEST(StateMemory, RuntimeMemoryGrowsWithTheCommunicators) {
  // context + first + (n - 1) further, n from the groups above; fragmentation on top.
  const ModelConfig m = *find_model_preset("gpt-350m");
  const RuntimeMemory rt{0.7e9, 0.9e9, 0.45e9};
  Layout l;
  l.tp = 2;
  l.pp = 4;
  l.dp = 2;
  const auto r = estimate_memory({m, l, Precision::bf16, 64, 141e9, rt});
  EXPECT_DOUBLE_EQ(r.per_stage[0].runtime_bytes, 0.7e9 + 0.9e9 + 4 * 0.45e9);  // world, tp, dp, pp, embedding
  EXPECT_DOUBLE_EQ(r.per_stage[1].runtime_bytes, 0.7e9 + 0.9e9 + 3 * 0.45e9);
  EXPECT_EQ(r.per_stage[3].nccl_communicators, 5);
  EXPECT_TRUE(r.per_stage[0].runtime_measured);
  Layout one;
  const auto r1 = estimate_memory({m, one, Precision::bf16, 8, 141e9, rt});
  EXPECT_DOUBLE_EQ(r1.peak().runtime_bytes, 0.7e9);
  for (const auto& st : r.per_stage) EXPECT_DOUBLE_EQ(st.workspace_bytes, st.runtime_bytes + st.fragmentation_bytes);
}

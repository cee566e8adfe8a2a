// Parameter counts against the published totals, and the per-token FLOP formula.
#include <gtest/gtest.h>

#include "model_config.h"
#include "model_presets.h"

using namespace trainsim;

namespace {
std::int64_t total(const char* name) { return count_params(*find_model_preset(name)).total; }
}  // namespace

TEST(ModelParams, LlamaPublishedTotals) {
  // Totals as the released checkpoints report them (sum of tensor sizes in the model cards'
  // safetensors index): Llama-2-7B 6,738,415,616; Llama-2-13B 13,015,864,320;
  // Llama-2-70B 68,976,648,192; Llama-3-8B 8,030,261,248; Llama-3-70B 70,553,706,496;
  // Llama-3.1-405B 405,853,388,800.
  EXPECT_EQ(total("llama2-7b"), 6738415616LL);
  EXPECT_EQ(total("llama2-13b"), 13015864320LL);
  EXPECT_EQ(total("llama2-70b"), 68976648192LL);
  EXPECT_EQ(total("llama3-8b"), 8030261248LL);
  EXPECT_EQ(total("llama3-70b"), 70553706496LL);
  EXPECT_EQ(total("llama3-405b"), 405853388800LL);
}

TEST(ModelParams, Llama2_7bByHand) {
  // Per layer: attention 4 h^2 = 4 * 4096^2 = 67,108,864; SwiGLU 3 h f = 3 * 4096 * 11008 =
  // 135,266,304; two RMSNorms 2h = 8,192 -> 202,383,360. Times 32 layers = 6,476,267,520.
  // Embedding and LM head 2 * 32000 * 4096 = 262,144,000; final norm 4,096.
  const ParamCount p = count_params(*find_model_preset("llama2-7b"));
  EXPECT_EQ(p.per_layer, 202383360);
  EXPECT_EQ(p.layers_total, 6476267520LL);
  EXPECT_EQ(p.embedding + p.lm_head, 262144000);
  EXPECT_EQ(p.final_norm, 4096);
}

TEST(ModelParams, Gpt3_175bByHand) {
  // GPT with biases and tied embeddings: per layer 12 h^2 + 13 h = 12 * 12288^2 + 13 * 12288 =
  // 1,811,939,328 + 159,744 = 1,812,099,072; 96 layers = 173,961,510,912. Token embedding
  // 50257 * 12288 = 617,558,016; positions 2048 * 12288 = 25,165,824; final LayerNorm 24,576.
  // Total 174,604,259,328 (the paper's "175B").
  const ParamCount p = count_params(*find_model_preset("gpt3-175b"));
  EXPECT_EQ(p.per_layer, 1812099072LL);
  EXPECT_EQ(p.total, 174604259328LL);
}

TEST(ModelParams, SmallGptSizesMatchTheirNames) {
  // The GPT-3 paper's small models, within 10% of their nominal size.
  const std::pair<const char*, double> sizes[] = {{"gpt-125m", 125e6}, {"gpt-350m", 350e6}, {"gpt-760m", 760e6},
                                                  {"gpt-1.3b", 1.3e9}, {"gpt-2.7b", 2.7e9}, {"gpt-6.7b", 6.7e9}};
  for (const auto& [name, n] : sizes) {
    const double got = static_cast<double>(total(name));
    EXPECT_NEAR(got / n, 1.0, 0.1) << name << " has " << got;
  }
}

TEST(ModelParams, FlopsPerTokenIsSixNPlusAttention) {
  // Llama-2-7B: matrix parameters touched per token = 32 * (4 h^2 + 3 h f) + V h (logits)
  // = 6,476,005,376 + 131,072,000 = 6,607,077,376; 6 N = 39,642,464,256; attention
  // 12 * 32 * 4096 * 4096 = 6,442,450,944; total 46,084,915,200.
  EXPECT_DOUBLE_EQ(model_flops_per_token(*find_model_preset("llama2-7b")), 46084915200.0);
}

TEST(ModelParams, EveryPresetIsValid) {
  for (const auto& name : model_preset_names()) {
    EXPECT_NO_THROW(validate_model(*find_model_preset(name), name)) << name;
  }
  EXPECT_FALSE(find_model_preset("llama4-1t").has_value());
}

TEST(ModelParams, VocabularyPaddedAsMegatronPadsIt) {
  // Megatron-LM pads the vocabulary to the first multiple of make-vocab-size-divisible-by x TP
  // at or above it: GPT-2's 50,257 words with 128 become 50,304 on one rank (393 x 128) and
  // 51,200 over 8 (50 x 1,024, the vocabulary of Narayanan et al.'s GPT-3 runs); Llama 2's
  // 32,000 over 8 become 32,768 (32 x 1,024). Unset, the vocabulary is split as it is.
  ModelConfig m = *find_model_preset("gpt3-175b");
  EXPECT_EQ(padded_vocab(m, 8), 50257);
  m.vocab_divisible_by = 128;
  EXPECT_EQ(padded_vocab(m, 1), 50304);
  EXPECT_EQ(padded_vocab(m, 8), 51200);
  EXPECT_EQ(with_padded_vocab(m, 8).vocab, 51200);
  EXPECT_EQ(with_padded_vocab(m, 8).hidden, m.hidden);
  ModelConfig l = *find_model_preset("llama2-7b");
  l.vocab_divisible_by = 128;
  EXPECT_EQ(padded_vocab(l, 8), 32768);
  EXPECT_EQ(padded_vocab(l, 1), 32000);  // already a multiple of 128
}

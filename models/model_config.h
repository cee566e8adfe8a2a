#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace trainsim {

// gpt: LayerNorm (with bias), GELU MLP with biases, learned positions, biases on every linear.
// llama: RMSNorm, SwiGLU MLP, rotary positions, grouped-query attention, no biases.
enum class Family { gpt, llama };

struct ModelConfig {
  std::string name;
  Family family = Family::gpt;
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int kv_heads = 0;      // == heads for multi-head attention
  int ffn_hidden = 0;
  int vocab = 0;
  int seq_len = 0;
  bool tied_embeddings = false;
  // Megatron-LM's --make-vocab-size-divisible-by: the embedding and the output layer are padded to
  // the first multiple of this times the TP degree at or above `vocab` (padded_vocab). 0: not
  // padded, the vocabulary split over the TP ranks as it is (as the project's step runner runs it).
  int vocab_divisible_by = 0;

  int head_dim() const { return hidden / heads; }
  int kv_hidden() const { return kv_heads * head_dim(); }
};

// Exact parameter counts, by part.
struct ParamCount {
  std::int64_t embedding = 0;   // token (+ learned position) embedding
  std::int64_t per_layer = 0;   // one transformer layer
  std::int64_t final_norm = 0;
  std::int64_t lm_head = 0;     // 0 when tied to the embedding
  std::int64_t layers_total = 0;
  std::int64_t total = 0;
};

ParamCount count_params(const ModelConfig& m);

// The vocabulary as laid out over `tp` ranks: `vocab` rounded up to a multiple of
// vocab_divisible_by x tp, or `vocab` itself where vocab_divisible_by is 0.
int padded_vocab(const ModelConfig& m, int tp);
// The model as it runs over `tp` ranks: its vocabulary padded (the rest unchanged).
ModelConfig with_padded_vocab(const ModelConfig& m, int tp);

// Model FLOPs per token for one forward+backward pass (no recompute): 6 per parameter of every
// matrix that touches the token (all linear layers and the logits), plus attention's
// 12·layers·hidden·seq (QK^T and AV, forward 4·s·h per token per layer, backward twice that), as in
// PaLM (Chowdhery et al. 2022, appendix B). Embedding lookups are not FLOPs.
double model_flops_per_token(const ModelConfig& m);

// Checks the shape for internal consistency; throws InputError naming `where`.
void validate_model(const ModelConfig& m, const std::string& where);

const char* to_string(Family f);

}  // namespace trainsim

#include "model_config.h"

#include <algorithm>

#include "input_error.h"

namespace trainsim {

const char* to_string(Family f) { return f == Family::gpt ? "gpt" : "llama"; }

ParamCount count_params(const ModelConfig& m) {
  ParamCount p;
  const std::int64_t h = m.hidden, f = m.ffn_hidden, v = m.vocab, kv = m.kv_hidden();
  if (m.family == Family::gpt) {
    // Attention: QKV (h x 3h + 3h bias), output (h x h + h). MLP: h x f + f, f x h + h.
    // Two LayerNorms with weight and bias: 4h.
    const std::int64_t attn = h * (h + 2 * kv) + (h + 2 * kv) + h * h + h;
    const std::int64_t mlp = h * f + f + f * h + h;
    p.per_layer = attn + mlp + 4 * h;
    p.embedding = v * h + static_cast<std::int64_t>(m.seq_len) * h;
    p.final_norm = 2 * h;
  } else {
    // Attention: Q (h x h), K and V (h x kv each), O (h x h). SwiGLU: gate and up (h x f), down (f x h).
    // Two RMSNorms with weight only: 2h.
    const std::int64_t attn = h * h + 2 * h * kv + h * h;
    const std::int64_t mlp = 3 * h * f;
    p.per_layer = attn + mlp + 2 * h;
    p.embedding = v * h;
    p.final_norm = h;
  }
  p.lm_head = m.tied_embeddings ? 0 : v * h;
  p.layers_total = p.per_layer * m.layers;
  p.total = p.embedding + p.layers_total + p.final_norm + p.lm_head;
  return p;
}

int padded_vocab(const ModelConfig& m, int tp) {
  if (m.vocab_divisible_by <= 0) return m.vocab;
  const std::int64_t unit = static_cast<std::int64_t>(m.vocab_divisible_by) * std::max(1, tp);
  return static_cast<int>((m.vocab + unit - 1) / unit * unit);
}

ModelConfig with_padded_vocab(const ModelConfig& m, int tp) {
  ModelConfig p = m;
  p.vocab = padded_vocab(m, tp);
  return p;
}

double model_flops_per_token(const ModelConfig& m) {
  const double h = m.hidden, f = m.ffn_hidden, kv = m.kv_hidden(), v = m.vocab;
  const double mlp_mats = (m.family == Family::gpt ? 2.0 : 3.0) * h * f;
  const double attn_mats = 2.0 * h * h + 2.0 * h * kv;
  const double matrix_params = m.layers * (mlp_mats + attn_mats) + v * h;  // + logits
  return 6.0 * matrix_params + 12.0 * m.layers * h * m.seq_len;
}

void validate_model(const ModelConfig& m, const std::string& where) {
  auto positive = [&](int value, const char* key) {
    if (value <= 0)
      throw InputError(where + "." + key, "expected a positive integer, found " + std::to_string(value));
  };
  positive(m.layers, "layers");
  positive(m.hidden, "hidden");
  positive(m.heads, "heads");
  positive(m.kv_heads, "kv_heads");
  positive(m.ffn_hidden, "ffn_hidden");
  positive(m.vocab, "vocab");
  positive(m.seq_len, "seq_len");
  if (m.hidden % m.heads != 0)
    throw InputError(where + ".heads", "hidden (" + std::to_string(m.hidden) +
                                           ") must be divisible by heads (" + std::to_string(m.heads) + ")");
  if (m.heads % m.kv_heads != 0)
    throw InputError(where + ".kv_heads", "heads (" + std::to_string(m.heads) +
                                              ") must be divisible by kv_heads (" +
                                              std::to_string(m.kv_heads) + ")");
}

}  // namespace trainsim

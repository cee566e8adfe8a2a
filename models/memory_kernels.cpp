#include "memory_kernels.h"

#include <algorithm>

namespace trainsim {

const std::vector<std::string>& memory_kernel_names() {
  static const std::vector<std::string> names = {
      // Both families: norms (and their backward), residual adds, the embedding, the loss.
      "layernorm", "layernorm.bwd", "rmsnorm", "rmsnorm.bwd", "residual", "bias_dropout_residual", "dropout_residual.bwd",
      "embedding", "embedding.bwd", "cross_entropy",
      // GPT-style: biased QKV split and merge, the heads' layout changes, GeLU.
      "qkv_bias_split", "qkv_merge_bias.bwd", "attention_split_heads.bwd", "attention_merge_heads", "bias_gelu", "gelu_bias.bwd",
      // Llama-style: QKV without bias, rotary embeddings, SwiGLU.
      "qkv_split", "qkv_merge.bwd", "rope", "rope.bwd", "swiglu", "swiglu.bwd",
      // The optimizer's fused Adam update.
      "adam"};
  return names;
}

bool is_memory_kernel(const std::string& name) {
  const auto& n = memory_kernel_names();
  return std::find(n.begin(), n.end(), name) != n.end();
}

}  // namespace trainsim

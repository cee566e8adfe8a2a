#include "model_presets.h"

namespace trainsim {
namespace {

ModelConfig gpt(const char* name, int layers, int hidden, int heads, int seq) {
  return ModelConfig{name, Family::gpt, layers, hidden, heads, heads, 4 * hidden, 50257, seq, true};
}

ModelConfig llama(const char* name, int layers, int hidden, int heads, int kv, int ffn, int vocab,
                  int seq) {
  return ModelConfig{name, Family::llama, layers, hidden, heads, kv, ffn, vocab, seq, false};
}

const std::vector<ModelConfig>& presets() {
  static const std::vector<ModelConfig> all = {
      // GPT-3 family shapes (table 2.1), GPT-2 vocabulary, tied embeddings, learned positions.
      gpt("gpt-125m", 12, 768, 12, 2048),
      gpt("gpt-350m", 24, 1024, 16, 2048),
      gpt("gpt-760m", 24, 1536, 16, 2048),
      gpt("gpt-1.3b", 24, 2048, 16, 2048),
      gpt("gpt-2.7b", 32, 2560, 32, 2048),
      gpt("gpt-6.7b", 32, 4096, 32, 2048),
      gpt("gpt3-175b", 96, 12288, 96, 2048),
      // Megatron-Turing NLG 530B (Smith et al. 2022): 105 layers, hidden 20480, 128 heads.
      gpt("mt-nlg-530b", 105, 20480, 128, 2048),
      llama("llama2-7b", 32, 4096, 32, 32, 11008, 32000, 4096),
      llama("llama2-13b", 40, 5120, 40, 40, 13824, 32000, 4096),
      llama("llama2-70b", 80, 8192, 64, 8, 28672, 32000, 4096),
      llama("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192),
      llama("llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192),
      llama("llama3-405b", 126, 16384, 128, 8, 53248, 128256, 8192),
  };
  return all;
}

}  // namespace

std::optional<ModelConfig> find_model_preset(const std::string& name) {
  for (const auto& m : presets())
    if (m.name == name) return m;
  return std::nullopt;
}

std::vector<std::string> model_preset_names() {
  std::vector<std::string> names;
  for (const auto& m : presets()) names.push_back(m.name);
  return names;
}

}  // namespace trainsim

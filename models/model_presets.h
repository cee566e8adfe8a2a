#pragma once
#include <optional>
#include <string>
#include <vector>

#include "model_config.h"

namespace trainsim {

// Published architectures. Sources: GPT-3 (Brown et al. 2020, table 2.1), Llama 2 (Touvron et al.
// 2023, and the released config.json files), Llama 3 (Dubey et al. 2024, table 3).
std::optional<ModelConfig> find_model_preset(const std::string& name);
std::vector<std::string> model_preset_names();

}  // namespace trainsim

#pragma once
#include <string>

namespace trainsim {

// Training precision: the dtype of weights/activations in compute. Master weights and Adam states are
// fp32 in every mode (mixed precision).
enum class Precision { bf16, fp16, fp8 };

Precision parse_precision(const std::string& s, const std::string& where);
const char* to_string(Precision p);
// Bytes per element of activations and the compute copy of the weights.
double activation_bytes(Precision p);
// fp8 training keeps activations that feed GEMMs in bf16 in this model (Transformer Engine keeps
// higher-precision copies for backward), so only GEMM throughput changes with fp8.

}  // namespace trainsim

#include "precision.h"

#include "input_error.h"

namespace trainsim {

Precision parse_precision(const std::string& s, const std::string& where) {
  if (s == "bf16") return Precision::bf16;
  if (s == "fp16") return Precision::fp16;
  if (s == "fp8") return Precision::fp8;
  throw InputError(where, "expected one of \"bf16\", \"fp16\", \"fp8\", found \"" + s + "\"");
}

const char* to_string(Precision p) {
  switch (p) {
    case Precision::bf16: return "bf16";
    case Precision::fp16: return "fp16";
    case Precision::fp8: return "fp8";
  }
  return "?";
}

double activation_bytes(Precision) { return 2.0; }

}  // namespace trainsim

// The GEMMs a kernel-class record timed inside its steps, priced by the cost model and summed by
// their time in the step. Build from the repository root after a build in build/:
//   g++ -std=c++20 -O1 -I. calibrate/records/2026-12-06-h100-session-48-token-grid/gemm_error_by_length.cpp build/models/libmodels.a -o /tmp/by_length
//   /tmp/by_length h100-sxm tests/validation/h100-llama-one-gpu-kernel-classes*.json
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include "models/cost_model.h"
#include "models/hardware_profile.h"
using namespace trainsim;
int main(int argc, char** argv) {
  const HardwareProfile hp = load_hardware_profile(argv[1], "models/hardware");
  CostModel c(hp, Precision::bf16);
  for (int f = 2; f < argc; ++f) {
    auto doc = nlohmann::json::parse(std::ifstream(argv[f]));
    struct Bin { double n = 0, pred = 0, meas = 0; };
    Bin bins[4];
    for (auto& run : doc["runs"]) for (auto& g : run["kernel_classes"]["gemm_shapes"]) {
      double m = g["m"], n = g["n"], k = g["k"], meas = g["measured_s"], calls = g["calls_per_step"];
      bool acc = g.value("accumulate", false);
      double p = c.gemm_time_s(m, n, k, acc);
      int b = meas < 100e-6 ? 0 : meas < 300e-6 ? 1 : meas < 1000e-6 ? 2 : 3;
      bins[b].n += 1; bins[b].pred += p * calls; bins[b].meas += meas * calls;
    }
    std::printf("%s\n", argv[f]);
    const char* names[] = {"<0.1ms", "0.1-0.3ms", "0.3-1ms", ">1ms"};
    for (int b = 0; b < 4; ++b) if (bins[b].n) std::printf("  %-10s n=%3.0f summed %+.1f%%\n", names[b], bins[b].n, 100 * (bins[b].pred / bins[b].meas - 1));
  }
}

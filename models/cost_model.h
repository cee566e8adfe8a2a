#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "hardware_profile.h"
#include "layer_ops.h"
#include "layout.h"
#include "precision.h"

namespace trainsim {

// Times of work on one GPU from a hardware profile: GEMMs from the achieved-rate table (nearest
// measured shape in log space, capped by the roofline), attention from its achieved fraction of
// peak at the nearest measured shape, memory-bound kernels from bytes over the achieved bandwidth
// at that size. Kernels are issued asynchronously, so none takes less than the launch interval.
class CostModel {
 public:
  CostModel(const HardwareProfile& hw, Precision p);

  double op_time_s(const Op& op) const;
  // `accumulate`: the output is added into an fp32 buffer (a mixed-precision weight gradient),
  // timed from the profile's table of such GEMMs where it has one (bf16 and fp16 steps).
  double gemm_time_s(double m, double n, double k, bool accumulate = false) const;
  double memory_time_s(double bytes) const;
  // A memory-bound op of a kernel class the profile measured (else the generic table), at the
  // rates measured for the hidden size nearest `width` (in log space; 0: any).
  double kernel_time_s(const std::string& kernel, double bytes, double width = 0) const;
  // Mixed-precision Adam over `params` parameters: reads fp32 master, momentum, variance and
  // gradient (16 bytes), writes the first three and the bf16 weights (14 bytes), then zeroes the
  // fp32 gradient for the next step (4 bytes): 34 bytes per parameter.
  double adam_time_s(double params) const;
  // Kernel time to compress `bytes` of gradients and to decompress the received result.
  double compression_time_s(const Compression& c, double bytes) const;
  double gemm_rate_tflops(double m, double n, double k, bool accumulate = false) const;

  const HardwareProfile& hardware() const { return hw_; }
  // Distinct for every cost model the process builds: a cache of times worked out with one cost
  // model keys on it.
  std::uint64_t instance() const { return instance_; }
  double launch_s() const { return hw_.kernel_launch_us * 1e-6; }
  double peak_flops() const;  // dense peak of the training dtype, FLOP/s

 private:
  const HardwareProfile& hw_;
  Precision precision_;
  std::uint64_t instance_ = 0;
  // A GEMM table with its shapes in log space, whether each is misaligned, and its row; computed
  // once and ordered by log m, so that a nearest-shape search can stop scanning once m alone is
  // farther than the best match.
  struct LogShape {
    double lm, ln, lk;
    bool misaligned;
    std::size_t row;
  };
  struct Table {
    const std::vector<GemmPoint>* rows = nullptr;
    double scale = 1.0;  // fp8 without an fp8 table: bf16 table times the peak ratio
    std::vector<LogShape> log;
    void index(const std::vector<GemmPoint>& t, double s);
    double rate(double m, double n, double k, std::vector<std::size_t>& tie_rows) const;
  };
  Table table_;
  Table accumulate_table_;  // kGemmAccumulateFp32, where the profile has it and the step is bf16 or fp16
  mutable std::vector<std::size_t> tie_rows_;  // scratch for gemm_rate_tflops
  // GEMM times already looked up, by shape: a step asks for the same few shapes many times. Makes
  // a CostModel unsafe to share between threads; use one per thread.
  struct ShapeHash {
    std::size_t operator()(const std::array<double, 3>& s) const noexcept;
  };
  mutable std::unordered_map<std::array<double, 3>, double, ShapeHash> gemm_memo_, accumulate_memo_;
};

// The time a step with every layer on one GPU spends in each kind of kernel, as `c` prices them:
// `microbatches` x (layers x the layer's ops, forward, backward and recompute, + the embedding's
// and the head's). `other_s` is the memory-bound kernels' (`by_kernel` by kernel name): the part a
// clock below calibrate's stretches by HardwareProfile::elementwise_clock_factor.
struct KernelClasses {
  double gemm_s = 0, attention_s = 0, other_s = 0;
  double gemm_flops = 0, attention_flops = 0;  // executed, as the ops count them
  std::map<std::string, double> by_kernel;
};
KernelClasses one_gpu_kernel_classes(const CostModel& c, const OpContext& ctx, int layers, double microbatches);

}  // namespace trainsim

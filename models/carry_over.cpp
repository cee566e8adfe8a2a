#include "carry_over.h"

#include <algorithm>
#include <vector>

#include "input_error.h"

namespace trainsim {

// The unfused attention per element of the batch x heads x seq x seq matrices, in bytes of device
// memory (bf16 values, 2 bytes; the dropout mask, 1), with a row's repeated reads inside one kernel
// (4-16 KiB, read again by the warp that just read it) served from cache:
//   forward: S = Q K^T writes S (2); the softmax reads the causal half of S (1) and writes P (2),
//   with dropout also the dropped-out P (2) and the mask (1); O = P V reads P (2).
//   7 bytes, 10 with dropout.
//   backward: dV = P^T dO reads P (2); dP = dO V^T writes dP (2); the softmax's backward reads P (2),
//   dP (2), with dropout the mask (1), and writes dS (2); dQ = dS K and dK = dS^T Q read dS (2 + 2).
//   14 bytes, 15 with dropout.
double attention_score_bytes(const HardwareProfile::AttentionPoint& p, bool backward) {
  const double per_element = backward ? (p.dropout ? 15.0 : 14.0) : (p.dropout ? 10.0 : 7.0);
  return per_element * p.batch_heads * p.seq * p.seq;
}

double carried_rate(double base_rate, double memory_share, double bandwidth_ratio, double core_ratio) {
  const double share = std::clamp(memory_share, 0.0, 1.0);
  return base_rate / (share / bandwidth_ratio + (1.0 - share) / core_ratio);
}

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

// Rule for parts that cannot be measured here. A GEMM runs at the calibrated part's fraction of the
// vendor's peak for its data type. Every other measured time is split in two: the time its bytes take
// at the calibrated part's measured device-memory rate (the device copy, `memory_bandwidth_GBps`),
// carried at the ratio of the datasheet memory bandwidths, and the rest, carried at the ratio of the
// compute that does it: the bf16 tensor peak for attention (its batched matmuls), the CUDA cores'
// fp32 peak for the memory-bound kernels (element-wise, the optimizer, compression), which run at a
// third of the device copy's rate or less and so are mostly not waiting on memory. A kernel at the
// device copy's rate carries at the bandwidth ratio alone. Launch overhead, host links and the
// comm/compute interference carry unchanged; runtime memory in bytes, and so does the device memory
// the driver keeps for itself (below).
void carry_over(HardwareProfile& hp, const HardwareProfile& base, double datasheet_bw, double base_datasheet_bw,
                const std::string& where) {
  const double peak_ratio = hp.peak("bf16") / base.peak("bf16");
  if (datasheet_bw <= 0 || base_datasheet_bw <= 0)
    throw InputError(where, "both profiles need gpu.datasheet_memory_bandwidth_GBps (the vendor figure)");
  const double bw_ratio = datasheet_bw / base_datasheet_bw;
  const double stream = base.memory_bandwidth_GBps;
  if (hp.gemm.empty()) {
    hp.gemm = base.gemm;
    for (auto& [d, pts] : hp.gemm) {
      const double r = (hp.peak(d) > 0 && base.peak(d) > 0) ? hp.peak(d) / base.peak(d) : peak_ratio;
      for (auto& p : pts) p.tflops *= r;
    }
  }
  if (hp.measured_tflops.empty())
    for (const auto& [d, v] : base.measured_tflops)
      hp.measured_tflops[d] = v * ((hp.peak(d) > 0 && base.peak(d) > 0) ? hp.peak(d) / base.peak(d) : peak_ratio);
  if (hp.attention_fwd_fraction == 0) {
    hp.attention_fwd_fraction = base.attention_fwd_fraction;
    hp.attention_bwd_fraction = base.attention_bwd_fraction;
    hp.attention = base.attention;
    if (!hp.attention.empty()) {
      const double peak_b = base.peak("bf16") * 1e12;
      auto carry = [&](const HardwareProfile::AttentionPoint& p, double fraction, bool backward) {
        const double flops = 4.0 * p.batch_heads * p.seq * p.seq * p.head_dim * (backward ? 2.0 : 1.0);
        const double took = flops / (fraction * peak_b);
        const double moving = attention_score_bytes(p, backward) / (stream * 1e9);
        return carried_rate(fraction * peak_b, moving / took, bw_ratio, peak_ratio) / (hp.peak("bf16") * 1e12);
      };
      std::vector<double> fwd, bwd;
      for (auto& p : hp.attention) {
        p.fwd_fraction = carry(p, p.fwd_fraction, false);
        p.bwd_fraction = carry(p, p.bwd_fraction, true);
        fwd.push_back(p.fwd_fraction);
        bwd.push_back(p.bwd_fraction);
      }
      hp.attention_fwd_fraction = median(fwd);
      hp.attention_bwd_fraction = median(bwd);
    }
  }
  const bool memory_tables = hp.memory_bound.empty() || hp.memory_kernels.empty() ||
                             (hp.int8_quantize_GBps == 0 && base.int8_quantize_GBps > 0) ||
                             (hp.topk_select_GBps == 0 && base.topk_select_GBps > 0);
  const double core_ratio = base.peak("fp32") > 0 ? hp.peak("fp32") / base.peak("fp32") : 0.0;
  if (memory_tables && core_ratio <= 0)
    throw InputError(where, "both profiles need gpu.peak_tflops.fp32 (the CUDA cores' rate)");
  auto carry_GBps = [&](double GBps) { return carried_rate(GBps, GBps / stream, bw_ratio, core_ratio); };
  if (hp.memory_bandwidth_GBps == 0) hp.memory_bandwidth_GBps = base.memory_bandwidth_GBps * bw_ratio;
  if (hp.memory_bound.empty()) {
    hp.memory_bound = base.memory_bound;
    for (auto& p : hp.memory_bound) p.GBps = carry_GBps(p.GBps);
  }
  if (hp.memory_kernels.empty()) {
    hp.memory_kernels = base.memory_kernels;
    for (auto& [k, pts] : hp.memory_kernels)
      for (auto& p : pts) p.GBps = carry_GBps(p.GBps);
  }
  if (hp.kernel_launch_us == 0) hp.kernel_launch_us = base.kernel_launch_us;
  if (hp.int8_quantize_GBps == 0) hp.int8_quantize_GBps = carry_GBps(base.int8_quantize_GBps);
  if (hp.topk_select_GBps == 0) hp.topk_select_GBps = carry_GBps(base.topk_select_GBps);
  if (hp.comm_compute_interference == 0) {
    hp.comm_compute_interference = base.comm_compute_interference;
    hp.p2p_compute_interference = base.p2p_compute_interference;
  }
  if (hp.h2d_GBps == 0) { hp.h2d_GBps = base.h2d_GBps; hp.d2h_GBps = base.d2h_GBps; }
  // Device memory: the part's vendor figure (as nvidia-smi reports it) less what the base's driver
  // keeps for itself, in bytes (the vendor's figure less CUDA's total on the base). A file that
  // gives its own datasheet_memory_bytes gives the allocatable memory_bytes too, which is kept.
  if (hp.datasheet_memory_bytes == 0) {
    if (base.datasheet_memory_bytes <= 0)
      throw InputError(where, "the base profile " + base.name + " needs gpu.datasheet_memory_bytes (the memory nvidia-smi reports, "
                              "beside the memory_bytes CUDA could allocate)");
    hp.datasheet_memory_bytes = hp.memory_bytes;
    hp.memory_bytes -= base.datasheet_memory_bytes - base.memory_bytes;
    if (!(hp.memory_bytes > 0)) throw InputError(where, "the base's driver reservation leaves this part no memory");
  }
  // Runtime memory carries over in bytes: the same driver, CUDA and NCCL versions allocate alike.
  if (hp.context_bytes == 0) {
    hp.context_bytes = base.context_bytes;
    hp.nccl_first_communicator_bytes = base.nccl_first_communicator_bytes;
    hp.nccl_further_communicator_bytes = base.nccl_further_communicator_bytes;
    hp.runtime_memory_provenance = base.runtime_memory_provenance;
    if (hp.context_bytes > 0) {
      hp.runtime_memory_provenance.source = "derived";
      hp.runtime_memory_provenance.rule = "carried over in bytes from " + base.name;
    }
  }
}

}  // namespace trainsim

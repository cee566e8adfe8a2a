#pragma once
// Plain C++ records of what the GPU microbenchmarks measured, so that calibrate/ (host C++) can fit
// and write them without seeing CUDA types.
#include <cstddef>
#include <string>
#include <vector>

namespace trainsim::gpu {

struct DeviceInfo {
  std::string name;
  int count = 0;
  std::string driver, cuda_runtime, nccl;
  double memory_bytes = 0;
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  double l2_bytes = 0;
  std::string topology;  // link type per GPU pair, e.g. "0-1:NVLINK" or "0-1:PCIE"
  std::vector<std::string> uuids;  // each device's UUID as nvidia-smi names it (device_identity.h)
};

// The GemmSample dtype of bf16 GEMMs whose fp32 output is accumulated into (beta = 1), as a
// mixed-precision step's weight-gradient GEMMs add into the fp32 gradients.
inline constexpr const char* kBf16AccumulateFp32 = "bf16_accumulate_fp32";

struct GemmSample {
  std::string dtype;  // bf16 | fp16 | fp8 | tf32 | bf16_accumulate_fp32 (bf16 into an fp32 output, beta = 1)
  int m = 0, n = 0, k = 0;
  double time_us = 0;
  double tflops = 0;
};

struct BandwidthSample {
  std::string kernel;  // copy | add | adam | h2d | d2h | p2p
  double bytes = 0;    // bytes moved (read + written for device kernels; transferred for copies)
  double time_us = 0;
  double GBps = 0;
  int src = -1, dst = -1;  // for p2p
};

struct AttentionSample {
  int batch = 0, heads = 0, seq = 0, head_dim = 0;
  double fwd_us = 0, bwd_us = 0;
  double fwd_tflops = 0, bwd_tflops = 0;  // full (non-causal) FLOP count over time
  int kv_group = 1;     // query heads per K/V head
  bool dropout = true;  // dropout 0.1 on the probabilities (gpt); none (llama)
};

struct CollectiveSample {
  std::string collective;  // all_reduce | all_gather | reduce_scatter | all_to_all | send_recv
  int gpus = 0;
  double bytes = 0;        // nccl-tests "size"
  double time_us = 0;
  double algbw_GBps = 0, busbw_GBps = 0;
  long wrong = 0;          // elements that differ from the expected result
};

struct CompressionSample {
  std::string kernel;  // int8_quantize | int8_dequantize | topk_select
  double bytes = 0;    // gradient bytes processed (fp32)
  double time_us = 0;
  double GBps = 0;
  double rel_error = 0;  // quantize-dequantize error, or the kept fraction's error for top-k
};

// One kernel of the training step (the runner's element-wise and row-wise kernels) at one shape.
struct KernelSample {
  std::string kernel;
  int tokens = 0, hidden = 0, ffn = 0, vocab = 0, heads = 0, seq = 0;
  double time_us = 0;
  bool llama = false;  // a Llama-style layer's kernel (its byte count follows that family)
  int kv_heads = 0;    // 0: as many as heads
};

struct Measurements {
  DeviceInfo device;
  std::vector<GemmSample> gemm;
  std::vector<BandwidthSample> bandwidth;
  std::vector<AttentionSample> attention;
  std::vector<CollectiveSample> collectives;
  std::vector<CompressionSample> compression;
  std::vector<KernelSample> kernels;
  double launch_overhead_us = 0;
  double gemm_check_rel_error = -1;  // cuBLASLt result against a CPU reference
  double interference_slowdown = -1; // GEMM slowdown with NCCL beside it (-1: not measured)
  double p2p_interference_slowdown = -1;  // the same beside NCCL send/recv between two GPUs
  // Device memory besides the tensors (runtime_memory.h; -1: not measured).
  double context_bytes = -1;
  double nccl_first_comm_bytes = -1, nccl_further_comm_bytes = -1;
  int nccl_comm_gpus = 0;
  std::vector<std::string> notes;    // what was skipped and why
};

// Row-major C[m,n] = op(A) op(B) with the operand layouts of the role the shape plays in a layer:
// forward X W (no transposes), input gradient dY W^T (tb), weight gradient X^T dY (ta).
struct GemmShape {
  int m, n, k;
  bool ta = false, tb = false;
};

struct CalibrationPlan {
  bool quick = false;
  double max_collective_bytes = 4.0 * (1ull << 30);
  // Timed beside the grid of transformer shapes (a scenario's own, `planner gemm-shapes`); those
  // with ta, weight gradients, also accumulated into fp32.
  std::vector<GemmShape> extra_gemms;
};

// How bench_step_kernels times a kernel: `burst`, ten calls back to back per timed run (as the
// calibration records them: launches overlapping execution, operands left in L2 by the call
// before); `single`, one call between events; `evicted`, one call between events after a write
// over twice the L2 cache, so that its operands come from HBM; `after_compute`, one call between
// events right after a stretch of dependent FMAs on every SM (no tensor cores); `under_load`, one call
// between events right after four 8192^3 bf16 GEMMs, 400 of them run first: the power-capped
// clock that a training step's GEMMs hold the GPU at.
enum class StepKernelTiming { burst, single, evicted, after_compute, under_load };
// Which shapes bench_step_kernels times the GPT-style kernels at: `quick`, two; `profile`, the
// eleven the measured profiles were calibrated with; `dense`, every hidden size of GPT-3's models
// to 6.7B at 2,048, 4,096, 8,192 and 16,384 tokens (24; calibrate kernel-table, kernel-conditions).
enum class StepKernelShapes { quick, profile, dense };
// The training step's element-wise and row-wise kernels at preset models' shapes (the Llama-style
// ones at five shapes, two with `quick`).
// With `gelu_in_place_too`, the GeLU backward is also timed as the step calls it, writing over its
// incoming gradient (a diagnostic row, "gelu_bias.bwd in place", that no profile table holds).
std::vector<KernelSample> bench_step_kernels(StepKernelShapes shapes, StepKernelTiming how = StepKernelTiming::burst,
                                             bool gelu_in_place_too = false);

// How long calibrate leaves the GPU idle before timing each attention shape, milliseconds. Timed
// right after a larger shape, a small one's forward read up to 18% slow and its backward up to 14%
// (on an H100, calibrate/records/2026-12-07-session-58-attention-order/); after 300 ms idle the
// shapes read as in the reverse order at the median (+0.4% forward, +0.2% backward; 50 of 60
// forwards within 2%, eight more within -4% to +8%, and the two the reverse order timed after a
// larger one -10% and -15%). 300 ms is the idle that was measured, not a tuned value; shorter was not tried.
inline constexpr double kAttentionIdleMs = 300;

// calibrate's attention shapes as calibrate times them, each after kAttentionIdleMs of idle GPU.
std::vector<AttentionSample> bench_attention_table(bool quick);
// calibrate's attention shapes timed three ways (a diagnostic): in calibrate's order, in the
// reverse order, and each alone after the GPU has been idle `idle_ms` (not timed at 0). Each
// shape's buffers are allocated and filled just before it is timed, as calibrate does.
struct AttentionOrderSample {
  AttentionSample in_order, reversed, after_idle;
};
std::vector<AttentionOrderSample> bench_attention_orders(double idle_ms);

// The current device's free and total memory.
void device_memory(std::size_t& free_bytes, std::size_t& total_bytes);
// Device memory allocated and written for as long as it lives (to time kernels on a full device).
class DeviceBallast {
 public:
  explicit DeviceBallast(std::size_t bytes);
  ~DeviceBallast();
  DeviceBallast(const DeviceBallast&) = delete;
  DeviceBallast& operator=(const DeviceBallast&) = delete;
  std::size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
};

// Runs every microbenchmark the visible GPUs allow. Throws std::runtime_error on a CUDA failure.
Measurements run_calibration(const CalibrationPlan& plan);
// The visible GPUs, driver, CUDA runtime, NCCL version and peer access between GPU pairs.
DeviceInfo describe_devices();
bool cuda_available();
int cuda_device_count();
void use_device(int device);  // for this host thread's later CUDA work

}  // namespace trainsim::gpu

#pragma once
// Row-major GEMMs through cuBLASLt with fp32 accumulation: C[M,N] = alpha op(A) op(B) + beta C,
// A row-major [M,K] (or [K,M] transposed), B [K,N] (or [N,K]). bf16 operands; C in bf16 or fp32
// (fp32 for gradients accumulated over micro-batches). Each distinct call shape is autotuned over
// cuBLASLt's top heuristics on first use, as calibrate does, and cached. Tuning takes no device
// memory beyond the 64 MiB workspace: a GEMM that accumulates into C, timed on C itself, leaves C
// as it found it (zeroed again where it was zero, as a gradient is before its first
// accumulation; else saved to host memory and copied back).
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <map>
#include <tuple>

namespace trainsim::gpu {

class LtMatmul {
 public:
  explicit LtMatmul(cudaStream_t stream);
  ~LtMatmul();
  LtMatmul(const LtMatmul&) = delete;
  LtMatmul& operator=(const LtMatmul&) = delete;

  void gemm(bool ta, bool tb, int M, int N, int K, const void* A, const void* B, void* C, bool c_fp32, float alpha = 1.0f,
            float beta = 0.0f);

 private:
  struct Plan;
  using Key = std::tuple<bool, bool, int, int, int, bool, bool>;
  Plan& plan_for(const Key& k, const void* A, const void* B, void* C, float alpha, float beta);
  cublasLtHandle_t handle_ = nullptr;
  cudaStream_t stream_;
  void* workspace_ = nullptr;
  std::map<Key, Plan*> plans_;
};

}  // namespace trainsim::gpu

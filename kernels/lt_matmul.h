#pragma once
// Row-major GEMMs through cuBLASLt with fp32 accumulation: C[M,N] = alpha op(A) op(B) + beta C,
// A row-major [M,K] (or [K,M] transposed), B [K,N] (or [N,K]). bf16 operands; C in bf16 or fp32
// (fp32 for gradients accumulated over micro-batches). Each distinct call shape is autotuned over
// cuBLASLt's top heuristics on first use, as calibrate does, and cached. Tuning a GEMM that
// accumulates into C saves C first: into the tuning scratch where one is reserved and large enough,
// else into a buffer allocated there and then.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <map>
#include <tuple>

#include "cuda_compat.h"

namespace trainsim::gpu {

class LtMatmul {
 public:
  explicit LtMatmul(cudaStream_t stream);
  ~LtMatmul();
  LtMatmul(const LtMatmul&) = delete;
  LtMatmul& operator=(const LtMatmul&) = delete;

  void gemm(bool ta, bool tb, int M, int N, int K, const void* A, const void* B, void* C, bool c_fp32, float alpha = 1.0f,
            float beta = 0.0f);

  // Device memory for saving C while an accumulating GEMM of up to `bytes` of output is tuned,
  // allocated now (throws DeviceOutOfMemory where it does not fit), so that a caller can allocate
  // everything a run needs before it starts; released once no new shape is expected.
  void reserve_tuning_scratch(size_t bytes);
  void release_tuning_scratch();

 private:
  struct Plan;
  using Key = std::tuple<bool, bool, int, int, int, bool, bool>;
  Plan& plan_for(const Key& k, const void* A, const void* B, void* C, float alpha, float beta);
  cublasLtHandle_t handle_ = nullptr;
  cudaStream_t stream_;
  void* workspace_ = nullptr;
  DeviceBuffer tuning_scratch_;
  std::map<Key, Plan*> plans_;
};

}  // namespace trainsim::gpu

#include "lt_matmul.h"

#include <vector>

#include "cuda_compat.h"
#include "timing.h"

namespace trainsim::gpu {

namespace {
constexpr size_t kWorkspace = 64ull << 20;
constexpr int kCandidates = 6;
}  // namespace

struct LtMatmul::Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

LtMatmul::LtMatmul(cudaStream_t stream) : stream_(stream) {
  TRAINSIM_CUBLAS(cublasLtCreate(&handle_));
  TRAINSIM_CUDA(cudaMalloc(&workspace_, kWorkspace));
}

LtMatmul::~LtMatmul() {
  for (auto& [k, p] : plans_) {
    cublasLtMatmulDescDestroy(p->op);
    cublasLtMatrixLayoutDestroy(p->a);
    cublasLtMatrixLayoutDestroy(p->b);
    cublasLtMatrixLayoutDestroy(p->c);
    delete p;
  }
  cudaFree(workspace_);
  cublasLtDestroy(handle_);
}

// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLASLt's first operand is B.
LtMatmul::Plan& LtMatmul::plan_for(const Key& k, const void* A, const void* B, void* C, float alpha, float beta) {
  auto it = plans_.find(k);
  if (it != plans_.end()) return *it->second;
  const auto [ta, tb, M, N, K, c32, accumulate] = k;
  Plan* p = new Plan;
  TRAINSIM_CUBLAS(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t opa = tb ? CUBLAS_OP_T : CUBLAS_OP_N, opb = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  TRAINSIM_CUBLAS(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
  TRAINSIM_CUBLAS(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
  if (tb) TRAINSIM_CUBLAS(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_16BF, K, N, K));
  else TRAINSIM_CUBLAS(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_16BF, N, K, N));
  if (ta) TRAINSIM_CUBLAS(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_16BF, M, K, M));
  else TRAINSIM_CUBLAS(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_16BF, K, M, K));
  TRAINSIM_CUBLAS(cublasLtMatrixLayoutCreate(&p->c, c32 ? CUDA_R_32F : CUDA_R_16BF, N, M, N));
  cublasLtMatmulPreference_t pref;
  TRAINSIM_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
  size_t ws = kWorkspace;
  TRAINSIM_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  cublasLtMatmulHeuristicResult_t cands[kCandidates];
  int found = 0;
  TRAINSIM_CUBLAS(cublasLtMatmulAlgoGetHeuristic(handle_, p->op, p->a, p->b, p->c, p->c, pref, kCandidates, cands, &found));
  cublasLtMatmulPreferenceDestroy(pref);
  if (found == 0) throw std::runtime_error("cuBLASLt has no algorithm for a runner GEMM");
  p->algo = cands[0].algo;
  double best = 1e300;
  // Timing runs the GEMM several times on the real output: with beta != 0 (gradient accumulation)
  // each run would add to it again. C is saved first and put back after.
  DeviceBuffer own;
  void* saved = nullptr;
  const size_t c_bytes = static_cast<size_t>(M) * N * (c32 ? 4 : 2);
  if (accumulate && found > 1) {
    if (tuning_scratch_.bytes() >= c_bytes) {
      saved = tuning_scratch_.get();
    } else {
      own = DeviceBuffer(c_bytes);
      saved = own.get();
    }
    TRAINSIM_CUDA(cudaMemcpyAsync(saved, C, c_bytes, cudaMemcpyDeviceToDevice, stream_));
  }
  for (int i = 0; i < found && found > 1; ++i) {
    const double us = time_median_us(stream_, 1, 3, [&] {
      TRAINSIM_CUBLAS(cublasLtMatmul(handle_, p->op, &alpha, B, p->a, A, p->b, &beta, C, p->c, C, p->c, &cands[i].algo,
                                     workspace_, kWorkspace, stream_));
    });
    if (us < best) { best = us; p->algo = cands[i].algo; }
  }
  if (accumulate && found > 1) {
    TRAINSIM_CUDA(cudaMemcpyAsync(C, saved, c_bytes, cudaMemcpyDeviceToDevice, stream_));
    TRAINSIM_CUDA(cudaStreamSynchronize(stream_));
  }
  plans_[k] = p;
  return *p;
}

void LtMatmul::reserve_tuning_scratch(size_t bytes) {
  if (bytes > tuning_scratch_.bytes()) {
    tuning_scratch_ = DeviceBuffer();
    tuning_scratch_ = DeviceBuffer(bytes);
  }
}

void LtMatmul::release_tuning_scratch() {
  TRAINSIM_CUDA(cudaStreamSynchronize(stream_));
  tuning_scratch_ = DeviceBuffer();
}

void LtMatmul::gemm(bool ta, bool tb, int M, int N, int K, const void* A, const void* B, void* C, bool c_fp32, float alpha,
                    float beta) {
  Plan& p = plan_for(Key{ta, tb, M, N, K, c_fp32, beta != 0.0f}, A, B, C, alpha, beta);
  TRAINSIM_CUBLAS(cublasLtMatmul(handle_, p.op, &alpha, B, p.a, A, p.b, &beta, C, p.c, C, p.c, &p.algo, workspace_,
                                 kWorkspace, stream_));
}

}  // namespace trainsim::gpu

#include "lt_matmul.h"

#include <vector>

#include "cuda_compat.h"
#include "timing.h"

namespace trainsim::gpu {

namespace {
constexpr size_t kWorkspace = 64ull << 20;
constexpr int kCandidates = 6;

// *flag = 1 if any of the n 16-bit words at p is not all zero bits (a C of bf16 or fp32 alike).
__global__ void any_nonzero(const unsigned short* p, size_t n, unsigned* flag) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<size_t>(gridDim.x) * blockDim.x)
    if (p[i]) {
      *flag = 1;
      return;
    }
}
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
  // each run would add to it again, so C is put back after. No device memory is taken for that
  // (a run sets up every buffer before its first step, and this one may come at the device's
  // limit): a C of zero bits, a gradient's first accumulation, is zeroed again; any other is saved
  // to host memory.
  const size_t c_bytes = static_cast<size_t>(M) * N * (c32 ? 4 : 2);
  bool c_zero = false;
  std::vector<unsigned char> saved;
  if (accumulate && found > 1) {
    auto* flag = static_cast<unsigned*>(workspace_);
    TRAINSIM_CUDA(cudaMemsetAsync(flag, 0, sizeof(unsigned), stream_));
    any_nonzero<<<1024, 256, 0, stream_>>>(static_cast<const unsigned short*>(C), c_bytes / 2, flag);
    TRAINSIM_CUDA(cudaGetLastError());
    unsigned nonzero = 1;
    TRAINSIM_CUDA(cudaMemcpyAsync(&nonzero, flag, sizeof nonzero, cudaMemcpyDeviceToHost, stream_));
    TRAINSIM_CUDA(cudaStreamSynchronize(stream_));
    c_zero = nonzero == 0;
    if (!c_zero) {
      saved.resize(c_bytes);
      TRAINSIM_CUDA(cudaMemcpyAsync(saved.data(), C, c_bytes, cudaMemcpyDeviceToHost, stream_));
      TRAINSIM_CUDA(cudaStreamSynchronize(stream_));
    }
  }
  for (int i = 0; i < found && found > 1; ++i) {
    const double us = time_median_us(stream_, 1, 3, [&] {
      TRAINSIM_CUBLAS(cublasLtMatmul(handle_, p->op, &alpha, B, p->a, A, p->b, &beta, C, p->c, C, p->c, &cands[i].algo,
                                     workspace_, kWorkspace, stream_));
    });
    if (us < best) { best = us; p->algo = cands[i].algo; }
  }
  if (accumulate && found > 1) {
    if (c_zero) TRAINSIM_CUDA(cudaMemsetAsync(C, 0, c_bytes, stream_));
    else TRAINSIM_CUDA(cudaMemcpyAsync(C, saved.data(), c_bytes, cudaMemcpyHostToDevice, stream_));
    TRAINSIM_CUDA(cudaStreamSynchronize(stream_));
  }
  plans_[k] = p;
  return *p;
}

void LtMatmul::gemm(bool ta, bool tb, int M, int N, int K, const void* A, const void* B, void* C, bool c_fp32, float alpha,
                    float beta) {
  Plan& p = plan_for(Key{ta, tb, M, N, K, c_fp32, beta != 0.0f}, A, B, C, alpha, beta);
  TRAINSIM_CUBLAS(cublasLtMatmul(handle_, p.op, &alpha, B, p.a, A, p.b, &beta, C, p.c, C, p.c, &p.algo, workspace_,
                                 kWorkspace, stream_));
}

}  // namespace trainsim::gpu

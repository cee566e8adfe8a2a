#include "attention.h"

#include <cuda_bf16.h>

#include "cuda_compat.h"

#define TRAINSIM_CUBLAS_V2(call)                                                                          \
  do {                                                                                                    \
    cublasStatus_t st_ = (call);                                                                          \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                                                     \
      throw std::runtime_error(std::string(#call) + " failed: cuBLAS status " + std::to_string(static_cast<int>(st_))); \
  } while (0)

namespace trainsim::gpu {

namespace {

}  // namespace

// Row-major [rows, cols] tensors are column-major [cols, rows] to cuBLAS; this computes, per batch,
// row-major C[M,N] = op(A) op(B) with A row-major [M,K] (or [K,M] if ta) and B [K,N] (or [N,K] if tb).
void batched_gemm_rm(cublasHandle_t h, bool ta, bool tb, int M, int N, int K, const void* A, long long sa, const void* B,
             long long sb, void* C, long long sc, int batch, float scale) {
  const float beta = 0.0f;
  // Row-major C = A B  <=>  column-major C^T = B^T A^T.
  TRAINSIM_CUBLAS_V2(cublasGemmStridedBatchedEx(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K,
                                                &scale, B, CUDA_R_16BF, tb ? K : N, sb, A, CUDA_R_16BF, ta ? M : K, sa, &beta,
                                                C, CUDA_R_16BF, N, sc, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

namespace {

// One warp per row, 16-byte loads (8 bf16 per lane per step; seq must be a multiple of 8): causal
// mask (column > row is -inf), max, exp, sum, normalise.
__device__ __forceinline__ void unpack8(const uint4& u, float* f) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
  for (int i = 0; i < 4; ++i) {
    const float2 t = __bfloat1622float2(h[i]);
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}
__device__ __forceinline__ uint4 pack8(const float* f) {
  uint4 u;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&u);
  for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  return u;
}

__global__ void softmax_causal(__nv_bfloat16* s, int seq, long long rows) {
  const long long row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const int r = static_cast<int>(row % seq);
  uint4* x = reinterpret_cast<uint4*>(s + row * seq);
  const int vecs = seq / 8;
  float mx = -INFINITY;
  for (int v = lane; v < vecs; v += 32) {
    if (v * 8 > r) break;
    float f[8];
    unpack8(x[v], f);
    for (int i = 0; i < 8; ++i)
      if (v * 8 + i <= r) mx = fmaxf(mx, f[i]);
  }
  for (int o = 16; o > 0; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, o));
  float sum = 0.0f;
  for (int v = lane; v < vecs; v += 32) {
    if (v * 8 > r) break;
    float f[8];
    unpack8(x[v], f);
    for (int i = 0; i < 8; ++i)
      if (v * 8 + i <= r) sum += __expf(f[i] - mx);
  }
  for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffff, sum, o);
  const float inv = 1.0f / sum;
  for (int v = lane; v < vecs; v += 32) {
    float f[8];
    if (v * 8 <= r) unpack8(x[v], f);
    for (int i = 0; i < 8; ++i) f[i] = (v * 8 + i <= r) ? __expf(f[i] - mx) * inv : 0.0f;
    x[v] = pack8(f);
  }
}

// dS = P * (dP - sum_j dP_j P_j), in place over dP.
__global__ void softmax_backward(const __nv_bfloat16* p, __nv_bfloat16* dp, int seq, long long rows) {
  const long long row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const uint4* pr = reinterpret_cast<const uint4*>(p + row * seq);
  uint4* dr = reinterpret_cast<uint4*>(dp + row * seq);
  const int vecs = seq / 8;
  float dot = 0.0f;
  for (int v = lane; v < vecs; v += 32) {
    float a[8], b[8];
    unpack8(pr[v], a);
    unpack8(dr[v], b);
    for (int i = 0; i < 8; ++i) dot += a[i] * b[i];
  }
  for (int o = 16; o > 0; o /= 2) dot += __shfl_xor_sync(0xffffffff, dot, o);
  for (int v = lane; v < vecs; v += 32) {
    float a[8], b[8];
    unpack8(pr[v], a);
    unpack8(dr[v], b);
    for (int i = 0; i < 8; ++i) b[i] = a[i] * (b[i] - dot);
    dr[v] = pack8(b);
  }
}

}  // namespace

void attention_forward(cublasHandle_t h, const AttentionShape& a, const void* q, const void* k, const void* v, void* p,
                       void* o, cudaStream_t st) {
  if (a.seq % 8 != 0) throw std::invalid_argument("attention needs a sequence length divisible by 8");
  TRAINSIM_CUBLAS_V2(cublasSetStream(h, st));
  const int s = a.seq, d = a.head_dim, bh = a.batch_heads;
  const long long sd = static_cast<long long>(s) * d, ss = static_cast<long long>(s) * s;
  // S = Q K^T / sqrt(d)
  batched_gemm_rm(h, false, true, s, s, d, q, sd, k, sd, p, ss, bh, 1.0f / sqrtf(static_cast<float>(d)));
  const long long rows = static_cast<long long>(bh) * s;
  softmax_causal<<<static_cast<unsigned>((rows + 7) / 8), 256, 0, st>>>(static_cast<__nv_bfloat16*>(p), s, rows);
  TRAINSIM_KERNEL_CHECK();
  // O = P V
  batched_gemm_rm(h, false, false, s, d, s, p, ss, v, sd, o, sd, bh, 1.0f);
}

void attention_backward(cublasHandle_t h, const AttentionShape& a, const void* q, const void* k, const void* v,
                        const void* p, const void* d_o, void* dp, void* dq, void* dk, void* dv, cudaStream_t st) {
  TRAINSIM_CUBLAS_V2(cublasSetStream(h, st));
  const int s = a.seq, d = a.head_dim, bh = a.batch_heads;
  const long long sd = static_cast<long long>(s) * d, ss = static_cast<long long>(s) * s;
  const float scale = 1.0f / sqrtf(static_cast<float>(d));
  batched_gemm_rm(h, true, false, s, d, s, p, ss, d_o, sd, dv, sd, bh, 1.0f);   // dV = P^T dO
  batched_gemm_rm(h, false, true, s, s, d, d_o, sd, v, sd, dp, ss, bh, 1.0f);   // dP = dO V^T
  const long long rows = static_cast<long long>(bh) * s;
  softmax_backward<<<static_cast<unsigned>((rows + 7) / 8), 256, 0, st>>>(static_cast<const __nv_bfloat16*>(p),
                                                                         static_cast<__nv_bfloat16*>(dp), s, rows);
  TRAINSIM_KERNEL_CHECK();
  batched_gemm_rm(h, false, false, s, d, s, dp, ss, k, sd, dq, sd, bh, scale);  // dQ = dS K
  batched_gemm_rm(h, true, false, s, d, s, dp, ss, q, sd, dk, sd, bh, scale);   // dK = dS^T Q
}

}  // namespace trainsim::gpu

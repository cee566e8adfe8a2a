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

__device__ __forceinline__ bool keep_elem(size_t i, unsigned seed, float drop) {
  unsigned long long x = (i + 1) * 0x9E3779B97F4A7C15ull ^ (static_cast<unsigned long long>(seed) << 32);
  x ^= x >> 31; x *= 0xBF58476D1CE4E5B9ull; x ^= x >> 27;
  return static_cast<float>(x >> 40) / static_cast<float>(1ull << 24) >= drop;
}

// One warp per row of scores, 8 values per lane per step: causal mask, max, sum, normalise into p;
// with dropout, also the kept mask and the dropped-out probabilities pd.
__global__ void softmax_dropout_k(__nv_bfloat16* s, __nv_bfloat16* pd, unsigned char* mask, int seq, long long rows,
                                  unsigned seed, float drop, int heads, int heads_total, int head_offset) {
  const long long row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  // The row's index in the whole layer's scores, for the dropout draw.
  long long grow = row;
  if (heads > 0) {
    const long long bh = row / seq, bi = bh / heads, hi = bh % heads;
    grow = (bi * heads_total + head_offset + hi) * seq + row % seq;
  }
  const int r = static_cast<int>(row % seq);
  uint4* x = reinterpret_cast<uint4*>(s + row * seq);
  const int vecs = seq / 8;
  float mx = -INFINITY;
  for (int v = lane; v < vecs && v * 8 <= r; v += 32) {
    float f[8];
    unpack8(x[v], f);
    for (int i = 0; i < 8; ++i)
      if (v * 8 + i <= r) mx = fmaxf(mx, f[i]);
  }
  for (int o = 16; o > 0; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, o));
  float sum = 0.0f;
  for (int v = lane; v < vecs && v * 8 <= r; v += 32) {
    float f[8];
    unpack8(x[v], f);
    for (int i = 0; i < 8; ++i)
      if (v * 8 + i <= r) sum += __expf(f[i] - mx);
  }
  for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffff, sum, o);
  const float inv = 1.0f / sum, keep_scale = 1.0f / (1.0f - drop);
  uint4* y = pd ? reinterpret_cast<uint4*>(pd + row * seq) : nullptr;
  for (int v = lane; v < vecs; v += 32) {
    float f[8], g[8];
    unsigned char m8[8];
    if (v * 8 <= r) unpack8(x[v], f);
    for (int i = 0; i < 8; ++i) {
      f[i] = (v * 8 + i <= r) ? __expf(f[i] - mx) * inv : 0.0f;
      const bool k = pd ? keep_elem(static_cast<size_t>(grow) * seq + v * 8 + i, seed, drop) : true;
      m8[i] = k;
      g[i] = k ? f[i] * keep_scale : 0.0f;
    }
    x[v] = pack8(f);
    if (pd) {
      y[v] = pack8(g);
      *reinterpret_cast<uint2*>(mask + row * seq + v * 8) = *reinterpret_cast<uint2*>(m8);
    }
  }
}

// d(pd) -> d(scores) in place: undo dropout with the mask, then dS = P * (dP - sum_j dP_j P_j).
__global__ void softmax_dropout_bwd_k(const __nv_bfloat16* p, const unsigned char* mask, __nv_bfloat16* dp, int seq,
                                      long long rows, float drop) {
  const long long row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const uint4* pr = reinterpret_cast<const uint4*>(p + row * seq);
  uint4* dr = reinterpret_cast<uint4*>(dp + row * seq);
  const float keep_scale = 1.0f / (1.0f - drop);
  const int vecs = seq / 8;
  auto grad8 = [&](int v, float* a, float* g) {
    unpack8(pr[v], a);
    unpack8(dr[v], g);
    if (mask) {
      const uint2 mm = *reinterpret_cast<const uint2*>(mask + row * seq + v * 8);
      const unsigned char* m8 = reinterpret_cast<const unsigned char*>(&mm);
      for (int i = 0; i < 8; ++i) g[i] = m8[i] ? g[i] * keep_scale : 0.0f;
    }
  };
  float dot = 0.0f;
  for (int v = lane; v < vecs; v += 32) {
    float a[8], g[8];
    grad8(v, a, g);
    for (int i = 0; i < 8; ++i) dot += a[i] * g[i];
  }
  for (int o = 16; o > 0; o /= 2) dot += __shfl_xor_sync(0xffffffff, dot, o);
  for (int v = lane; v < vecs; v += 32) {
    float a[8], g[8];
    grad8(v, a, g);
    for (int i = 0; i < 8; ++i) g[i] = a[i] * (g[i] - dot);
    dr[v] = pack8(g);
  }
}

}  // namespace

void attention_forward(cublasHandle_t h, const AttentionShape& a, const AttentionBuffers& b, unsigned seed, float dropout,
                       cudaStream_t st) {
  if (a.seq % 8 != 0) throw std::invalid_argument("attention needs a sequence length divisible by 8");
  TRAINSIM_CUBLAS_V2(cublasSetStream(h, st));
  const int s = a.seq, d = a.head_dim, bh = a.batch_heads, g = a.group, gs = g * s, nb = bh / g;
  const long long sd = static_cast<long long>(s) * d, ss = static_cast<long long>(s) * s;
  // Per K/V head, its group's query rows stacked: [g*s, d] x [s, d]^T.
  batched_gemm_rm(h, false, true, gs, s, d, b.q, g * sd, b.k, sd, b.p, g * ss, nb, 1.0f / sqrtf(static_cast<float>(d)));  // S = Q K^T / sqrt(d)
  const long long rows = static_cast<long long>(bh) * s;
  const bool dropping = dropout > 0;
  softmax_dropout_k<<<static_cast<unsigned>((rows + 7) / 8), 256, 0, st>>>(static_cast<__nv_bfloat16*>(b.p),
      dropping ? static_cast<__nv_bfloat16*>(b.pd) : nullptr, dropping ? b.mask : nullptr, s, rows, seed, dropout, a.heads, a.heads_total, a.head_offset);
  TRAINSIM_KERNEL_CHECK();
  batched_gemm_rm(h, false, false, gs, d, s, dropping ? b.pd : b.p, g * ss, b.v, sd, b.o, g * sd, nb, 1.0f);  // O = Pd V
}

void attention_backward(cublasHandle_t h, const AttentionShape& a, const AttentionBuffers& b, const void* d_o, void* ds,
                        void* dq, void* dk, void* dv, float dropout, cudaStream_t st) {
  TRAINSIM_CUBLAS_V2(cublasSetStream(h, st));
  const int s = a.seq, d = a.head_dim, bh = a.batch_heads, g = a.group, gs = g * s, nb = bh / g;
  const long long sd = static_cast<long long>(s) * d, ss = static_cast<long long>(s) * s;
  const float scale = 1.0f / sqrtf(static_cast<float>(d));
  const bool dropping = dropout > 0;
  // K/V gradients sum over the group's query rows (the inner dimension g*s).
  batched_gemm_rm(h, true, false, s, d, gs, dropping ? b.pd : b.p, g * ss, d_o, g * sd, dv, sd, nb, 1.0f);  // dV = Pd^T dO
  batched_gemm_rm(h, false, true, gs, s, d, d_o, g * sd, b.v, sd, ds, g * ss, nb, 1.0f);                    // dPd = dO V^T
  const long long rows = static_cast<long long>(bh) * s;
  softmax_dropout_bwd_k<<<static_cast<unsigned>((rows + 7) / 8), 256, 0, st>>>(static_cast<const __nv_bfloat16*>(b.p),
      dropping ? b.mask : nullptr, static_cast<__nv_bfloat16*>(ds), s, rows, dropout);
  TRAINSIM_KERNEL_CHECK();
  batched_gemm_rm(h, false, false, gs, d, s, ds, g * ss, b.k, sd, dq, g * sd, nb, scale);  // dQ = dS K
  batched_gemm_rm(h, true, false, s, d, gs, ds, g * ss, b.q, g * sd, dk, sd, nb, scale);   // dK = dS^T Q
}

}  // namespace trainsim::gpu

#pragma once
// Unfused ("naive") multi-head attention on bf16 tensors laid out [batch*heads, seq, head_dim]:
// scores by a batched GEMM, a causal softmax kernel, and the weighted sum by a second GEMM; the
// backward pass is four batched GEMMs and the softmax backward. Used by calibration and by the
// real-step runner.
#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace trainsim::gpu {

struct AttentionShape {
  int batch_heads = 0, seq = 0, head_dim = 0;
  // Tensor parallelism: these are heads [head_offset, head_offset + heads) of heads_total, so that
  // dropout draws what the whole layer would for them. heads = 0: all heads are here.
  int heads = 0, heads_total = 0, head_offset = 0;
  // Grouped-query attention: `group` query heads share each K/V head. Q and O hold batch_heads
  // heads (a group's heads adjacent), K and V batch_heads / group.
  int group = 1;
};

// Per batch, row-major C[M,N] = scale op(A) op(B) (bf16, fp32 accumulation), strided batches.
void batched_gemm_rm(cublasHandle_t h, bool ta, bool tb, int M, int N, int K, const void* A, long long sa, const void* B,
                     long long sb, void* C, long long sc, int batch, float scale);

// Q, K, V, O: [bh, s, d]. P (softmax probabilities) and, with dropout, PD (dropped-out
// probabilities) and MASK: [bh, s, s], kept for backward. Dropout masks come from a counter hash
// of (element, seed), so a recomputation with the same seed reproduces them.
struct AttentionBuffers {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* p = nullptr;
  void* pd = nullptr;
  unsigned char* mask = nullptr;
  void* o = nullptr;
};
void attention_forward(cublasHandle_t h, const AttentionShape& a, const AttentionBuffers& b, unsigned seed, float dropout,
                       cudaStream_t st);
// dO in; dS is scratch of [bh, s, s]; dQ, dK, dV out.
void attention_backward(cublasHandle_t h, const AttentionShape& a, const AttentionBuffers& b, const void* d_o, void* ds,
                        void* dq, void* dk, void* dv, float dropout, cudaStream_t st);

}  // namespace trainsim::gpu

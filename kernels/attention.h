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
};

// Per batch, row-major C[M,N] = scale op(A) op(B) (bf16, fp32 accumulation), strided batches.
void batched_gemm_rm(cublasHandle_t h, bool ta, bool tb, int M, int N, int K, const void* A, long long sa, const void* B,
                     long long sb, void* C, long long sc, int batch, float scale);

// Q, K, V, O: [bh, s, d]; P (softmax probabilities, kept for backward): [bh, s, s].
void attention_forward(cublasHandle_t h, const AttentionShape& a, const void* q, const void* k, const void* v, void* p,
                       void* o, cudaStream_t st);
// dO in; dQ, dK, dV out; dP is scratch of [bh, s, s].
void attention_backward(cublasHandle_t h, const AttentionShape& a, const void* q, const void* k, const void* v,
                        const void* p, const void* d_o, void* dp, void* dq, void* dk, void* dv, cudaStream_t st);

}  // namespace trainsim::gpu

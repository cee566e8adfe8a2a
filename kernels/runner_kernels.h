#pragma once
// Element-wise and row-wise kernels of a GPT training step (bf16 activations, fp32 statistics and
// gradient accumulation). Dropout masks come from a counter hash, so recomputation reproduces them.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>

namespace trainsim::gpu {

using bf16 = __nv_bfloat16;
constexpr float kDropout = 0.1f;

void embed_forward(const int* tokens, const bf16* wte, const bf16* wpe, bf16* out, unsigned char* mask, int T, int h, int seq,
                   unsigned seed, cudaStream_t st);
// Word-embedding gradients go to rows [vocab_begin, vocab_begin + vocab_rows) of dwte (a
// vocabulary-parallel shard); tokens outside them add nothing there. Position gradients always.
void embed_backward(const bf16* dout, const unsigned char* mask, const int* tokens, float* dwte, float* dwpe, int T, int h,
                    int seq, cudaStream_t st, int vocab_begin = 0, int vocab_rows = 1 << 30);
// Vocabulary-parallel embedding (Megatron-LM): each tensor-parallel rank looks up the rows it holds
// (zero elsewhere), the ranks sum the results, and embed_finish adds positions and dropout as
// embed_forward does.
void embed_lookup(const int* tokens, const bf16* wte, bf16* out, int T, int h, int vocab_begin, int vocab_rows, cudaStream_t st);
void embed_finish(const bf16* rows, const bf16* wpe, bf16* out, unsigned char* mask, int T, int h, int seq, unsigned seed,
                  cudaStream_t st);
void layernorm_forward(const bf16* x, const bf16* g, const bf16* b, bf16* y, float* mean, float* rstd, int T, int h, cudaStream_t st);
// dx = LN backward; dg, db accumulate (fp32).
void layernorm_backward(const bf16* dy, const bf16* x, const bf16* g, const float* mean, const float* rstd, bf16* dx,
                        float* dg, float* db, int T, int h, cudaStream_t st);
// qkv [T, 3h] (+ bias) -> q, k, v [b*a, s, d]; and the inverse for gradients (no bias).
void split_heads(const bf16* qkv, const bf16* bias, bf16* q, bf16* k, bf16* v, int b, int s, int a, int d, cudaStream_t st);
void merge_qkv_grad(const bf16* dq, const bf16* dk, const bf16* dv, bf16* dqkv, int b, int s, int a, int d, cudaStream_t st);
// [b*a, s, d] <-> [T, h]
void heads_to_rows(const bf16* in, bf16* out, int b, int s, int a, int d, cudaStream_t st);
void rows_to_heads(const bf16* in, bf16* out, int b, int s, int a, int d, cudaStream_t st);
// out = residual + dropout(y + bias); keeps the mask.
void bias_dropout_residual(const bf16* y, const bf16* bias, const bf16* residual, bf16* out, unsigned char* mask, int T, int h,
                           unsigned seed, cudaStream_t st);
// dy = dout * mask / (1 - p).
void dropout_backward(const bf16* dout, const unsigned char* mask, bf16* dy, size_t n, cudaStream_t st);
// gelu_in = x + bias (kept), out = gelu(gelu_in).
void bias_gelu(const bf16* x, const bf16* bias, bf16* gelu_in, bf16* out, int T, int f, cudaStream_t st);
void gelu_backward(const bf16* dout, const bf16* gelu_in, bf16* din, size_t n, cudaStream_t st);
// grad[c] += sum over rows of dy[r, c].
void column_sum(const bf16* dy, float* grad, int T, int n, cudaStream_t st);
// Sum of `n` floats in double, deterministic (fixed-order block partials summed on the host);
// synchronises `st`. Replicas that applied the same update hold bitwise-equal parameters, so
// equal sums. `partials`: kChecksumPartials doubles of device memory for the block partials, the
// caller's, so that a sum allocates nothing.
constexpr int kChecksumPartials = 512;
double checksum(const float* p, size_t n, double* partials, cudaStream_t st, bool squares = false);
double checksum(const bf16* p, size_t n, double* partials, cudaStream_t st);
void add_inplace(bf16* x, const bf16* y, size_t n, cudaStream_t st);
void add_inplace(float* x, const float* y, size_t n, cudaStream_t st);
// Cross-entropy over rows of logits (vocab-wide softmax in fp32 through logits32); writes the
// gradient (softmax - onehot) * scale over the bf16 logits in place and adds the loss to *loss.
void cross_entropy(bf16* logits, float* logits32, const int* targets, float* loss, int T, int V, float scale, cudaStream_t st);
// Vocabulary-parallel cross-entropy over this rank's vocab_cols columns of the logits: per row,
// stats[3] = local max, sum of exp below it, the target's logit if this rank holds the target (else
// 0). After the ranks' stats are gathered ([ranks][T][3]), cross_entropy_finish forms the row's
// log-sum-exp over the whole vocabulary, adds the loss, and writes the gradient over its columns.
void cross_entropy_stats(const bf16* logits, float* logits32, const int* targets, float* stats, int T, int vocab_begin, int vocab_cols,
                         cudaStream_t st);
void cross_entropy_finish(bf16* logits, const float* logits32, const int* targets, const float* all_stats, int ranks, float* loss, int T,
                          int vocab_begin, int vocab_cols, float scale, cudaStream_t st);
// dst[r * dst_stride + c] = fill_random_f32's value at index src_offset + r * src_stride + c, for a
// rows x cols block: a shard gets the values the whole tensor would hold there.
void fill_random_slice(float* dst, size_t dst_stride, size_t rows, size_t cols, size_t src_offset, size_t src_stride, unsigned seed,
                       float scale, cudaStream_t st);
// Llama-style kernels. RMSNorm (eps 1e-5, gain only; rstd kept per row); its backward
// accumulates the gain's gradient.
void rmsnorm_forward(const bf16* x, const bf16* g, bf16* y, float* rstd, int T, int h, cudaStream_t st);
void rmsnorm_backward(const bf16* dy, const bf16* x, const bf16* g, const float* rstd, bf16* dx, float* dg, int T, int h, cudaStream_t st);
// Rotary position embedding in place on [batch_heads, s, d] (rotate-half pairs, base 10000);
// `inverse` rotates back (the gradient).
void rope(bf16* x, int batch_heads, int s, int d, bool inverse, cudaStream_t st);
// gate_up [T, 2n] (gate, then up) -> out [T, n] = silu(gate) * up; and the gradient of both halves.
void swiglu(const bf16* gate_up, bf16* out, int T, int n, cudaStream_t st);
void swiglu_backward(const bf16* dout, const bf16* gate_up, bf16* dgate_up, int T, int n, cudaStream_t st);
// qkv [T, (a + 2 kv) d] -> q [b*a, s, d], k, v [b*kv, s, d] (grouped-query heads, no bias); the
// inverse for gradients.
void split_qkv_gqa(const bf16* qkv, bf16* q, bf16* k, bf16* v, int bsz, int s, int a, int kv, int d, cudaStream_t st);
void merge_qkv_gqa_grad(const bf16* dq, const bf16* dk, const bf16* dv, bf16* dqkv, int bsz, int s, int a, int kv, int d, cudaStream_t st);
// out = residual + y.
void residual_add(const bf16* y, const bf16* residual, bf16* out, size_t n, cudaStream_t st);
// Word-embedding gradient without dropout or positions, into rows [vocab_begin, + vocab_rows).
void embed_rows_backward(const bf16* dout, const int* tokens, float* dwte, int T, int h, int vocab_begin, int vocab_rows, cudaStream_t st);
// Mixed-precision Adam: fp32 master, moments and gradient; writes the bf16 compute copy.
void adam_update(float* w, float* m, float* v, const float* g, bf16* w16, size_t n, float lr, cudaStream_t st);
void cast_to_bf16(const float* in, bf16* out, size_t n, cudaStream_t st);
// Launches with a grid sized for n elements on this device.
int grid_for_elements(size_t n);

}  // namespace trainsim::gpu

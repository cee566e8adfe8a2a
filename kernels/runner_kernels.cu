#include "runner_kernels.h"

#include <vector>

#include "cuda_compat.h"

namespace trainsim::gpu {

namespace {

#define GRID_STRIDE(i, n) \
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < (n); i += static_cast<size_t>(gridDim.x) * blockDim.x)

__device__ __forceinline__ bool keep(size_t i, unsigned seed) {
  unsigned long long x = (i + 1) * 0x9E3779B97F4A7C15ull ^ (static_cast<unsigned long long>(seed) << 32);
  x ^= x >> 31; x *= 0xBF58476D1CE4E5B9ull; x ^= x >> 27;
  return static_cast<float>(x >> 40) / static_cast<float>(1ull << 24) >= kDropout;
}
// fill.cu's hash_uniform: a slice filled here holds the values fill_random_f32 gives the same indices.
__device__ __forceinline__ float random_uniform(size_t i, unsigned seed) {
  unsigned long long x = (i + 1) * 0x9E3779B97F4A7C15ull ^ (static_cast<unsigned long long>(seed) << 32);
  x ^= x >> 31; x *= 0xBF58476D1CE4E5B9ull; x ^= x >> 27; x *= 0x94D049BB133111EBull; x ^= x >> 33;
  return static_cast<float>(x >> 40) / static_cast<float>(1ull << 24) * 2.0f - 1.0f;
}
__device__ __forceinline__ float f(bf16 v) { return __bfloat162float(v); }
__device__ __forceinline__ bf16 b(float v) { return __float2bfloat16(v); }
constexpr float kKeepScale = 1.0f / (1.0f - kDropout);

// Block-wide reduction of one float per thread (blockDim.x a multiple of 32, at most 1024) by
// `op`, whose identity is `init`; every thread gets the result.
template <class Op>
__device__ float block_reduce(float v, float init, Op op) {
  __shared__ float part[32];
  for (int o = 16; o > 0; o /= 2) v = op(v, __shfl_xor_sync(0xffffffff, v, o));
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
  __syncthreads();
  float t = threadIdx.x < blockDim.x / 32 ? part[threadIdx.x] : init;
  if (threadIdx.x < 32)
    for (int o = 16; o > 0; o /= 2) t = op(t, __shfl_xor_sync(0xffffffff, t, o));
  __shared__ float total;
  if (threadIdx.x == 0) total = t;
  __syncthreads();
  const float r = total;
  __syncthreads();
  return r;
}
struct AddOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
__device__ float block_sum(float v) { return block_reduce(v, 0.0f, AddOp{}); }
__device__ float block_max(float v) { return block_reduce(v, -INFINITY, MaxOp{}); }

__global__ void embed_fwd_k(const int* tok, const bf16* wte, const bf16* wpe, bf16* out, unsigned char* mask, int T, int h,
                            int seq, unsigned seed) {
  GRID_STRIDE(i, static_cast<size_t>(T) * h) {
    const int t = static_cast<int>(i / h), c = static_cast<int>(i % h);
    const float v = f(wte[static_cast<size_t>(tok[t]) * h + c]) + f(wpe[static_cast<size_t>(t % seq) * h + c]);
    const bool k = keep(i, seed);
    mask[i] = k;
    out[i] = b(k ? v * kKeepScale : 0.0f);
  }
}

__global__ void embed_bwd_k(const bf16* d, const unsigned char* mask, const int* tok, float* dwte, float* dwpe, int T, int h, int seq,
                            int v0, int vn) {
  GRID_STRIDE(i, static_cast<size_t>(T) * h) {
    const int t = static_cast<int>(i / h), c = static_cast<int>(i % h);
    const float g = mask[i] ? f(d[i]) * kKeepScale : 0.0f;
    const int row = tok[t] - v0;
    if (row >= 0 && row < vn) atomicAdd(&dwte[static_cast<size_t>(row) * h + c], g);
    atomicAdd(&dwpe[static_cast<size_t>(t % seq) * h + c], g);
  }
}

// This rank's rows [v0, v0 + vn) of the word embedding; zero for tokens outside them.
__global__ void embed_lookup_k(const int* tok, const bf16* wte, bf16* out, int T, int h, int v0, int vn) {
  GRID_STRIDE(i, static_cast<size_t>(T) * h) {
    const int t = static_cast<int>(i / h), c = static_cast<int>(i % h);
    const int row = tok[t] - v0;
    out[i] = row >= 0 && row < vn ? wte[static_cast<size_t>(row) * h + c] : b(0.0f);
  }
}

// As embed_fwd_k, from word-embedding rows already gathered.
__global__ void embed_finish_k(const bf16* rows, const bf16* wpe, bf16* out, unsigned char* mask, int T, int h, int seq, unsigned seed) {
  GRID_STRIDE(i, static_cast<size_t>(T) * h) {
    const int t = static_cast<int>(i / h), c = static_cast<int>(i % h);
    const float v = f(rows[i]) + f(wpe[static_cast<size_t>(t % seq) * h + c]);
    const bool k = keep(i, seed);
    mask[i] = k;
    out[i] = b(k ? v * kKeepScale : 0.0f);
  }
}

__global__ void ln_fwd_k(const bf16* x, const bf16* g, const bf16* bb, bf16* y, float* mean, float* rstd, int h) {
  const size_t row = blockIdx.x;
  const bf16* xr = x + row * h;
  float s = 0, s2 = 0;
  for (int c = threadIdx.x; c < h; c += blockDim.x) {
    const float v = f(xr[c]);
    s += v;
    s2 += v * v;
  }
  s = block_sum(s);
  s2 = block_sum(s2);
  const float mu = s / h, var = fmaxf(s2 / h - mu * mu, 0.0f), rs = rsqrtf(var + 1e-5f);
  if (threadIdx.x == 0) { mean[row] = mu; rstd[row] = rs; }
  for (int c = threadIdx.x; c < h; c += blockDim.x) y[row * h + c] = b((f(xr[c]) - mu) * rs * f(g[c]) + f(bb[c]));
}

__global__ void ln_bwd_k(const bf16* dy, const bf16* x, const bf16* g, const float* mean, const float* rstd, bf16* dx, int h) {
  const size_t row = blockIdx.x;
  const float mu = mean[row], rs = rstd[row];
  float a = 0, c2 = 0;
  for (int c = threadIdx.x; c < h; c += blockDim.x) {
    const float xh = (f(x[row * h + c]) - mu) * rs, gy = f(dy[row * h + c]) * f(g[c]);
    a += gy;
    c2 += gy * xh;
  }
  a = block_sum(a) / h;
  c2 = block_sum(c2) / h;
  for (int c = threadIdx.x; c < h; c += blockDim.x) {
    const float xh = (f(x[row * h + c]) - mu) * rs, gy = f(dy[row * h + c]) * f(g[c]);
    dx[row * h + c] = b(rs * (gy - a - xh * c2));
  }
}

// dgamma += sum dy * xhat, dbeta += sum dy, over rows; 32 columns per block, rows split over grid.y.
__global__ void ln_param_grad_k(const bf16* dy, const bf16* x, const float* mean, const float* rstd, float* dg, float* db, int T, int h) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= h) return;
  float sg = 0, sb = 0;
  for (int r = blockIdx.y; r < T; r += gridDim.y) {
    const float d = f(dy[static_cast<size_t>(r) * h + c]);
    sg += d * (f(x[static_cast<size_t>(r) * h + c]) - mean[r]) * rstd[r];
    sb += d;
  }
  atomicAdd(&dg[c], sg);
  atomicAdd(&db[c], sb);
}

__global__ void col_sum_k(const bf16* dy, float* grad, int T, int n) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= n) return;
  float s = 0;
  for (int r = blockIdx.y; r < T; r += gridDim.y) s += f(dy[static_cast<size_t>(r) * n + c]);
  atomicAdd(&grad[c], s);
}

__global__ void split_heads_k(const bf16* qkv, const bf16* bias, bf16* q, bf16* k, bf16* v, int bsz, int s, int a, int d) {
  const int h = a * d;
  GRID_STRIDE(i, static_cast<size_t>(bsz) * s * 3 * h) {
    const size_t t = i / (3 * h);
    const int j = static_cast<int>(i % (3 * h));
    const int which = j / h, head = (j % h) / d, dd = j % d;
    const size_t bi = t / s, si = t % s;
    const size_t o = ((bi * a + head) * s + si) * d + dd;
    const bf16 val = b(f(qkv[i]) + f(bias[j]));
    (which == 0 ? q : which == 1 ? k : v)[o] = val;
  }
}

__global__ void merge_qkv_k(const bf16* dq, const bf16* dk, const bf16* dv, bf16* dqkv, int bsz, int s, int a, int d) {
  const int h = a * d;
  GRID_STRIDE(i, static_cast<size_t>(bsz) * s * 3 * h) {
    const size_t t = i / (3 * h);
    const int j = static_cast<int>(i % (3 * h));
    const int which = j / h, head = (j % h) / d, dd = j % d;
    const size_t bi = t / s, si = t % s;
    const size_t o = ((bi * a + head) * s + si) * d + dd;
    dqkv[i] = (which == 0 ? dq : which == 1 ? dk : dv)[o];
  }
}

__global__ void heads_to_rows_k(const bf16* in, bf16* out, int bsz, int s, int a, int d) {
  const int h = a * d;
  GRID_STRIDE(i, static_cast<size_t>(bsz) * s * h) {
    const size_t t = i / h;
    const int j = static_cast<int>(i % h), head = j / d, dd = j % d;
    const size_t bi = t / s, si = t % s;
    out[i] = in[((bi * a + head) * s + si) * d + dd];
  }
}

__global__ void rows_to_heads_k(const bf16* in, bf16* out, int bsz, int s, int a, int d) {
  const int h = a * d;
  GRID_STRIDE(i, static_cast<size_t>(bsz) * s * h) {
    const size_t t = i / h;
    const int j = static_cast<int>(i % h), head = j / d, dd = j % d;
    const size_t bi = t / s, si = t % s;
    out[((bi * a + head) * s + si) * d + dd] = in[i];
  }
}

__global__ void bias_dropout_residual_k(const bf16* y, const bf16* bias, const bf16* res, bf16* out, unsigned char* mask, int T,
                                        int h, unsigned seed) {
  GRID_STRIDE(i, static_cast<size_t>(T) * h) {
    const bool k = keep(i, seed);
    mask[i] = k;
    out[i] = b(f(res[i]) + (k ? (f(y[i]) + f(bias[i % h])) * kKeepScale : 0.0f));
  }
}

__global__ void dropout_bwd_k(const bf16* d, const unsigned char* mask, bf16* dy, size_t n) {
  GRID_STRIDE(i, n) dy[i] = b(mask[i] ? f(d[i]) * kKeepScale : 0.0f);
}

__device__ __forceinline__ float gelu(float x) { return 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x))); }
__device__ __forceinline__ float gelu_grad(float x) {
  const float u = 0.7978845608f * (x + 0.044715f * x * x * x), t = tanhf(u);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * 0.7978845608f * (1.0f + 3.0f * 0.044715f * x * x);
}

__global__ void bias_gelu_k(const bf16* x, const bf16* bias, bf16* gin, bf16* out, int T, int n) {
  GRID_STRIDE(i, static_cast<size_t>(T) * n) {
    const float v = f(x[i]) + f(bias[i % n]);
    gin[i] = b(v);
    out[i] = b(gelu(v));
  }
}

__global__ void gelu_bwd_k(const bf16* d, const bf16* gin, bf16* din, size_t n) {
  GRID_STRIDE(i, n) din[i] = b(f(d[i]) * gelu_grad(f(gin[i])));
}

__global__ void add_k(bf16* x, const bf16* y, size_t n) {
  GRID_STRIDE(i, n) x[i] = b(f(x[i]) + f(y[i]));
}

__global__ void add_f32_k(float* x, const float* y, size_t n) {
  GRID_STRIDE(i, n) x[i] += y[i];
}

// A row of n bf16 logits copied to fp32 (y), with its max and the sum of exp below the max
// (block-wide; every thread gets both).
__device__ float2 row_softmax_stats(const bf16* x, float* y, int n) {
  float mx = -INFINITY;
  for (int c = threadIdx.x; c < n; c += blockDim.x) {
    const float v = f(x[c]);
    y[c] = v;
    mx = fmaxf(mx, v);
  }
  mx = block_max(mx);
  float s = 0;
  for (int c = threadIdx.x; c < n; c += blockDim.x) s += __expf(y[c] - mx);
  return make_float2(mx, block_sum(s));
}

// One block per row: max, sum of exp, loss, gradient (softmax - onehot) * scale.
__global__ void cross_entropy_k(bf16* logits, float* l32, const int* tgt, float* loss, int V, float scale) {
  const size_t row = blockIdx.x;
  bf16* x = logits + row * V;
  float* y = l32 + row * V;
  const float2 st = row_softmax_stats(x, y, V);
  const float mx = st.x, s = st.y;
  const int t = tgt[row];
  if (threadIdx.x == 0) atomicAdd(loss, (logf(s) + mx - y[t]) * scale);
  for (int c = threadIdx.x; c < V; c += blockDim.x) x[c] = b((__expf(y[c] - mx) / s - (c == t ? 1.0f : 0.0f)) * scale);
}


// Vocabulary-parallel cross-entropy, first half (one block per row of this rank's vn columns):
// the row's local max, sum of exp below it, and the target's logit where this rank holds it.
__global__ void ce_stats_k(const bf16* logits, float* l32, const int* tgt, float* stats, int v0, int vn) {
  const size_t row = blockIdx.x;
  const bf16* x = logits + row * vn;
  float* y = l32 + row * vn;
  const float2 st = row_softmax_stats(x, y, vn);
  const float mx = st.x, s = st.y;
  if (threadIdx.x == 0) {
    const int t = tgt[row] - v0;
    stats[row * 3] = mx;
    stats[row * 3 + 1] = s;
    stats[row * 3 + 2] = t >= 0 && t < vn ? y[t] : 0.0f;
  }
}

// Second half, from every rank's statistics ([ranks][T][3]): the row's log-sum-exp over the whole
// vocabulary, the loss, and the gradient (softmax - onehot) * scale over this rank's columns.
__global__ void ce_finish_k(bf16* logits, const float* l32, const int* tgt, const float* all, int ranks, int T, float* loss, int v0,
                            int vn, float scale) {
  const size_t row = blockIdx.x;
  float mx = -INFINITY, s = 0, target = 0;
  for (int r = 0; r < ranks; ++r) mx = fmaxf(mx, all[(static_cast<size_t>(r) * T + row) * 3]);
  for (int r = 0; r < ranks; ++r) {
    const float* st = all + (static_cast<size_t>(r) * T + row) * 3;
    s += st[1] * __expf(st[0] - mx);
    target += st[2];
  }
  if (threadIdx.x == 0) atomicAdd(loss, (logf(s) + mx - target) * scale);
  const int t = tgt[row] - v0;
  bf16* x = logits + row * vn;
  const float* y = l32 + row * vn;
  for (int c = threadIdx.x; c < vn; c += blockDim.x) x[c] = b((__expf(y[c] - mx) / s - (c == t ? 1.0f : 0.0f)) * scale);
}


// ---- Llama-style layers: RMSNorm, rotary embeddings, SwiGLU, grouped-query heads, no biases, no dropout.

__global__ void rms_fwd_k(const bf16* x, const bf16* g, bf16* y, float* rstd, int h) {
  const size_t row = blockIdx.x;
  const bf16* xr = x + row * h;
  float ss = 0;
  for (int c = threadIdx.x; c < h; c += blockDim.x) { const float v = f(xr[c]); ss += v * v; }
  ss = block_sum(ss);
  const float r = rsqrtf(ss / h + 1e-5f);
  if (threadIdx.x == 0) rstd[row] = r;
  for (int c = threadIdx.x; c < h; c += blockDim.x) y[row * h + c] = b(f(xr[c]) * r * f(g[c]));
}

// dx = r (g dy - x r^2 mean(g dy x)); the gain's gradient by rms_param_grad_k.
__global__ void rms_bwd_k(const bf16* dy, const bf16* x, const bf16* g, const float* rstd, bf16* dx, int h) {
  const size_t row = blockIdx.x;
  const float r = rstd[row];
  float dot = 0;
  for (int c = threadIdx.x; c < h; c += blockDim.x) dot += f(dy[row * h + c]) * f(g[c]) * f(x[row * h + c]);
  dot = block_sum(dot) / h;
  for (int c = threadIdx.x; c < h; c += blockDim.x) {
    const float xv = f(x[row * h + c]);
    dx[row * h + c] = b(r * (f(dy[row * h + c]) * f(g[c]) - xv * r * r * dot));
  }
}

__global__ void rms_param_grad_k(const bf16* dy, const bf16* x, const float* rstd, float* dg, int T, int h) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= h) return;
  float s = 0;
  for (int r = blockIdx.y; r < T; r += gridDim.y) s += f(dy[static_cast<size_t>(r) * h + c]) * f(x[static_cast<size_t>(r) * h + c]) * rstd[r];
  atomicAdd(&dg[c], s);
}

// Rotary position embedding in place on [b*heads, s, d] (pairs (i, i + d/2), base 10000); inverse
// rotation for the gradient.
__global__ void rope_k(bf16* x, size_t rows, int s, int d, float sign) {
  const int half = d / 2;
  GRID_STRIDE(i, rows * half) {
    const size_t row = i / half;
    const int j = static_cast<int>(i % half);
    const int pos = static_cast<int>(row % s);
    const float theta = pos * __powf(10000.0f, -2.0f * j / d);
    float sn, cs;
    __sincosf(theta, &sn, &cs);
    sn *= sign;
    bf16* p = x + row * d;
    const float a = f(p[j]), c = f(p[j + half]);
    p[j] = b(a * cs - c * sn);
    p[j + half] = b(a * sn + c * cs);
  }
}

// gu [T, 2n] = gate | up -> out = silu(gate) * up.
__global__ void swiglu_k(const bf16* gu, bf16* out, int T, int n) {
  GRID_STRIDE(i, static_cast<size_t>(T) * n) {
    const size_t t = i / n;
    const int c = static_cast<int>(i % n);
    const float g = f(gu[t * 2 * n + c]), u = f(gu[t * 2 * n + n + c]);
    out[i] = b(g / (1.0f + __expf(-g)) * u);
  }
}

__global__ void swiglu_bwd_k(const bf16* dout, const bf16* gu, bf16* dgu, int T, int n) {
  GRID_STRIDE(i, static_cast<size_t>(T) * n) {
    const size_t t = i / n;
    const int c = static_cast<int>(i % n);
    const float g = f(gu[t * 2 * n + c]), u = f(gu[t * 2 * n + n + c]), d = f(dout[i]);
    const float sg = 1.0f / (1.0f + __expf(-g));
    dgu[t * 2 * n + c] = b(d * u * sg * (1.0f + g * (1.0f - sg)));
    dgu[t * 2 * n + n + c] = b(d * g * sg);
  }
}

// qkv [T, (a + 2 kv) d] -> q [b*a, s, d], k and v [b*kv, s, d]; and the inverse for gradients.
__global__ void split_gqa_k(const bf16* qkv, bf16* q, bf16* k, bf16* v, int bsz, int s, int a, int kv, int d) {
  const int w = (a + 2 * kv) * d;
  GRID_STRIDE(i, static_cast<size_t>(bsz) * s * w) {
    const size_t t = i / w;
    const int j = static_cast<int>(i % w), head = j / d, dd = j % d;
    const size_t bi = t / s, si = t % s;
    if (head < a) q[((bi * a + head) * s + si) * d + dd] = qkv[i];
    else if (head < a + kv) k[((bi * kv + head - a) * s + si) * d + dd] = qkv[i];
    else v[((bi * kv + head - a - kv) * s + si) * d + dd] = qkv[i];
  }
}

__global__ void merge_gqa_k(const bf16* dq, const bf16* dk, const bf16* dv, bf16* dqkv, int bsz, int s, int a, int kv, int d) {
  const int w = (a + 2 * kv) * d;
  GRID_STRIDE(i, static_cast<size_t>(bsz) * s * w) {
    const size_t t = i / w;
    const int j = static_cast<int>(i % w), head = j / d, dd = j % d;
    const size_t bi = t / s, si = t % s;
    if (head < a) dqkv[i] = dq[((bi * a + head) * s + si) * d + dd];
    else if (head < a + kv) dqkv[i] = dk[((bi * kv + head - a) * s + si) * d + dd];
    else dqkv[i] = dv[((bi * kv + head - a - kv) * s + si) * d + dd];
  }
}

__global__ void residual_k(const bf16* y, const bf16* res, bf16* out, size_t n) {
  GRID_STRIDE(i, n) out[i] = b(f(res[i]) + f(y[i]));
}

__global__ void embed_rows_bwd_k(const bf16* d, const int* tok, float* dwte, int T, int h, int v0, int vn) {
  GRID_STRIDE(i, static_cast<size_t>(T) * h) {
    const int t = static_cast<int>(i / h), c = static_cast<int>(i % h);
    const int row = tok[t] - v0;
    if (row >= 0 && row < vn) atomicAdd(&dwte[static_cast<size_t>(row) * h + c], f(d[i]));
  }
}

__global__ void fill_slice_k(float* dst, size_t dst_stride, size_t rows, size_t cols, size_t src_offset, size_t src_stride,
                             unsigned seed, float scale) {
  GRID_STRIDE(i, rows * cols) {
    const size_t r = i / cols, c = i % cols;
    float v = random_uniform(src_offset + r * src_stride + c, seed) * scale;
    if (v == 0.0f) v = scale * 1e-3f;
    dst[r * dst_stride + c] = v;
  }
}

__global__ void adam_k(float* w, float* m, float* v, const float* g, bf16* w16, size_t n, float lr) {
  GRID_STRIDE(i, n) {
    const float gi = g[i];
    const float mi = 0.9f * m[i] + 0.1f * gi;
    const float vi = 0.95f * v[i] + 0.05f * gi * gi;
    const float wi = w[i] - lr * mi / (sqrtf(vi) + 1e-8f);
    m[i] = mi;
    v[i] = vi;
    w[i] = wi;
    w16[i] = b(wi);
  }
}

__global__ void cast_k(const float* in, bf16* out, size_t n) { GRID_STRIDE(i, n) out[i] = b(in[i]); }

dim3 col_grid(int n, int T) { return dim3((n + 255) / 256, std::min(T, 64)); }

}  // namespace

int grid_for_elements(size_t n) {
  int dev = 0, sms = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  return static_cast<int>(std::max<size_t>(1, std::min<size_t>((n + 255) / 256, static_cast<size_t>(sms) * 16)));
}

#define LAUNCH_ELEMS(kernel, n, st, ...) \
  kernel<<<grid_for_elements(n), 256, 0, st>>>(__VA_ARGS__); \
  TRAINSIM_KERNEL_CHECK()

void embed_forward(const int* tokens, const bf16* wte, const bf16* wpe, bf16* out, unsigned char* mask, int T, int h, int seq,
                   unsigned seed, cudaStream_t st) {
  LAUNCH_ELEMS(embed_fwd_k, static_cast<size_t>(T) * h, st, tokens, wte, wpe, out, mask, T, h, seq, seed);
}
void embed_backward(const bf16* dout, const unsigned char* mask, const int* tokens, float* dwte, float* dwpe, int T, int h, int seq,
                    cudaStream_t st, int vocab_begin, int vocab_rows) {
  LAUNCH_ELEMS(embed_bwd_k, static_cast<size_t>(T) * h, st, dout, mask, tokens, dwte, dwpe, T, h, seq, vocab_begin, vocab_rows);
}
void embed_lookup(const int* tokens, const bf16* wte, bf16* out, int T, int h, int vocab_begin, int vocab_rows, cudaStream_t st) {
  LAUNCH_ELEMS(embed_lookup_k, static_cast<size_t>(T) * h, st, tokens, wte, out, T, h, vocab_begin, vocab_rows);
}
void embed_finish(const bf16* rows, const bf16* wpe, bf16* out, unsigned char* mask, int T, int h, int seq, unsigned seed,
                  cudaStream_t st) {
  LAUNCH_ELEMS(embed_finish_k, static_cast<size_t>(T) * h, st, rows, wpe, out, mask, T, h, seq, seed);
}
void layernorm_forward(const bf16* x, const bf16* g, const bf16* bb, bf16* y, float* mean, float* rstd, int T, int h, cudaStream_t st) {
  ln_fwd_k<<<T, 256, 0, st>>>(x, g, bb, y, mean, rstd, h);
  TRAINSIM_KERNEL_CHECK();
}
void layernorm_backward(const bf16* dy, const bf16* x, const bf16* g, const float* mean, const float* rstd, bf16* dx, float* dg,
                        float* db, int T, int h, cudaStream_t st) {
  ln_bwd_k<<<T, 256, 0, st>>>(dy, x, g, mean, rstd, dx, h);
  TRAINSIM_KERNEL_CHECK();
  ln_param_grad_k<<<col_grid(h, T), 256, 0, st>>>(dy, x, mean, rstd, dg, db, T, h);
  TRAINSIM_KERNEL_CHECK();
}
void split_heads(const bf16* qkv, const bf16* bias, bf16* q, bf16* k, bf16* v, int bsz, int s, int a, int d, cudaStream_t st) {
  LAUNCH_ELEMS(split_heads_k, static_cast<size_t>(bsz) * s * 3 * a * d, st, qkv, bias, q, k, v, bsz, s, a, d);
}
void merge_qkv_grad(const bf16* dq, const bf16* dk, const bf16* dv, bf16* dqkv, int bsz, int s, int a, int d, cudaStream_t st) {
  LAUNCH_ELEMS(merge_qkv_k, static_cast<size_t>(bsz) * s * 3 * a * d, st, dq, dk, dv, dqkv, bsz, s, a, d);
}
void heads_to_rows(const bf16* in, bf16* out, int bsz, int s, int a, int d, cudaStream_t st) {
  LAUNCH_ELEMS(heads_to_rows_k, static_cast<size_t>(bsz) * s * a * d, st, in, out, bsz, s, a, d);
}
void rows_to_heads(const bf16* in, bf16* out, int bsz, int s, int a, int d, cudaStream_t st) {
  LAUNCH_ELEMS(rows_to_heads_k, static_cast<size_t>(bsz) * s * a * d, st, in, out, bsz, s, a, d);
}
void bias_dropout_residual(const bf16* y, const bf16* bias, const bf16* residual, bf16* out, unsigned char* mask, int T, int h,
                           unsigned seed, cudaStream_t st) {
  LAUNCH_ELEMS(bias_dropout_residual_k, static_cast<size_t>(T) * h, st, y, bias, residual, out, mask, T, h, seed);
}
void dropout_backward(const bf16* dout, const unsigned char* mask, bf16* dy, size_t n, cudaStream_t st) {
  LAUNCH_ELEMS(dropout_bwd_k, n, st, dout, mask, dy, n);
}
void bias_gelu(const bf16* x, const bf16* bias, bf16* gin, bf16* out, int T, int n, cudaStream_t st) {
  LAUNCH_ELEMS(bias_gelu_k, static_cast<size_t>(T) * n, st, x, bias, gin, out, T, n);
}
void gelu_backward(const bf16* dout, const bf16* gin, bf16* din, size_t n, cudaStream_t st) {
  LAUNCH_ELEMS(gelu_bwd_k, n, st, dout, gin, din, n);
}
void column_sum(const bf16* dy, float* grad, int T, int n, cudaStream_t st) {
  col_sum_k<<<col_grid(n, T), 256, 0, st>>>(dy, grad, T, n);
  TRAINSIM_KERNEL_CHECK();
}
void add_inplace(bf16* x, const bf16* y, size_t n, cudaStream_t st) { LAUNCH_ELEMS(add_k, n, st, x, y, n); }
void add_inplace(float* x, const float* y, size_t n, cudaStream_t st) { LAUNCH_ELEMS(add_f32_k, n, st, x, y, n); }
void cross_entropy(bf16* logits, float* logits32, const int* targets, float* loss, int T, int V, float scale, cudaStream_t st) {
  cross_entropy_k<<<T, 512, 0, st>>>(logits, logits32, targets, loss, V, scale);
  TRAINSIM_KERNEL_CHECK();
}
void cross_entropy_stats(const bf16* logits, float* logits32, const int* targets, float* stats, int T, int vocab_begin, int vocab_cols,
                         cudaStream_t st) {
  ce_stats_k<<<T, 512, 0, st>>>(logits, logits32, targets, stats, vocab_begin, vocab_cols);
  TRAINSIM_KERNEL_CHECK();
}
void cross_entropy_finish(bf16* logits, const float* logits32, const int* targets, const float* all_stats, int ranks, float* loss, int T,
                          int vocab_begin, int vocab_cols, float scale, cudaStream_t st) {
  ce_finish_k<<<T, 512, 0, st>>>(logits, logits32, targets, all_stats, ranks, T, loss, vocab_begin, vocab_cols, scale);
  TRAINSIM_KERNEL_CHECK();
}
void fill_random_slice(float* dst, size_t dst_stride, size_t rows, size_t cols, size_t src_offset, size_t src_stride, unsigned seed,
                       float scale, cudaStream_t st) {
  LAUNCH_ELEMS(fill_slice_k, rows * cols, st, dst, dst_stride, rows, cols, src_offset, src_stride, seed, scale);
}
void rmsnorm_forward(const bf16* x, const bf16* g, bf16* y, float* rstd, int T, int h, cudaStream_t st) {
  rms_fwd_k<<<T, 256, 0, st>>>(x, g, y, rstd, h);
  TRAINSIM_KERNEL_CHECK();
}
void rmsnorm_backward(const bf16* dy, const bf16* x, const bf16* g, const float* rstd, bf16* dx, float* dg, int T, int h, cudaStream_t st) {
  rms_bwd_k<<<T, 256, 0, st>>>(dy, x, g, rstd, dx, h);
  TRAINSIM_KERNEL_CHECK();
  rms_param_grad_k<<<col_grid(h, T), 256, 0, st>>>(dy, x, rstd, dg, T, h);
  TRAINSIM_KERNEL_CHECK();
}
void rope(bf16* x, int batch_heads, int s, int d, bool inverse, cudaStream_t st) {
  const size_t rows = static_cast<size_t>(batch_heads) * s;
  LAUNCH_ELEMS(rope_k, rows * (d / 2), st, x, rows, s, d, inverse ? -1.0f : 1.0f);
}
void swiglu(const bf16* gate_up, bf16* out, int T, int n, cudaStream_t st) {
  LAUNCH_ELEMS(swiglu_k, static_cast<size_t>(T) * n, st, gate_up, out, T, n);
}
void swiglu_backward(const bf16* dout, const bf16* gate_up, bf16* dgate_up, int T, int n, cudaStream_t st) {
  LAUNCH_ELEMS(swiglu_bwd_k, static_cast<size_t>(T) * n, st, dout, gate_up, dgate_up, T, n);
}
void split_qkv_gqa(const bf16* qkv, bf16* q, bf16* k, bf16* v, int bsz, int s, int a, int kv, int d, cudaStream_t st) {
  LAUNCH_ELEMS(split_gqa_k, static_cast<size_t>(bsz) * s * (a + 2 * kv) * d, st, qkv, q, k, v, bsz, s, a, kv, d);
}
void merge_qkv_gqa_grad(const bf16* dq, const bf16* dk, const bf16* dv, bf16* dqkv, int bsz, int s, int a, int kv, int d, cudaStream_t st) {
  LAUNCH_ELEMS(merge_gqa_k, static_cast<size_t>(bsz) * s * (a + 2 * kv) * d, st, dq, dk, dv, dqkv, bsz, s, a, kv, d);
}
void residual_add(const bf16* y, const bf16* residual, bf16* out, size_t n, cudaStream_t st) {
  LAUNCH_ELEMS(residual_k, n, st, y, residual, out, n);
}
void embed_rows_backward(const bf16* dout, const int* tokens, float* dwte, int T, int h, int vocab_begin, int vocab_rows, cudaStream_t st) {
  LAUNCH_ELEMS(embed_rows_bwd_k, static_cast<size_t>(T) * h, st, dout, tokens, dwte, T, h, vocab_begin, vocab_rows);
}
void adam_update(float* w, float* m, float* v, const float* g, bf16* w16, size_t n, float lr, cudaStream_t st) {
  LAUNCH_ELEMS(adam_k, n, st, w, m, v, g, w16, n, lr);
}
void cast_to_bf16(const float* in, bf16* out, size_t n, cudaStream_t st) { LAUNCH_ELEMS(cast_k, n, st, in, out, n); }

namespace {
template <class T>
__global__ void checksum_k(const T* p, size_t n, bool squares, double* partial) {
  __shared__ double sh[256];
  double acc = 0;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<size_t>(gridDim.x) * blockDim.x)
  {
    const double x = static_cast<double>(static_cast<float>(p[i]));
    acc += squares ? x * x : x;
  }
  sh[threadIdx.x] = acc;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = sh[0];
}
}  // namespace

namespace {
template <class T>
double checksum_impl(const T* p, size_t n, double* partials, cudaStream_t st, bool squares) {
  constexpr int kBlocks = kChecksumPartials;
  checksum_k<<<kBlocks, 256, 0, st>>>(p, n, squares, partials);
  TRAINSIM_KERNEL_CHECK();
  std::vector<double> host(kBlocks);
  TRAINSIM_CUDA(cudaMemcpyAsync(host.data(), partials, kBlocks * sizeof(double), cudaMemcpyDeviceToHost, st));
  TRAINSIM_CUDA(cudaStreamSynchronize(st));
  double sum = 0;
  for (double x : host) sum += x;
  return sum;
}
}  // namespace

double checksum(const float* p, size_t n, double* partials, cudaStream_t st, bool squares) {
  return checksum_impl(p, n, partials, st, squares);
}
double checksum(const bf16* p, size_t n, double* partials, cudaStream_t st) { return checksum_impl(p, n, partials, st, false); }

}  // namespace trainsim::gpu

// Orchestrates the microbenchmarks into one Measurements record.
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <chrono>
#include <thread>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>
#include <tuple>
#include <vector>

#include "attention.h"
#include "compression.h"
#include "device_identity.h"
#include "gemm_bench.h"
#include "lt_matmul.h"
#include "measurements.h"
#include "memory_bench.h"
#include "nccl_bench.h"
#include "runner_kernels.h"
#include "runtime_memory.h"
#include "timing.h"

namespace trainsim::gpu {

bool cuda_available() { return cuda_device_count() > 0; }

int cuda_device_count() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

void use_device(int device) { TRAINSIM_CUDA(cudaSetDevice(device)); }

DeviceInfo describe_devices();

namespace {

std::string version_string(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }

}  // namespace

DeviceInfo describe_devices() {
  DeviceInfo d;
  TRAINSIM_CUDA(cudaGetDeviceCount(&d.count));
  cudaDeviceProp p{};
  TRAINSIM_CUDA(cudaGetDeviceProperties(&p, 0));
  d.name = p.name;
  d.memory_bytes = static_cast<double>(p.totalGlobalMem);
  d.sm_count = p.multiProcessorCount;
  d.cc_major = p.major;
  d.cc_minor = p.minor;
  d.l2_bytes = p.l2CacheSize;
  for (int i = 0; i < d.count; ++i) {
    cudaDeviceProp q{};
    TRAINSIM_CUDA(cudaGetDeviceProperties(&q, i));
    unsigned char bytes[16];
    for (int b = 0; b < 16; ++b) bytes[b] = static_cast<unsigned char>(q.uuid.bytes[b]);
    d.uuids.push_back(format_gpu_uuid(bytes));
  }
  int drv = 0, rt = 0, nccl = 0;
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  ncclGetVersion(&nccl);
  d.driver = "CUDA driver API " + version_string(drv);
  // The kernel driver version, as nvidia-smi prints it.
  if (FILE* f = std::fopen("/proc/driver/nvidia/version", "r")) {
    char line[512] = {};
    if (std::fgets(line, sizeof line, f)) {
      const std::string s(line);
      // "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build ...":
      // the first token made of digits and dots after "Kernel Module".
      const auto k = s.find("Kernel Module");
      std::istringstream words(k == std::string::npos ? std::string() : s.substr(k));
      for (std::string w; words >> w;)
        if (!w.empty() && w.find_first_not_of("0123456789.") == std::string::npos && w.find('.') != std::string::npos) {
          d.driver = w + " (" + d.driver + ")";
          break;
        }
    }
    std::fclose(f);
  }
  d.cuda_runtime = version_string(rt);
  d.nccl = std::to_string(nccl / 10000) + "." + std::to_string((nccl / 100) % 100) + "." + std::to_string(nccl % 100);
  for (int a = 0; a < d.count; ++a)
    for (int b = a + 1; b < d.count; ++b) {
      int access = 0, rank = 0;
      cudaDeviceGetP2PAttribute(&access, cudaDevP2PAttrAccessSupported, a, b);
      cudaDeviceGetP2PAttribute(&rank, cudaDevP2PAttrPerformanceRank, a, b);
      d.topology += std::to_string(a) + "-" + std::to_string(b) + ":" + (access ? "P2P(rank " + std::to_string(rank) + ")" : "none") + " ";
    }
  return d;
}

namespace {

struct AttentionCase { int b, h, s, d, group = 1; bool dropout = true; };

// The attention shapes calibrate times, in its order.
std::vector<AttentionCase> attention_cases(bool quick) {
  using S = AttentionCase;
  // The head counts and sizes of the preset models at micro-batches 1 to 8.
  std::vector<S> shapes = quick ? std::vector<S>{{4, 16, 2048, 64}, {2, 32, 2048, 128}}
                                : std::vector<S>{{1, 12, 2048, 64}, {2, 12, 2048, 64}, {4, 12, 2048, 64}, {8, 12, 2048, 64},
                                                 {1, 16, 2048, 64}, {2, 16, 2048, 64}, {4, 16, 2048, 64}, {8, 16, 2048, 64},
                                                 {1, 16, 2048, 96}, {2, 16, 2048, 96}, {4, 16, 2048, 96},
                                                 {8, 16, 2048, 96}, {1, 16, 2048, 128}, {2, 16, 2048, 128}, {4, 16, 2048, 128},
                                                 {8, 16, 2048, 128}, {1, 32, 2048, 80}, {2, 32, 2048, 80}, {4, 32, 2048, 80},
                                                 {8, 32, 2048, 80}, {1, 32, 2048, 128}, {2, 32, 2048, 128}, {1, 32, 4096, 128},
                                                 {1, 40, 4096, 128}, {1, 64, 4096, 128}};
  // Llama-style attention: no dropout, grouped K/V heads (8 and 4 query heads per K/V head, and
  // Llama 2's one), at micro-batches 1-4.
  for (int b : quick ? std::vector<int>{2} : std::vector<int>{1, 2, 4}) {
    shapes.push_back({b, 32, 2048, 64, 8, false});
    shapes.push_back({b, 24, 2048, 128, 3, false});
    shapes.push_back({b, 32, 2048, 128, 4, false});
    shapes.push_back({b, 32, 2048, 128, 1, false});
  }
  // Long sequences (4,096 and 8,192 tokens), where the s x s tensors of the unfused attention
  // dominate: GPT-style 64-wide heads, Llama-style grouped heads, and Llama 2's 128-wide ones.
  if (!quick)
    for (int s : {4096, 8192}) {
      for (int b : {1, 2}) {
        shapes.push_back({b, 16, s, 64});
        shapes.push_back({b, 32, s, 64, 8, false});
      }
      shapes.push_back({1, 32, s, 128, 1, false});
    }
  // The Llama presets' own long shapes, per rank at the tensor-parallel degrees they run with: Llama 3
  // at 8,192 tokens with 4 (8B), 8 (70B) and 16 (405B) query heads per K/V head; Llama 2 at 4,096
  // tokens, 7B and 13B without grouping, 70B with 8.
  if (!quick) {
    for (int h : {4, 8, 16, 32}) shapes.push_back({1, h, 8192, 128, 4, false});
    for (int h : {8, 16}) shapes.push_back({1, h, 8192, 128, 8, false});
    shapes.push_back({2, 16, 8192, 128, 8, false});
    for (int b : {1, 2}) shapes.push_back({b, 16, 8192, 128, 16, false});
    for (int h : {8, 16}) shapes.push_back({1, h, 4096, 128, 8, false});
    for (int h : {8, 16}) shapes.push_back({1, h, 4096, 128, 1, false});
  }
  return shapes;
}

// One shape's forward and backward, each the median of ten calls after two untimed ones.
AttentionSample time_attention(cublasHandle_t h, cudaStream_t st, const AttentionCase& s) {
  AttentionShape a{s.b * s.h, s.s, s.d};
  a.group = s.group;
  const size_t sd = static_cast<size_t>(a.batch_heads) * s.s * s.d, ss = static_cast<size_t>(a.batch_heads) * s.s * s.s;
  const size_t skv = sd / s.group;  // K and V: one head per group
  DeviceBuffer q(sd * 2), k(skv * 2), v(skv * 2), o(sd * 2), p(ss * 2), pd(s.dropout ? ss * 2 : 0), mask(s.dropout ? ss : 0), dp(ss * 2),
      dO(sd * 2), dq(sd * 2), dk(skv * 2), dv(skv * 2);
  fill_random_bf16(q.get(), sd, 1, 1.0f, st);
  fill_random_bf16(k.get(), skv, 2, 1.0f, st);
  fill_random_bf16(v.get(), skv, 3, 1.0f, st);
  fill_random_bf16(dO.get(), sd, 4, 1.0f, st);
  // Causal attention, with dropout 0.1 on the probabilities as GPT training runs it, or without
  // (Llama).
  const float drop = s.dropout ? 0.1f : 0.0f;
  const AttentionBuffers ab{q.get(), k.get(), v.get(), p.get(), s.dropout ? pd.get() : nullptr,
                            s.dropout ? mask.get<unsigned char>() : nullptr, o.get()};
  const double fwd = time_median_us(st, 2, 10, [&] { attention_forward(h, a, ab, 7, drop, st); });
  const double bwd = time_median_us(st, 2, 10, [&] { attention_backward(h, a, ab, dO.get(), dp.get(), dq.get(), dk.get(), dv.get(), drop, st); });
  const double flops = 4.0 * s.b * s.h * static_cast<double>(s.s) * s.s * s.d;
  AttentionSample sample{s.b, s.h, s.s, s.d, fwd, bwd, flops / (fwd * 1e6), 2 * flops / (bwd * 1e6)};
  sample.kv_group = s.group;
  sample.dropout = s.dropout;
  return sample;
}

// Each shape is timed after the GPU has been idle kAttentionIdleMs (measurements.h says why).
std::vector<AttentionSample> bench_attention(bool quick) {
  std::vector<AttentionSample> out;
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cublasCreate failed");
  cudaStream_t st;
  TRAINSIM_CUDA(cudaStreamCreate(&st));
  for (const auto& s : attention_cases(quick)) {
    TRAINSIM_CUDA(cudaStreamSynchronize(st));
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(kAttentionIdleMs));
    out.push_back(time_attention(h, st, s));
  }
  cublasDestroy(h);
  cudaStreamDestroy(st);
  return out;
}

std::vector<CompressionSample> bench_compression(bool quick) {
  std::vector<CompressionSample> out;
  cudaStream_t st;
  TRAINSIM_CUDA(cudaStreamCreate(&st));
  const size_t n = quick ? (64ull << 20) : (256ull << 20);  // fp32 gradient elements
  DeviceBuffer g(n * 4), back(n * 4), q(n), scales((n / kQuantBlock + 1) * 4), resid(n * 4);
  fill_random_f32(g.get<float>(), n, 7, 1.0f, st);
  const double qus = time_median_us(st, 2, 10, [&] { int8_quantize(g.get<float>(), q.get<signed char>(), scales.get<float>(), n, st); });
  const double dus = time_median_us(st, 2, 10, [&] { int8_dequantize(q.get<signed char>(), scales.get<float>(), back.get<float>(), n, st); });
  // Error of the round trip, on a sample copied to the host.
  const size_t m = 1 << 20;
  std::vector<float> a(m), b(m);
  TRAINSIM_CUDA(cudaMemcpy(a.data(), g.get(), m * 4, cudaMemcpyDeviceToHost));
  TRAINSIM_CUDA(cudaMemcpy(b.data(), back.get(), m * 4, cudaMemcpyDeviceToHost));
  double num = 0, den = 0;
  for (size_t i = 0; i < m; ++i) { num += (a[i] - b[i]) * (a[i] - b[i]); den += a[i] * a[i]; }
  const double err = std::sqrt(num / den);
  out.push_back({"int8_quantize", n * 4.0, qus, n * 4.0 / (qus * 1e3), err});
  out.push_back({"int8_dequantize", n * 4.0, dus, n * 4.0 / (dus * 1e3), err});
  // Top-K 1% with error feedback.
  const double frac = 0.01;
  const size_t cap = static_cast<size_t>(n * frac * 1.5);
  DeviceBuffer vals(cap * 4), idx(cap * 4), sample((1 << 16) * 4), counter(4);
  TRAINSIM_CUDA(cudaMemsetAsync(resid.get(), 0, n * 4, st));
  size_t kept = 0;
  const double tus = time_median_us(st, 1, 5, [&] {
    kept = topk_error_feedback(g.get<float>(), resid.get<float>(), vals.get<float>(), idx.get<int>(), cap, n, frac,
                               sample.get<float>(), counter.get<int>(), st);
  });
  // The kept fraction against the target (relative error of the count).
  out.push_back({"topk_select", n * 4.0, tus, n * 4.0 / (tus * 1e3), std::fabs(static_cast<double>(kept) / n / frac - 1.0)});
  cudaStreamDestroy(st);
  return out;
}

// Keeps every SM busy with `iters` dependent FMAs per thread (CUDA cores, not tensor cores): a
// compute-bound stretch before a timed memory-bound kernel.
__global__ void fma_spin_kernel(float* out, int iters) {
  float a = threadIdx.x * 1e-3f, b = 1.0001f;
  for (int i = 0; i < iters; ++i) a = fmaf(a, b, 1e-7f);
  if (a == 12345.0f) out[0] = a;  // never true; keeps the loop
}

}  // namespace

// The element-wise and row-wise kernels of a GPT training step (kernels/runner_kernels.cu), each
// timed alone at the shapes of a few preset models and micro-batches.
std::vector<KernelSample> bench_step_kernels(StepKernelShapes which, StepKernelTiming how, bool gelu_in_place_too) {
  struct Shape { int T, h, V; };
  const bool quick = which == StepKernelShapes::quick;
  const Shape quick_shapes[] = {{2048, 768, 50257}, {4096, 2048, 50257}};
  const Shape profile_shapes[] = {{2048, 768, 50257},  {16384, 768, 50257},  {8192, 1536, 50257}, {16384, 1536, 50257},
                                  {4096, 2048, 50257}, {8192, 2048, 50257},  {16384, 2048, 50257}, {4096, 2560, 50257},
                                  {16384, 2560, 50257}, {2048, 4096, 50257}, {8192, 4096, 50257}};
  std::vector<Shape> shapes;
  if (quick) {
    for (const Shape& sh : quick_shapes) shapes.push_back(sh);
  } else if (which == StepKernelShapes::profile) {
    for (const Shape& sh : profile_shapes) shapes.push_back(sh);
  } else {
    // A kernel's rate need not be monotonic in tokens at one hidden size: timed inside GPT steps,
    // the dropout-residual backward at 768 wide ran faster at 8,192 tokens than the profile
    // table had it at both 2,048 and 16,384.
    for (int h : {768, 1024, 1536, 2048, 2560, 4096})
      for (int T : {2048, 4096, 8192, 16384}) shapes.push_back({T, h, 50257});
  }
  std::vector<KernelSample> out;
  cudaStream_t st;
  TRAINSIM_CUDA(cudaStreamCreate(&st));
  // Evicting the operands: a write over twice the L2 cache before each timed call.
  int dev = 0, l2 = 0;
  TRAINSIM_CUDA(cudaGetDevice(&dev));
  TRAINSIM_CUDA(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  DeviceBuffer flush(how == StepKernelTiming::evicted ? 2 * static_cast<size_t>(l2) : 16);
  int sms = 0;
  TRAINSIM_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  // Under load: bf16 GEMMs of 8192^3 (about 1.1 TFLOP each) keep the tensor cores at full power, as
  // a training step's GEMMs do, so that the GPU runs at its power-capped clock.
  const bool load = how == StepKernelTiming::under_load;
  const int G = load ? 8192 : 16;
  DeviceBuffer ga(static_cast<size_t>(G) * G * 2), gb(static_cast<size_t>(G) * G * 2), gc(static_cast<size_t>(G) * G * 2);
  LtMatmul mm(st);
  auto heavy_gemm = [&] { mm.gemm(false, false, G, G, G, ga.get(), gb.get(), gc.get(), false); };
  if (load) {
    fill_random_bf16(ga.get(), ga.bytes() / 2, 21, 1.0f, st);
    fill_random_bf16(gb.get(), gb.bytes() / 2, 22, 1.0f, st);
    for (int i = 0; i < 400; ++i) heavy_gemm();  // to the power limit before the first timed call
    TRAINSIM_CUDA(cudaStreamSynchronize(st));
  }
  auto time_us = [&](auto&& fn) {
    switch (how) {
      case StepKernelTiming::burst: return time_median_us(st, 2, 10, fn, 10);
      case StepKernelTiming::single: return time_median_us(st, 2, 10, fn, 1);
      case StepKernelTiming::evicted: return time_median_after_us(st, 2, 10, fn, [&] {
        TRAINSIM_CUDA(cudaMemsetAsync(flush.get(), 1, flush.bytes(), st));
      });
      case StepKernelTiming::after_compute: return time_median_after_us(st, 2, 10, fn, [&] {
        fma_spin_kernel<<<sms * 4, 256, 0, st>>>(flush.get<float>(), 1 << 18);
      });
      case StepKernelTiming::under_load: return time_median_after_us(st, 2, 10, fn, [&] {
        for (int i = 0; i < 4; ++i) heavy_gemm();
      });
    }
    return 0.0;
  };
  for (const auto& sh : shapes) {
    const int T = sh.T, h = sh.h, f = 4 * h, V = sh.V, seq = 2048, bsz = T / seq, d = 64, a = h / d;
    const size_t Th = static_cast<size_t>(T) * h, Tf = static_cast<size_t>(T) * f;
    DeviceBuffer x(Th * 2), y(Th * 2), z(Th * 2), wide(std::max(3 * Th, Tf) * 2), wide2(Tf * 2), wide3(Tf * 2),
        q(Th * 2), k(Th * 2), v(Th * 2), mask(Th), g(h * 2), bb(std::max(3 * h, f) * 2), mean(T * 4), rstd(T * 4),
        gf(std::max(3 * h, f) * 4), gf2(h * 4), logits(static_cast<size_t>(T) * V * 2), l32(static_cast<size_t>(T) * V * 4),
        tok(T * 4), loss(4), wte(static_cast<size_t>(V) * h * 2), wpe(static_cast<size_t>(seq) * h * 2),
        dwte(static_cast<size_t>(V) * h * 4), dwpe(static_cast<size_t>(seq) * h * 4);
    using bf = __nv_bfloat16;
    for (auto* buf : {&x, &y, &z, &wide, &wide2, &wide3, &q, &k, &v, &g, &bb, &logits, &wte, &wpe})
      fill_random_bf16(buf->get(), buf->bytes() / 2, 3, 1.0f, st);
    std::vector<int> tk(T);
    for (int i = 0; i < T; ++i) tk[i] = (i * 7919) % V;
    TRAINSIM_CUDA(cudaMemcpy(tok.get(), tk.data(), T * 4, cudaMemcpyHostToDevice));
    TRAINSIM_CUDA(cudaMemset(dwte.get(), 0, dwte.bytes()));
    TRAINSIM_CUDA(cudaMemset(dwpe.get(), 0, dwpe.bytes()));
    TRAINSIM_CUDA(cudaMemset(gf.get(), 0, gf.bytes()));
    TRAINSIM_CUDA(cudaMemset(gf2.get(), 0, gf2.bytes()));
    layernorm_forward(x.get<bf>(), g.get<bf>(), bb.get<bf>(), y.get<bf>(), mean.get<float>(), rstd.get<float>(), T, h, st);
    bias_dropout_residual(x.get<bf>(), bb.get<bf>(), y.get<bf>(), z.get<bf>(), mask.get<unsigned char>(), T, h, 9, st);
    auto time = [&](const char* name, auto&& fn) {
      const double us = time_us(fn);
      out.push_back({name, T, h, f, V, a, seq, us});
    };
    time("layernorm", [&] { layernorm_forward(x.get<bf>(), g.get<bf>(), bb.get<bf>(), y.get<bf>(), mean.get<float>(), rstd.get<float>(), T, h, st); });
    time("layernorm.bwd", [&] {
      layernorm_backward(z.get<bf>(), x.get<bf>(), g.get<bf>(), mean.get<float>(), rstd.get<float>(), y.get<bf>(), gf.get<float>(),
                         gf2.get<float>(), T, h, st);
      add_inplace(q.get<bf>(), y.get<bf>(), Th, st);
    });
    time("qkv_bias_split", [&] { split_heads(wide.get<bf>(), bb.get<bf>(), q.get<bf>(), k.get<bf>(), v.get<bf>(), bsz, seq, a, d, st); });
    time("attention_merge_heads", [&] { heads_to_rows(q.get<bf>(), y.get<bf>(), bsz, seq, a, d, st); });
    time("attention_split_heads.bwd", [&] { rows_to_heads(y.get<bf>(), q.get<bf>(), bsz, seq, a, d, st); });
    time("qkv_merge_bias.bwd", [&] {
      merge_qkv_grad(q.get<bf>(), k.get<bf>(), v.get<bf>(), wide.get<bf>(), bsz, seq, a, d, st);
      column_sum(wide.get<bf>(), gf.get<float>(), T, 3 * h, st);
    });
    time("bias_dropout_residual", [&] {
      bias_dropout_residual(x.get<bf>(), bb.get<bf>(), y.get<bf>(), z.get<bf>(), mask.get<unsigned char>(), T, h, 9, st);
    });
    time("dropout_residual.bwd", [&] {
      dropout_backward(z.get<bf>(), mask.get<unsigned char>(), y.get<bf>(), Th, st);
      column_sum(y.get<bf>(), gf2.get<float>(), T, h, st);
    });
    time("bias_gelu", [&] { bias_gelu(wide.get<bf>(), bb.get<bf>(), wide2.get<bf>(), wide3.get<bf>(), T, f, st); });
    time("gelu_bias.bwd", [&] {
      gelu_backward(wide3.get<bf>(), wide2.get<bf>(), wide.get<bf>(), Tf, st);
      column_sum(wide.get<bf>(), gf.get<float>(), T, f, st);
    });
    if (gelu_in_place_too)
      time("gelu_bias.bwd in place", [&] {
        gelu_backward(wide3.get<bf>(), wide2.get<bf>(), wide3.get<bf>(), Tf, st);
        column_sum(wide3.get<bf>(), gf.get<float>(), T, f, st);
      });
    time("cross_entropy", [&] {
      cross_entropy(logits.get<bf>(), l32.get<float>(), tok.get<int>(), loss.get<float>(), T, V, 1.0f / T, st);
    });
    time("embedding", [&] {
      embed_forward(tok.get<int>(), wte.get<bf>(), wpe.get<bf>(), y.get<bf>(), mask.get<unsigned char>(), T, h, seq, 5, st);
    });
    if (&sh == &shapes.front()) {
      // The optimizer step: mixed-precision Adam over 64 Mi parameters, then zeroing the fp32 gradients.
      const size_t n = 64ull << 20;
      DeviceBuffer w(n * 4), m1(n * 4), m2(n * 4), gr(n * 4), w16(n * 2);
      for (auto* buf : {&w, &m1, &m2, &gr}) fill_random_f32(buf->get<float>(), n, 11, 1.0f, st);
      const double us = time_median_us(st, 2, 10, [&] {
        adam_update(w.get<float>(), m1.get<float>(), m2.get<float>(), gr.get<float>(), w16.get<bf>(), n, 1e-4f, st);
        TRAINSIM_CUDA(cudaMemsetAsync(gr.get(), 0, n * 4, st));
      });
      out.push_back({"adam", static_cast<int>(n >> 20), 0, 0, 0, 0, 0, us});  // tokens field: parameters in Mi
    }
    time("embedding.bwd", [&] {
      embed_backward(y.get<bf>(), mask.get<unsigned char>(), tok.get<int>(), dwte.get<float>(), dwpe.get<float>(), T, h, seq, st);
    });
  }
  // Llama-style layers' own kernels (RMSNorm, the grouped-query split, rotary embeddings, SwiGLU,
  // residual add) at Llama-like widths: head size 128, four query heads per K/V head, SwiGLU width
  // about 8h/3.
  struct LlamaShape { int T, h, f; };
  const std::vector<LlamaShape> lshapes = quick ? std::vector<LlamaShape>{{4096, 2048, 5632}}
                                                : std::vector<LlamaShape>{{2048, 2048, 5632}, {4096, 2048, 5632}, {16384, 2048, 5632},
                                                                          {4096, 4096, 11008}, {8192, 4096, 11008}};
  for (const auto& sh : lshapes) {
    const int T = sh.T, h = sh.h, f = sh.f, seq = 2048, bsz = T / seq, d = 128, a = h / d, kvh = a / 4, kv = kvh * d;
    const size_t Th = static_cast<size_t>(T) * h, Tkv = static_cast<size_t>(T) * kv, Tf = static_cast<size_t>(T) * f;
    using bf = __nv_bfloat16;
    DeviceBuffer x(Th * 2), y(Th * 2), z(Th * 2), g(h * 2), rstd(T * 4), dg(h * 4), qkv((Th + 2 * Tkv) * 2), q(Th * 2), k(Tkv * 2),
        v(Tkv * 2), gu(2 * Tf * 2), sw(Tf * 2), dgu(2 * Tf * 2);
    for (auto* buf : {&x, &y, &z, &g, &qkv, &q, &k, &v, &gu, &sw}) fill_random_bf16(buf->get(), buf->bytes() / 2, 5, 1.0f, st);
    TRAINSIM_CUDA(cudaMemset(dg.get(), 0, dg.bytes()));
    auto time = [&](const char* name, auto&& fn) {
      const double us = time_us(fn);
      KernelSample ks{name, T, h, f, 32000, a, seq, us};
      ks.llama = true;
      ks.kv_heads = kvh;
      out.push_back(ks);
    };
    time("rmsnorm", [&] { rmsnorm_forward(x.get<bf>(), g.get<bf>(), y.get<bf>(), rstd.get<float>(), T, h, st); });
    time("rmsnorm.bwd", [&] {
      rmsnorm_backward(z.get<bf>(), x.get<bf>(), g.get<bf>(), rstd.get<float>(), y.get<bf>(), dg.get<float>(), T, h, st);
      add_inplace(z.get<bf>(), y.get<bf>(), Th, st);
    });
    time("qkv_split", [&] { split_qkv_gqa(qkv.get<bf>(), q.get<bf>(), k.get<bf>(), v.get<bf>(), bsz, seq, a, kvh, d, st); });
    time("qkv_merge.bwd", [&] { merge_qkv_gqa_grad(q.get<bf>(), k.get<bf>(), v.get<bf>(), qkv.get<bf>(), bsz, seq, a, kvh, d, st); });
    time("rope", [&] {
      rope(q.get<bf>(), bsz * a, seq, d, false, st);
      rope(k.get<bf>(), bsz * kvh, seq, d, false, st);
    });
    time("rope.bwd", [&] {
      rope(q.get<bf>(), bsz * a, seq, d, true, st);
      rope(k.get<bf>(), bsz * kvh, seq, d, true, st);
    });
    time("residual", [&] { residual_add(x.get<bf>(), y.get<bf>(), z.get<bf>(), Th, st); });
    time("swiglu", [&] { swiglu(gu.get<bf>(), sw.get<bf>(), T, f, st); });
    time("swiglu.bwd", [&] { swiglu_backward(sw.get<bf>(), gu.get<bf>(), dgu.get<bf>(), T, f, st); });
  }
  cudaStreamDestroy(st);
  return out;
}

void device_memory(std::size_t& free_bytes, std::size_t& total_bytes) { TRAINSIM_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes)); }

DeviceBallast::DeviceBallast(std::size_t bytes) : bytes_(bytes) {
  if (bytes_ == 0) return;
  TRAINSIM_CUDA(cudaMalloc(&p_, bytes_));
  TRAINSIM_CUDA(cudaMemset(p_, 1, bytes_));
  TRAINSIM_CUDA(cudaDeviceSynchronize());
}
DeviceBallast::~DeviceBallast() {
  if (p_) cudaFree(p_);
}

Measurements run_calibration(const CalibrationPlan& plan) {
  Measurements m;
  m.device = describe_devices();
  const bool quick = plan.quick;
  std::fprintf(stderr, "calibrate: %d x %s, CUDA %s, NCCL %s\n", m.device.count, m.device.name.c_str(),
               m.device.cuda_runtime.c_str(), m.device.nccl.c_str());
  TRAINSIM_CUDA(cudaSetDevice(0));
  // First, while device 0 holds nothing else: the context, and the communicators' growth.
  const RuntimeMemorySample rt = measure_runtime_memory(m.device.count);
  m.context_bytes = rt.context_bytes;
  m.nccl_first_comm_bytes = rt.nccl_first_bytes;
  m.nccl_further_comm_bytes = rt.nccl_further_bytes;
  m.nccl_comm_gpus = rt.gpus;
  std::fprintf(stderr, "calibrate: runtime memory: context %.3f GiB", rt.context_bytes / (1 << 30));
  if (rt.gpus >= 2)
    std::fprintf(stderr, ", NCCL communicator over %d GPUs: first %.3f GiB, further %.3f GiB", rt.gpus,
                 rt.nccl_first_bytes / (1 << 30), rt.nccl_further_bytes / (1 << 30));
  std::fprintf(stderr, "\n");
  m.gemm_check_rel_error = check_gemm_bf16();
  std::fprintf(stderr, "calibrate: bf16 GEMM check, relative error %.2e\n", m.gemm_check_rel_error);
  std::vector<GemmShape> shapes = transformer_gemm_shapes(quick);
  if (!plan.extra_gemms.empty()) {
    std::set<std::tuple<int, int, int, bool, bool>> all;
    for (const auto& s : shapes) all.insert({s.m, s.n, s.k, s.ta, s.tb});
    const std::size_t grid = all.size();
    for (const auto& s : plan.extra_gemms) all.insert({s.m, s.n, s.k, s.ta, s.tb});
    shapes.clear();
    for (const auto& [m_, n_, k_, ta, tb] : all) shapes.push_back({m_, n_, k_, ta, tb});
    std::fprintf(stderr, "calibrate: %zu extra GEMM shapes given, %zu not on the grid\n", plan.extra_gemms.size(), all.size() - grid);
    m.notes.push_back(std::to_string(all.size() - grid) + " GEMM shapes beside the grid, given with --extra-shapes");
  }
  // Each stage's seconds in the log, so that a device session can be planned around a full run.
  auto stage_start = std::chrono::steady_clock::now();
  auto stage_s = [&stage_start] {
    const auto now = std::chrono::steady_clock::now();
    const double s = std::chrono::duration<double>(now - stage_start).count();
    stage_start = now;
    return s;
  };
  m.notes.push_back("bf16 GEMMs timed one at a time after a memory-bound copy of about their length, on operands at training "
                    "magnitudes (activations +-1, weights +-0.035), as in a training step");
  for (const char* dt : {"bf16", "fp16", "fp8", "tf32"}) {
    std::vector<GemmShape> use = shapes;
    if (std::string(dt) != "bf16") {
      use.clear();
      for (int x : {1024, 2048, 4096, 8192, 16384}) use.push_back({x, x, x});
    }
    const auto s = bench_gemms(use, dt, m.device.cc_major);
    m.gemm.insert(m.gemm.end(), s.begin(), s.end());
    std::fprintf(stderr, "calibrate: %zu %s GEMMs (%.0f s)\n", s.size(), dt, stage_s());
  }
  // The weight-gradient shapes again, accumulated into fp32 as the step runs them.
  std::vector<GemmShape> wgrad;
  for (const auto& s : shapes)
    if (s.ta) wgrad.push_back(s);
  const auto acc = bench_gemms(wgrad, kBf16AccumulateFp32, m.device.cc_major);
  m.gemm.insert(m.gemm.end(), acc.begin(), acc.end());
  std::fprintf(stderr, "calibrate: %zu bf16 weight-gradient GEMMs accumulated into fp32 (%.0f s)\n", acc.size(), stage_s());
  m.launch_overhead_us = bench_launch_overhead_us();
  auto mem = bench_memory_kernels(quick);
  m.bandwidth.insert(m.bandwidth.end(), mem.begin(), mem.end());
  auto host = bench_host_copies(quick);
  m.bandwidth.insert(m.bandwidth.end(), host.begin(), host.end());
  std::fprintf(stderr, "calibrate: memory and host copies done (%.0f s)\n", stage_s());
  m.attention = bench_attention(quick);
  m.compression = bench_compression(quick);
  m.kernels = bench_step_kernels(quick ? StepKernelShapes::quick : StepKernelShapes::profile);
  std::fprintf(stderr, "calibrate: attention and compression done (%.0f s)\n", stage_s());
  if (m.device.count >= 2) {
    auto p2p = bench_peer_copies(m.device.count);
    m.bandwidth.insert(m.bandwidth.end(), p2p.begin(), p2p.end());
    for (int g = 2; g <= m.device.count; g *= 2) {
      auto c = bench_collectives(g, plan.max_collective_bytes, quick);
      m.collectives.insert(m.collectives.end(), c.begin(), c.end());
      std::fprintf(stderr, "calibrate: collectives over %d GPUs done (%.0f s)\n", g, stage_s());
    }
    m.interference_slowdown = bench_interference(m.device.count);
    m.p2p_interference_slowdown = bench_p2p_interference(m.device.count);
  } else {
    // One GPU: NCCL's single-rank path is still exercised and checked; there is no link to measure.
    auto c = bench_collectives(1, 64.0 * (1 << 20), true);
    m.collectives.insert(m.collectives.end(), c.begin(), c.end());
    m.notes.push_back("one GPU visible: peer copies, multi-GPU collectives and GEMM/NCCL interference not measured");
  }
  return m;
}

std::vector<AttentionSample> bench_attention_table(bool quick) { return bench_attention(quick); }

std::vector<AttentionOrderSample> bench_attention_orders(double idle_ms) {
  const std::vector<AttentionCase> cases = attention_cases(false);
  std::vector<AttentionOrderSample> out(cases.size());
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cublasCreate failed");
  cudaStream_t st;
  TRAINSIM_CUDA(cudaStreamCreate(&st));
  for (std::size_t i = 0; i < cases.size(); ++i) out[i].in_order = time_attention(h, st, cases[i]);
  for (std::size_t i = cases.size(); i-- > 0;) out[i].reversed = time_attention(h, st, cases[i]);
  if (idle_ms > 0)
    for (std::size_t i = 0; i < cases.size(); ++i) {
      TRAINSIM_CUDA(cudaStreamSynchronize(st));
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(idle_ms));
      out[i].after_idle = time_attention(h, st, cases[i]);
    }
  cublasDestroy(h);
  cudaStreamDestroy(st);
  return out;
}

}  // namespace trainsim::gpu

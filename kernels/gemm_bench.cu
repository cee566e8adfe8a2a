#include "gemm_bench.h"

#include <array>

#include <cuda_bf16.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "lt_matmul.h"
#include "timing.h"

namespace trainsim::gpu {

std::vector<GemmShape> transformer_gemm_shapes(bool quick) {
  std::set<std::tuple<int, int, int, bool, bool>> s;
  // The GPT-3 family's hidden sizes and Llama 3's 3,072, at the tokens a micro-batch brings (one to
  // eight sequences of 2,048; the table's nearest row prices what lies between).
  const std::vector<int> hidden = quick ? std::vector<int>{1024, 2048, 4096, 8192}
                                        : std::vector<int>{768, 1024, 1536, 2048, 2560, 3072, 4096, 5120, 8192, 12288};
  const std::vector<int> tokens = quick ? std::vector<int>{4096} : std::vector<int>{2048, 4096, 8192, 16384};
  for (int h : hidden)
    for (int tp : {1, 2, 4, 8}) {
      if (tp > 1 && h < 4096) continue;
      for (int t : tokens) {
        const int pairs[4][2] = {{3 * h / tp, h}, {h, h / tp}, {4 * h / tp, h}, {h, 4 * h / tp}};
        for (auto& p : pairs) {
          s.insert({t, p[0], p[1], false, false});  // forward: tokens x out x in
          s.insert({t, p[1], p[0], false, true});   // input gradient: tokens x in x out
          s.insert({p[1], p[0], t, true, false});   // weight gradient: in x out x tokens
        }
      }
    }
  // Logits against the (tied) word embedding: forward lnf x E^T, input gradient dlogits x E, weight
  // gradient dlogits^T x lnf, for the GPT-2 and Llama vocabularies (not multiples of 8 for GPT-2,
  // which makes them slower than their neighbours); Llama's from a hidden size of 2,048 up.
  for (int vocab : {50257, 32000, 128256})
    for (int t : tokens)
      for (int h : hidden) {
        if (vocab != 50257 && h < 2048) continue;
        s.insert({t, vocab, h, false, true});
        s.insert({t, h, vocab, false, false});
        s.insert({vocab, h, t, true, false});
      }
  for (int x : {1024, 2048, 4096, 8192, 16384}) s.insert({x, x, x, false, false});
  std::vector<GemmShape> out;
  for (auto& [m, n, k, ta, tb] : s) out.push_back({m, n, k, ta, tb});
  return out;
}

namespace {

struct LtTypes {
  cudaDataType_t ab, cd;
  cublasComputeType_t compute;
  size_t ab_size, cd_size;
};

LtTypes types_for(const std::string& dtype) {
  if (dtype == "bf16") return {CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 2, 2};
  if (dtype == "fp16") return {CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F, 2, 2};
  if (dtype == "fp8") return {CUDA_R_8F_E4M3, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 1, 2};
  if (dtype == "tf32") return {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 4, 4};
  throw std::runtime_error("unknown GEMM dtype " + dtype);
}

class LtGemm {
 public:
  LtGemm() {
    TRAINSIM_CUBLAS(cublasLtCreate(&handle_));
    TRAINSIM_CUDA(cudaStreamCreate(&stream_));
    workspace_ = DeviceBuffer(kWorkspace);
  }
  ~LtGemm() {
    cublasLtDestroy(handle_);
    cudaStreamDestroy(stream_);
  }
  cudaStream_t stream() const { return stream_; }

  // Returns false when cuBLASLt has no algorithm for the shape. With `autotune`, times the
  // heuristic's top candidates on the given operands and keeps the fastest.
  bool prepare(const LtTypes& t, int m, int n, int k, const void* A = nullptr, const void* B = nullptr, void* C = nullptr) {
    release();
    TRAINSIM_CUBLAS(cublasLtMatmulDescCreate(&op_, t.compute, CUDA_R_32F));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    TRAINSIM_CUBLAS(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    TRAINSIM_CUBLAS(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    TRAINSIM_CUBLAS(cublasLtMatrixLayoutCreate(&a_, t.ab, k, m, k));
    TRAINSIM_CUBLAS(cublasLtMatrixLayoutCreate(&b_, t.ab, k, n, k));
    TRAINSIM_CUBLAS(cublasLtMatrixLayoutCreate(&c_, t.cd, m, n, m));
    cublasLtMatmulPreference_t pref;
    TRAINSIM_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
    size_t ws = kWorkspace;
    TRAINSIM_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    int found = 0;
    cublasLtMatmulHeuristicResult_t cands[kCandidates];
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle_, op_, a_, b_, c_, c_, pref, A ? kCandidates : 1, cands, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS || found == 0) return false;
    algo_ = cands[0];
    if (A && found > 1) {
      double best = 1e300;
      for (int i = 0; i < found; ++i) {
        algo_ = cands[i];
        const double us = time_median_us(stream_, 1, 3, [&] { run(A, B, C); });
        if (us < best) { best = us; chosen_ = i; }
      }
      algo_ = cands[chosen_];
    }
    return true;
  }
  void run(const void* A, const void* B, void* C) {
    const float alpha = 1.0f, beta = 0.0f;
    TRAINSIM_CUBLAS(cublasLtMatmul(handle_, op_, &alpha, A, a_, B, b_, &beta, C, c_, C, c_, &algo_.algo,
                                   workspace_.get(), kWorkspace, stream_));
  }

 private:
  void release() {
    if (op_) cublasLtMatmulDescDestroy(op_);
    if (a_) cublasLtMatrixLayoutDestroy(a_);
    if (b_) cublasLtMatrixLayoutDestroy(b_);
    if (c_) cublasLtMatrixLayoutDestroy(c_);
    op_ = nullptr; a_ = b_ = c_ = nullptr;
  }
  static constexpr size_t kWorkspace = 64ull << 20;
  static constexpr int kCandidates = 6;
  int chosen_ = 0;
  cublasLtHandle_t handle_ = nullptr;
  cudaStream_t stream_ = nullptr;
  DeviceBuffer workspace_;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
  cublasLtMatmulHeuristicResult_t algo_{};
};

void fill(const std::string& dtype, void* p, size_t n, unsigned seed, cudaStream_t s) {
  if (dtype == "bf16") fill_random_bf16(p, n, seed, 1.0f, s);
  else if (dtype == "fp16") fill_random_f16(p, n, seed, 1.0f, s);
  else if (dtype == "fp8") fill_random_fp8(p, n, seed, 1.0f, s);
  else fill_random_f32(static_cast<float*>(p), n, seed, 1.0f, s);
}

}  // namespace

// The largest A, B and C of `shapes`, in elements: one set of buffers serves them all.
std::array<size_t, 3> largest_operands(const std::vector<GemmShape>& shapes) {
  std::array<size_t, 3> m{0, 0, 0};
  for (const auto& s : shapes) {
    m[0] = std::max(m[0], static_cast<size_t>(s.m) * s.k);
    m[1] = std::max(m[1], static_cast<size_t>(s.k) * s.n);
    m[2] = std::max(m[2], static_cast<size_t>(s.m) * s.n);
  }
  return m;
}

std::vector<GemmSample> bench_gemms(const std::vector<GemmShape>& shapes, const char* dtype_c, int cc_major) {
  const std::string dtype(dtype_c);
  std::vector<GemmSample> out;
  if (dtype == "fp8" && !fp8_supported(cc_major)) return out;
  // bf16 operands accumulated into an fp32 output (beta = 1): the weight-gradient GEMMs of a
  // mixed-precision step, which add each micro-batch's gradient into the fp32 gradient buffer.
  const bool accumulate = dtype == kBf16AccumulateFp32;
  const LtTypes t = types_for(accumulate ? "bf16" : dtype);
  const auto [max_a, max_b, max_c] = largest_operands(shapes);
  LtGemm g;
  DeviceBuffer A(max_a * t.ab_size), B(max_b * t.ab_size), C(max_c * (accumulate ? 4 : t.cd_size));
  fill(accumulate ? "bf16" : dtype, A.get(), max_a, 1, g.stream());
  fill(accumulate ? "bf16" : dtype, B.get(), max_b, 2, g.stream());
  if (accumulate) TRAINSIM_CUDA(cudaMemsetAsync(C.get(), 0, max_c * 4, g.stream()));
  if (dtype == "bf16" || accumulate) {
    // As in a training step: operands at training magnitudes (activations +-1, weights +-0.035, the
    // runner's initialisation), and each GEMM timed alone right after a memory-bound copy about as
    // long as it, as element-wise kernels sit between a step's GEMMs. Back to back on random
    // operands, large GEMMs ran 5-10% slower on the H200 (clocks held down by the power limit;
    // `calibrate gemm-conditions` shows the four cases).
    fill_random_bf16(B.get(), max_b, 2, 0.035f, g.stream());
    const size_t copy_cap = 512ull << 20;
    DeviceBuffer src(copy_cap), dst(copy_cap);
    TRAINSIM_CUDA(cudaMemsetAsync(src.get(), 1, copy_cap, g.stream()));
    LtMatmul mm(g.stream());
    cudaEvent_t ev0, ev1;
    TRAINSIM_CUDA(cudaEventCreate(&ev0));
    TRAINSIM_CUDA(cudaEventCreate(&ev1));
    for (const auto& s : shapes) {
      const double flops = 2.0 * s.m * s.n * s.k;
      const double guess_us = flops / 6e8;
      const int reps = std::max(7, std::min(40, static_cast<int>(30000.0 / std::max(1.0, guess_us))));
      auto run = [&] {
        if (accumulate) mm.gemm(s.ta, s.tb, s.m, s.n, s.k, A.get(), B.get(), C.get(), true, 1.0f, 1.0f);
        else mm.gemm(s.ta, s.tb, s.m, s.n, s.k, A.get(), B.get(), C.get(), false);
      };
      // A fresh fp32 gradient for each shape, as at a step's first micro-batch: autotuning an
      // accumulating GEMM over a non-zero output saves and restores that output through the host.
      if (accumulate) TRAINSIM_CUDA(cudaMemsetAsync(C.get(), 0, static_cast<size_t>(s.m) * s.n * 4, g.stream()));
      run();  // autotunes this shape
      for (int w = 0; w < 3; ++w) run();
      // Short GEMMs are timed as a burst of `inner` (launches overlapping execution), as before.
      const int inner = std::max(1, std::min(50, static_cast<int>(300.0 / std::max(1.0, guess_us))));
      const size_t copy = std::min(copy_cap, std::max<size_t>(1 << 20, static_cast<size_t>(guess_us * inner * 1e-6 * 3.3e12 / 2)));
      std::vector<float> ms(reps);
      for (int i = 0; i < reps; ++i) {
        TRAINSIM_CUDA(cudaMemcpyAsync(dst.get(), src.get(), copy, cudaMemcpyDeviceToDevice, g.stream()));
        TRAINSIM_CUDA(cudaEventRecord(ev0, g.stream()));
        for (int k = 0; k < inner; ++k) run();
        TRAINSIM_CUDA(cudaEventRecord(ev1, g.stream()));
        TRAINSIM_CUDA(cudaEventSynchronize(ev1));
        TRAINSIM_CUDA(cudaEventElapsedTime(&ms[i], ev0, ev1));
      }
      std::sort(ms.begin(), ms.end());
      const double us = 1000.0 * ms[reps / 2] / inner;
      out.push_back({dtype, s.m, s.n, s.k, us, flops / (us * 1e-6) / 1e12});
    }
    cudaEventDestroy(ev0);
    cudaEventDestroy(ev1);
    return out;
  }
  for (const auto& s : shapes) {
    if (!g.prepare(t, s.m, s.n, s.k, A.get(), B.get(), C.get())) continue;
    const double flops = 2.0 * s.m * s.n * s.k;
    // Enough repetitions for about 50 ms of timed work, between 5 and 50.
    const double guess_us = flops / 6e8;  // ~600 TFLOP/s
    const int reps = std::max(5, std::min(50, static_cast<int>(50000.0 / std::max(1.0, guess_us))));
    const double us = time_median_us(g.stream(), 3, reps, [&] { g.run(A.get(), B.get(), C.get()); });
    out.push_back({dtype, s.m, s.n, s.k, us, flops / (us * 1e-6) / 1e12});
  }
  return out;
}

std::vector<GemmConditionSample> bench_gemm_conditions(const std::vector<GemmShape>& shapes, double idle_ms) {
  const auto [max_a, max_b, max_c] = largest_operands(shapes);
  LtGemm g;
  cudaStream_t st = g.stream();
  DeviceBuffer A(max_a * 2), B(max_b * 2), Bw(max_b * 2), C(max_c * 2), C32(max_c * 4);
  const size_t copy_bytes = 1ull << 30;
  DeviceBuffer src(copy_bytes), dst(copy_bytes);
  fill_random_bf16(A.get(), max_a, 1, 1.0f, st);
  fill_random_bf16(B.get(), max_b, 2, 1.0f, st);
  fill_random_bf16(Bw.get(), max_b, 3, 0.035f, st);
  TRAINSIM_CUDA(cudaMemsetAsync(src.get(), 1, copy_bytes, st));
  LtMatmul mm(st);
  cudaEvent_t a, b;
  TRAINSIM_CUDA(cudaEventCreate(&a));
  TRAINSIM_CUDA(cudaEventCreate(&b));
  std::vector<GemmConditionSample> out;
  for (const auto& s : shapes) {
    auto run = [&](const void* Bp) { mm.gemm(s.ta, s.tb, s.m, s.n, s.k, A.get(), Bp, C.get(), false); };
    run(B.get());  // autotune
    const double flops = 2.0 * s.m * s.n * s.k;
    const double guess_us = flops / 6e8;
    const int reps = std::max(10, std::min(60, static_cast<int>(100000.0 / std::max(1.0, guess_us))));
    const int inner = std::max(1, std::min(50, static_cast<int>(300.0 / std::max(1.0, guess_us))));
    // A device copy about as long as the GEMM (3.3 TB/s of copy traffic), then the GEMM alone timed.
    const size_t copy = std::min(copy_bytes, static_cast<size_t>(guess_us * 1e-6 * 3.3e12 / 2));
    auto interleaved = [&](const void* Bp) {
      std::vector<float> ms(reps);
      for (int w = 0; w < 3; ++w) run(Bp);
      for (int i = 0; i < reps; ++i) {
        TRAINSIM_CUDA(cudaMemcpyAsync(dst.get(), src.get(), copy, cudaMemcpyDeviceToDevice, st));
        TRAINSIM_CUDA(cudaEventRecord(a, st));
        run(Bp);
        TRAINSIM_CUDA(cudaEventRecord(b, st));
        TRAINSIM_CUDA(cudaEventSynchronize(b));
        TRAINSIM_CUDA(cudaEventElapsedTime(&ms[i], a, b));
      }
      std::sort(ms.begin(), ms.end());
      return 1000.0 * ms[reps / 2];
    };
    GemmConditionSample r;
    r.shape = s;
    r.us_random_b2b = time_median_us(st, 3, reps, [&] { run(B.get()); }, inner);
    r.us_trainlike_b2b = time_median_us(st, 3, reps, [&] { run(Bw.get()); }, inner);
    r.us_random_interleaved = interleaved(B.get());
    r.us_trainlike_interleaved = interleaved(Bw.get());
    TRAINSIM_CUDA(cudaMemsetAsync(C32.get(), 0, static_cast<size_t>(s.m) * s.n * 4, st));
    mm.gemm(s.ta, s.tb, s.m, s.n, s.k, A.get(), Bw.get(), C32.get(), true, 1.0f, 1.0f);  // autotune
    r.us_fp32_accumulate_b2b = time_median_us(
        st, 3, reps, [&] { mm.gemm(s.ta, s.tb, s.m, s.n, s.k, A.get(), Bw.get(), C32.get(), true, 1.0f, 1.0f); }, inner);
    if (idle_ms > 0) {
      std::vector<float> ms(reps);
      for (int i = 0; i < reps; ++i) {
        TRAINSIM_CUDA(cudaStreamSynchronize(st));
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(idle_ms));
        TRAINSIM_CUDA(cudaEventRecord(a, st));
        run(Bw.get());
        TRAINSIM_CUDA(cudaEventRecord(b, st));
        TRAINSIM_CUDA(cudaEventSynchronize(b));
        TRAINSIM_CUDA(cudaEventElapsedTime(&ms[i], a, b));
      }
      std::sort(ms.begin(), ms.end());
      r.us_trainlike_after_idle = 1000.0 * ms[reps / 2];
    }
    out.push_back(r);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return out;
}

double check_gemm_bf16() {
  const int n = 256;
  const LtTypes t = types_for("bf16");
  LtGemm g;
  DeviceBuffer A(n * n * 2), B(n * n * 2), C(n * n * 2);
  fill_random_bf16(A.get(), n * n, 11, 1.0f, g.stream());
  fill_random_bf16(B.get(), n * n, 12, 1.0f, g.stream());
  TRAINSIM_CUDA(cudaMemsetAsync(C.get(), 0xFF, n * n * 2, g.stream()));  // poison
  if (!g.prepare(t, n, n, n)) throw std::runtime_error("cuBLASLt found no bf16 algorithm for 256^3");
  g.run(A.get(), B.get(), C.get());
  std::vector<unsigned short> a(n * n), b(n * n), c(n * n);
  TRAINSIM_CUDA(cudaStreamSynchronize(g.stream()));
  TRAINSIM_CUDA(cudaMemcpy(a.data(), A.get(), n * n * 2, cudaMemcpyDeviceToHost));
  TRAINSIM_CUDA(cudaMemcpy(b.data(), B.get(), n * n * 2, cudaMemcpyDeviceToHost));
  TRAINSIM_CUDA(cudaMemcpy(c.data(), C.get(), n * n * 2, cudaMemcpyDeviceToHost));
  auto f = [](unsigned short v) { unsigned int x = static_cast<unsigned int>(v) << 16; float r; std::memcpy(&r, &x, 4); return r; };
  double num = 0, den = 0;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      double ref = 0;
      for (int p = 0; p < n; ++p) ref += static_cast<double>(f(a[p + i * n])) * f(b[p + j * n]);
      const double got = f(c[i + j * n]);
      if (!std::isfinite(got)) return INFINITY;
      num += (got - ref) * (got - ref);
      den += ref * ref;
    }
  return std::sqrt(num / den);
}

}  // namespace trainsim::gpu

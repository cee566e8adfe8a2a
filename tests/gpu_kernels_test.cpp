// GPU kernels against CPU references. Skipped (not failed) where no GPU is visible.
#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "clock_monitor.h"
#include "compression.h"
#include "cuda_compat.h"
#include "gemm_bench.h"
#include "grad_comm.h"
#include "kernel_mix.h"
#include "lt_matmul.h"
#include "measurements.h"
#include "nccl_bench.h"
#include "pipeline_schedule.h"
#include "runtime_memory.h"
#include "step_runner.h"

using namespace trainsim::gpu;

#define REQUIRE_GPU() \
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device visible"

// First in this file, while the process holds nothing else on device 0.
TEST(GpuKernels, RuntimeMemoryIsTheContextAndEachCommunicatorsBuffers) {
  // The context with cuBLAS, cuBLASLt's 64 MiB workspace and loaded GEMM kernels: 0.65 GiB on the
  // H200 runs (CUDA 13), so between a quarter and two GiB; with two or more GPUs each communicator
  // adds something under 4 GiB on every device, the second no more than the first.
  REQUIRE_GPU();
  const RuntimeMemorySample s = measure_runtime_memory(cuda_device_count());
  EXPECT_GT(s.context_bytes, 0.25 * (1 << 30));
  EXPECT_LT(s.context_bytes, 2.0 * (1 << 30));
  if (cuda_device_count() >= 2) {
    EXPECT_EQ(s.gpus, cuda_device_count());
    EXPECT_GT(s.nccl_first_bytes, 0);
    EXPECT_LT(s.nccl_first_bytes, 4.0 * (1 << 30));
    EXPECT_GT(s.nccl_further_bytes, 0);
    EXPECT_LE(s.nccl_further_bytes, s.nccl_first_bytes);
  } else {
    EXPECT_EQ(s.gpus, 0);
  }
  std::printf("[ info ] context %.3f GiB", s.context_bytes / (1 << 30));
  if (s.gpus >= 2)
    std::printf("; communicators over %d GPUs: first %.3f GiB, further %.3f GiB", s.gpus, s.nccl_first_bytes / (1 << 30),
                s.nccl_further_bytes / (1 << 30));
  std::printf("\n");
}

TEST(GpuKernels, GemmSlowdownBesideCommunicationIsMeasuredWithTwoGpus) {
  // calibrate's interference figures: a bf16 GEMM's time on GPU 0 beside a loop of NCCL traffic
  // over its time alone, less one; beside a 256 MiB all-reduce over every GPU (0.35 on the H200
  // pair) and beside send/recv both ways between GPUs 0 and 1 (what pipeline transfers do). With
  // one GPU neither can be measured: -1. With two, each is finite, not below -0.05 (a GEMM does not
  // run faster beside traffic, beyond timing noise) and below 1.
  REQUIRE_GPU();
  const int n = cuda_device_count();
  const double all_reduce = bench_interference(n), p2p = bench_p2p_interference(n);
  if (n < 2) {
    EXPECT_EQ(all_reduce, -1);
    EXPECT_EQ(p2p, -1);
    return;
  }
  for (double x : {all_reduce, p2p}) {
    EXPECT_TRUE(std::isfinite(x));
    EXPECT_GT(x, -0.05);
    EXPECT_LT(x, 1.0);
  }
  std::printf("[ info ] GEMM slowdown beside an all-reduce %.3f, beside send/recv %.3f (%d GPUs)\n", all_reduce, p2p, n);
}

TEST(GpuKernels, AnAllocationLargerThanTheDeviceSaysWhatItAskedAndLeavesTheDeviceUsable) {
  // `planner validate` records a layout that ran out of memory and goes on to the next: the
  // allocation must throw DeviceOutOfMemory (not a generic error) and leave no sticky error behind.
  REQUIRE_GPU();
  size_t free_b = 0, total_b = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
  const size_t too_much = total_b + (size_t{1} << 30);
  try {
    DeviceBuffer b(too_much);
    ADD_FAILURE() << "an allocation larger than the device succeeded";
  } catch (const DeviceOutOfMemory& e) {
    EXPECT_EQ(e.requested_bytes, static_cast<double>(too_much));
    EXPECT_GT(e.total_bytes, 0);
    EXPECT_LT(e.free_bytes, e.requested_bytes);
    EXPECT_NE(std::string(e.what()).find("out of device memory"), std::string::npos) << e.what();
  }
  DeviceBuffer small(1 << 20);
  EXPECT_NE(small.get(), nullptr);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(GpuKernels, GemmMatchesCpuReference) {
  REQUIRE_GPU();
  // bf16 operands, fp32 accumulation: relative error between 1e-3 and 1e-2 against float64.
  EXPECT_LT(check_gemm_bf16(), 1e-2);
}

TEST(GpuKernels, WeightGradientGemmsAreTimedAccumulatingIntoFp32) {
  REQUIRE_GPU();
  // calibrate's table of weight-gradient GEMMs as a mixed-precision step runs them: the bf16
  // product added into an fp32 output (beta = 1), which the GEMM reads and writes 4 bytes an
  // element of instead of writing 2. Two of Llama 3B's (in x out x tokens at 2,048 tokens): each
  // timed, at a rate that is a real one, and, with 6 more bytes an output element to move, no
  // faster than the same shape with a bf16 output beyond the timing's few percent of noise.
  const std::vector<GemmShape> shapes{{3072, 3072, 2048, true, false}, {8192, 3072, 2048, true, false}};
  const auto acc = bench_gemms(shapes, kBf16AccumulateFp32, 9);
  const auto plain = bench_gemms(shapes, "bf16", 9);
  ASSERT_EQ(acc.size(), shapes.size());
  ASSERT_EQ(plain.size(), shapes.size());
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    EXPECT_EQ(acc[i].dtype, kBf16AccumulateFp32);
    EXPECT_EQ(acc[i].m, shapes[i].m);
    EXPECT_GT(acc[i].tflops, 10.0) << i;
    EXPECT_LT(acc[i].tflops, 2000.0) << i;
    EXPECT_GT(acc[i].time_us, 0.95 * plain[i].time_us) << i << ": " << acc[i].time_us << " us against " << plain[i].time_us;
    std::printf("[ info ] %d x %d x %d: %.1f us accumulating into fp32, %.1f us into bf16\n", shapes[i].m, shapes[i].n,
                shapes[i].k, acc[i].time_us, plain[i].time_us);
  }
}

TEST(GpuKernels, GemmConditionsTimeEachShapeEveryWayAskedFor) {
  REQUIRE_GPU();
  // gemm-conditions' six timings of a shape, the one after an idle GPU only when asked for: each
  // a real time (a 4096 x 4096 x 4096 bf16 GEMM is 137 GFLOP: 61 us at a B200's dense peak, 4.4 ms
  // at a tenth of an A100's), and the one after 20 ms of rest no shorter than half the
  // back-to-back time (a rested GPU is not faster than a busy one by more than its clock range).
  const std::vector<GemmShape> shapes{{4096, 4096, 4096, false, false}};
  const auto plain = bench_gemm_conditions(shapes);
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_EQ(plain[0].us_trainlike_after_idle, 0.0);
  const auto rested = bench_gemm_conditions(shapes, 20.0);
  ASSERT_EQ(rested.size(), 1u);
  const auto& r = rested[0];
  for (double us : {r.us_random_b2b, r.us_trainlike_b2b, r.us_random_interleaved, r.us_trainlike_interleaved,
                    r.us_fp32_accumulate_b2b, r.us_trainlike_after_idle}) {
    EXPECT_GT(us, 61.0);
    EXPECT_LT(us, 4400.0);
  }
  EXPECT_GT(r.us_trainlike_after_idle, 0.5 * r.us_trainlike_b2b);
  std::printf("[ info ] 4096^3: %.1f us back to back, %.1f us after 20 ms idle\n", r.us_trainlike_b2b, r.us_trainlike_after_idle);
}

TEST(GpuKernels, KernelMixRunsTheSharesAskedFor) {
  // Element-wise kernels alone (share 0), then with GEMMs, or attention, for about half the time:
  // the cycle's counts come from the times alone, and the shares measured in the mix stay near the
  // target unless the clock moves the load and the kernels apart by more than a third.
  REQUIRE_GPU();
  KernelMixLoad attention;
  attention.attention = true;
  attention.heads = 8;
  attention.kv_group = 4;
  for (const KernelMixLoad& load : {KernelMixLoad{}, attention}) {
    const KernelMixResult r = bench_kernel_mix({0, 0.5}, 0.2, 0.3, load);
    ASSERT_EQ(r.points.size(), 2u);
    ASSERT_EQ(r.alone_us.size(), r.kernels.size());
    EXPECT_GT(r.load_alone_us, 0);
    EXPECT_GT(r.load_flop, 0);
    const KernelMixPoint& alone = r.points[0];
    EXPECT_EQ(alone.loads, 0);
    EXPECT_EQ(alone.load_share, 0);
    EXPECT_GT(alone.cycles, 10);
    ASSERT_EQ(alone.kernel_us.size(), r.kernels.size());
    for (double us : alone.kernel_us) EXPECT_GT(us, 0);
    const KernelMixPoint& half = r.points[1];
    EXPECT_GE(half.loads, 1);
    EXPECT_GE(half.groups, 1);
    EXPECT_NEAR(half.load_share, 0.5, 0.15) << r.load;
    EXPECT_GT(half.load_us, 0);
    EXPECT_GT(half.wall_end_s, half.wall_begin_s + 0.25);
  }
  // A GPT 125M-sized layer (2,048 tokens of 768, width 3,072) moves about a tenth of the default
  // Llama 2 7B layer's bytes (4,096 tokens of 4,096, width 11,008): its kernels take less time.
  const KernelMixResult big = bench_kernel_mix({0}, 0.1, 0.2);
  const KernelMixResult small = bench_kernel_mix({0}, 0.1, 0.2, KernelMixLoad{}, ElementwiseLayer{2048, 768, 3072});
  EXPECT_EQ(small.tokens, 2048);
  EXPECT_EQ(small.hidden, 768);
  EXPECT_EQ(small.ffn, 3072);
  double big_us = 0, small_us = 0;
  for (double us : big.alone_us) big_us += us;
  for (double us : small.alone_us) small_us += us;
  EXPECT_LT(small_us, 0.5 * big_us);
  std::printf("[ info ] element-wise group alone: %.1f us (Llama 2 7B layer, 4,096 tokens), %.1f us (GPT 125M layer, 2,048 tokens)\n",
              big_us, small_us);
  // GPT 125M's own layer kernels at 8,192 tokens (micro-batch 4), as the runner's GPT layer calls
  // them: ten entries, LayerNorm and the dropouts twice each. Against the same runner's times in
  // a GPT 125M step at micro-batch 4 on an H100 (tests/validation/h100-small-gpt-kernel-classes.json:
  // 12 layers x 4 micro-batches; the layer's share of the "other" kernels less the cross-entropy
  // and the embeddings, about 1.1 ms), the group takes between half and twice that.
  ElementwiseLayer gpt_layer{8192, 768, 3072};
  gpt_layer.gpt = true;
  const KernelMixResult gpt = bench_kernel_mix({0}, 0.1, 0.2, KernelMixLoad{}, gpt_layer);
  ASSERT_EQ(gpt.kernels.size(), 10u);
  EXPECT_TRUE(gpt.gpt);
  EXPECT_EQ(gpt.kernels.front(), "layernorm*2");
  double gpt_us = 0;
  for (double us : gpt.alone_us) gpt_us += us;
  std::printf("[ info ] GPT 125M layer's element-wise group alone at 8,192 tokens: %.1f us\n", gpt_us);
  EXPECT_GT(gpt_us, 550);
  EXPECT_LT(gpt_us, 2200);
}

TEST(GpuKernels, Int8RoundTrip) {
  REQUIRE_GPU();
  const size_t n = 1 << 20;
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = std::sin(0.001 * i) * (1 + (i % 7));
  DeviceBuffer d(n * 4), q(n), s((n / kQuantBlock + 1) * 4), back(n * 4);
  TRAINSIM_CUDA(cudaMemcpy(d.get(), x.data(), n * 4, cudaMemcpyHostToDevice));
  int8_quantize(d.get<float>(), q.get<signed char>(), s.get<float>(), n, 0);
  int8_dequantize(q.get<signed char>(), s.get<float>(), back.get<float>(), n, 0);
  std::vector<float> y(n);
  TRAINSIM_CUDA(cudaMemcpy(y.data(), back.get(), n * 4, cudaMemcpyDeviceToHost));
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) { num += (x[i] - y[i]) * (x[i] - y[i]); den += x[i] * x[i]; }
  // Blockwise absmax scaling to 127 levels: relative error well under 1%.
  EXPECT_LT(std::sqrt(num / den), 0.01);
}

TEST(GpuKernels, TopKWithErrorFeedbackConservesTheGradient) {
  REQUIRE_GPU();
  const size_t n = 1 << 20;
  std::vector<float> g(n);
  for (size_t i = 0; i < n; ++i) g[i] = std::cos(0.37 * i) * (i % 13);
  DeviceBuffer dg(n * 4), r(n * 4), vals(n * 4), idx(n * 4), sample((1 << 16) * 4), counter(4);
  TRAINSIM_CUDA(cudaMemcpy(dg.get(), g.data(), n * 4, cudaMemcpyHostToDevice));
  TRAINSIM_CUDA(cudaMemset(r.get(), 0, n * 4));
  const size_t kept = topk_error_feedback(dg.get<float>(), r.get<float>(), vals.get<float>(), idx.get<int>(), n, n, 0.01,
                                          sample.get<float>(), counter.get<int>(), 0);
  EXPECT_NEAR(static_cast<double>(kept) / n, 0.01, 0.003);
  // Sent values plus the kept residual reproduce the gradient exactly.
  std::vector<float> res(n), v(kept);
  std::vector<int> ix(kept);
  TRAINSIM_CUDA(cudaMemcpy(res.data(), r.get(), n * 4, cudaMemcpyDeviceToHost));
  TRAINSIM_CUDA(cudaMemcpy(v.data(), vals.get(), kept * 4, cudaMemcpyDeviceToHost));
  TRAINSIM_CUDA(cudaMemcpy(ix.data(), idx.get(), kept * 4, cudaMemcpyDeviceToHost));
  for (size_t k = 0; k < kept; ++k) res[ix[k]] += v[k];
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(res[i], g[i]) << i;
}

TEST(GpuKernels, DataParallelBucketsCoverEveryGradientOnce) {
  // One replica with a host "all-reduce" that only counts: every gradient element must be summed
  // exactly once per step, in several buckets, and the training must match running without one
  // (the identity sum changes nothing).
  REQUIRE_GPU();
  RunnerConfig c;
  c.layers = 2; c.hidden = 128; c.heads = 4; c.ffn = 512; c.vocab = 512; c.seq = 64;
  c.micro_batch = 2; c.microbatches = 2; c.warmup_steps = 1; c.timed_steps = 2;
  c.bucket_MB = 0.1;
  const RunnerResult plain = run_gpt_training(c);
  std::size_t summed = 0;
  HostCollectives host;
  host.all_reduce_sum = [&](float*, std::size_t n) { summed += n; };
  auto comm = make_host_grad_comm(0, 1, host);
  c.comm = comm.get();
  const RunnerResult dp = run_gpt_training(c);
  const std::size_t h = c.hidden, f = c.ffn;
  const std::size_t params = c.vocab * h + c.seq * h + c.layers * (4 * h * h + 2 * h * f + 9 * h + f) + 2 * h;
  const int steps = c.warmup_steps + c.timed_steps;
  EXPECT_EQ(summed, params * steps);
  EXPECT_GE(dp.buckets, 3);
  // cuBLASLt autotunes each run's GEMM algorithms by timing, so two runs may sum in another order:
  // equal to float rounding, not bitwise.
  EXPECT_NEAR(dp.first_loss, plain.first_loss, 1e-5 * std::fabs(plain.first_loss));
  EXPECT_NEAR(dp.last_loss, plain.last_loss, 1e-5 * std::fabs(plain.last_loss));
  EXPECT_NEAR(dp.param_checksum, plain.param_checksum, 1e-7 * std::fabs(plain.param_checksum));
}

TEST(GpuKernels, Int8AllReduceOfOneReplicaIsTwoQuantisations) {
  // One replica: the all-to-all and all-gather are copies, so the result is x quantised, summed
  // (with nothing) and quantised again: within 2/254 of each block's largest value.
  REQUIRE_GPU();
  const std::size_t n = 100000;  // not a multiple of the block: the padding must quantise to zero
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = std::sin(0.001f * i) * (1.0f + (i % 7));
  DeviceBuffer d(n * sizeof(float));
  TRAINSIM_CUDA(cudaMemcpy(d.get(), x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  HostCollectives host;
  host.all_to_all = [](const void* s, void* r, std::size_t b) { std::memcpy(r, s, b); };
  host.all_gather = [](const void* s, void* r, std::size_t b) { std::memcpy(r, s, b); };
  auto comm = make_host_grad_comm(0, 1, host);
  Int8AllReduce ar;
  ar.run(*comm, d.get<float>(), n, nullptr);
  TRAINSIM_CUDA(cudaDeviceSynchronize());
  std::vector<float> y(n);
  TRAINSIM_CUDA(cudaMemcpy(y.data(), d.get(), n * sizeof(float), cudaMemcpyDeviceToHost));
  for (std::size_t b = 0; b < n; b += kQuantBlock) {
    float amax = 0;
    for (std::size_t i = b; i < std::min(n, b + kQuantBlock); ++i) amax = std::max(amax, std::fabs(x[i]));
    for (std::size_t i = b; i < std::min(n, b + kQuantBlock); ++i) ASSERT_NEAR(y[i], x[i], 2.0f * amax / 254.0f + 1e-6f) << i;
  }
}

TEST(GpuKernels, TopKAllGatherOfOneReplicaConservesTheGradient) {
  // One replica: the bucket becomes the kept values (about 1%), the rest is in the residual, and
  // together they are the gradient exactly.
  REQUIRE_GPU();
  const std::size_t n = 300000;
  std::vector<float> g(n);
  for (std::size_t i = 0; i < n; ++i) g[i] = std::cos(0.37f * i) * (i % 13);
  DeviceBuffer d(n * 4), r(n * 4);
  TRAINSIM_CUDA(cudaMemcpy(d.get(), g.data(), n * 4, cudaMemcpyHostToDevice));
  TRAINSIM_CUDA(cudaMemset(r.get(), 0, n * 4));
  HostCollectives host;
  host.all_gather = [](const void* s, void* out, std::size_t b) { std::memcpy(out, s, b); };
  auto comm = make_host_grad_comm(0, 1, host);
  TopKAllGather tk;
  tk.run(*comm, d.get<float>(), r.get<float>(), n, 0.01, nullptr);
  TRAINSIM_CUDA(cudaDeviceSynchronize());
  std::vector<float> sent(n), res(n);
  TRAINSIM_CUDA(cudaMemcpy(sent.data(), d.get(), n * 4, cudaMemcpyDeviceToHost));
  TRAINSIM_CUDA(cudaMemcpy(res.data(), r.get(), n * 4, cudaMemcpyDeviceToHost));
  std::size_t kept = 0;
  for (std::size_t i = 0; i < n; ++i) {
    kept += sent[i] != 0.0f;
    ASSERT_EQ(sent[i] + res[i], g[i]) << i;
    ASSERT_TRUE(sent[i] == 0.0f || res[i] == 0.0f) << i;
  }
  EXPECT_NEAR(static_cast<double>(kept) / n, 0.01, 0.004);
}

namespace {

// Host collectives among threads of this process (ranks sharing one GPU): what MPI does for
// `planner validate` under mpirun, so that tensor- and pipeline-parallel runs can be checked
// in one test. Point-to-point messages are copied into a mailbox, so a send never waits.
class ThreadGroup {
 public:
  explicit ThreadGroup(int n) : n_(n), slots_(n), sync_(n) {}
  HostCollectives member(int rank) {
    HostCollectives h;
    h.all_reduce_sum = [this, rank](float* x, std::size_t count) {
      slots_[rank] = x;
      sync_.arrive_and_wait();
      std::vector<float> sum(count, 0.0f);
      for (int r = 0; r < n_; ++r)
        for (std::size_t i = 0; i < count; ++i) sum[i] += static_cast<const float*>(slots_[r])[i];
      sync_.arrive_and_wait();
      std::memcpy(x, sum.data(), count * sizeof(float));
      sync_.arrive_and_wait();
    };
    h.reduce_scatter_sum = [this, rank](const float* send, float* recv, std::size_t count) {
      slots_[rank] = const_cast<float*>(send);
      sync_.arrive_and_wait();
      std::vector<float> sum(count, 0.0f);
      for (int r = 0; r < n_; ++r)
        for (std::size_t i = 0; i < count; ++i) sum[i] += static_cast<const float*>(slots_[r])[rank * count + i];
      sync_.arrive_and_wait();
      std::memcpy(recv, sum.data(), count * sizeof(float));
    };
    h.all_gather = [this, rank](const void* send, void* recv, std::size_t bytes) {
      slots_[rank] = const_cast<void*>(send);
      sync_.arrive_and_wait();
      for (int r = 0; r < n_; ++r) std::memcpy(static_cast<char*>(recv) + r * bytes, slots_[r], bytes);
      sync_.arrive_and_wait();
    };
    h.send_recv = [this, rank](const std::vector<P2pMessage>& sends, const std::vector<P2pMessage>& recvs) {
      for (const auto& m : sends) {
        std::lock_guard<std::mutex> lock(mu_);
        const char* p = static_cast<const char*>(m.buf);
        mail_[{rank, m.peer}].emplace_back(p, p + m.bytes);
        cv_.notify_all();
      }
      for (const auto& m : recvs) {
        std::unique_lock<std::mutex> lock(mu_);
        auto& box = mail_[{m.peer, rank}];
        cv_.wait(lock, [&] { return !box.empty(); });
        ASSERT_EQ(box.front().size(), m.bytes);
        std::memcpy(m.buf, box.front().data(), m.bytes);
        box.pop_front();
      }
    };
    return h;
  }

 private:
  int n_;
  std::vector<void*> slots_;
  std::barrier<> sync_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<int, int>, std::deque<std::vector<char>>> mail_;
};

// A small GPT, or a small Llama with two query heads per K/V head and untied output weights.
RunnerConfig small_model(bool llama) {
  RunnerConfig c;
  // An odd vocabulary: the two tensor-parallel shards differ in size.
  c.layers = 4; c.hidden = 128; c.heads = 4; c.ffn = llama ? 344 : 512; c.vocab = 509; c.seq = 64;
  c.micro_batch = 2; c.microbatches = 4; c.warmup_steps = 1; c.timed_steps = 1;
  if (llama) { c.llama = true; c.kv_heads = 2; c.tied_embeddings = false; }
  return c;
}

// Runs `configure(rank, config)` on `n` threads sharing the GPU; the per-rank results.
template <class F>
std::vector<RunnerResult> run_ranks(int n, bool llama, F configure) {
  std::vector<RunnerResult> out(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      RunnerConfig c = small_model(llama);
      auto keep = configure(r, c);
      out[r] = run_gpt_training(c);
    });
  for (auto& t : threads) t.join();
  return out;
}

TEST(GpuKernels, AnAccumulatingGemmIsTunedWithoutDeviceMemoryOfItsOwn) {
  // The autotuner times an accumulating GEMM (C += A B) on C itself and must leave C as it found
  // it, without device memory beyond its workspace, for a run sets up every buffer first and may
  // leave the device nearly full. C is 1 GiB here (16,384 x 16,384 fp32) and the device is filled
  // until about half a GiB is left; A and B are all ones. First call, C zero (a gradient's first
  // accumulation) and K = 64: every element 64 after it, exact in fp32, not 64 more for each
  // timed candidate. Second call, another shape (K = 32) on a C of the bytes 0x3F (0.7470588 each):
  // every element that value plus 32, rounded once, as one fp32 addition gives.
  REQUIRE_GPU();
  const int M = 16384, N = 16384, K = 64;
  const size_t c_bytes = static_cast<size_t>(M) * N * sizeof(float);
  cudaStream_t st = nullptr;
  ASSERT_EQ(cudaStreamCreate(&st), cudaSuccess);
  {
    DeviceBuffer A(static_cast<size_t>(M) * K * 2), B(static_cast<size_t>(K) * N * 2), C(c_bytes);
    const std::vector<uint16_t> ones(static_cast<size_t>(M) * K, 0x3F80);  // bf16 1.0
    ASSERT_EQ(cudaMemcpy(A.get(), ones.data(), A.bytes(), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(B.get(), ones.data(), B.bytes(), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemset(C.get(), 0, c_bytes), cudaSuccess);
    LtMatmul mm(st);
    std::vector<DeviceBuffer> filler;
    const size_t slack = 512ull << 20;
    for (int tries = 0; tries < 64; ++tries) {
      size_t free_b = 0, total_b = 0;
      ASSERT_EQ(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
      if (free_b <= slack + (64ull << 20)) break;
      try {
        filler.emplace_back(free_b - slack);
      } catch (const DeviceOutOfMemory&) {
        filler.emplace_back((free_b - slack) / 2);
      }
    }
    size_t free_b = 0, total_b = 0;
    ASSERT_EQ(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
    ASSERT_LT(free_b, c_bytes) << "the device could not be filled";
    std::vector<float> host(static_cast<size_t>(M) * N);
    auto count_other = [&](float want) {
      EXPECT_EQ(cudaMemcpy(host.data(), C.get(), c_bytes, cudaMemcpyDeviceToHost), cudaSuccess);
      return static_cast<size_t>(std::count_if(host.begin(), host.end(), [&](float v) { return v != want; }));
    };
    EXPECT_NO_THROW(mm.gemm(false, false, M, N, K, A.get(), B.get(), C.get(), true, 1.0f, 1.0f));
    ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
    EXPECT_EQ(count_other(64.0f), 0u) << "C[0] = " << host[0];
    float c0 = 0;
    const uint32_t bits = 0x3F3F3F3Fu;
    std::memcpy(&c0, &bits, sizeof c0);
    ASSERT_EQ(cudaMemset(C.get(), 0x3F, c_bytes), cudaSuccess);
    EXPECT_NO_THROW(mm.gemm(false, false, M, N, K / 2, A.get(), B.get(), C.get(), true, 1.0f, 1.0f));
    ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
    const float want = c0 + 32.0f;
    EXPECT_EQ(count_other(want), 0u) << "C[0] = " << host[0] << ", want " << want;
    std::printf("[ info ] accumulating GEMMs tuned with %.2f GiB free, C %.2f GiB\n", free_b / double(1 << 30),
                c_bytes / double(1 << 30));
  }
  cudaStreamDestroy(st);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(GpuKernels, RanksAgreeWhetherTheirBuffersFitBeforeTheirFirstCollective) {
  // Two ranks of one step (threads sharing the GPU), the second with a model whose parameters and
  // Adam state alone (400 layers of hidden 2,048: 20 G parameters, 18 bytes each) exceed any
  // device: it throws DeviceOutOfMemory, the first PeerSetupFailed, each after one call of the
  // agreement, and neither waits in a collective. Alone, a rank that does not fit throws at once
  // after telling the agreement; the device stays usable.
  REQUIRE_GPU();
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  bool any_failed = false;
  std::vector<int> calls(2, 0), fits_told(2, -1);
  auto agree_for = [&](int rank) {
    return [&, rank](bool fits) {
      std::unique_lock<std::mutex> lock(mu);
      ++calls[rank];
      fits_told[rank] = fits ? 1 : 0;
      any_failed = any_failed || !fits;
      ++arrived;
      cv.notify_all();
      cv.wait(lock, [&] { return arrived == 2; });
      return !any_failed;
    };
  };
  std::vector<std::string> caught(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      RunnerConfig c = small_model(false);
      if (r == 1) c.layers = 400, c.hidden = 2048, c.heads = 16, c.ffn = 8192;
      c.agree_setup = agree_for(r);
      try {
        run_gpt_training(c);
        caught[r] = "none";
      } catch (const DeviceOutOfMemory&) {
        caught[r] = "device";
      } catch (const PeerSetupFailed&) {
        caught[r] = "peer";
      } catch (const std::exception& e) {
        caught[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(caught[0], "peer");
  EXPECT_EQ(caught[1], "device");
  EXPECT_EQ(calls, (std::vector<int>{1, 1}));
  EXPECT_EQ(fits_told, (std::vector<int>{1, 0}));
  RunnerConfig alone = small_model(false);
  alone.layers = 400, alone.hidden = 2048, alone.heads = 16, alone.ffn = 8192;
  int told = -1;
  alone.agree_setup = [&](bool fits) {
    told = fits ? 1 : 0;
    return fits;
  };
  EXPECT_THROW(run_gpt_training(alone), DeviceOutOfMemory);
  EXPECT_EQ(told, 0);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  const RunnerResult ok = run_gpt_training(small_model(false));
  EXPECT_TRUE(ok.finite);
}

// The passes of `stage` in the simulator's order.
void set_schedule(RunnerConfig& c, trainsim::sim::PipelineKind kind, int pp, int vpp, int stage) {
  for (const auto& op : trainsim::sim::pipeline_order(kind, pp, vpp, c.microbatches, stage))
    c.passes.push_back({op.forward, op.microbatch, op.chunk});
  c.warmup = trainsim::sim::pipeline_warmup(kind, pp, vpp, c.microbatches, stage);
}

template <class F>
std::vector<RunnerResult> run_two_ranks(bool llama, F configure) {
  return run_ranks(2, llama, configure);
}

}  // namespace

TEST(GpuKernels, TensorParallelRunMatchesOneGpu) {
  // Two tensor-parallel ranks (heads, MLP columns and vocabulary split, bf16 partial sums) start
  // from the weights one GPU has and draw the same dropout: the first step's loss and gradient
  // norm match one GPU's up to bf16 rounding of the partial sums (loss 1e-3, norm 1e-2).
  // The same for a Llama-style model (grouped-query heads split with their K/V heads).
  REQUIRE_GPU();
  for (bool llama : {false, true}) {
    const RunnerResult one = run_gpt_training(small_model(llama));
    ThreadGroup group(2);
    const auto rs = run_two_ranks(llama, [&](int r, RunnerConfig& c) {
      auto comm = make_host_grad_comm(r, 2, group.member(r));
      c.tp_comm = comm.get();
      return std::shared_ptr<GradComm>(std::move(comm));
    });
    EXPECT_TRUE(one.finite) << llama;
    EXPECT_EQ(rs[1].first_loss, 0.0);  // only tensor-parallel rank 0 reports the loss
    EXPECT_NEAR(rs[0].first_loss, one.first_loss, 1e-3 * one.first_loss) << llama;
    EXPECT_NEAR(std::sqrt(rs[0].first_grad_sq + rs[1].first_grad_sq), std::sqrt(one.first_grad_sq), 1e-2 * std::sqrt(one.first_grad_sq))
        << llama;
    EXPECT_TRUE(rs[0].finite && rs[1].finite);
  }
}

namespace {

// Two pipeline stages of the small model, each rank configured by `place(rank, config)` (its
// layers and schedule), against one GPU running the same four micro-batches: the same arithmetic,
// so the first loss within 1e-5 and the gradient norm within 1e-3 (GEMM algorithms are autotuned
// per run), and the last loss within 1e-2.
template <class Place>
void expect_pipeline_matches_one_gpu(Place place) {
  for (bool llama : {false, true}) {
    const RunnerResult one = run_gpt_training(small_model(llama));
    ThreadGroup pipe(2), ends(2);
    const auto rs = run_two_ranks(llama, [&](int r, RunnerConfig& c) {
      std::shared_ptr<GradComm> p = make_host_grad_comm(r, 2, pipe.member(r)), e = make_host_grad_comm(r, 2, ends.member(r));
      c.pp_comm = p.get();
      c.embed_comm = e.get();
      place(r, c);
      return std::make_pair(p, e);
    });
    EXPECT_EQ(rs[0].first_loss, 0.0);  // the last stage reports the loss
    EXPECT_NEAR(rs[1].first_loss, one.first_loss, 1e-5 * one.first_loss) << llama;
    EXPECT_NEAR(std::sqrt(rs[0].first_grad_sq + rs[1].first_grad_sq), std::sqrt(one.first_grad_sq), 1e-3 * std::sqrt(one.first_grad_sq))
        << llama;
    EXPECT_NEAR(rs[1].last_loss, one.last_loss, 1e-2 * one.last_loss) << llama;
  }
}

}  // namespace

TEST(GpuKernels, PipelineRunMatchesOneGpu) {
  // Two stages of two layers each, 1F1B, activations and their gradients sent between the
  // stages, the tied embedding's two gradients summed; for the Llama-style model the untied output
  // weights live on the last stage only.
  REQUIRE_GPU();
  expect_pipeline_matches_one_gpu([](int r, RunnerConfig& c) {
    c.stage_first_layer = 2 * r;
    c.stage_layers = 2;
    set_schedule(c, trainsim::sim::PipelineKind::one_f_one_b, 2, 1, r);
  });
}

TEST(GpuKernels, InterleavedPipelineRunMatchesOneGpu) {
  // Two stages with two chunks of one layer each (stage 0 runs layers 0 and 2, stage 1 layers 1
  // and 3), interleaved 1F1B, messages grouped as Megatron-LM groups them.
  REQUIRE_GPU();
  expect_pipeline_matches_one_gpu([](int r, RunnerConfig& c) {
    c.chunk_layers = {{r, 1}, {2 + r, 1}};
    set_schedule(c, trainsim::sim::PipelineKind::interleaved, 2, 2, r);
  });
}

TEST(GpuKernels, LlamaRunnerLearnsAndKeepsItsMemoryAccount) {
  // One GPU, the small Llama (two query heads per K/V head): small random weights give nearly
  // uniform logits, so the first loss is about ln(vocab), and eight Adam steps on the same tokens
  // bring it down.
  REQUIRE_GPU();
  RunnerConfig c = small_model(true);
  c.warmup_steps = 1;
  c.timed_steps = 8;
  const RunnerResult r = run_gpt_training(c);
  EXPECT_TRUE(r.finite);
  EXPECT_NEAR(r.first_loss, std::log(509.0), 0.1);
  EXPECT_LT(r.last_loss, r.first_loss - 0.05);
  // The phases are disjoint parts of the step on one stream; backward runs more kernels than
  // forward.
  EXPECT_GT(r.forward_ms, 0.0);
  EXPECT_GT(r.backward_ms, r.forward_ms);
  EXPECT_LE(r.forward_ms + r.backward_ms + r.optimizer_ms, r.step_ms * 1.05);  // medians of different steps
}

TEST(GpuKernels, ClockMonitorReadsTheGpuARunUsesAndNamesItAsCudaDoes) {
  // NVML, beside a short run on device 0: it finds the GPU CUDA calls device 0 (by PCI bus id),
  // names it by the UUID CUDA gives (formatted as nvidia-smi prints it), and takes readings in
  // physical ranges while the run's timed window lies among them.
  REQUIRE_GPU();
  const DeviceInfo d = describe_devices();
  ASSERT_EQ(static_cast<int>(d.uuids.size()), d.count);
  for (const std::string& u : d.uuids) EXPECT_EQ(u.rfind("GPU-", 0), 0u) << u;
  ClockMonitor mon(0, 0.005);
  ASSERT_TRUE(mon.available()) << mon.unavailable_reason();
  EXPECT_EQ(mon.uuid(), d.uuids[0]);
  EXPECT_GT(mon.power_limit_w(), 100.0);
  EXPECT_LT(mon.power_limit_w(), 2000.0);
  RunnerConfig c = small_model(true);
  c.warmup_steps = 1;
  c.timed_steps = 8;
  mon.start();
  const RunnerResult r = run_gpt_training(c);
  const std::vector<ClockReading> readings = mon.stop();
  ASSERT_GE(readings.size(), 2u);
  for (std::size_t i = 0; i < readings.size(); ++i) {
    EXPECT_GT(readings[i].sm_mhz, 100.0);
    EXPECT_LT(readings[i].sm_mhz, 4000.0);
    EXPECT_GT(readings[i].power_w, 10.0);
    EXPECT_LT(readings[i].power_w, 2000.0);
    if (mon.reports_instant_power()) {
      EXPECT_GT(readings[i].power_instant_w, 10.0);
      EXPECT_LT(readings[i].power_instant_w, 2000.0);
    } else {
      EXPECT_TRUE(std::isnan(readings[i].power_instant_w));
    }
    if (i > 0) {
      EXPECT_GE(readings[i].wall_s, readings[i - 1].wall_s);
    }
  }
  EXPECT_LT(r.timed_begin_wall_s, r.timed_end_wall_s);
  EXPECT_GE(r.timed_begin_wall_s, readings.front().wall_s - 1.0);
  EXPECT_LE(r.timed_end_wall_s, readings.back().wall_s + 1.0);
  std::printf("[ info ] %s: %zu readings, last %.0f MHz %.0f W (%.0f W instantaneous; limit %.0f W)\n", d.uuids[0].c_str(),
              readings.size(), readings.back().sm_mhz, readings.back().power_w, readings.back().power_instant_w, mon.power_limit_w());
}

TEST(GpuKernels, ZeroStagesMatchOneGpu) {
  // Three data-parallel replicas, each running 4 of the 12 micro-batches one GPU runs, under
  // ZeRO 0-3, with buckets of one layer (0.5 MB) and of several (1.5 MB); three replicas leave
  // elements over in odd-sized buckets, which every replica holds. Only the order of the fp32
  // sums differs from one GPU: the replicas' losses sum to its first loss within 1e-5, the
  // squared gradient norm (whole on every replica without ZeRO, in owned parts that the replicas
  // add up with it) matches within 1e-3, the last loss within 1e-2 (Adam's first updates are
  // +-lr wherever a gradient is mostly rounding noise), and the replicas end with the same weights.
  REQUIRE_GPU();
  for (bool llama : {false, true}) {
    RunnerConfig c1 = small_model(llama);
    c1.microbatches = 12;
    const RunnerResult one = run_gpt_training(c1);
    for (int zero : {0, 1, 2, 3})
      for (double bucket : {0.5, 1.5}) {
        ThreadGroup group(3);
        const auto rs = run_ranks(3, llama, [&](int r, RunnerConfig& c) {
          std::shared_ptr<GradComm> comm = make_host_grad_comm(r, 3, group.member(r));
          c.comm = comm.get();
          c.zero = zero;
          c.bucket_MB = bucket;
          return comm;
        });
        double first = 0, last = 0, grad_sq = 0;
        for (const auto& r : rs) first += r.first_loss, last += r.last_loss, grad_sq += r.first_grad_sq;
        if (zero == 0) grad_sq = rs[0].first_grad_sq;
        const std::string what = (llama ? "llama zero " : "gpt zero ") + std::to_string(zero) + " bucket " + std::to_string(bucket);
        EXPECT_NEAR(first, one.first_loss, 1e-5 * one.first_loss) << what;
        EXPECT_NEAR(std::sqrt(grad_sq), std::sqrt(one.first_grad_sq), 1e-3 * std::sqrt(one.first_grad_sq)) << what;
        EXPECT_NEAR(last, one.last_loss, 1e-2 * one.last_loss) << what;
        EXPECT_EQ(rs[0].param_checksum, rs[1].param_checksum) << what;
        EXPECT_EQ(rs[0].param_checksum, rs[2].param_checksum) << what;
        EXPECT_GE(rs[0].buckets, zero >= 2 ? 4 * 2 : 2) << what;  // ZeRO-2/3 sum every micro-batch's buckets
      }
  }
}

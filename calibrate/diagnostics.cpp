#include "diagnostics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "clock_log.h"
#include "input_error.h"

#ifdef TRAINSIM_HAVE_CUDA
#include "gemm_bench.h"
#include "kernel_mix.h"
#include "measurements.h"
#endif

namespace trainsim::calib {

std::vector<GemmUse> parse_gemm_condition_shapes(const GemmConditionsOptions& o) {
  if (!(o.idle_ms >= 0 && o.idle_ms <= 10000)) throw InputError("--idle-ms", "must be from 0 to 10000 milliseconds");
  std::vector<GemmUse> shapes;
  if (o.shapes.empty()) {
    // Forward, input-gradient and weight-gradient GEMMs of GPT 125M and 350M at micro-batch 2
    // (short GEMMs, timed as bursts by calibrate), GPT 1.3B at micro-batch 8 and GPT 6.7B at
    // micro-batch 2.
    for (auto [T, h] : {std::pair{4096, 768}, std::pair{4096, 1024}, std::pair{16384, 2048}, std::pair{4096, 4096}})
      for (auto [n, k] : {std::pair{3 * h, h}, std::pair{h, h}, std::pair{4 * h, h}, std::pair{h, 4 * h}}) {
        shapes.push_back({T, n, k, false, false});
        shapes.push_back({T, k, n, false, true});
        shapes.push_back({k, n, T, true, false});
      }
    return shapes;
  }
  for (const std::string& text : o.shapes) {
    // The calibrate shape format ("m n k ta tb") with commas, ta and tb 0 when left out.
    const std::string where = "--shape " + text;
    std::string line = text;
    std::replace(line.begin(), line.end(), ',', ' ');
    std::istringstream fields(line);
    int count = 0;
    for (std::string f; fields >> f;) ++count;
    if ((count != 3 && count != 5) || std::count(text.begin(), text.end(), ',') != count - 1)
      throw InputError(where, "expected m,n,k or m,n,k,ta,tb (ta and tb 0 or 1)");
    if (count == 3) line += " 0 0";
    for (const GemmUse& g : parse_gemm_shapes(line, where)) {
      for (int d : {g.m, g.n, g.k})
        if (d < 16 || d > 131072) throw InputError(where, "each of m, n, k must be from 16 to 131072");
      if (gemm_operand_bytes(g) > kMaxGemmOperandBytes) throw InputError(where, "its operands would take over 24 GiB");
      shapes.push_back(g);
    }
  }
  return shapes;
}

int run_gemm_conditions(const GemmConditionsOptions& o) {
  const std::vector<GemmUse> parsed = parse_gemm_condition_shapes(o);
#ifdef TRAINSIM_HAVE_CUDA
  if (!gpu::cuda_available()) {
    std::cerr << "error: no CUDA device is visible\n";
    return 1;
  }
  std::vector<gpu::GemmShape> shapes;
  for (const auto& p : parsed) shapes.push_back({p.m, p.n, p.k, p.ta, p.tb});
  const auto samples = gpu::bench_gemm_conditions(shapes, o.idle_ms);
  // calibrate's own timing of each shape (after a copy of about its length, capped at 512 MiB), last.
  const auto table = gpu::bench_gemms(shapes, "bf16", gpu::describe_devices().cc_major);
  std::printf("%6s %6s %6s %2s %2s %12s %12s %12s %12s %12s %12s %12s\n", "m", "n", "k", "ta", "tb", "random b2b", "train b2b",
              "random intl", "train intl", "fp32+= b2b", "calibrate", o.idle_ms > 0 ? "after idle" : "");
  double sums[4] = {0, 0, 0, 0};
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const auto& r = samples[i];
    std::printf("%6d %6d %6d %2d %2d %10.1fus %10.1fus %10.1fus %10.1fus %10.1fus %10.1fus", r.shape.m, r.shape.n, r.shape.k,
                r.shape.ta, r.shape.tb, r.us_random_b2b, r.us_trainlike_b2b, r.us_random_interleaved, r.us_trainlike_interleaved,
                r.us_fp32_accumulate_b2b, i < table.size() ? table[i].time_us : 0.0);
    if (o.idle_ms > 0) std::printf(" %10.1fus", r.us_trainlike_after_idle);
    std::printf("\n");
    sums[0] += r.us_random_b2b; sums[1] += r.us_trainlike_b2b; sums[2] += r.us_random_interleaved; sums[3] += r.us_trainlike_interleaved;
  }
  std::printf("total %.1f ms random back to back; train-like %+.1f%%, random interleaved %+.1f%%, train-like interleaved %+.1f%%\n",
              sums[0] * 1e-3, 100 * (sums[1] / sums[0] - 1), 100 * (sums[2] / sums[0] - 1), 100 * (sums[3] / sums[0] - 1));
  if (o.idle_ms > 0) std::printf("after idle: each call timed alone after the GPU was idle for %.0f ms\n", o.idle_ms);
  return 0;
#else
  std::cerr << "error: gemm-conditions needs a CUDA build\n";
  return 1;
#endif
}

int run_kernel_conditions() {
#ifdef TRAINSIM_HAVE_CUDA
  if (!gpu::cuda_available()) {
    std::cerr << "error: no CUDA device is visible\n";
    return 1;
  }
  const auto burst = gpu::bench_step_kernels(gpu::StepKernelShapes::dense, gpu::StepKernelTiming::burst, true);
  const auto single = gpu::bench_step_kernels(gpu::StepKernelShapes::dense, gpu::StepKernelTiming::single, true);
  const auto evicted = gpu::bench_step_kernels(gpu::StepKernelShapes::dense, gpu::StepKernelTiming::evicted, true);
  const auto after = gpu::bench_step_kernels(gpu::StepKernelShapes::dense, gpu::StepKernelTiming::after_compute, true);
  const auto loaded = gpu::bench_step_kernels(gpu::StepKernelShapes::dense, gpu::StepKernelTiming::under_load, true);
  // Then back to back again with most of the device's memory allocated and written.
  std::vector<gpu::KernelSample> full;
  {
    std::size_t free_b = 0, total_b = 0;
    gpu::device_memory(free_b, total_b);
    const std::size_t keep = 24ull << 30;
    gpu::DeviceBallast ballast(free_b > keep ? free_b - keep : 0);
    full = gpu::bench_step_kernels(gpu::StepKernelShapes::dense, gpu::StepKernelTiming::burst, true);
    std::printf("# ballast for the last column: %.1f GiB of %.1f GiB\n", ballast.bytes() / double(1ull << 30), total_b / double(1ull << 30));
  }
  std::printf("%-26s %6s %6s %12s %12s %12s %12s %12s %12s\n", "kernel", "tokens", "hidden", "burst", "single", "evicted",
              "after FMA", "under load", "burst, full");
  for (std::size_t i = 0; i < burst.size() && i < single.size() && i < evicted.size() && i < after.size() && i < loaded.size() &&
                          i < full.size();
       ++i)
    std::printf("%-26s %6d %6d %10.2fus %10.2fus %10.2fus %10.2fus %10.2fus %10.2fus\n", burst[i].kernel.c_str(), burst[i].tokens,
                burst[i].hidden, burst[i].time_us, single[i].time_us, evicted[i].time_us, after[i].time_us, loaded[i].time_us,
                full[i].time_us);
  return 0;
#else
  std::cerr << "error: kernel-conditions needs a CUDA build\n";
  return 1;
#endif

}

void check_attention_conditions(double idle_ms) {
  if (!(idle_ms >= 0 && idle_ms <= 10000)) throw InputError("--idle-ms", "must be from 0 to 10000 milliseconds");
}

int run_attention_conditions(double idle_ms) {
  check_attention_conditions(idle_ms);
#ifdef TRAINSIM_HAVE_CUDA
  if (!gpu::cuda_available()) {
    std::cerr << "error: no CUDA device is visible\n";
    return 1;
  }
  const auto samples = gpu::bench_attention_orders(idle_ms);
  std::printf("%5s %5s %5s %4s %5s %4s | %11s %11s %11s | %11s %11s %11s | %s\n", "batch", "heads", "seq", "dim", "group", "drop",
              "fwd order", "reversed", "after idle", "bwd order", "reversed", "after idle", "in order over reversed (fwd, bwd)");
  std::vector<double> fwd_ratio, bwd_ratio;
  for (const auto& r : samples) {
    const auto& a = r.in_order;
    const double rf = a.fwd_us / r.reversed.fwd_us, rb = a.bwd_us / r.reversed.bwd_us;
    fwd_ratio.push_back(rf);
    bwd_ratio.push_back(rb);
    std::printf("%5d %5d %5d %4d %5d %4d | %9.1fus %9.1fus %9.1fus | %9.1fus %9.1fus %9.1fus | %+.1f%% %+.1f%%\n", a.batch, a.heads,
                a.seq, a.head_dim, a.kv_group, a.dropout ? 1 : 0, a.fwd_us, r.reversed.fwd_us, r.after_idle.fwd_us, a.bwd_us,
                r.reversed.bwd_us, r.after_idle.bwd_us, 100 * (rf - 1), 100 * (rb - 1));
  }
  auto med = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  std::printf("%zu shapes: in calibrate's order over the reverse order, median %+.1f%% forward (%+.1f%% to %+.1f%%), %+.1f%% backward "
              "(%+.1f%% to %+.1f%%)\n",
              samples.size(), 100 * (med(fwd_ratio) - 1), 100 * (*std::min_element(fwd_ratio.begin(), fwd_ratio.end()) - 1),
              100 * (*std::max_element(fwd_ratio.begin(), fwd_ratio.end()) - 1), 100 * (med(bwd_ratio) - 1),
              100 * (*std::min_element(bwd_ratio.begin(), bwd_ratio.end()) - 1),
              100 * (*std::max_element(bwd_ratio.begin(), bwd_ratio.end()) - 1));
  if (idle_ms > 0) std::printf("after idle: each shape timed after the GPU was idle for %.0f ms\n", idle_ms);
  return 0;
#else
  std::cerr << "error: attention-conditions needs a CUDA build\n";
  return 1;
#endif
}

void check_kernel_mix(const KernelMixOptions& o) {
  for (std::size_t i = 0; i < o.shares.size(); ++i)
    if (!(o.shares[i] >= 0 && o.shares[i] < 1))
      throw InputError("--shares[" + std::to_string(i) + "]", "a share must be at least 0 and below 1");
  if (o.shares.empty()) throw InputError("--shares", "needs at least one share");
  if (!(o.settle_s > 0 && o.settle_s <= 60)) throw InputError("--settle", "must be above 0 and at most 60 seconds");
  if (!(o.timed_s > 0 && o.timed_s <= 60)) throw InputError("--timed", "must be above 0 and at most 60 seconds");
  for (std::size_t i = 0; i < o.gemm.size(); ++i)
    if (o.gemm[i] < 16 || o.gemm[i] > 65536)
      throw InputError("--gemm[" + std::to_string(i) + "]", "each of m, n, k must be from 16 to 65536");
  {
    if (o.layer_kind != "llama" && o.layer_kind != "gpt")
      throw InputError("--layer-kind", "'" + o.layer_kind + "': llama or gpt");
    const bool gpt = o.layer_kind == "gpt";
    const char* names[] = {"tokens", "hidden", gpt ? "MLP width" : "SwiGLU width"};
    for (std::size_t i = 0; i < o.layer.size(); ++i)
      if (o.layer[i] < 64 || o.layer[i] > 65536) throw InputError(std::string("--layer ") + names[i], "must be from 64 to 65536");
    if (o.layer[0] > 2048 && o.layer[0] % 2048 != 0)
      throw InputError("--layer tokens", "above 2,048 must be whole sequences of 2,048");
    if (o.layer[1] % 64 != 0) throw InputError("--layer hidden", "must be a multiple of 64 (whole heads)");
    // Its buffers (kernels/kernel_mix.cu), bf16: Llama-style, at most nine tokens x hidden (K/V no
    // wider than hidden) and five tokens x width; GPT-style, thirteen tokens x hidden, a byte
    // mask of tokens x hidden, and four tokens x width.
    const double tokens = o.layer[0];
    const double per_token = gpt ? 13.5 * o.layer[1] + 4.0 * o.layer[2] : 9.0 * o.layer[1] + 5.0 * o.layer[2];
    if (2.0 * tokens * per_token > 16.0 * (1ull << 30))
      throw InputError("--layer", "its tensors would take over 16 GiB");
  }
  if (!o.attention.empty()) {
    const char* names[] = {"batch", "heads", "seq", "head_dim", "query heads per K/V head"};
    for (std::size_t i = 0; i < o.attention.size(); ++i)
      if (o.attention[i] < 1 || o.attention[i] > 65536)
        throw InputError(std::string("--attention ") + names[i], "must be from 1 to 65536");
    if (o.attention[1] % o.attention[4] != 0)
      throw InputError("--attention", "heads must be a multiple of the query heads per K/V head");
    if (static_cast<double>(o.attention[0]) * o.attention[1] * o.attention[2] * o.attention[2] * 2 > 16.0 * (1ull << 30))
      throw InputError("--attention", "its s x s score tensors would take over 16 GiB");
  }
}

int run_kernel_mix(const KernelMixOptions& o) {
  check_kernel_mix(o);
  // A clock log that cannot be read is said before the minutes of measuring, not after.
  if (!o.clock_log.empty()) read_clock_log(o.clock_log);
#ifdef TRAINSIM_HAVE_CUDA
  if (!gpu::cuda_available()) {
    std::cerr << "error: no CUDA device is visible\n";
    return 1;
  }
  gpu::KernelMixLoad mix_load;
  mix_load.gm = o.gemm[0];
  mix_load.gn = o.gemm[1];
  mix_load.gk = o.gemm[2];
  if (!o.attention.empty()) {
    mix_load.attention = true;
    mix_load.batch = o.attention[0];
    mix_load.heads = o.attention[1];
    mix_load.seq = o.attention[2];
    mix_load.head_dim = o.attention[3];
    mix_load.kv_group = o.attention[4];
  }
  const gpu::KernelMixResult r =
      gpu::bench_kernel_mix(o.shares, o.settle_s, o.timed_s, mix_load, {o.layer[0], o.layer[1], o.layer[2], o.layer_kind == "gpt"});
  std::vector<ClockSample> clocks;
  if (!o.clock_log.empty()) clocks = read_clock_log(o.clock_log);
  std::printf("# load: %s; element-wise kernels of a %s layer at %d tokens, hidden %d, %s width %d\n", r.load.c_str(),
              r.gpt ? "GPT-style" : "Llama-style", r.tokens, r.hidden, r.gpt ? "MLP" : "SwiGLU", r.ffn);
  std::printf("# alone, one call between events at the full clock: load %.1f us (%.0f TFLOP/s)", r.load_alone_us,
              r.load_flop / (r.load_alone_us * 1e6));
  double alone_sum = 0;
  for (std::size_t k = 0; k < r.kernels.size(); ++k) {
    std::printf("; %s %.1f us", r.kernels[k].c_str(), r.alone_us[k]);
    alone_sum += r.alone_us[k];
  }
  std::printf("\n# in the mix: each call's median time over its time alone; \"kernels\": the group's sum over its sum alone\n");
  std::printf("%6s %6s %5s %6s %6s %7s", "target", "share", "loads", "groups", "cycles", "load");
  // Each kernel's column as wide as its name (GPT's are long), at least 11.
  std::vector<int> width;
  for (const auto& k : r.kernels) width.push_back(std::max(11, static_cast<int>(k.size())));
  for (std::size_t k = 0; k < r.kernels.size(); ++k) std::printf(" %*s", width[k], r.kernels[k].c_str());
  // The instantaneous power where the log has it (a mean over the last second otherwise only).
  bool instant = false;
  for (const ClockSample& c : clocks) instant = instant || !std::isnan(c.power_instant_w);
  // (Its column comes before the clock's: scripts read the clock, power and samples as the last three.)
  std::printf(" %8s%s %7s %6s %7s\n", "kernels", instant ? "  W inst" : "", "SM MHz", "W", "samples");
  for (const auto& p : r.points) {
    std::printf("%6.2f %6.3f %5d %6d %6d", p.target_share, p.load_share, p.loads, p.groups, p.cycles);
    if (p.loads > 0) std::printf(" %7.3f", p.load_us / r.load_alone_us);
    else std::printf(" %7s", "-");
    double sum = 0;
    for (std::size_t k = 0; k < r.kernels.size(); ++k) {
      std::printf(" %*.3f", width[k], p.kernel_us[k] / r.alone_us[k]);
      sum += p.kernel_us[k];
    }
    std::printf(" %8.3f", sum / alone_sum);
    if (clocks.empty()) {
      std::printf(" %7s %6s %7s\n", "-", "-", "-");
    } else {
      const ClockStats c = clock_stats(clocks, p.wall_begin_s, p.wall_end_s);
      if (instant) std::printf(" %7.0f", c.power_instant_w);
      std::printf(" %7.0f %6.0f %7d\n", c.sm_mhz, c.power_w, c.samples);
    }
  }
  return 0;
#else
  std::cerr << "error: kernel-mix needs a CUDA build\n";
  return 1;
#endif

}

}  // namespace trainsim::calib

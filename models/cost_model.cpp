#include "cost_model.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>

#include "input_error.h"

namespace trainsim {

namespace {
// Dimensions that are not multiples of 8 (a GPT-2 vocabulary of 50257) keep cuBLAS off its fast
// kernels: such shapes are matched only with measured shapes that are misaligned too.
bool misaligned(double x) {  // GEMM dimensions are far below 2^63
  const double whole = std::floor(x);
  return whole != x || static_cast<long long>(whole) % 8 != 0;
}
bool misaligned(double a, double b, double c) { return misaligned(a) || misaligned(b) || misaligned(c); }
}  // namespace

CostModel::CostModel(const HardwareProfile& hw, Precision p) : hw_(hw), precision_(p) {
  static std::atomic<std::uint64_t> made{0};
  instance_ = ++made;
  const std::string want = to_string(p);
  if (auto it = hw_.gemm.find(want); it != hw_.gemm.end() && !it->second.empty()) {
    table_.index(it->second, 1.0);
  } else if (auto b = hw_.gemm.find("bf16"); b != hw_.gemm.end() && !b->second.empty()) {
    table_.index(b->second, hw_.peak(want) > 0 && hw_.peak("bf16") > 0 ? hw_.peak(want) / hw_.peak("bf16") : 1.0);
  }
  // Mixed precision keeps fp32 gradients: its weight-gradient GEMMs add into them.
  if (auto a = hw_.gemm.find(kGemmAccumulateFp32);
      a != hw_.gemm.end() && !a->second.empty() && (p == Precision::bf16 || p == Precision::fp16))
    accumulate_table_.index(a->second, 1.0);
}

void CostModel::Table::index(const std::vector<GemmPoint>& t, double s) {
  rows = &t;
  scale = s;
  log.clear();
  for (std::size_t i = 0; i < t.size(); ++i) log.push_back({std::log(t[i].m), std::log(t[i].n), std::log(t[i].k), misaligned(t[i].m, t[i].n, t[i].k), i});
  std::stable_sort(log.begin(), log.end(), [](const LogShape& a, const LogShape& b) { return a.lm < b.lm; });
}

double CostModel::peak_flops() const {
  const double p = hw_.peak(to_string(precision_));
  return (p > 0 ? p : hw_.peak("bf16")) * 1e12;
}

double CostModel::gemm_rate_tflops(double m, double n, double k, bool accumulate) const {
  if (accumulate && accumulate_table_.rows) return accumulate_table_.rate(m, n, k, tie_rows_);
  if (!table_.rows) {
    // The profile loader requires a GEMM table or a measured ceiling.
    auto it = hw_.measured_tflops.find("bf16");
    TRAINSIM_ASSERT(it != hw_.measured_tflops.end(), "profile has neither a GEMM table nor a measured bf16 rate");
    return it->second;
  }
  return table_.rate(m, n, k, tie_rows_);
}

double CostModel::Table::rate(double m, double n, double k, std::vector<std::size_t>& tie_rows) const {
  const bool want = misaligned(m, n, k);
  const double lm = std::log(m), ln = std::log(n), lk = std::log(k);
  // Nearest measured shape (L1 distance in log space); shapes equally near (a power of two between
  // two measured ones, up to the last bits of the logarithms) share the query: their times are
  // averaged, i.e. the harmonic mean of their rates, rather than letting rounding pick one. The
  // rows are ordered by log m, and |log m - p.lm| alone bounds the distance from below, so each
  // scan walks outwards from log m and stops once that bound passes what it is looking for.
  constexpr double kTie = 1e-9;
  const std::size_t n_rows = log.size();
  const std::size_t mid = static_cast<std::size_t>(
      std::lower_bound(log.begin(), log.end(), lm, [](const LogShape& p, double v) { return p.lm < v; }) - log.begin());
  auto dist = [&](const LogShape& p) { return std::fabs(lm - p.lm) + std::fabs(ln - p.ln) + std::fabs(lk - p.lk); };
  // Calls visit(p) for every row eligible in this pass whose log m is within `reach` of lm(); the
  // reach may shrink as it goes.
  auto scan = [&](bool aligned_only, double& reach, auto&& visit) {
    for (std::size_t i = mid; i < n_rows && log[i].lm - lm <= reach; ++i)
      if (!aligned_only || log[i].misaligned == want) visit(log[i]);
    for (std::size_t i = mid; i-- > 0 && lm - log[i].lm <= reach;)
      if (!aligned_only || log[i].misaligned == want) visit(log[i]);
  };
  for (int pass = 0; pass < 2; ++pass) {
    double best_d = 1e300;
    scan(pass == 0, best_d, [&](const LogShape& p) { best_d = std::min(best_d, dist(p)); });
    if (best_d == 1e300) continue;
    double reach = best_d + kTie;
    tie_rows.clear();
    scan(pass == 0, reach, [&](const LogShape& p) {
      if (dist(p) <= best_d + kTie) tie_rows.push_back(p.row);
    });
    std::sort(tie_rows.begin(), tie_rows.end());  // sum in table order
    double inv = 0;
    for (std::size_t r : tie_rows) inv += 1.0 / (*rows)[r].tflops;
    return static_cast<double>(tie_rows.size()) / inv * scale;
  }
  TRAINSIM_ASSERT(false, "GEMM table is empty");
  return 0.0;
}

std::size_t CostModel::ShapeHash::operator()(const std::array<double, 3>& s) const noexcept {
  std::size_t h = 0;
  for (double x : s) h = h * 1000003u ^ std::hash<double>{}(x);
  return h;
}

double CostModel::gemm_time_s(double m, double n, double k, bool accumulate) const {
  if (m <= 0 || n <= 0 || k <= 0) return 0.0;
  accumulate = accumulate && accumulate_table_.rows;
  auto& memo = accumulate ? accumulate_memo_ : gemm_memo_;
  const std::array<double, 3> key{m, n, k};
  if (auto it = memo.find(key); it != memo.end()) return it->second;
  const double flops = 2.0 * m * n * k;
  const double compute = flops / (gemm_rate_tflops(m, n, k, accumulate) * 1e12);
  // An accumulated output is read and written in fp32.
  const double bytes = activation_bytes(precision_) * (m * k + k * n) + (accumulate ? 8.0 : activation_bytes(precision_)) * m * n;
  // Kernels are issued asynchronously: a kernel shorter than the launch interval is launch-bound.
  const double t = std::max(launch_s(), std::max(compute, bytes / (hw_.memory_bandwidth_GBps * 1e9)));
  memo.emplace(key, t);
  return t;
}

namespace {
// Piecewise-linear in log(bytes); flat beyond the measured ends.
double interpolate_GBps(const std::vector<BandwidthPoint>& pts, double bytes) {
  if (bytes <= pts.front().bytes) return pts.front().GBps;
  if (bytes >= pts.back().bytes) return pts.back().GBps;
  for (std::size_t i = 1; i < pts.size(); ++i)
    if (bytes <= pts[i].bytes) {
      const double x = (std::log(bytes) - std::log(pts[i - 1].bytes)) / (std::log(pts[i].bytes) - std::log(pts[i - 1].bytes));
      return pts[i - 1].GBps + x * (pts[i].GBps - pts[i - 1].GBps);
    }
  return pts.back().GBps;
}
}  // namespace

double CostModel::kernel_time_s(const std::string& kernel, double bytes, double width) const {
  auto it = hw_.memory_kernels.find(kernel);
  if (it == hw_.memory_kernels.end() || it->second.empty() || bytes <= 0) return memory_time_s(bytes);
  const std::vector<BandwidthPoint>& all = it->second;
  // Row-wise kernels run at different rates for different row lengths at the same bytes: use the
  // points of the measured hidden size nearest in log space (both neighbours when equidistant).
  double best = 1e300;
  if (width > 0)
    for (const auto& p : all)
      if (p.width > 0) best = std::min(best, std::fabs(std::log(p.width / width)));
  if (best == 1e300) return std::max(launch_s(), bytes / (interpolate_GBps(all, bytes) * 1e9));
  std::vector<BandwidthPoint> near;
  for (const auto& p : all)
    if (p.width > 0 && std::fabs(std::log(p.width / width)) <= best + 1e-9) near.push_back(p);
  return std::max(launch_s(), bytes / (interpolate_GBps(near, bytes) * 1e9));
}

double CostModel::memory_time_s(double bytes) const {
  if (bytes <= 0) return 0.0;
  double bw = hw_.memory_bandwidth_GBps;
  const auto& pts = hw_.memory_bound;
  if (!pts.empty()) {
    // Piecewise-linear in log(bytes); flat beyond the measured ends.
    if (bytes <= pts.front().bytes) bw = pts.front().GBps;
    else if (bytes >= pts.back().bytes) bw = pts.back().GBps;
    else
      for (std::size_t i = 1; i < pts.size(); ++i)
        if (bytes <= pts[i].bytes) {
          const double x = (std::log(bytes) - std::log(pts[i - 1].bytes)) / (std::log(pts[i].bytes) - std::log(pts[i - 1].bytes));
          bw = pts[i - 1].GBps + x * (pts[i].GBps - pts[i - 1].GBps);
          break;
        }
  }
  return std::max(launch_s(), bytes / (bw * 1e9));
}

double CostModel::op_time_s(const Op& op) const {
  switch (op.kind) {
    case OpKind::gemm: return gemm_time_s(op.m, op.n, op.k, op.accumulate);
    case OpKind::attention: {
      const bool bwd = op.name.find(".bwd") != std::string::npos;
      double frac = bwd ? hw_.attention_bwd_fraction : hw_.attention_fwd_fraction;
      // The measured shape nearest to the op's, among those with its dropout if any were measured:
      // first in head size, then in query heads per K/V head, then in (batch x heads, sequence),
      // each in log space. That order follows the table: on the H200 the fraction of peak moves
      // 2.5 times from 64- to 128-wide heads and a third with grouping, but under a fifth over an
      // eightfold batch x heads and a few percent from 4,096 to 8,192 tokens, so a shape matched
      // in size and grouping carries over across batch and length, not the other way round.
      bool same_dropout = false;
      for (const auto& p : hw_.attention) same_dropout |= p.dropout == op.dropout;
      std::array<double, 3> best{1e300, 1e300, 1e300};
      for (const auto& p : hw_.attention) {
        if (same_dropout && p.dropout != op.dropout) continue;
        const std::array<double, 3> d{std::fabs(std::log(op.k / p.head_dim)), std::fabs(std::log(op.kv_group / p.kv_group)),
                                      std::fabs(std::log(op.m / p.batch_heads)) + std::fabs(std::log(op.n / p.seq))};
        if (d < best) { best = d; frac = bwd ? p.bwd_fraction : p.fwd_fraction; }
      }
      // Without an attention measurement, the two batched matmuls at the GEMM table's rate for
      // their shape (sequence x sequence x head size).
      const double rate = frac > 0 ? frac * hw_.peak("bf16") * 1e12 : gemm_rate_tflops(op.n, op.n, op.k) * 1e12;
      return std::max(launch_s(), std::max(op.flops / rate, op.bytes / (hw_.memory_bandwidth_GBps * 1e9)));
    }
    case OpKind::memory: return kernel_time_s(op.kernel, op.bytes, op.width);
  }
  return 0.0;
}

double CostModel::adam_time_s(double params) const { return kernel_time_s("adam", 34.0 * params); }

double CostModel::compression_time_s(const Compression& c, double bytes) const {
  switch (c.kind) {
    case Compression::Kind::none: return 0.0;
    case Compression::Kind::fp16: return memory_time_s(bytes * 1.5);  // read fp32, write fp16
    case Compression::Kind::int8: {
      // Quantize, then dequantize the result. Unmeasured: a memory-bound pass over the fp32 input
      // and the int8 output (5/4 of the gradient bytes), each way.
      if (hw_.int8_quantize_GBps > 0) return 2.0 * std::max(launch_s(), bytes / (hw_.int8_quantize_GBps * 1e9));
      return 2.0 * memory_time_s(1.25 * bytes);
    }
    case Compression::Kind::topk: {
      // Selection with error feedback (read gradient and residual, write the residual back:
      // 3x the gradient bytes when unmeasured), then the scatter-add of the gathered values.
      const double select = hw_.topk_select_GBps > 0 ? std::max(launch_s(), bytes / (hw_.topk_select_GBps * 1e9))
                                                     : memory_time_s(3.0 * bytes);
      return select + memory_time_s(2.0 * bytes);
    }
    case Compression::Kind::powersgd: {
      // Two thin GEMMs per matrix (P = M Q, Q = M^T P) over the gradient viewed as a square-ish
      // matrix, plus orthogonalisation: costed as GEMMs of the bucket's elements times the rank.
      const double elems = bytes / 4.0;
      const double side = std::sqrt(elems);
      return 2.0 * gemm_time_s(side, c.powersgd_rank, side) + memory_time_s(2.0 * bytes);
    }
  }
  return 0.0;
}

KernelClasses one_gpu_kernel_classes(const CostModel& c, const OpContext& ctx, int layers, double microbatches) {
  KernelClasses k;
  auto add = [&](const LayerOps& ops, double times) {
    for (const auto* list : {&ops.forward, &ops.backward, &ops.recompute})
      for (const Op& op : *list) {
        const double t = c.op_time_s(op) * times;
        if (op.kind == OpKind::gemm) {
          k.gemm_s += t;
          k.gemm_flops += op.flops * times;
        } else if (op.kind == OpKind::attention) {
          k.attention_s += t;
          k.attention_flops += op.flops * times;
        } else {
          k.other_s += t;
          k.by_kernel[op.kernel] += t;
        }
      }
  };
  add(transformer_layer_ops(ctx), static_cast<double>(layers) * microbatches);
  add(embedding_ops(ctx), microbatches);
  add(head_ops(ctx), microbatches);
  return k;
}

}  // namespace trainsim

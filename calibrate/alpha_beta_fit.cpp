#include "alpha_beta_fit.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace trainsim::calib {

double busbw_factor(const std::string& c, int n) {
  const double d = n;
  if (c == "all_reduce") return 2.0 * (d - 1) / d;
  if (c == "all_gather" || c == "reduce_scatter" || c == "all_to_all") return (d - 1) / d;
  return 1.0;  // send_recv, broadcast, reduce
}

double predict_us(const AlphaBetaFit& f, const std::string& collective, int gpus, double bytes) {
  return f.alpha_us + bytes * busbw_factor(collective, gpus) / (f.busbw_GBps * 1e3);
}

AlphaBetaFit fit_alpha_beta(const LinkTable& t, double min_bytes) {
  std::vector<const LinkPoint*> pts;
  for (const auto& p : t.points)
    if (p.bytes >= min_bytes && p.time_us > 0) pts.push_back(&p);
  if (pts.size() < 2) throw std::invalid_argument("fit needs at least two points at or above the minimum size");
  const double factor = busbw_factor(t.collective, t.gpus);
  // Weighted linear least squares: minimise sum ((alpha + x*b - t) / t)^2 with x = S * factor.
  Eigen::MatrixXd A(pts.size(), 2);
  Eigen::VectorXd y(pts.size());
  for (std::size_t i = 0; i < pts.size(); ++i) {
    const double w = 1.0 / pts[i]->time_us;
    A(i, 0) = w;
    A(i, 1) = w * pts[i]->bytes * factor;
    y(i) = 1.0;
  }
  Eigen::Vector2d x = A.colPivHouseholderQr().solve(y);
  AlphaBetaFit f;
  f.alpha_us = std::max(0.0, x(0));
  if (x(0) < 0) {
    // A negative intercept is not a latency: refit the slope alone.
    Eigen::VectorXd col = A.col(1);
    x(1) = col.dot(y) / col.dot(col);
  }
  if (!(x(1) > 0)) throw std::invalid_argument("fit gave a non-positive time per byte");
  f.busbw_GBps = 1.0 / (x(1) * 1e3);  // us per byte -> GB/s
  f.points = static_cast<int>(pts.size());
  std::vector<double> rel;
  double mean_log = 0;
  for (auto* p : pts) mean_log += std::log(p->time_us);
  mean_log /= pts.size();
  double ss_res = 0, ss_tot = 0;
  for (auto* p : pts) {
    const double pred = predict_us(f, t.collective, t.gpus, p->bytes);
    rel.push_back(std::fabs(pred - p->time_us) / p->time_us);
    ss_res += std::pow(std::log(pred) - std::log(p->time_us), 2);
    ss_tot += std::pow(std::log(p->time_us) - mean_log, 2);
  }
  f.r2 = ss_tot > 0 ? 1.0 - ss_res / ss_tot : 1.0;
  f.max_rel_error = *std::max_element(rel.begin(), rel.end());
  std::nth_element(rel.begin(), rel.begin() + rel.size() / 2, rel.end());
  f.median_rel_error = rel[rel.size() / 2];
  return f;
}

std::vector<AlphaBetaSegment> fit_piecewise_alpha_beta(const LinkTable& t, double min_bytes, double tolerance) {
  std::vector<LinkPoint> pts;
  for (const auto& p : t.points)
    if (p.bytes >= min_bytes && p.time_us > 0) pts.push_back(p);
  std::sort(pts.begin(), pts.end(), [](const LinkPoint& a, const LinkPoint& b) { return a.bytes < b.bytes; });
  if (pts.size() < 2) throw std::invalid_argument("fit needs at least two points at or above the minimum size");
  auto fit_range = [&](std::size_t i, std::size_t j) {
    LinkTable sub{t.collective, t.gpus, {pts.begin() + static_cast<long>(i), pts.begin() + static_cast<long>(j) + 1}, t.source};
    try {
      return fit_alpha_beta(sub, 0);
    } catch (const std::invalid_argument&) {
      // Times that do not grow with the size (latency-bound, within noise): a constant, the
      // relative-error least-squares level sum(1/t) / sum(1/t^2), and a bandwidth that adds
      // nothing measurable.
      AlphaBetaFit f;
      double a = 0, b = 0;
      for (const auto& p : sub.points) {
        a += 1.0 / p.time_us;
        b += 1.0 / (p.time_us * p.time_us);
      }
      f.alpha_us = a / b;
      f.busbw_GBps = 1e5;
      f.points = static_cast<int>(sub.points.size());
      for (const auto& p : sub.points)
        f.max_rel_error = std::max(f.max_rel_error, std::fabs(predict_us(f, t.collective, t.gpus, p.bytes) - p.time_us) / p.time_us);
      f.median_rel_error = f.max_rel_error;
      return f;
    }
  };
  std::vector<AlphaBetaSegment> out;
  auto alone = [&](std::size_t i) {
    AlphaBetaFit one;
    one.alpha_us = pts[i].time_us;
    one.busbw_GBps = 1e5;
    one.points = 1;
    out.push_back({pts[i].bytes, pts[i].bytes, one});
  };
  for (std::size_t i = 0; i < pts.size();) {
    if (i + 1 == pts.size()) {
      alone(i);
      break;
    }
    // Two points always fit (unless they need a negative latency); grow while the next point
    // still fits within the tolerance. Segments do not share points.
    std::size_t j = i + 1;
    AlphaBetaFit best = fit_range(i, j);
    if (best.max_rel_error > tolerance) {
      alone(i);
      ++i;
      continue;
    }
    while (j + 1 < pts.size()) {
      const AlphaBetaFit f = fit_range(i, j + 1);
      if (f.max_rel_error > tolerance) break;
      best = f;
      ++j;
    }
    out.push_back({pts[i].bytes, pts[j].bytes, best});
    i = j + 1;
  }
  return out;
}

double predict_us(const std::vector<AlphaBetaSegment>& segments, const std::string& collective, int gpus, double bytes) {
  if (segments.empty()) throw std::invalid_argument("no segments");
  for (const auto& s : segments)
    if (bytes <= s.max_bytes) return predict_us(s.fit, collective, gpus, bytes);
  return predict_us(segments.back().fit, collective, gpus, bytes);
}

}  // namespace trainsim::calib

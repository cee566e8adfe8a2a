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

}  // namespace trainsim::calib

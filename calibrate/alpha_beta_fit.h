#pragma once
#include "link_table.h"

namespace trainsim::calib {

// t(S) = alpha + S * factor / busbw, fitted by least squares on relative error (each point weighted
// by 1/t^2, so small and large messages count alike) over points with bytes >= min_bytes.
struct AlphaBetaFit {
  double alpha_us = 0;
  double busbw_GBps = 0;
  double r2 = 0;                // on the fitted points, in log space of time
  double max_rel_error = 0;     // largest |predicted - measured| / measured over the fitted points
  double median_rel_error = 0;
  int points = 0;
};

AlphaBetaFit fit_alpha_beta(const LinkTable& t, double min_bytes);
double predict_us(const AlphaBetaFit& f, const std::string& collective, int gpus, double bytes);

}  // namespace trainsim::calib

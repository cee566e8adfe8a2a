#pragma once
#include <vector>

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

// Piecewise alpha-beta: consecutive size ranges, each fitted on its own, as few as keep every
// measured point at or above min_bytes within `tolerance` (relative). NCCL changes protocol and
// channel count with the message size, so one line over 1 MiB to GiB misses by 10-20%. Segments
// are grown greedily from the smallest size; neighbours share their boundary point.
struct AlphaBetaSegment {
  double min_bytes = 0, max_bytes = 0;
  AlphaBetaFit fit;
};
std::vector<AlphaBetaSegment> fit_piecewise_alpha_beta(const LinkTable& t, double min_bytes, double tolerance);
// The segment covering `bytes` (the first below its range, the last above it).
double predict_us(const std::vector<AlphaBetaSegment>& segments, const std::string& collective, int gpus, double bytes);
double predict_us(const AlphaBetaFit& f, const std::string& collective, int gpus, double bytes);

}  // namespace trainsim::calib

#pragma once
// Collective measurements over message sizes for one collective and group size, as nccl-tests
// reports them (size, time, algbw, busbw, #wrong), wherever they came from.
#include <string>
#include <vector>

namespace trainsim::calib {

struct LinkPoint {
  double bytes = 0;
  double time_us = 0;
  double algbw_GBps = 0;
  double busbw_GBps = 0;
  long wrong = 0;
};

struct LinkTable {
  std::string collective;  // all_reduce | all_gather | reduce_scatter | all_to_all | send_recv | ...
  int gpus = 0;
  std::vector<LinkPoint> points;
  std::string source;      // file or "measured"
};

// nccl-tests' bus-bandwidth factor for a collective over n ranks (doc/PERFORMANCE.md).
double busbw_factor(const std::string& collective, int n);

}  // namespace trainsim::calib

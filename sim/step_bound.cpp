#include "step_bound.h"

#include <algorithm>
#include <vector>

#include "step_work.h"

namespace trainsim::sim {

double step_lower_bound(const StepInput& in) {
  const Layout& L = in.layout;
  const int vpp = L.schedule == Schedule::interleaved ? L.vpp : 1;
  thread_local std::vector<ChunkWork> chunks;
  chunk_work(in, vpp, chunks);
  const double m = microbatches_per_step(in);
  double bound = 0, lead = 0;
  for (int s = 0; s < L.pp; ++s) {
    double per_microbatch = 0;
    for (int c = 0; c < vpp; ++c) {
      const ChunkWork& w = chunks[static_cast<std::size_t>(s) * vpp + c];
      per_microbatch += w.fwd_s + w.recompute_s + w.bwd_s;
    }
    bound = std::max(bound, lead + m * per_microbatch);
    const ChunkWork& first = chunks[static_cast<std::size_t>(s) * vpp];
    lead += first.fwd_s + first.recompute_s + first.bwd_s;
  }
  return bound;
}

}  // namespace trainsim::sim

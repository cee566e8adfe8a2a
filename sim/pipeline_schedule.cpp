#include "pipeline_schedule.h"

#include <algorithm>
#include <array>
#include <map>

namespace trainsim::sim {

namespace {

// Megatron-LM's mapping from the k-th virtual micro-batch of a stage to (micro-batch, chunk).
PipeOp interleaved_op(int k, int pp, int vpp, bool forward) {
  const int group = pp * vpp;
  int chunk = (k % group) / pp;
  if (!forward) chunk = vpp - 1 - chunk;
  const int mb = (k / group) * pp + k % pp;
  return PipeOp{forward, mb, chunk};
}

}  // namespace

int pipeline_warmup(PipelineKind kind, int pp, int vpp, int m, int stage) {
  switch (kind) {
    case PipelineKind::gpipe: return m;
    case PipelineKind::one_f_one_b: return std::min(pp - stage - 1, m);
    case PipelineKind::interleaved:
      // With as many micro-batches as stages every forward runs first (Megatron-LM's all-warm-up case).
      return m == pp ? m * vpp : std::min(2 * (pp - stage - 1) + (vpp - 1) * pp, m * vpp);
  }
  return m;
}

std::vector<PipeOp> pipeline_order(PipelineKind kind, int pp, int vpp, int m, int stage) {
  std::vector<PipeOp> out;
  switch (kind) {
    case PipelineKind::gpipe:
      for (int i = 0; i < m; ++i) out.push_back({true, i, 0});
      for (int i = 0; i < m; ++i) out.push_back({false, i, 0});
      break;
    case PipelineKind::one_f_one_b: {
      const int warm = pipeline_warmup(kind, pp, vpp, m, stage);
      int f = 0, b = 0;
      for (; f < warm; ++f) out.push_back({true, f, 0});
      while (f < m) {
        out.push_back({true, f++, 0});
        out.push_back({false, b++, 0});
      }
      while (b < m) out.push_back({false, b++, 0});
      break;
    }
    case PipelineKind::interleaved: {
      const int total = m * vpp;
      const int warm = pipeline_warmup(kind, pp, vpp, m, stage);
      int f = 0, b = 0;
      for (; f < warm; ++f) out.push_back(interleaved_op(f, pp, vpp, true));
      while (f < total) {
        out.push_back(interleaved_op(f++, pp, vpp, true));
        out.push_back(interleaved_op(b++, pp, vpp, false));
      }
      while (b < total) out.push_back(interleaved_op(b++, pp, vpp, false));
      break;
    }
  }
  return out;
}

int max_inflight(const std::vector<PipeOp>& order) {
  int cur = 0, best = 0;
  for (const auto& op : order) {
    cur += op.forward ? 1 : -1;
    best = std::max(best, cur);
  }
  return best;
}

const std::vector<PipeOp>& cached_pipeline_order(PipelineKind kind, int pp, int vpp, int m, int stage) {
  using Key = std::array<int, 5>;
  thread_local std::map<Key, std::vector<PipeOp>> cache;
  const Key key{static_cast<int>(kind), pp, vpp, m, stage};
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  if (cache.size() > 4096) cache.clear();
  return cache.emplace(key, pipeline_order(kind, pp, vpp, m, stage)).first->second;
}

}  // namespace trainsim::sim

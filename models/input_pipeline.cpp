#include "input_pipeline.h"

#include <algorithm>

namespace trainsim {

InputPipelineResult input_pipeline_time(const DataSpec& spec, double tokens, int stage_gpus, int gpus_per_node, int pp) {
  InputPipelineResult r;
  // Ranks are numbered TP fastest, then DP, then PP: a stage's ranks are consecutive.
  r.loading_nodes = std::max(1, (stage_gpus + gpus_per_node - 1) / gpus_per_node);
  if (spec.loader_tokens_per_s_per_node > 0) r.loader_s = tokens / (spec.loader_tokens_per_s_per_node * r.loading_nodes);
  if (spec.storage_GBps > 0) r.storage_s = tokens * spec.bytes_per_token * (pp > 1 ? 2.0 : 1.0) / (spec.storage_GBps * 1e9);
  r.per_step_s = std::max(r.loader_s, r.storage_s);
  return r;
}

}  // namespace trainsim

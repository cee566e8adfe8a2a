#pragma once
#include <string>

#include "layout.h"
#include "model_config.h"

namespace trainsim {

// The constraints a real framework (Megatron-LM / DeepSpeed) puts on a layout. Returns "" when the
// layout is valid, otherwise one sentence saying which constraint fails.
std::string layout_violation(const ModelConfig& m, const Layout& l, int global_batch, int gpus,
                             int gpus_per_node, bool allow_tp_across_nodes = false);

// Micro-batches per step per pipeline: global_batch / (dp * micro_batch).
int microbatches_per_step(const Layout& l, int global_batch);

}  // namespace trainsim

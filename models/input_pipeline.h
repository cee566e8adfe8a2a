#pragma once
// The input pipeline: loader workers prepare the next step's batch while the current one runs, so a
// step takes the longer of its own time and the time the loaders need for its tokens; the
// difference is exposed as `data_wait`. As Megatron-LM feeds a pipeline, the first stage's ranks
// read the tokens and the last stage's the labels (the same tokens shifted), each set of nodes the
// whole step's worth in parallel: the loading falls on the nodes that hold one stage's
// tensor- and data-parallel ranks, and storage is read twice when there is more than one stage.

namespace trainsim {

struct DataSpec {
  bool given = false;
  double loader_tokens_per_s_per_node = 0;  // what one node's loader workers prepare; 0: unlimited
  double storage_GBps = 0;                  // aggregate read rate of the dataset's storage; 0: unlimited
  double bytes_per_token = 0;               // on storage (2 for uint16 token ids, 4 for uint32)
};

struct InputPipelineResult {
  int loading_nodes = 0;   // nodes that hold the first stage's ranks
  double loader_s = 0;     // their loaders' time for one step's tokens
  double storage_s = 0;    // storage's time for the bytes one step reads
  double per_step_s = 0;   // the longer of the two
};

// One step of `tokens` on a layout whose first stage spans `stage_gpus` GPUs (TP x DP), with
// `gpus_per_node` GPUs per node and `pp` stages.
InputPipelineResult input_pipeline_time(const DataSpec& spec, double tokens, int stage_gpus, int gpus_per_node, int pp);

}  // namespace trainsim

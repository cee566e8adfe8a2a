// The input pipeline: the loaders' time per step against hand-worked numbers, and a step that
// waits for its data.
#include <gtest/gtest.h>

#include "evaluation.h"
#include "input_pipeline.h"
#include "scenario.h"

using namespace trainsim;

// 4M tokens a step; the first stage spans tp 8 x dp 12 = 96 GPUs, 12 nodes of 8. Loaders at 1e5
// tokens/s per node: 4e6 / (1e5 * 12) = 3.333 s. Storage at 2 GB/s, 4 bytes a token, tokens and
// labels both read (pp > 1): 4e6 * 4 * 2 / 2e9 = 16 ms. One stage: the labels come with the
// tokens, 8 ms.
TEST(InputPipeline, LoadersOnOneStagesNodesAndStorageReadTwice) {
  DataSpec d;
  d.given = true;
  d.loader_tokens_per_s_per_node = 1e5;
  d.storage_GBps = 2;
  d.bytes_per_token = 4;
  InputPipelineResult r = input_pipeline_time(d, 4e6, 96, 8, 4);
  EXPECT_EQ(r.loading_nodes, 12);
  EXPECT_NEAR(r.loader_s, 4e6 / 1.2e6, 1e-12);
  EXPECT_NEAR(r.storage_s, 0.016, 1e-15);
  EXPECT_EQ(r.per_step_s, r.loader_s);
  EXPECT_NEAR(input_pipeline_time(d, 4e6, 96, 8, 1).storage_s, 0.008, 1e-15);
  // A stage smaller than a node still loads on one node.
  EXPECT_EQ(input_pipeline_time(d, 4e6, 4, 8, 2).loading_nodes, 1);
  d.loader_tokens_per_s_per_node = 0;  // storage alone
  EXPECT_NEAR(input_pipeline_time(d, 4e6, 96, 8, 4).per_step_s, 0.016, 1e-15);
}

// A step that the loaders cannot keep up with takes the loaders' time; the difference is exposed as
// data_wait, and the breakdown still adds up to the step. Loaders fast enough are hidden.
TEST(InputPipeline, SlowLoadersExposeDataWait) {
  Scenario s = load_scenario(std::string(TRAINSIM_SCENARIOS) + "/llama2-7b-one-node.json", TRAINSIM_PROFILES);
  const int nodes = s.cluster.nodes.front();
  const Layout l = resolve_layout(s, s.layout, s.layout_dp_given, nodes);
  const Evaluation plain = evaluate(s, l, nodes, EvalOptions{});
  const double tokens = static_cast<double>(s.training.global_batch) * s.model.seq_len;
  s.data.given = true;
  // Loaders on one node that need twice the simulated step.
  s.data.loader_tokens_per_s_per_node = tokens / (2.0 * plain.step.step_time_s);
  const Evaluation slow = evaluate(s, l, nodes, EvalOptions{});
  EXPECT_NEAR(slow.step.step_time_s, 2.0 * plain.step.step_time_s, 1e-9 * plain.step.step_time_s);
  EXPECT_NEAR(slow.step.breakdown_s[sim::kDataWait], plain.step.step_time_s, 1e-9 * plain.step.step_time_s);
  double sum = 0;
  for (double b : slow.step.breakdown_s) sum += b;
  EXPECT_NEAR(sum, slow.step.step_time_s, 1e-9 * slow.step.step_time_s);
  EXPECT_NEAR(slow.tokens_per_s, plain.tokens_per_s / 2, 1e-9 * plain.tokens_per_s);
  // Loaders at twice the step's pace: nothing exposed, the step unchanged.
  s.data.loader_tokens_per_s_per_node = 4.0 * tokens / plain.step.step_time_s;
  const Evaluation fast = evaluate(s, l, nodes, EvalOptions{});
  EXPECT_EQ(fast.step.step_time_s, plain.step.step_time_s);
  EXPECT_EQ(fast.step.breakdown_s[sim::kDataWait], 0);
  // A GPU at 90% under loaders that need twice the step: the loaders set both steps, so the
  // stragglers cost nothing.
  s.data.loader_tokens_per_s_per_node = tokens / (2.0 * plain.step.step_time_s);
  s.stragglers.given = true;
  s.stragglers.gpus = {{3, 0.9}};
  EvalOptions opt;
  opt.straggler_baseline = true;
  const Evaluation loader_bound = evaluate(s, l, nodes, opt);
  EXPECT_NEAR(loader_bound.step.step_time_s, 2.0 * plain.step.step_time_s, 1e-9 * plain.step.step_time_s);
  EXPECT_EQ(loader_bound.stragglers.step_without_s, loader_bound.step.step_time_s);
}

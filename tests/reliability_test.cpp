// Failures and checkpoints: Daly's interval and expected wall-clock time against numbers worked by
// hand, and what the planner does with them.
#include <gtest/gtest.h>

#include <cmath>

#include "evaluation.h"
#include "layout_search.h"
#include "reliability.h"
#include "scenario.h"

using namespace trainsim;

// A job failing every M = 10 h = 36,000 s, a checkpoint of delta = 360 s, a restart of
// R = 15 min + 360 s (reading the checkpoint back) = 1,260 s:
//   Young:  sqrt(2 delta M) = sqrt(2 * 360 * 36,000) = 5,091.17 s
//   Daly:   x = delta / (2M) = 0.005; tau = 5,091.17 (1 + sqrt(0.005)/3 + 0.005/9) - 360
//           = 5,091.17 * 1.024126 - 360 = 4,854.0 s
//   wall per work = M e^(R/M) (e^((tau + delta)/M) - 1) / tau
//           = 36,000 * e^0.035 * (e^0.144833 - 1) / 4,854.0 = 36,000 * 1.035620 * 0.155843 / 4,854.0
//           = 1.19702, goodput 0.83541.
TEST(Reliability, DalyIntervalAndWallTimeMatchTheirClosedForms) {
  const double M = 36000, delta = 360, R = 1260;
  EXPECT_NEAR(daly_interval_s(delta, M), 4854.0, 0.5);
  EXPECT_NEAR(daly_wall_per_work(4854.0, delta, R, M), 1.19702, 2e-5);
  // Daly's interval is the minimum of the wall time: 10% either side costs more.
  const double tau = daly_interval_s(delta, M);
  EXPECT_LT(daly_wall_per_work(tau, delta, R, M), daly_wall_per_work(0.9 * tau, delta, R, M));
  EXPECT_LT(daly_wall_per_work(tau, delta, R, M), daly_wall_per_work(1.1 * tau, delta, R, M));
  // Small checkpoints: Young's first-order interval.
  EXPECT_NEAR(daly_interval_s(1.0, 1e7) / std::sqrt(2.0 * 1.0 * 1e7), 1.0, 1e-3);
  // A checkpoint longer than twice the MTBF: checkpoint every MTBF.
  EXPECT_EQ(daly_interval_s(100.0, 40.0), 40.0);
}

// The same job from a scenario's figures: 1,000 GPUs failing every 10,000 h each (M = 10 h); a
// 1e11-parameter model's checkpoint is 14 bytes per parameter, 1.4e12 bytes, written at 3.8889 GB/s
// in 360 s; steps of 60 s put Daly's 4,854 s between 80 steps (4,800 s, goodput 0.835401) and 81
// (4,860 s, goodput 0.835408): 81 is taken.
namespace {
// 1,000 GPUs failing every 10,000 h each, a checkpoint written in 360 s, 15 minutes to restart.
ReliabilitySpec closed_form_job(bool async) {
  ReliabilitySpec spec;
  spec.given = true;
  spec.gpu_mtbf_hours = 10000;
  spec.checkpoint_GBps = 1.4e12 / 360 / 1e9;
  spec.restart_minutes = 15;
  spec.async_checkpoint = async;
  return spec;
}
}  // namespace

TEST(Reliability, ScenarioFiguresGiveTheClosedFormJob) {
  ReliabilitySpec spec = closed_form_job(false);
  const ReliabilityResult r = reliability_for(spec, 1000, 125, 1e11, 60.0);
  EXPECT_NEAR(r.job_mtbf_s, 36000, 1e-6);
  EXPECT_NEAR(r.checkpoint_bytes, 1.4e12, 1);
  EXPECT_NEAR(r.checkpoint_write_s, 360, 1e-9);
  EXPECT_NEAR(r.restart_s, 1260, 1e-9);
  EXPECT_EQ(r.interval_steps, 81);
  EXPECT_NEAR(r.goodput, 0.835408, 2e-6);
  // Node failures add to GPU failures: 125 nodes failing every 1,250 h each double the rate.
  spec.node_mtbf_hours = 1250;
  EXPECT_NEAR(reliability_for(spec, 1000, 125, 1e11, 60.0).job_mtbf_s, 18000, 1e-6);
  // Failures every 3.6 s against a 1,260 s restart: the job never gets anywhere.
  spec.node_mtbf_hours = 0;
  spec.gpu_mtbf_hours = 1;
  const ReliabilityResult never = reliability_for(spec, 1000, 125, 1e11, 60.0);
  EXPECT_TRUE(never.computed);
  EXPECT_LT(never.goodput, 1e-100);
}

// The same job checkpointing asynchronously: each of the 1,000 GPUs copies 1.4e12 / 1,000 bytes to
// host memory at 2.8 GB/s, delta = 0.5 s; the 360 s write runs in the background and adds to the
// rework, R = 1,260 + 360 = 1,620 s. Daly's interval for delta = 0.5 s is
// sqrt(2 * 0.5 * 36,000) (1 + sqrt(0.5/72,000)/3 + 0.5/648,000) - 0.5 = 189.4 s, shorter than the
// write, so tau = 360 s (6 steps of 60 s):
//   wall per work = 36,000 e^(1,620/36,000) (e^(360.5/36,000) - 1) / 360 = 1.052743, goodput 0.949900.
TEST(Reliability, AsynchronousCheckpointsBlockOnlyForTheCopy) {
  const ReliabilityResult r = reliability_for(closed_form_job(true), 1000, 125, 1e11, 60.0, 2.8);
  EXPECT_NEAR(r.checkpoint_blocking_s, 0.5, 1e-12);
  EXPECT_NEAR(r.checkpoint_write_s, 360, 1e-9);
  EXPECT_NEAR(r.rework_s, 1620, 1e-9);
  EXPECT_NEAR(daly_interval_s(0.5, 36000), 189.4, 0.05);
  EXPECT_EQ(r.interval_steps, 6);
  EXPECT_NEAR(r.goodput, 0.949900, 2e-6);
  // Synchronous, the same job keeps 0.835408 (above).
  EXPECT_LT(reliability_for(closed_form_job(false), 1000, 125, 1e11, 60.0, 2.8).goodput, r.goodput);
}

// On the 405B scenario's sweep the bigger clusters fail more often and keep less of their time for
// training; time to train divides by that goodput, and the time-to-train objective ranks by it.
TEST(Reliability, BiggerClustersKeepLessOfTheirTime) {
  const Scenario s = load_scenario(std::string(TRAINSIM_SCENARIOS) + "/llama3-405b-2k-to-16k-gpus.json", TRAINSIM_PROFILES);
  ASSERT_TRUE(s.reliability.given);
  double last = 1.0;
  for (int nodes : s.cluster.nodes) {
    const Layout l = resolve_layout(s, s.layout, false, nodes);
    const Evaluation ev = evaluate(s, l, nodes, EvalOptions{});
    EXPECT_LT(ev.reliability.goodput, last) << nodes;
    last = ev.reliability.goodput;
    const double tokens_per_s_trained = s.training.tokens_total / ev.time_to_train_s;
    EXPECT_NEAR(tokens_per_s_trained / ev.tokens_per_s, ev.reliability.goodput, 1e-12);
    Scenario by_time = s;
    by_time.search.objective = "time_to_train";
    EXPECT_NEAR(objective_value(by_time, ev), ev.tokens_per_s * ev.reliability.goodput, 1e-9 * ev.tokens_per_s);
    Scenario by_cost = s;
    by_cost.search.objective = "cost";
    EXPECT_NEAR(objective_value(by_cost, ev), -ev.gpus / (ev.tokens_per_s * ev.reliability.goodput), 1e-15);
  }
  // A job that never finishes has no time to train (infinite, null in JSON), not the failure-free one.
  Scenario fragile = s;
  fragile.reliability.gpu_mtbf_hours = 0.5;
  const int nodes = s.cluster.nodes.front();
  const Evaluation ev = evaluate(fragile, resolve_layout(fragile, fragile.layout, false, nodes), nodes, EvalOptions{});
  EXPECT_EQ(ev.reliability.goodput, 0.0);
  EXPECT_TRUE(std::isinf(ev.time_to_train_s));
}

// The training step on the engine: schedules, the bubble, buckets, symmetric vs full mode.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "cost_model.h"
#include "evaluation.h"
#include "hardware_profile.h"
#include "input_error.h"
#include "memory_model.h"
#include "model_presets.h"
#include "pipeline_schedule.h"
#include "result_json.h"
#include "scenario.h"
#include "step_builder.h"
#include "stragglers.h"

using namespace trainsim;
using namespace trainsim::sim;

namespace {

const std::string kData = TRAINSIM_TEST_DATA;
const std::string kScenarios = TRAINSIM_SCENARIOS;
const std::string kProfiles = TRAINSIM_PROFILES;

// A random test's scenario and its layout at `nodes`; false for a combination the layout rules
// refuse (heads, layers, batch).
bool parse_random_layout(const std::string& text, int nodes, Scenario& s, Layout& l) {
  try {
    s = parse_scenario(text, "r", kProfiles);
    l = resolve_layout(s, s.layout, false, nodes);
    return true;
  } catch (const InputError&) {
    return false;
  }
}

// A model whose embedding and head are negligible next to its layers (tiny vocabulary), so that
// pipeline stages are equal.
ModelConfig equal_stage_model(int layers) {
  ModelConfig m = *find_model_preset("gpt-1.3b");
  m.layers = layers;
  m.vocab = 8;
  return m;
}

struct Fixture {
  HardwareProfile hw = load_hardware_profile("test-gpu", kData);
  CostModel cost{hw, Precision::bf16};
};

// `dp` data-parallel replicas of `m` spread evenly over `nodes` nodes (a NIC per GPU), each running
// one micro-batch of 8 sequences with the gradients in one bucket: the whole all-reduce follows
// backward and is exposed.
StepInput one_bucket_data_parallel(const Fixture& f, const ModelConfig& m, int dp, int nodes, double nvlink_Bps, double nic_Bps,
                                   double intra_alpha_s, double inter_alpha_s) {
  StepInput in;
  in.model = &m;
  in.layout.dp = dp;
  in.layout.bucket_MB = 1e5;
  in.layout.micro_batch = 8;
  in.global_batch = 8 * dp;
  in.cost = &f.cost;
  in.net.shape.nodes = nodes;
  in.net.shape.gpus_per_node = dp / nodes;
  in.net.shape.nics_per_node = dp / nodes;
  in.net.shape.nvlink_Bps = nvlink_Bps;
  in.net.shape.nic_Bps = nic_Bps;
  in.net.intra_alpha_s = intra_alpha_s;
  in.net.inter_alpha_s = inter_alpha_s;
  return in;
}

StepInput pipeline_input(const Fixture& f, const ModelConfig& m, int pp, int vpp, int microbatches, Schedule sch) {
  StepInput in;
  in.model = &m;
  in.layout.pp = pp;
  in.layout.vpp = vpp;
  in.layout.schedule = sch;
  in.global_batch = microbatches;
  in.cost = &f.cost;
  // Free communication: links far faster than anything else, no latency.
  in.net.shape.nodes = pp;
  in.net.shape.gpus_per_node = 1;
  in.net.shape.nics_per_node = 1;
  in.net.shape.nvlink_Bps = 1e18;
  in.net.shape.nic_Bps = 1e18;
  return in;
}

// One layout of a table-driven test as a scenario; the fields a table leaves out take these values
// (bucket_MB 0: the scenario's default). Sequence parallelism goes with TP.
struct LayoutCase {
  const char* model = "llama2-13b";
  const char* hardware = "h100-sxm";
  int nodes = 16, tp = 8, pp = 1, vpp = 1, mb = 1, zero = 1;
  double bucket_MB = 0;
  const char* schedule = "1f1b";
  const char* recompute = "selective";
  const char* compression = "none";
  const char* network = "";  // a "network" member for the cluster, with its leading comma
  int global_batch = 512;
};

Scenario case_scenario(const LayoutCase& c) {
  char bucket[48] = "";
  if (c.bucket_MB > 0) std::snprintf(bucket, sizeof bucket, R"(, "bucket_MB": %g)", c.bucket_MB);
  char text[2048];
  std::snprintf(text, sizeof text, R"({ "name": "case", "model": "%s", "training": { "global_batch": %d },
    "hardware": "%s", "cluster": { "nodes": %d, "gpus_per_node": 8 %s },
    "layout": { "tp": %d, "pp": %d, "vpp": %d, "micro_batch": %d, "sequence_parallel": %s, "recompute": "%s",
                "zero": %d, "schedule": "%s", "compression": "%s" %s } })",
                c.model, c.global_batch, c.hardware, c.nodes, c.network, c.tp, c.pp, c.vpp, c.mb, c.tp > 1 ? "true" : "false",
                c.recompute, c.zero, c.schedule, c.compression, bucket);
  return parse_scenario(text, "case", kProfiles);
}

// Symmetric mode against full mode for each layout override of the scenario's layout on `nodes`:
// the steps agree within `tolerance` (relative).
void expect_modes_agree(const Scenario& s, std::initializer_list<const char*> overrides, int nodes, double tolerance) {
  for (const char* over : overrides) {
    bool dp = false;
    const Layout l = resolve_layout(s, apply_layout_overrides(s.layout, over, &dp), dp, nodes);
    EvalOptions sym, full;
    full.mode = SimMode::full;
    const double a = evaluate(s, l, nodes, sym).step.step_time_s;
    const double b = evaluate(s, l, nodes, full).step.step_time_s;
    EXPECT_NEAR(a / b, 1.0, tolerance) << over << ": symmetric " << a << " full " << b;
  }
}

// A layout case on its first node count, evaluated in symmetric mode and in full mode.
struct BothModes {
  Scenario s;
  Evaluation sym, full;
};
BothModes both_modes(const LayoutCase& c) {
  BothModes r;
  r.s = case_scenario(c);
  const Layout l = resolve_layout(r.s, r.s.layout, false, c.nodes);
  EvalOptions full;
  full.mode = SimMode::full;
  r.sym = evaluate(r.s, l, c.nodes, EvalOptions{});
  r.full = evaluate(r.s, l, c.nodes, full);
  return r;
}

// Llama 2 7B on 4 nodes of 8 GPUs over `network` (a JSON member), tp 2 · pp 2 interleaved with
// `recompute`, GPU `slow` at 70%: symmetric mode runs one GPU per TP group (16) because of `why`,
// and its step is full mode's within 1e-3.
void expect_one_gpu_per_tp_group(const char* network, const char* recompute, int slow, const char* why) {
  char text[1024];
  std::snprintf(text, sizeof text, R"({ "name": "t", "model": "llama2-7b", "training": { "global_batch": 32 }, "hardware": "h200-sxm",
      "cluster": { "nodes": 4, "gpus_per_node": 8, "network": %s },
      "layout": { "tp": 2, "pp": 2, "vpp": 2, "schedule": "interleaved", "micro_batch": 1, "sequence_parallel": true, "zero": 1,
                  "recompute": "%s", "bucket_MB": 5 },
      "stragglers": { "gpus": [ { "gpu": %d, "speed": 0.7 } ] } })",
                network, recompute, slow);
  const Scenario s = parse_scenario(text, "t.json", kProfiles);
  const Layout l = resolve_layout(s, s.layout, false, 4);
  EvalOptions full;
  full.mode = SimMode::full;
  const Evaluation a = evaluate(s, l, 4, EvalOptions{}), b = evaluate(s, l, 4, full);
  ASSERT_NE(a.step.every_replica_because, nullptr);
  EXPECT_STREQ(a.step.every_replica_because, why);
  EXPECT_EQ(a.step.simulated_gpus, 16);
  EXPECT_NEAR(a.step.step_time_s / b.step.step_time_s, 1.0, 1e-3);
}

}  // namespace

TEST(PipelineSchedule, OrdersAreCompleteAndInflightMatchesMemoryModel) {
  for (auto [kind, sch] : {std::pair{PipelineKind::gpipe, Schedule::gpipe}, std::pair{PipelineKind::one_f_one_b, Schedule::one_f_one_b},
                           std::pair{PipelineKind::interleaved, Schedule::interleaved}}) {
    const int p = 4, v = kind == PipelineKind::interleaved ? 2 : 1, m = 8;
    for (int st = 0; st < p; ++st) {
      const auto order = pipeline_order(kind, p, v, m, st);
      EXPECT_EQ(static_cast<int>(order.size()), 2 * m * v);
      // The memory model's closed form and the schedule agree on what a stage holds.
      EXPECT_EQ(max_inflight(order), inflight_microbatches(sch, p, v, m, st)) << static_cast<int>(kind) << " stage " << st;
    }
  }
}

TEST(Step, OneFOneBBubbleFraction) {
  // Equal stages, free communication: the first stage idles (p - 1)(t_f + t_b) out of
  // (m + p - 1)(t_f + t_b), a bubble fraction of (p - 1)/(m + p - 1) (Narayanan et al. 2021).
  Fixture f;
  const ModelConfig m = equal_stage_model(16);
  for (auto [p, mb] : {std::pair{4, 8}, std::pair{4, 16}, std::pair{8, 8}}) {
    const StepResult r = simulate_step(pipeline_input(f, m, p, 1, mb, Schedule::one_f_one_b));
    const double work = r.step_time_s - r.breakdown_s[kOptimizer];
    EXPECT_NEAR(r.breakdown_s[kBubble] / work, (p - 1.0) / (mb + p - 1.0), 0.01) << p << " " << mb;
  }
}

// The critical path of a recorded step (the chain of tasks each started by the end of the one
// before it) runs from zero to the step's end without a gap, and each of its slices is a task of
// the timeline. With equal stages and free communication, 1F1B's path is the last stage's m
// forward-backward pairs with p - 1 forwards before them and p - 1 backwards after them:
// (m + p - 1)(t_f + t_b), so m + p - 1 forwards and as many backwards.
TEST(Step, TheCriticalPathRunsWithoutAGapFromZeroToTheStep) {
  auto expect_chain = [](const StepResult& r, const std::string& what) {
    SCOPED_TRACE(what);
    ASSERT_FALSE(r.critical_path.empty());
    const double T = r.step_time_s;
    EXPECT_EQ(r.critical_path.front().start_s, 0.0);
    EXPECT_NEAR(r.critical_path.back().end_s, T, 1e-12 * T);
    for (std::size_t i = 0; i + 1 < r.critical_path.size(); ++i)
      ASSERT_NEAR(r.critical_path[i + 1].start_s, r.critical_path[i].end_s, 1e-12 * T) << i;
    for (const TimelineEntry& e : r.timeline) EXPECT_GE(e.end_s - e.start_s, e.uncontended_s - 1e-12 * T) << e.name;
    for (const TimelineEntry& c : r.critical_path) {
      EXPECT_GT(c.end_s, c.start_s);
      const bool found = std::any_of(r.timeline.begin(), r.timeline.end(), [&](const TimelineEntry& e) {
        return e.gpu == c.gpu && e.stream == c.stream && e.start_s == c.start_s && e.end_s == c.end_s && e.name == c.name;
      });
      EXPECT_TRUE(found) << c.name << " on GPU " << c.gpu;
    }
  };
  Fixture f;
  const ModelConfig m = equal_stage_model(16);
  for (auto [p, mb] : {std::pair{4, 8}, std::pair{8, 8}}) {
    StepInput in = pipeline_input(f, m, p, 1, mb, Schedule::one_f_one_b);
    in.record_timeline = true;
    const StepResult r = simulate_step(in);
    expect_chain(r, "1f1b p " + std::to_string(p));
    int forwards = 0, backwards = 0;
    std::map<int, int> gpus;
    for (const TimelineEntry& c : r.critical_path) {
      forwards += c.name.rfind("F mb", 0) == 0;
      backwards += c.name.rfind("B mb", 0) == 0;
      ++gpus[c.gpu];
    }
    EXPECT_EQ(forwards, mb + p - 1) << p;
    EXPECT_EQ(backwards, mb + p - 1) << p;
    EXPECT_EQ(static_cast<int>(gpus.size()), p);  // it runs through every stage
  }
  const Scenario s = load_scenario(kData + "/test-scenario.json", kData);
  EvalOptions traced;
  traced.record_timeline = true;
  for (const char* over : {"", "schedule=gpipe", "pp=4,vpp=2,schedule=interleaved,tp=1,sequence_parallel=false", "pp=1,zero=3", "zero=0,compression=int8"}) {
    bool dp = false;
    const Layout l = resolve_layout(s, apply_layout_overrides(s.layout, over, &dp), dp, 2);
    expect_chain(evaluate(s, l, 2, traced).step, over);
    EvalOptions full = traced;
    full.mode = SimMode::full;
    expect_chain(evaluate(s, l, 2, full).step, std::string("full ") + over);
  }
}

TEST(Step, GpipeHasTheSameBubbleAsOneFOneB) {
  Fixture f;
  const ModelConfig m = equal_stage_model(16);
  const StepResult a = simulate_step(pipeline_input(f, m, 4, 1, 8, Schedule::gpipe));
  const StepResult b = simulate_step(pipeline_input(f, m, 4, 1, 8, Schedule::one_f_one_b));
  EXPECT_NEAR(a.step_time_s, b.step_time_s, 1e-3 * b.step_time_s);
}

TEST(Step, InterleavedBubbleFraction) {
  // Interleaved 1F1B with v chunks per stage: bubble / ideal compute = (p - 1)/(v m).
  Fixture f;
  const ModelConfig m = equal_stage_model(32);
  for (auto [p, v, mb] : {std::tuple{4, 2, 8}, std::tuple{4, 4, 8}, std::tuple{2, 2, 8}}) {
    const StepResult r = simulate_step(pipeline_input(f, m, p, v, mb, Schedule::interleaved));
    const double work = r.step_time_s - r.breakdown_s[kOptimizer] - r.breakdown_s[kBubble];
    EXPECT_NEAR(r.breakdown_s[kBubble] / work, (p - 1.0) / (v * mb), 0.01) << p << " " << v << " " << mb;
  }
}

TEST(Step, BreakdownAddsUpToStepTime) {
  const Scenario s = load_scenario(kData + "/test-scenario.json", kData);
  const Evaluation ev = evaluate(s, resolve_layout(s, s.layout, false, 2), 2, EvalOptions{});
  double sum = 0;
  for (double b : ev.step.breakdown_s) sum += b;
  EXPECT_NEAR(sum, ev.step.step_time_s, 1e-9 * ev.step.step_time_s);
}

TEST(Step, SymmetricAndFullModesAgree) {
  // Where every rank of a stage does the same work, one representative per stage (with its share
  // of the NICs) and every rank on the full topology give the same step within 1%.
  const Scenario s = load_scenario(kData + "/test-scenario.json", kData);
  expect_modes_agree(s, {"", "zero=0,bucket_MB=5", "tp=1,pp=4,sequence_parallel=false", "tp=8,pp=1", "pp=1,zero=3"}, 2, 0.01);
}

TEST(Step, ZeroGatherWaitsForEveryUpdateAndDelaysNone) {
  // ZeRO-1/2 on one node, dp 8: each rank updates its 1/8 shard once its gradients are reduced,
  // then the group all-gathers the updated parameters. The ranks are alike, so every update ends
  // at the same time and the gather starts then: the step is backward, reduction, one update and
  // the gather on every rank, no rank idle, which is what symmetric mode's one rank gives. (An
  // update that waited for a gather issued before it would add a second update's time as bubble.)
  for (int zero : {1, 2}) {
    const BothModes m = both_modes({.model = "gpt-1.3b", .hardware = "h200-sxm", .nodes = 1, .tp = 1, .zero = zero, .global_batch = 16});
    const StepResult &a = m.sym.step, &b = m.full.step;
    EXPECT_EQ(b.simulated_gpus, 8);
    EXPECT_LT(b.breakdown_s[kBubble], 1e-9 * b.step_time_s) << "zero " << zero;
    EXPECT_NEAR(b.breakdown_s[kOptimizer], a.breakdown_s[kOptimizer], 1e-9 * a.step_time_s) << "zero " << zero;
    EXPECT_NEAR(a.step_time_s / b.step_time_s, 1.0, 1e-6) << "zero " << zero;
  }
}

TEST(Step, AStageThatDoesNotFillItsNodesRunsEveryReplicaOrEveryGpu) {
  // tp 2, pp 2 on 3 nodes of 8: a stage is 12 GPUs, a node and a half, so a node holds GPUs of
  // both stages and stage 0's data-parallel rings cross nodes at some members and not at others.
  // One GPU per stage cannot stand for the rest (its own ring hop is NVLink while others cross the
  // network). With a NIC for every GPU (DGX A100: 8), one GPU per TP group still stands for its
  // group: every replica of every stage is simulated (12 of the 24 GPUs), each ring hop on its own
  // links, and the step is full mode's to rounding. With 2 NICs a node, 4 GPUs share a NIC: on
  // node 1, replicas 4 and 5 of stage 0, whose ring hops differ (one enters the node, the other
  // leaves it; their other hops stay on NVLink), so half a NIC each is not what they get: the step
  // is simulated on every GPU, as --mode full does. Both say why. On 6 nodes a stage fills 3 nodes
  // and one representative per stage stands for them (within the modes' 1%); on one node, where
  // no NIC is used, too.
  LayoutCase c{.model = "gpt-1.3b", .hardware = "a100-80g-sxm", .tp = 2, .pp = 2, .zero = 0};
  for (int nodes : {3, 6, 1}) {
    c.nodes = nodes;
    c.global_batch = 8 * nodes;
    const BothModes m = both_modes(c);
    const Scenario& s = m.s;
    const Evaluation &a = m.sym, &b = m.full;
    if (nodes == 3) {
      ASSERT_EQ(s.cluster.network.nics_per_node, 8);
      EXPECT_EQ(a.step.full_because, nullptr);
      ASSERT_NE(a.step.every_replica_because, nullptr);
      EXPECT_STREQ(a.step.every_replica_because, "a pipeline stage's GPUs do not fill whole nodes");
      EXPECT_EQ(a.step.simulated_gpus, 12);
      EXPECT_NEAR(a.step.step_time_s / b.step.step_time_s, 1.0, 1e-9);
      EXPECT_EQ(result_to_json(s, a)["every_replica_simulated_because"], a.step.every_replica_because);
      // Two NICs a node.
      LayoutCase shared = c;
      shared.network = R"(, "network": { "nics_per_node": 2 })";
      const BothModes two = both_modes(shared);
      ASSERT_NE(two.sym.step.full_because, nullptr);
      EXPECT_EQ(two.sym.step.every_replica_because, nullptr);
      EXPECT_EQ(two.sym.step.simulated_gpus, 24);
      nlohmann::json ja = result_to_json(two.s, two.sym);
      EXPECT_EQ(ja["every_gpu_simulated_because"], two.sym.step.full_because);
      ja.erase("every_gpu_simulated_because");
      EXPECT_EQ(ja.dump(), result_to_json(two.s, two.full).dump());
      EXPECT_EQ(two.sym.step.step_time_s, two.full.step.step_time_s);
      // A caller that would rather leave such a step out than wait for it (what-if's fabric rows)
      // gets the reason instead.
      EvalOptions symmetric_only;
      symmetric_only.every_gpu_if_needed = false;
      try {
        evaluate(two.s, two.sym.layout, 3, symmetric_only);
        ADD_FAILURE() << "ran";
      } catch (const sim::NeedsEveryGpu& e) {
        EXPECT_STREQ(e.why, "a pipeline stage's GPUs do not fill whole nodes");
      }
    } else {
      EXPECT_EQ(a.step.full_because, nullptr) << nodes;
      EXPECT_EQ(a.step.simulated_gpus, 2) << nodes;
      EXPECT_NEAR(a.step.step_time_s / b.step.step_time_s, 1.0, 0.01) << nodes;
    }
  }
}

TEST(Step, OnAnOversubscribedFabricStagesThatStraddleLeavesRunOneGpuPerTensorParallelGroup) {
  // Nodes of 8 GPUs and 8 NICs, 4 nodes to a leaf switch, uplinks 4:1 oversubscribed. Symmetric
  // mode gives a representative its leaf's uplink share as if every leaf were alike and each
  // stage's traffic between leaves were all there is, or, where stages lie within one leaf, as if
  // the leaf's stages shared its uplinks GPU for GPU (a last leaf half full holding fewer stages).
  // Through planner simulate on random layouts of 5-64 nodes, one GPU per stage came out up to 41%
  // off one way or the other where stages straddle leaves or a leaf is half full under them, and
  // 13-53% short with NCCL's tree all-reduce across leaves (whose edges load the uplinks unlike a
  // ring's). Such steps run one GPU per TP group instead, every replica of every stage, and say
  // why: each ring, tree or pipeline edge crosses the leaves where it does, on a link of the leaf's
  // uplinks sized for the GPUs of the groups in it (each flow stands for its group's tp flows, so
  // a leaf's tp x R GPUs' share of uplinks carries R flows: C / tp). The step is full mode's to
  // rounding. A caller that would rather leave out a step that needs every GPU gets these. With
  // the uplinks not oversubscribed, or stages of whole leaves or within one, and rings, one GPU
  // per stage still stands for the rest.
  const char* tight = R"(, "network": { "fabric": "fat-tree", "oversubscription": 4, "allreduce_algorithm": "%s" })";
  const char* loose = R"(, "network": { "fabric": "fat-tree", "oversubscription": 1, "allreduce_algorithm": "%s" })";
  struct Case {
    int nodes, tp, pp, zero;
    const char* algorithm;
    const char* misfit;  // the reason symmetric mode gives way, with 4:1 uplinks (nullptr: none)
  };
  const Case cases[] = {
      {6, 8, 1, 1, "ring", "the nodes do not fill whole leaf switches of the oversubscribed fabric"},
      {12, 8, 4, 1, "ring", "pipeline stages straddle leaf switches of the oversubscribed fabric"},  // stages of 3 nodes
      {8, 8, 4, 1, "ring", nullptr},   // two stages a leaf, which share its uplinks
      {8, 8, 8, 1, "ring", nullptr},   // four stages a leaf: only the transfers between leaves cross its uplinks
      {6, 8, 3, 1, "ring", nullptr},   // stages of 2 nodes, the last leaf half full with one of them
      {8, 1, 1, 0, "tree", "NCCL's tree all-reduce crosses the leaf switches of the oversubscribed fabric"},
      {8, 1, 1, 0, "ring", nullptr},
      {8, 8, 2, 1, "ring", nullptr},  // a stage a leaf: only the pipeline crosses the uplinks
  };
  for (const Case& k : cases)
    for (const char* net : {tight, loose}) {
      char network[200];
      std::snprintf(network, sizeof network, net, k.algorithm);
      LayoutCase c{.model = "gpt-350m", .hardware = "h100-sxm", .nodes = k.nodes, .tp = k.tp, .pp = k.pp, .zero = k.zero, .network = network};
      c.global_batch = 4 * 8 * k.nodes / k.tp;
      const BothModes m = both_modes(c);
      const StepResult &a = m.sym.step, &b = m.full.step;
      const std::string what = std::to_string(k.nodes) + " nodes " + describe(m.sym.layout) + network;
      ASSERT_EQ(m.s.cluster.network.nics_per_node, 8);
      const char* expected = net == tight ? k.misfit : nullptr;
      // A caller may ask for symmetric mode or nothing (what-if's fabric rows in a report): then
      // such a step throws, naming the reason, rather than running on every GPU.
      EvalOptions symmetric_only;
      symmetric_only.every_gpu_if_needed = false;
      if (expected) {
        EXPECT_EQ(a.full_because, nullptr) << what;
        ASSERT_NE(a.every_replica_because, nullptr) << what;
        EXPECT_STREQ(a.every_replica_because, expected) << what;
        EXPECT_EQ(a.simulated_gpus, 8 * k.nodes / k.tp) << what;
        EXPECT_NEAR(a.step_time_s / b.step_time_s, 1.0, 1e-9) << what;
        EXPECT_EQ(evaluate(m.s, m.sym.layout, k.nodes, symmetric_only).step.step_time_s, a.step_time_s) << what;
      } else {
        EXPECT_EQ(a.full_because, nullptr) << what;
        EXPECT_EQ(a.every_replica_because, nullptr) << what;
        EXPECT_EQ(a.simulated_gpus, k.pp) << what;
        EXPECT_NEAR(a.step_time_s / b.step_time_s, 1.0, 0.005) << what;
        EXPECT_EQ(evaluate(m.s, m.sym.layout, k.nodes, symmetric_only).step.step_time_s, a.step_time_s) << what;
      }
    }
  // Rail-optimized, 4 nodes to a group of rail switches at 4:1, stages of 3 nodes. A rail switch
  // carries one NIC index of each node, with uplinks of its own: with tp 8 every TP group has one
  // GPU on each rail. With tp 4 or 2 a data-parallel group's members sit on rails 0-3 in one
  // replica and 4-7 in the next (or pairs of rails), and NCCL hands their traffic between rails
  // inside the node, through the NIC of the GPU on the receiver's rail (PXN), which is another
  // group's representative: one GPU per group stands for its group on either fabric, with the
  // hand-over and each rail's uplinks as full mode has them.
  const char* rails = R"(, "network": { "fabric": "rail-optimized", "nics_per_leaf": 4, "oversubscription": 4, "allreduce_algorithm": "ring" })";
  for (int tp : {8, 4, 2}) {
    LayoutCase c{.model = "gpt-350m", .hardware = "h100-sxm", .nodes = 12, .tp = tp, .pp = 4, .zero = 1, .network = rails};
    c.global_batch = 4 * 96 / (4 * tp);
    const BothModes m = both_modes(c);
    const StepResult &a = m.sym.step, &b = m.full.step;
    EXPECT_EQ(a.full_because, nullptr) << tp;
    ASSERT_NE(a.every_replica_because, nullptr) << tp;
    EXPECT_STREQ(a.every_replica_because, "pipeline stages straddle leaf switches of the oversubscribed fabric");
    EXPECT_EQ(a.simulated_gpus, 96 / tp) << tp;
    EXPECT_NEAR(a.step_time_s / b.step_time_s, 1.0, 1e-9) << tp;
  }
}

TEST(Step, OneGpuPerTensorParallelGroupNeedsItsNicsAtOneSpeedAndASharedNicsGroupsAlike) {
  // 12 nodes of 8 GPUs and 8 NICs under fat-tree leaves of 4 nodes at 4:1, tp 8 · pp 4: stages of
  // 3 nodes straddle the leaves, so one GPU per TP group is simulated. A representative sends at
  // its group's slowest NIC; with node 0's NIC 0 alone at half speed the group's other seven rings
  // would run at full speed beside it, so the step runs on every GPU; with all eight of node 0's
  // NICs at half speed the representative stands for its group again, and agrees with full mode.
  for (const char* nics : {R"({ "node": 0, "nic": 0, "speed": 0.5 })",
                           R"({ "node": 0, "nic": 0, "speed": 0.5 }, { "node": 0, "nic": 1, "speed": 0.5 }, { "node": 0, "nic": 2, "speed": 0.5 },
                              { "node": 0, "nic": 3, "speed": 0.5 }, { "node": 0, "nic": 4, "speed": 0.5 }, { "node": 0, "nic": 5, "speed": 0.5 },
                              { "node": 0, "nic": 6, "speed": 0.5 }, { "node": 0, "nic": 7, "speed": 0.5 })"}) {
    const bool one = std::string(nics).find("\"nic\": 1") == std::string::npos;
    const std::string text = R"({ "name": "t", "model": "gpt-350m", "training": { "global_batch": 96 }, "hardware": "h100-sxm",
        "cluster": { "nodes": 12, "gpus_per_node": 8,
                     "network": { "nics_per_node": 8, "fabric": "fat-tree", "oversubscription": 4, "allreduce_algorithm": "ring" } },
        "layout": { "tp": 8, "pp": 4, "micro_batch": 1, "sequence_parallel": true, "zero": 1 },
        "stragglers": { "nics": [ )" + std::string(nics) + " ] } }";
    const Scenario s = parse_scenario(text, "t.json", kProfiles);
    const Layout l = resolve_layout(s, s.layout, false, 12);
    EvalOptions full;
    full.mode = SimMode::full;
    const StepResult a = evaluate(s, l, 12, EvalOptions{}).step, b = evaluate(s, l, 12, full).step;
    if (one) {
      ASSERT_NE(a.full_because, nullptr);
      EXPECT_STREQ(a.full_because, "pipeline stages straddle leaf switches of the oversubscribed fabric");
      EXPECT_EQ(a.simulated_gpus, 96);
    } else {
      EXPECT_EQ(a.full_because, nullptr);
      ASSERT_NE(a.every_replica_because, nullptr);
      EXPECT_EQ(a.simulated_gpus, 12);
    }
    EXPECT_NEAR(a.step_time_s / b.step_time_s, 1.0, 1e-9) << nics;
  }
  // The reason, as replica_mode_misfit gives it.
  StepInput in;
  in.layout.tp = 8;
  in.net.shape.nodes = 2;
  in.net.shape.gpus_per_node = 8;
  in.net.shape.nics_per_node = 8;
  in.net.shape.nic_speed.assign(16, 1.0);
  EXPECT_EQ(replica_mode_misfit(in), nullptr);
  in.net.shape.nic_speed[9] = 0.5;
  ASSERT_NE(replica_mode_misfit(in), nullptr);
  EXPECT_STREQ(replica_mode_misfit(in), "a tensor-parallel group's NICs run at different speeds");
  // GPUs of different TP groups that share a NIC (tp 1, 4 NICs for 8 GPUs: pairs) take half of it
  // each only while they send alike: a slow GPU beside a fast one does not, so one GPU per stage
  // cannot stand for them. One per TP group can: the groups on a NIC share its links
  // (SymmetricPaths), each getting more of it while the others wait.
  in.net.shape.nic_speed.clear();
  in.net.shape.nics_per_node = 4;
  in.layout.tp = 1;
  in.layout.dp = 16;
  const std::vector<double> alike(16, 0.8);
  in.gpu_speed = &alike;
  EXPECT_EQ(symmetric_mode_misfit(in), nullptr);
  std::vector<double> unlike(16, 1.0);
  unlike[3] = 0.7;
  in.gpu_speed = &unlike;
  ASSERT_NE(symmetric_mode_misfit(in), nullptr);
  EXPECT_STREQ(symmetric_mode_misfit(in), "tensor-parallel groups sharing a NIC run at different speeds");
  EXPECT_EQ(replica_mode_misfit(in), nullptr);
  in.layout.tp = 2;  // each pair one group, which runs at its slower GPU
  in.layout.dp = 8;
  EXPECT_EQ(symmetric_mode_misfit(in), nullptr);
  // End to end: Llama 2 7B on 4 nodes of 8 GPUs with one 200 Gb/s NIC each (4 TP pairs to a NIC),
  // pp 2 interleaved, GPU 9 at 70%. Each replica simulated as if every replica were like the slow
  // one had every pair on a NIC send at once at the slow one's pace: 2.1% long against full mode.
  // One GPU per TP pair, the pairs of a NIC sharing it, is within what a pair's members waiting
  // for each other at the group's slowest GPU leaves (the fast member of the slow pair starts its
  // ring earlier in full mode): 7e-4 here, held to 1e-3.
  expect_one_gpu_per_tp_group(R"({ "nics_per_node": 1, "nic_Gbps": 200, "fabric": "fat-tree", "oversubscription": 2,
                                  "nics_per_leaf": 8, "allreduce_algorithm": "ring" })",
                              "none", 9, "tensor-parallel groups sharing a NIC run at different speeds");
}

TEST(Step, TpGroupsSharingALeafsUplinksAtDifferentSpeedsRunOneGpuPerGroup) {
  // Pipeline transfers between stages on different leaves of an oversubscribed fabric share the
  // leaf's uplinks with the other replicas' transfers. Replicas at one speed send theirs together
  // and split the uplinks; a slow replica's come after the fast ones' and get more of them. Each
  // replica simulated as if every replica were like it has them all send together: too slow.
  StepInput in;
  in.layout.tp = 2;
  in.layout.pp = 2;
  in.layout.dp = 8;
  in.net.shape.nodes = 4;
  in.net.shape.gpus_per_node = 8;
  in.net.shape.nics_per_node = 4;
  in.net.shape.fabric = Fabric::fat_tree;
  in.net.shape.nics_per_leaf = 4;  // a node to a leaf: each stage's two nodes on two leaves
  in.net.shape.oversubscription = 4;
  std::vector<double> speed(32, 1.0);
  in.gpu_speed = &speed;
  EXPECT_EQ(symmetric_mode_misfit(in), nullptr);
  speed[5] = 0.7;  // replica 2 of stage 0, on node 0 with replicas 0-3
  ASSERT_NE(symmetric_mode_misfit(in), nullptr);
  EXPECT_STREQ(symmetric_mode_misfit(in), "tensor-parallel groups whose pipeline transfers share a leaf's uplinks run at different speeds");
  EXPECT_EQ(replica_mode_misfit(in), nullptr);
  speed[4] = 0.7;  // the same group: its speed is unchanged
  EXPECT_NE(symmetric_mode_misfit(in), nullptr);
  in.net.shape.oversubscription = 1;  // uplinks that never bind
  EXPECT_EQ(symmetric_mode_misfit(in), nullptr);
  in.net.shape.oversubscription = 4;
  in.net.shape.nics_per_leaf = 8;  // a stage to a leaf: the transfers leave the leaf as before
  EXPECT_NE(symmetric_mode_misfit(in), nullptr);
  in.layout.pp = 1;  // no transfers
  in.layout.dp = 16;
  EXPECT_EQ(symmetric_mode_misfit(in), nullptr);
  // End to end: Llama 2 7B on 4 nodes of 8 GPUs and 4 NICs of 100 Gb/s, a node to a leaf under
  // 4:1 uplinks, tp 2 · pp 2 interleaved, GPU 5 at 70%. Each replica as if every replica were like
  // the slow one: 1.9% long against full mode (1.2-1.8% with the other schedules, with selective
  // recompute and at 2:1). One GPU per TP group: 4e-4 (rounding with ZeRO-0), held to 1e-3.
  expect_one_gpu_per_tp_group(R"({ "nics_per_node": 4, "nic_Gbps": 100, "fabric": "fat-tree", "oversubscription": 4,
                                  "nics_per_leaf": 4, "allreduce_algorithm": "ring" })",
                              "full", 5, "tensor-parallel groups whose pipeline transfers share a leaf's uplinks run at different speeds");
}

TEST(Step, AStepRunOnEveryGpuBecauseSymmetricModeCannotIsReadOffItsSteadyStateToo) {
  // 6 nodes of 8 GPUs and 2 NICs, tp 2 · pp 4: stages of a node and a half, whose TP pairs share
  // NICs with another stage's and whose rings leave the node at some members only
  // (AStageThatDoesNotFillItsNodesRunsEveryReplicaOrEveryGpu), so the step runs on every GPU.
  // There, as in symmetric mode, a long
  // 1F1B or interleaved schedule is read off its steady state from fewer micro-batches where the
  // run shows it repeating (only a repeat it checks, or a drift under 1e-3 of the step; where none
  // shows, every micro-batch is simulated after all, as for this small interleaved pipeline in
  // either mode); full mode asked for (`--mode full`) simulates every micro-batch. The two agree
  // to 1e-9 here.
  const char* network = R"(, "network": { "nics_per_node": 2, "fabric": "fat-tree", "allreduce_algorithm": "ring" })";
  for (const char* schedule : {"1f1b", "interleaved"}) {
    const BothModes m = both_modes({.model = "gpt-350m", .hardware = "h100-sxm", .nodes = 6, .tp = 2, .pp = 4,
                                    .vpp = std::string(schedule) == "interleaved" ? 2 : 1, .zero = 1, .schedule = schedule,
                                    .network = network, .global_batch = 6 * 48});
    const int microbatches = 48;
    ASSERT_NE(m.sym.step.full_because, nullptr) << schedule;
    EXPECT_STREQ(m.sym.step.full_because, "a pipeline stage's GPUs do not fill whole nodes");
    EXPECT_EQ(m.sym.step.simulated_gpus, 48) << schedule;
    if (std::string(schedule) == "1f1b") {
      EXPECT_GT(m.sym.step.simulated_microbatches, 0);
      EXPECT_LT(m.sym.step.simulated_microbatches, microbatches);
    }
    EXPECT_EQ(m.full.step.simulated_microbatches, microbatches) << schedule;
    EXPECT_NEAR(m.sym.step.step_time_s / m.full.step.step_time_s, 1.0, 1e-9) << schedule;
    for (int c = 0; c < sim::kCategories; ++c)
      EXPECT_NEAR(m.sym.step.breakdown_s[c], m.full.step.breakdown_s[c], 1e-9 * m.full.step.step_time_s) << schedule << " " << c;
  }
}

TEST(Step, StagesWithinOneLeafShareItsUplinks) {
  // 8 nodes of 8 GPUs and 8 NICs, 4 nodes to a fat-tree leaf (32 ports), tp 8 · pp 8: a stage is
  // one node, so each leaf holds four stages and only the pipeline's transfers between stages 3
  // and 4 cross the uplinks, at most one stage's a direction a leaf. A leaf's uplinks carry
  // 4 nodes x 8 NICs x B / r each way, so the 8 flows of stage 3's transfer get min(B, 4B/r) each:
  // the full NIC up to r = 4, so the step at 4:1 is the step at 1:1; at 8:1 they get B/2, and the
  // step is longer. Symmetric mode, whose representatives of a leaf's four stages share one link of
  // 4 x B / r each way, gives full mode's step at each ratio (a link per representative of B / r,
  // as for stages of whole leaves, would halve their rate at 2:1 already).
  double step_at[3] = {};
  const int ratios[3] = {1, 4, 8};
  for (int i = 0; i < 3; ++i) {
    char network[160];
    std::snprintf(network, sizeof network,
                  R"(, "network": { "nics_per_node": 8, "fabric": "fat-tree", "oversubscription": %d, "allreduce_algorithm": "ring" })", ratios[i]);
    const BothModes m = both_modes({.model = "gpt-350m", .hardware = "h100-sxm", .nodes = 8, .tp = 8, .pp = 8, .zero = 1,
                                    .network = network, .global_batch = 32});
    ASSERT_EQ(m.sym.step.full_because, nullptr) << ratios[i];
    EXPECT_EQ(m.sym.step.simulated_gpus, 8);
    EXPECT_NEAR(m.sym.step.step_time_s / m.full.step.step_time_s, 1.0, 1e-9) << ratios[i];
    step_at[i] = m.sym.step.step_time_s;
  }
  EXPECT_NEAR(step_at[1] / step_at[0], 1.0, 1e-12);
  EXPECT_GT(step_at[2], step_at[1] * (1 + 1e-6));
}

TEST(Step, WithMoreNicsThanGpusAGpuGetsMoreThanItsNicsShareOfAFatTreeLeafsUplinks) {
  // 8 nodes of 4 GPUs and 8 NICs of rate B, 2 nodes to a fat-tree leaf (16 ports), a DP ring over
  // all 32 GPUs. Each GPU sends by one NIC (its rail), but a leaf's uplinks serve all 16 of its
  // NICs: 16 B / r each way, 2 B / r for each of its 8 GPUs. A ring with 2 of its nodes in a leaf
  // sends half its node-crossing traffic between leaves, so it loads the uplinks at B / 2 a GPU
  // while its NICs run at B: the uplinks do not bind up to r = 4, and the step at 4:1 is the step
  // at 1:1; at 8:1 they give a GPU B / 4 and the ring slows. Symmetric mode, taking a GPU's share
  // of its leaf's uplinks as a share of its own NIC (B / r), made the step at 4:1 60% longer than
  // full mode's; with the leaf's every NIC counted, the modes agree at each ratio.
  double step_at[3] = {};
  const int ratios[3] = {1, 4, 8};
  for (int i = 0; i < 3; ++i) {
    char text[1024];
    std::snprintf(text, sizeof text, R"({ "name": "nics", "model": "gpt-1.3b", "training": { "global_batch": 64 }, "hardware": "h100-sxm",
      "cluster": { "nodes": 8, "gpus_per_node": 4, "network": { "nics_per_node": 8, "nic_Gbps": 100, "fabric": "fat-tree",
                   "oversubscription": %d, "nics_per_leaf": 16, "allreduce_algorithm": "ring" } },
      "layout": { "tp": 1, "pp": 1, "micro_batch": 1, "zero": 0, "recompute": "none" } })", ratios[i]);
    const Scenario s = parse_scenario(text, "nics", kProfiles);
    const Layout l = resolve_layout(s, s.layout, false, 8);
    EvalOptions full;
    full.mode = SimMode::full;
    const StepResult sym = evaluate(s, l, 8, EvalOptions{}).step;
    ASSERT_EQ(sym.full_because, nullptr) << ratios[i];
    EXPECT_EQ(sym.simulated_gpus, 1);
    EXPECT_NEAR(sym.step_time_s / evaluate(s, l, 8, full).step.step_time_s, 1.0, 1e-9) << ratios[i];
    step_at[i] = sym.step_time_s;
  }
  EXPECT_NEAR(step_at[1] / step_at[0], 1.0, 1e-12);
  EXPECT_GT(step_at[2], step_at[1] * 1.01);
}

TEST(Step, NodesWhoseGpusDoNotSpreadEvenlyOverTheirNicsRunOnEveryGpu) {
  // 4 nodes of 8 GPUs, a DP ring over all 32. A GPU sends across nodes by its rail's NIC: with 1, 2
  // or 4 NICs every NIC serves 8, 4 or 2 GPUs and a representative's 1/8 of the node's NICs is what
  // each GPU gets, so the modes agree; with 3 or 6, GPUs 0-7 fall on NICs 0,0,0,1,1,1,2,2 or
  // 0,0,1,2,3,3,4,5, the GPUs that share a NIC most pace the ring, and 1/8 of the node's NICs came
  // out 8% and 22% short. Those steps run on every GPU and say why.
  for (int nics : {1, 2, 3, 4, 6}) {
    char text[1024];
    std::snprintf(text, sizeof text, R"({ "name": "odd", "model": "gpt-1.3b", "training": { "global_batch": 64 }, "hardware": "h100-sxm",
      "cluster": { "nodes": 4, "gpus_per_node": 8, "network": { "nics_per_node": %d, "nic_Gbps": 100, "fabric": "single-switch",
                   "allreduce_algorithm": "ring" } },
      "layout": { "tp": 1, "pp": 1, "micro_batch": 2, "zero": 0, "recompute": "none" } })", nics);
    const Scenario s = parse_scenario(text, "odd", kProfiles);
    const Layout l = resolve_layout(s, s.layout, false, 4);
    EvalOptions full;
    full.mode = SimMode::full;
    const StepResult sym = evaluate(s, l, 4, EvalOptions{}).step;
    EXPECT_NEAR(sym.step_time_s / evaluate(s, l, 4, full).step.step_time_s, 1.0, 1e-9) << nics;
    if (8 % nics == 0) {
      EXPECT_EQ(sym.full_because, nullptr) << nics;
      EXPECT_EQ(sym.simulated_gpus, 1) << nics;
    } else {
      ASSERT_NE(sym.full_because, nullptr) << nics;
      EXPECT_STREQ(sym.full_because, "the node's GPUs do not spread evenly over its NICs");
    }
  }
}

TEST(Step, ATreeOfTwoRanksAcrossOversubscribedLeavesIsOneEdgeEachWayAsARing) {
  // 4 nodes of 8 GPUs and 8 NICs, a fat-tree leaf of 8 ports to each node, uplinks 4:1, NCCL's
  // tree forced for every all-reduce. tp 8 · pp 2 makes data-parallel groups of 2 GPUs on two
  // leaves, and the tied embedding's gradient all-reduce pairs GPUs of the first and the last
  // stage, on other leaves again: a tree of two ranks sends one edge each way across the uplinks,
  // as a ring of two does, so one GPU per stage stands for the rest and the modes agree. A data-
  // parallel tree of 4 ranks over the 4 leaves (tp 8 alone) loads them unlike a ring: it runs one
  // GPU per TP group, each tree edge on the links it crosses, and agrees with full mode too.
  const char* network = R"(, "network": { "nics_per_node": 8, "nics_per_leaf": 8, "fabric": "fat-tree", "oversubscription": 4, "allreduce_algorithm": "tree" })";
  const BothModes two = both_modes({.model = "gpt-350m", .hardware = "h100-sxm", .nodes = 4, .tp = 8, .pp = 2, .zero = 0,
                                    .network = network, .global_batch = 16});
  EXPECT_EQ(two.sym.step.full_because, nullptr);
  EXPECT_EQ(two.sym.step.simulated_gpus, 2);
  EXPECT_NEAR(two.sym.step.step_time_s / two.full.step.step_time_s, 1.0, 1e-9);
  const BothModes four = both_modes({.model = "gpt-350m", .hardware = "h100-sxm", .nodes = 4, .tp = 8, .pp = 1, .zero = 0,
                                     .network = network, .global_batch = 16});
  EXPECT_EQ(four.sym.step.full_because, nullptr);
  ASSERT_NE(four.sym.step.every_replica_because, nullptr);
  EXPECT_STREQ(four.sym.step.every_replica_because, "NCCL's tree all-reduce crosses the leaf switches of the oversubscribed fabric");
  EXPECT_EQ(four.sym.step.simulated_gpus, 4);
  EXPECT_NEAR(four.sym.step.step_time_s / four.full.step.step_time_s, 1.0, 1e-9);
}

TEST(Step, TiedEmbeddingGradientsAreSummedAcrossThePipelineBeforeTheOptimizer) {
  // GPT 350M (tied embeddings) over 2 nodes of one GPU, pp 2, dp 1, one 25 Gb/s NIC each at
  // efficiency 1 and 10 us latency (not the profile's network, so no measured curve rescales it).
  // The last stage keeps a copy of the V x h word embedding for the logits, and the two copies'
  // fp32 gradients, S = 4 V h bytes, are all-reduced between the two GPUs, as Megatron-LM and the
  // step runner do: a ring of 2 on an idle link takes 2(n-1)/n S/B + 2(n-1) alpha = S/B + 2 alpha,
  // and each GPU sends 2(n-1)/n S = S. It starts once both stages' last backward is done (there is
  // no data-parallel traffic to wait for), and both optimizers start when it ends. Untied, there
  // is none.
  auto scenario = [](bool tied) {
    char text[1024];
    std::snprintf(text, sizeof text, R"({ "name": "tied", "model": { "preset": "gpt-350m", "tied_embeddings": %s },
      "training": { "global_batch": 8 }, "hardware": "h100-sxm",
      "cluster": { "nodes": 2, "gpus_per_node": 1, "network": { "nics_per_node": 1, "nic_Gbps": 25, "efficiency": 1.0,
                   "latency_us": 10, "fabric": "single-switch" } },
      "layout": { "tp": 1, "pp": 2, "micro_batch": 1, "zero": 0, "recompute": "none" } })", tied ? "true" : "false");
    return parse_scenario(text, "tied", kProfiles);
  };
  EvalOptions traced;
  traced.record_timeline = true;
  const char* name = "tied embedding grad all_reduce";
  const Scenario s = scenario(true);
  const Layout l = resolve_layout(s, s.layout, false, 2);
  const StepResult r = evaluate(s, l, 2, traced).step;
  const ModelConfig m = with_padded_vocab(s.model, 1);
  const double S = 4.0 * m.vocab * m.hidden, B = 25e9 / 8, alpha = 10e-6;
  double start = 1e300, end = 0, busy = 0, last_backward = 0;
  for (const sim::TimelineEntry& e : r.timeline)
    if (e.name == name) start = std::min(start, e.start_s), end = std::max(end, e.end_s), busy += e.end_s - e.start_s;
    else if (e.name.rfind("B mb", 0) == 0) last_backward = std::max(last_backward, e.end_s);
  ASSERT_GT(busy, 0);
  EXPECT_NEAR(busy, S / B + 2 * alpha, 1e-9 * busy);
  EXPECT_NEAR(start, last_backward, 1e-12);
  int optimizers = 0;
  for (const sim::TimelineEntry& e : r.timeline)
    if (e.name == "optimizer") {
      EXPECT_GE(e.start_s, end - 1e-12);
      ++optimizers;
    }
  EXPECT_EQ(optimizers, 2);
  EXPECT_NEAR(r.dp_bytes_per_gpu, S, 1e-9 * S);
  const Scenario u = scenario(false);
  const StepResult ru = evaluate(u, resolve_layout(u, u.layout, false, 2), 2, traced).step;
  for (const sim::TimelineEntry& e : ru.timeline) EXPECT_NE(e.name, name);
  EXPECT_EQ(ru.dp_bytes_per_gpu, 0.0);
}

TEST(Step, ATreeNodesFlowsToDifferentNodesStayApartBesideAPipelineTransfer) {
  // 6 nodes of 8 GPUs and 8 NICs, tp 8 · pp 2, DDP over NCCL's tree: on each rail a tree over a
  // stage's 3 nodes, and stage 1's last backward transfer overlaps a gradient bucket. The
  // representative's node sends one tree edge to one node and two to another: two flows, which
  // with the transfer share its NIC three ways in full mode. Symmetric mode gives both destinations
  // the representative's own links; merged into one flow there, the transfer got half the NIC and
  // the step came out 0.13% short (10% on 64 nodes of 2 NICs without sequence parallelism). Kept
  // apart, the modes agree to rounding.
  const BothModes m = both_modes({.model = "gpt-1.3b", .hardware = "h200-sxm", .nodes = 6, .tp = 8, .pp = 2, .mb = 2, .zero = 0,
                                  .bucket_MB = 25, .recompute = "none",
                                  .network = R"(, "network": { "nics_per_node": 8, "nic_Gbps": 100, "fabric": "single-switch", "allreduce_algorithm": "tree" })",
                                  .global_batch = 24});
  EXPECT_EQ(m.sym.step.full_because, nullptr);
  EXPECT_NEAR(m.sym.step.step_time_s / m.full.step.step_time_s, 1.0, 1e-9);
}

TEST(Step, TheTpLatenciesFusedIntoAComputeTaskAreNotSlowedByCommunicationBesideIt) {
  // TP 8, ZeRO-2 over 3 nodes on the measured H200 (GEMMs 35% slower beside NCCL): the gradient
  // reduce-scatters overlap the backward passes. Full mode runs each TP collective as tasks of its
  // own, off the processor, so the slowdown stretches only the GEMMs; symmetric mode fuses them
  // into the pass's task, whose TP latencies must stay unstretched too (stretched, this layout's
  // step came out 4.2% longer than full mode's). The modes then agree exactly, up to rounding.
  const BothModes m =
      both_modes({.model = "gpt-350m", .hardware = "h200-sxm", .nodes = 3, .tp = 8, .zero = 2, .recompute = "none", .global_batch = 12});
  ASSERT_GT(m.s.hardware.comm_compute_interference, 0.3);
  const StepResult &a = m.sym.step, &b = m.full.step;
  EXPECT_EQ(a.full_because, nullptr);
  EXPECT_NEAR(a.step_time_s / b.step_time_s, 1.0, 1e-9);
}

TEST(Step, PipelineTransfersSlowComputeByThePointToPointFigure) {
  // Llama 2 7B over 8 pipeline stages in one node (tp 1, dp 1, untied embeddings): the pipeline
  // transfers are its only communication, so the GEMM slowdown beside communication reaches the
  // step through them alone. They slow compute by the profile's point-to-point figure where it has
  // one: at 0 the step is the one without any slowdown (to rounding: the compute then runs on a
  // processor that never slows), and the all-reduce's figure given as the point-to-point one
  // changes nothing. A profile without the figure charges the all-reduce's, which does lengthen the
  // step (transfers overlap the next micro-batch's compute), and half of it falls in between.
  const Scenario base = case_scenario({.model = "llama2-7b", .hardware = "h200-sxm", .nodes = 1, .tp = 1, .pp = 8, .zero = 0,
                                       .recompute = "none", .global_batch = 32});
  const double x = base.hardware.comm_compute_interference;
  ASSERT_GT(x, 0.3);
  ASSERT_EQ(base.hardware.p2p_compute_interference, -1);
  auto step = [&](double comm, double p2p) {
    Scenario s = base;
    s.hardware.comm_compute_interference = comm;
    s.hardware.p2p_compute_interference = p2p;
    return evaluate(s, resolve_layout(s, s.layout, false, 1), 1, EvalOptions{}).step.step_time_s;
  };
  const double none = step(0, -1), all_reduce = step(x, -1);
  EXPECT_NEAR(step(x, 0) / none, 1.0, 1e-12);
  EXPECT_EQ(step(x, x), all_reduce);
  EXPECT_NEAR(step(0, x) / all_reduce, 1.0, 1e-12);
  EXPECT_GT(all_reduce, none * (1 + 1e-6));
  const double half = step(x, x / 2);
  EXPECT_GT(half, none * (1 + 1e-6));
  EXPECT_LT(half, all_reduce);
}

TEST(Step, SymmetricAndFullAgreeOnRandomLayouts) {
  // Random layouts on 1-4 nodes of 8 GPUs (TP, PP with every schedule, ZeRO 0-3, recompute,
  // buckets, compression, NIC counts and rates, a forced all-reduce algorithm): where symmetric
  // mode applies, it gives full mode's step within 0.5% (the largest of some 1,000 random layouts
  // of 1-4 nodes, on every fabric, tried through planner simulate was 0.3%); where it does not,
  // it is full mode.
  std::mt19937 rng(7);
  auto pick = [&](std::initializer_list<int> v) { return *(v.begin() + std::uniform_int_distribution<int>(0, static_cast<int>(v.size()) - 1)(rng)); };
  const char* models[] = {"gpt-125m", "gpt-350m", "gpt-1.3b"};
  const char* hardware[] = {"h200-sxm", "h100-sxm", "a100-80g-sxm"};
  const char* schedules[] = {"1f1b", "gpipe", "interleaved"};
  const char* recomputes[] = {"none", "selective", "full"};
  const char* compressions[] = {"none", "fp16", "int8", "topk:0.01", "powersgd:4"};
  const char* algorithms[] = {"auto", "ring", "tree"};
  int compared = 0, full_ones = 0;
  for (int i = 0; i < 48; ++i) {
    LayoutCase c;
    c.model = models[pick({0, 1, 2})];
    c.hardware = hardware[pick({0, 1, 2})];
    c.nodes = pick({1, 2, 3, 4});
    c.tp = pick({1, 2, 4, 8});
    c.pp = pick({1, 2, 4});
    const int gpus = 8 * c.nodes;
    if ((gpus / c.tp) % c.pp != 0) continue;
    const int dp = gpus / (c.tp * c.pp);
    c.mb = pick({1, 2});
    c.global_batch = dp * c.mb * pick({2, 4, 8});
    c.schedule = c.pp > 1 ? schedules[pick({0, 1, 2})] : "1f1b";
    c.vpp = std::string(c.schedule) == "interleaved" ? 2 : 1;
    if (c.vpp == 2 && (c.global_batch / (dp * c.mb)) % c.pp != 0) c.global_batch = dp * c.mb * c.pp;
    c.recompute = recomputes[pick({0, 1, 2})];
    c.zero = pick({0, 1, 2, 3});
    c.bucket_MB = pick({5, 25, 100});
    c.compression = compressions[pick({0, 1, 2, 3, 4})];
    char network[160];
    std::snprintf(network, sizeof network, R"(, "network": { "nics_per_node": %d, "nic_Gbps": %d, "allreduce_algorithm": "%s" })",
                  pick({1, 2, 8}), pick({25, 100, 400}), algorithms[pick({0, 1, 2})]);
    c.network = network;
    BothModes m;
    try {
      m = both_modes(c);
    } catch (const InputError&) {
      continue;  // a combination the scenario rules refuse (ZeRO-3 with pipelines, say)
    }
    const Evaluation &a = m.sym, &b = m.full;
    if (!a.simulated) continue;  // out of memory
    EXPECT_NEAR(a.step.step_time_s / b.step.step_time_s, 1.0, 0.005)
        << m.s.hardware.name << " " << c.nodes << " nodes " << describe(a.layout) << network;
    ++compared;
    full_ones += a.step.full_because != nullptr;
  }
  std::printf("[ info ] %d random layouts compared, %d simulated on every GPU\n", compared, full_ones);
  EXPECT_GE(compared, 20);
}

TEST(Step, SymmetricAndFullAgreeOnRandomLayoutsOverOversubscribedLeaves) {
  // Random layouts on 8 or 16 nodes of 8 GPUs and 8 NICs, 4 nodes to a leaf (fat-tree, leaves of
  // 32 NIC ports) or to a group of rail switches (rail-optimized, switches of 4 node ports), uplinks
  // 2:1 or 4:1, rings (trees across such leaves
  // run on every GPU): where symmetric mode applies (each stage whole leaves or within one) it gives full mode's
  // step within 1.5%. The draws here come within 0.06%. The tolerance is not a bound: through
  // planner simulate, 83 random pipelines of 16-64 nodes of this kind came within 0.02% at the
  // 90th percentile, but one GPipe layout (pp 8 over stages of two leaves, 25 GbE, none of that
  // kind drawn here) 2.2% long; before the representative's traffic took its leaf's links down as
  // well as up, and shared them between rings and transfers, layouts came out up to 27% short.
  std::mt19937 rng(11);
  auto pick = [&](std::initializer_list<int> v) { return *(v.begin() + std::uniform_int_distribution<int>(0, static_cast<int>(v.size()) - 1)(rng)); };
  const char* fabrics[] = {R"("fabric": "fat-tree")", R"("fabric": "rail-optimized", "nics_per_leaf": 4)"};
  const char* compressions[] = {"none", "fp16", "int8"};
  int compared = 0, full_ones = 0;
  double worst = 0;
  for (int i = 0; i < 40; ++i) {
    LayoutCase c;
    c.model = pick({0, 1}) ? "gpt-350m" : "gpt-125m";
    c.nodes = pick({8, 16});
    c.tp = pick({1, 2, 4, 8});
    c.pp = pick({1, 2, 4});
    const int dp = 8 * c.nodes / (c.tp * c.pp);
    c.global_batch = dp * c.pp * pick({1, 2});
    c.schedule = c.pp > 1 && pick({0, 1}) ? "interleaved" : "1f1b";
    c.vpp = std::string(c.schedule) == "interleaved" ? 2 : 1;
    c.zero = pick({0, 1, 2});
    c.compression = compressions[pick({0, 1, 2})];
    char network[200];
    std::snprintf(network, sizeof network,
                  R"(, "network": { "nics_per_node": 8, "nic_Gbps": %d, %s, "oversubscription": %d, "allreduce_algorithm": "ring" })",
                  pick({100, 400}), fabrics[pick({0, 1})], pick({2, 4}));
    c.network = network;
    BothModes m;
    try {
      m = both_modes(c);
    } catch (const InputError&) {
      continue;
    }
    const Evaluation &a = m.sym, &b = m.full;
    if (!a.simulated) continue;
    EXPECT_NEAR(a.step.step_time_s / b.step.step_time_s, 1.0, 0.015) << c.nodes << " nodes " << describe(a.layout) << network;
    worst = std::max(worst, std::abs(a.step.step_time_s / b.step.step_time_s - 1));
    ++compared;
    full_ones += a.step.full_because != nullptr;
  }
  std::printf("[ info ] %d random layouts over oversubscribed leaves compared, %d simulated on every GPU; largest difference %.2g\n",
              compared, full_ones, worst);
  EXPECT_GE(compared, 10);
  EXPECT_LT(full_ones, compared);
}

TEST(Step, SymmetricAndFullAgreeOnAnOversubscribedFatTree) {
  // 4 nodes, 2 per leaf, uplinks 2:1 oversubscribed; pure DP ring across all nodes (a tree there
  // runs on every GPU: OnAnOversubscribedFabricOneGpuPerStageNeedsStagesThatDoNotStraddleLeaves).
  Fixture f;
  const ModelConfig m = *find_model_preset("gpt-350m");
  for (int nics : {1, 8}) {
    StepInput in;
    in.model = &m;
    in.layout.dp = 32;
    in.global_batch = 64;
    in.cost = &f.cost;
    in.net.shape.nodes = 4;
    in.net.shape.gpus_per_node = 8;
    in.net.shape.nics_per_node = nics;
    in.net.shape.nics_per_leaf = 2 * nics;
    in.net.shape.oversubscription = 2.0;
    in.net.shape.nvlink_Bps = 100e9;
    in.net.shape.nic_Bps = 10e9;
    in.net.shape.fabric = Fabric::fat_tree;
    in.net.allreduce_algorithm = Algorithm::ring;
    const StepResult r = simulate_step(in);
    EXPECT_EQ(r.full_because, nullptr);
    const double sym = r.step_time_s;
    in.mode = SimMode::full;
    const double full = simulate_step(in).step_time_s;
    EXPECT_NEAR(sym / full, 1.0, 0.02) << nics << " NICs: symmetric " << sym << " full " << full;
  }
}

TEST(Step, OnARailOptimizedFabricTrafficBetweenNodesStaysOnItsRail) {
  // 8 nodes of 8 GPUs and 8 NICs, 4 nodes to a group of rail switches, pure data parallelism on a
  // ring. NCCL keeps each ring channel on one NIC index on every node (PXN hands the data to that
  // NIC's GPU over NVLink), so a channel leaves and enters each group of rail switches once:
  // on its rail switch's uplink it is the only flow each way, at most one NIC's rate, which 4:1
  // oversubscription of 4 NICs still gives. The step is the one over uplinks of full capacity,
  // exactly, in both modes. (Sent across rails, every hop between nodes went through the spine
  // and this step came out 96% longer in full mode.)
  Fixture f;
  const ModelConfig m = *find_model_preset("gpt-350m");
  {
    double step[2][2];
    for (int o = 0; o < 2; ++o)
      for (int full = 0; full < 2; ++full) {
        StepInput in;
        in.model = &m;
        in.layout.dp = 64;
        in.global_batch = 128;
        in.cost = &f.cost;
        in.mode = full ? SimMode::full : SimMode::symmetric;
        in.net.allreduce_algorithm = Algorithm::ring;
        in.net.shape.nodes = 8;
        in.net.shape.gpus_per_node = 8;
        in.net.shape.nics_per_node = 8;
        in.net.shape.nics_per_leaf = 4;  // a rail switch's node ports
        in.net.shape.oversubscription = o ? 4.0 : 1.0;
        in.net.shape.nvlink_Bps = 200e9;
        in.net.shape.nic_Bps = 25e9;
        in.net.shape.fabric = Fabric::rail_optimized;
        const StepResult r = simulate_step(in);
        EXPECT_EQ(r.full_because, nullptr);
        step[o][full] = r.step_time_s;
      }
    EXPECT_EQ(step[1][1], step[0][1]);
    EXPECT_NEAR(step[1][0] / step[1][1], 1.0, 1e-9);
    EXPECT_NEAR(step[0][0] / step[0][1], 1.0, 1e-9);
  }
}

TEST(Step, SymmetricAndFullAgreeWithFewerGpusThanNics) {
  // One or two GPUs per node on nodes with 8 NICs: each GPU sends over its own rail's NIC, so one
  // representative per stage must get one NIC's rate, not the node's eight.
  Fixture f;
  const ModelConfig m = *find_model_preset("gpt-350m");
  for (int gpn : {1, 2}) {
    StepInput in;
    in.model = &m;
    in.layout.dp = 2 * gpn;
    in.global_batch = 4 * gpn;
    in.cost = &f.cost;
    in.net.shape.nodes = 2;
    in.net.shape.gpus_per_node = gpn;
    in.net.shape.nics_per_node = 8;
    in.net.shape.nvlink_Bps = 100e9;
    in.net.shape.nic_Bps = 1e9;
    in.net.shape.fabric = Fabric::single_switch;
    const double sym = simulate_step(in).step_time_s;
    in.mode = SimMode::full;
    const double full = simulate_step(in).step_time_s;
    EXPECT_NEAR(sym / full, 1.0, 0.02) << gpn << " GPUs per node: symmetric " << sym << " full " << full;
  }
}

TEST(Step, SymmetricAndFullAgreeOnRackSizedNvlinkDomains) {
  // Two GB200 NVL72 racks (a node is a 72-GPU NVLink domain, 72 NICs): with tp 4 and pp 2 each
  // stage fills a rack, so its 18-way data parallelism stays on NVLink and only the pipeline
  // crosses the NICs; with pp 1 the 36-way DP ring crosses both. One representative per stage and
  // every GPU on the full topology give the same step.
  const std::string text = R"({ "name": "nvl", "model": "llama3-8b", "training": { "global_batch": 144 },
      "hardware": "gb200-nvl72", "cluster": { "nodes": 2 },
      "layout": { "tp": 4, "pp": 2, "micro_batch": 1, "sequence_parallel": true, "zero": 1 } })";
  const Scenario s = parse_scenario(text, "nvl", kProfiles);
  EXPECT_EQ(s.cluster.gpus_per_node, 72);
  EXPECT_EQ(s.cluster.network.nics_per_node, 72);
  expect_modes_agree(s, {"", "pp=1"}, 2, 0.02);
}

TEST(Step, BucketSizeHasAnInteriorOptimum) {
  // Small buckets pay the per-collective latency many times; one huge bucket cannot start until
  // backward ends, so nothing overlaps. Built to show both: 16 data-parallel GPUs over 2 nodes
  // with 50 us of latency per ring step, one micro-batch of 8 sequences so that backward (about
  // 75 ms) is longer than the 1.4 GB gradient all-reduce (about 35 ms).
  Fixture f;
  const ModelConfig m = *find_model_preset("gpt-350m");
  std::vector<std::pair<double, double>> times;
  for (double mb : {0.25, 1.0, 4.0, 16.0, 64.0, 256.0, 4096.0}) {
    StepInput in;
    in.model = &m;
    in.layout.dp = 16;
    in.layout.bucket_MB = mb;
    in.layout.micro_batch = 8;
    in.global_batch = 128;
    in.cost = &f.cost;
    in.net.shape.nodes = 2;
    in.net.shape.gpus_per_node = 8;
    in.net.shape.nics_per_node = 8;
    in.net.shape.nvlink_Bps = 100e9;
    in.net.shape.nic_Bps = 10e9;
    in.net.intra_alpha_s = 50e-6;
    in.net.inter_alpha_s = 50e-6;
    in.net.allreduce_algorithm = Algorithm::ring;
    times.push_back({mb, simulate_step(in).step_time_s});
  }
  const auto best = std::min_element(times.begin(), times.end(), [](auto& a, auto& b) { return a.second < b.second; });
  EXPECT_NE(best, times.begin()) << "smallest bucket should not be best";
  EXPECT_NE(best, times.end() - 1) << "one bucket should not be best";
  EXPECT_LT(best->second, 0.95 * times.front().second);
  EXPECT_LT(best->second, 0.95 * times.back().second);
}

TEST(Step, AllReduceAlgorithmIsForcedOrPickedBySize) {
  // Four data-parallel GPUs, one per node behind a 10 GB/s NIC, the gradients S in one bucket
  // (which cannot start before backward ends, so the whole all-reduce is exposed). On idle links:
  //   ring: 2(n-1) a + 2(n-1)/n S/B = 6a + 1.5 S/B (each GPU sends 1.5 S);
  //   tree: 2 log2(4) a + 1.5 S/B = 4a + 1.5 S/B: two trees over the 4 nodes with S/2 both ways
  //         on each edge; GPU 0 has a parent and a child in one (S) and is a leaf in the other.
  // Forcing one runs it whatever the size. Automatic takes NCCL's tuner's pick, which prices the
  // tree's bandwidth at n/(0.92 (n-1)) = 1.449 times the ring's time per byte: the tree when the
  // latency saved, 2a, outweighs 0.449 x 1.5 S/B, the ring otherwise, though the flows run the
  // tree 2a faster either way.
  Fixture f;
  const ModelConfig m = *find_model_preset("gpt-350m");
  auto step = [&](Algorithm algo, double alpha) {
    StepInput in = one_bucket_data_parallel(f, m, 4, 4, 100e9, 10e9, 5e-6, alpha);
    in.net.allreduce_algorithm = algo;
    return simulate_step(in);
  };
  std::vector<bool> picks_tree;
  for (double a : {0.1, 0.001}) {
    const StepResult ring = step(Algorithm::ring, a), tree = step(Algorithm::tree, a), automatic = step(Algorithm::automatic, a);
    const double S = ring.dp_bytes_per_gpu / 1.5, B = 10e9;
    EXPECT_NEAR(tree.dp_bytes_per_gpu, 1.5 * S, 1e-6 * S);
    const double ring_s = 6 * a + 1.5 * S / B;
    EXPECT_NEAR(ring.breakdown_s[kDpComm], ring_s, 0.01 * ring_s) << "a = " << a;
    EXPECT_NEAR(ring.step_time_s - tree.step_time_s, 2 * a, 1e-3 * ring_s) << "a = " << a;
    picks_tree.push_back(2 * a > (4.0 / (0.92 * 3) - 1) * 1.5 * S / B);
    const StepResult& picked = picks_tree.back() ? tree : ring;
    EXPECT_EQ(automatic.step_time_s, picked.step_time_s) << "a = " << a;
  }
  EXPECT_EQ(picks_tree, (std::vector<bool>{true, false})) << "each latency takes a different algorithm";
}

TEST(Step, NvlsPricesAnAllReduceInsideANodeByItsCurve) {
  // Eight data-parallel GPUs in one node, the gradients S in one bucket after backward, so the
  // whole all-reduce is exposed. With NVLS on, the h200-sxm profile's imported 8-GPU curve prices
  // it: on idle links the exposed time is that curve's time at S. Without, the ring model at the
  // profile's 310 GB/s: 2(n-1) alpha + 1.75 S/B.
  Fixture f;
  const ModelConfig m = *find_model_preset("gpt-350m");
  const HardwareProfile hp = load_hardware_profile("h200-sxm", kProfiles);
  auto step = [&](bool nvls) {
    StepInput in = one_bucket_data_parallel(f, m, 8, 1, hp.intra_busbw_GBps * 1e9, 50e9, hp.intra_latency_us * 1e-6, 0.0);
    if (nvls) in.net.intra_measured = measured_collectives(hp.intra_nvls_collectives);
    return simulate_step(in);
  };
  const StepResult ring = step(false), nvls = step(true);
  const double S = ring.dp_bytes_per_gpu / 1.75;
  const double ring_s = 14 * hp.intra_latency_us * 1e-6 + 1.75 * S / (hp.intra_busbw_GBps * 1e9);
  EXPECT_NEAR(ring.breakdown_s[kDpComm], ring_s, 0.01 * ring_s);
  const double curve_s = sim::measured_time_s(measured_collectives(hp.intra_nvls_collectives).at(0), S);
  EXPECT_NEAR(nvls.breakdown_s[kDpComm], curve_s, 0.01 * curve_s);
  EXPECT_LT(curve_s, 0.75 * ring_s) << "S = " << S;  // about 310/470 of the ring's time at GB sizes
}

TEST(Step, SlowNetworkGetsSlowerWithMoreNodes) {
  // The 25 GbE example: on one node the gradients are summed over NVLink; from two nodes on, the
  // all-reduce of S = 5.3 GB of fp32 gradients crosses one 25 Gb/s port per node. A ring over n
  // GPUs sends 2(n-1)/n S through each node's port whatever the node count: 1.875 x 5.3 GB over
  // 0.9 x 3.125 GB/s = 3.5 s on 2 nodes (n = 16), 3.7 s on 4, while one node's whole step is about
  // one second. So 2 and 4 nodes give fewer tokens/s than 1, and exposed DP communication is why.
  const Scenario s = load_scenario(kScenarios + "/slow-network-25gbe.json", kProfiles);
  double one = 0;
  for (int nodes : {1, 2, 4}) {
    const Layout l = resolve_layout(s, s.layout, false, nodes);
    const Evaluation ev = evaluate(s, l, nodes, EvalOptions{});
    if (nodes == 1) one = ev.tokens_per_s;
    else {
      EXPECT_LT(ev.tokens_per_s, one) << nodes << " nodes";
      EXPECT_GT(ev.step.breakdown_s[kDpComm], 0.5 * ev.step.step_time_s) << "the reason is DP communication";
    }
  }
}

TEST(Step, CompressionCutsExposedDpTimeOnASlowNetwork) {
  const Scenario s = load_scenario(kScenarios + "/slow-network-25gbe.json", kProfiles);
  auto dp_time = [&](const char* comp) {
    bool dp = false;
    const Layout l = resolve_layout(s, apply_layout_overrides(s.layout, std::string("compression=") + comp, &dp), false, 2);
    return evaluate(s, l, 2, EvalOptions{}).step.breakdown_s[kDpComm];
  };
  const double none = dp_time("none"), fp16 = dp_time("fp16"), int8 = dp_time("int8"), topk = dp_time("topk:0.01");
  EXPECT_NEAR(fp16 / none, 0.5, 0.05);
  EXPECT_NEAR(int8 / none, 0.25, 0.05);
  EXPECT_LT(topk, int8);
}

TEST(Step, DeterministicOutput) {
  const Scenario s = load_scenario(kData + "/test-scenario.json", kData);
  const Layout l = resolve_layout(s, s.layout, false, 2);
  EvalOptions opt;
  opt.mode = SimMode::full;
  const std::string a = result_to_json(s, evaluate(s, l, 2, opt)).dump();
  const std::string b = result_to_json(s, evaluate(s, l, 2, opt)).dump();
  EXPECT_EQ(a, b);
}

TEST(Step, SteadyStateMatchesSimulatingEveryMicroBatch) {
  // In symmetric mode a long schedule is read off its steady state (one shorter run whose last
  // period repeats the one before). It must give the step time, breakdown and bytes of simulating
  // every micro-batch, across schedules, ZeRO stages, compression, recompute and networks where
  // data-parallel traffic overlaps the pipeline. Where compute sets the pace it must engage (fewer
  // micro-batches simulated); where pipeline transfers contend on a slow NIC the step is not
  // periodic (the forward and backward sends of a stage share its port in a pattern that drifts)
  // and it must fall back to simulating every micro-batch, as it must for GPipe.
  // This holds exactly for a schedule whose only coupling is through links. With the profile's
  // measured GEMM slowdown while NCCL runs (comm-compute interference), transfers stretch the
  // compute they overlap and a stage's lag can build up over many micro-batches: one repeating
  // period no longer proves the rest of the schedule periodic, and the reading is held to 1e-3 of
  // the exact one instead (the cases below differ by at most 5e-5 of the step).
  struct Case {
    LayoutCase layout;
    bool periodic;
  };
  const char* const nic100x1 = R"(, "network": { "nic_Gbps": 100, "nics_per_node": 1 })";
  const char* const nic25x1 = R"(, "network": { "nic_Gbps": 25, "nics_per_node": 1 })";
  const Case cases[] = {
      // Interleaved runs are read off a run of 3 pp micro-batches (the state at two cuts a period
      // apart) or 4 pp (two whole periods), so the step needs more than that to gain.
      {{.model = "gpt3-175b", .nodes = 64, .pp = 8, .vpp = 3, .schedule = "interleaved", .global_batch = 1024}, true},
      {{.model = "gpt3-175b", .nodes = 64, .pp = 8, .zero = 0, .recompute = "full"}, true},
      // A deep pipeline whose last stage (with the head) is the slowest.
      {{.model = "mt-nlg-530b", .nodes = 280, .pp = 35, .global_batch = 960}, true},
      {{.model = "gpt3-175b", .nodes = 32, .tp = 4, .pp = 16, .mb = 2, .schedule = "gpipe", .recompute = "full", .compression = "int8"}, false},
      {{.model = "gpt3-175b", .nodes = 32, .tp = 4, .pp = 16, .vpp = 2, .schedule = "interleaved", .global_batch = 1024}, true},
      // ZeRO-2 and -3 (no pipeline): reduce-scatters, and gathers, every micro-batch.
      {{.nodes = 8, .zero = 2, .global_batch = 256}, true},
      {{.nodes = 8, .zero = 3, .network = nic100x1, .global_batch = 256}, true},
      {{.nodes = 8, .tp = 2, .pp = 4, .zero = 0, .recompute = "none", .compression = "topk:0.01", .network = nic25x1, .global_batch = 256}, false},
      {{.nodes = 8, .tp = 2, .pp = 4, .vpp = 2, .schedule = "interleaved", .network = nic100x1, .global_batch = 256}, false},
      {{.nodes = 8, .tp = 2, .pp = 4, .vpp = 2, .schedule = "interleaved",
        .network = R"(, "network": { "nic_Gbps": 400, "nics_per_node": 8 })"}, true},
      // Transfers alternate with compute: a period of two micro-batches.
      {{.model = "gpt-1.3b", .nodes = 4, .tp = 1, .pp = 2, .mb = 2, .zero = 0, .recompute = "none", .network = nic25x1}, true},
  };
  double worst_with_interference = 0;
  for (const Case& c : cases) {
    Scenario s = case_scenario(c.layout);
    const int nodes = c.layout.nodes;
    const double measured_interference = s.hardware.comm_compute_interference;
    ASSERT_GT(measured_interference, 0.0);
    for (const double interference : {0.0, measured_interference}) {
      s.hardware.comm_compute_interference = interference;
      const double tol = interference > 0 ? 1e-3 : 1e-6;
      const Layout l = resolve_layout(s, s.layout, false, nodes);
      EvalOptions fast, exact;
      exact.steady_state = false;
      const Evaluation a = evaluate(s, l, nodes, fast), b = evaluate(s, l, nodes, exact);
      const std::string what = describe(l) + (interference > 0 ? " with interference" : "");
      const int m = s.training.global_batch / (l.dp * l.micro_batch);
      if (interference == 0) {
        if (c.periodic) EXPECT_LT(a.step.simulated_microbatches, m) << what;
        else EXPECT_GE(a.step.simulated_microbatches, m) << what;
      }
      EXPECT_EQ(b.step.simulated_microbatches, m) << what;
      EXPECT_NEAR(a.step.step_time_s / b.step.step_time_s, 1.0, tol) << what;
      if (interference > 0)
        worst_with_interference = std::max(worst_with_interference, std::fabs(a.step.step_time_s / b.step.step_time_s - 1.0));
      double sum = 0;
      for (int k = 0; k < kCategories; ++k) {
        EXPECT_NEAR(a.step.breakdown_s[k], b.step.breakdown_s[k], tol * b.step.step_time_s) << what << " " << category_name(k);
        sum += a.step.breakdown_s[k];
      }
      EXPECT_NEAR(sum, a.step.step_time_s, 1e-6 * a.step.step_time_s) << what;
      EXPECT_NEAR(a.step.dp_bytes_per_gpu, b.step.dp_bytes_per_gpu, 1e-6 * b.step.dp_bytes_per_gpu + 1) << what;
    }
  }
  std::printf("[ info ] steady-state reading with the measured interference: at most %.1e of the exact step\n",
              worst_with_interference);
}

TEST(Step, InterleavedStepIsReadOffAStateThatRepeatsAPeriodLater) {
  // GPT-3 175B on 1,024 A100s, tp 8 pp 8 dp 16 over 3 virtual stages, 96 micro-batches (the
  // benchmark layout). Its period is 8 micro-batches, and a whole period twice over needs 32
  // simulated; comparing the schedule's state at two cuts a period apart (every task the rest waits
  // for, and every task still running once the rest has begun, their starts and ends lambda apart)
  // needs 24. The reading is exact: the step, the breakdown and the bytes of simulating all 96, to
  // 1e-9, with and without the measured comm/compute interference, on 24 micro-batches.
  Scenario s = case_scenario({.model = "gpt3-175b", .hardware = "a100-80g-sxm", .nodes = 128, .pp = 8, .vpp = 3,
                              .schedule = "interleaved", .global_batch = 1536});
  const double measured = s.hardware.comm_compute_interference;
  ASSERT_GT(measured, 0.0);
  for (const double interference : {0.0, measured}) {
    s.hardware.comm_compute_interference = interference;
    const Layout l = resolve_layout(s, s.layout, false, 128);
    EvalOptions fast, exact;
    exact.steady_state = false;
    const Evaluation a = evaluate(s, l, 128, fast), b = evaluate(s, l, 128, exact);
    ASSERT_EQ(b.step.simulated_microbatches, 96);
    EXPECT_EQ(a.step.simulated_microbatches, 24) << interference;
    EXPECT_NEAR(a.step.step_time_s / b.step.step_time_s, 1.0, 1e-9) << interference;
    for (int k = 0; k < kCategories; ++k)
      EXPECT_NEAR(a.step.breakdown_s[k], b.step.breakdown_s[k], 1e-9 * b.step.step_time_s) << interference << " " << category_name(k);
    EXPECT_NEAR(a.step.dp_bytes_per_gpu, b.step.dp_bytes_per_gpu, 1e-9 * b.step.dp_bytes_per_gpu);
    EXPECT_NEAR(a.step.tp_bytes_per_gpu, b.step.tp_bytes_per_gpu, 1e-9 * b.step.tp_bytes_per_gpu);
  }
}

TEST(Step, AnInterleavedStepIsReadOffTwoCutsWhereThatTakesNoMoreMicroBatchesThanTwoPeriods) {
  // GPT 1.3B and Llama 2 7B on 4 nodes of H100s, tp 2 pp 4 dp 4 over 2 virtual stages, 128
  // micro-batches. Both readings need 16 micro-batches here. Under the measured comm/compute
  // slowdown, the last period of a 16- or 24-micro-batch run differs from the one before by the
  // same 9e-5 s (an effect of the run's end, not a drift), which the two-period reading cannot
  // accept over 28 more periods, so every micro-batch was simulated after both tries (168 in
  // all). The state at two cuts a period apart repeats exactly: the step is read off 16, the
  // full simulation's to 1e-9.
  for (const char* model : {"gpt-1.3b", "llama2-7b"}) {
    const Scenario s = case_scenario({.model = model, .nodes = 4, .tp = 2, .pp = 4, .vpp = 2, .schedule = "interleaved", .global_batch = 512});
    const Layout l = resolve_layout(s, s.layout, false, 4);
    ASSERT_GT(s.hardware.comm_compute_interference, 0.0);
    EvalOptions fast, exact;
    exact.steady_state = false;
    const Evaluation a = evaluate(s, l, 4, fast), b = evaluate(s, l, 4, exact);
    ASSERT_EQ(b.step.simulated_microbatches, 128) << model;
    EXPECT_EQ(a.step.simulated_microbatches, 16) << model;
    EXPECT_NEAR(a.step.step_time_s / b.step.step_time_s, 1.0, 1e-9) << model;
    for (int k = 0; k < kCategories; ++k)
      EXPECT_NEAR(a.step.breakdown_s[k], b.step.breakdown_s[k], 1e-9 * b.step.step_time_s) << model << " " << category_name(k);
  }
}

TEST(Step, EveryCutReadingOfRandomInterleavedLayoutsIsExact) {
  // Random interleaved layouts (models, hardware, TP, PP, virtual stages, micro-batch, ZeRO 0/1,
  // NIC speed and count, fabric, compression, bucket size, a straggler GPU), each read off its
  // steady state and simulated in full. Those read off the state at two cuts (3 pp micro-batches)
  // must give the full simulation's step and breakdown to 1e-9: that reading accepts only an exact
  // repeat, and its argument is exact. The others are held to the two-period reading's 1e-3.
  std::mt19937 rng(11);
  auto pick = [&](std::initializer_list<int> v) { return *(v.begin() + rng() % v.size()); };
  const char* models[] = {"gpt3-175b", "llama2-13b", "gpt-1.3b", "llama3-70b"};
  const char* hardware[] = {"a100-80g-sxm", "h100-sxm", "h200-sxm"};
  const char* fabrics[] = {"", R"(, "fabric": "fat-tree", "oversubscription": 2)", R"(, "fabric": "rail-optimized")"};
  const char* compressions[] = {"none", "int8", "topk:0.01", "fp16"};
  int cut = 0, compared = 0;
  for (int i = 0; i < 160; ++i) {
    const int pp = pick({2, 4, 8}), nodes = pick({4, 8, 16, 32});
    const std::string text = std::string(R"({ "name": "r", "model": ")") + models[rng() % 4] + R"(", "training": { "global_batch": )" +
                             std::to_string(pick({256, 512, 1024})) + R"( }, "hardware": ")" + hardware[rng() % 3] +
                             R"(", "cluster": { "nodes": )" + std::to_string(nodes) + R"(, "gpus_per_node": 8, "network": { "nic_Gbps": )" +
                             std::to_string(pick({25, 100, 400})) + R"(, "nics_per_node": )" + std::to_string(pick({1, 8})) +
                             fabrics[rng() % 3] + " } }" +
                             (rng() % 4 == 0 ? R"(, "stragglers": { "gpus": [ { "gpu": 3, "speed": 0.8 } ] })" : "") +
                             R"(, "layout": { "tp": )" + std::to_string(pick({1, 2, 4, 8})) + R"(, "pp": )" + std::to_string(pp) +
                             R"(, "vpp": )" + std::to_string(pick({2, 3, 4})) + R"(, "micro_batch": )" + std::to_string(pick({1, 2})) +
                             R"(, "zero": )" + std::to_string(pick({0, 1})) + R"(, "schedule": "interleaved", "compression": ")" +
                             compressions[rng() % 4] + R"(", "bucket_MB": )" + std::to_string(pick({25, 100})) + " } }";
    Scenario s;
    Layout l;
    if (!parse_random_layout(text, nodes, s, l)) continue;
    EvalOptions fast, exact;
    fast.simulate_if_oom = exact.simulate_if_oom = true;
    exact.steady_state = false;
    const Evaluation a = evaluate(s, l, nodes, fast), b = evaluate(s, l, nodes, exact);
    ++compared;
    const bool by_cut = a.step.simulated_microbatches == 3 * pp && b.step.simulated_microbatches > 3 * pp;
    cut += by_cut;
    const double tol = by_cut ? 1e-9 : 1e-3;
    EXPECT_NEAR(a.step.step_time_s / b.step.step_time_s, 1.0, tol) << text;
    for (int k = 0; k < kCategories; ++k) EXPECT_NEAR(a.step.breakdown_s[k], b.step.breakdown_s[k], tol * b.step.step_time_s) << text;
  }
  std::printf("[ info ] %d random interleaved layouts, %d read off the state at two cuts\n", compared, cut);
  EXPECT_GE(compared, 60);
  EXPECT_GE(cut, 5);
}

TEST(Step, PlansKeptAcrossStepsGiveTheSameStep) {
  // A search thread keeps one plan cache across the layouts it evaluates: plan shapes, and plans
  // routed onto a symmetric-mode engine's links by TP, DP, PP and cluster. Every result must be
  // the one a fresh cache gives, whatever was evaluated before: layouts that share the degrees and
  // differ in schedule, ZeRO or buckets, other degrees, other clusters (an oversubscribed fabric
  // wider than a leaf, whose uplinks are created as routes need them), and profiles with and
  // without measured collectives.
  const char* const fat = R"(, "network": { "fabric": "fat-tree", "oversubscription": 2 })";
  const LayoutCase cases[] = {
      {.pp = 4, .bucket_MB = 25},
      {.pp = 4, .vpp = 2, .zero = 0, .bucket_MB = 100, .schedule = "interleaved"},
      {.tp = 4, .pp = 8, .bucket_MB = 25},
      {.hardware = "h200-sxm", .pp = 4, .bucket_MB = 25},
      {.hardware = "h200-socket-loopback", .pp = 4, .bucket_MB = 25},
      {.pp = 4, .bucket_MB = 25, .network = fat},
      {.pp = 4, .zero = 0, .bucket_MB = 25, .schedule = "gpipe", .network = fat},
      {.hardware = "a100-80g-sxm", .pp = 4, .zero = 0, .bucket_MB = 50},
      {.hardware = "a100-80g-sxm", .zero = 2, .bucket_MB = 50},
      {.pp = 4, .bucket_MB = 25, .network = R"(, "network": { "nic_Gbps": 100, "nics_per_node": 2 })"},
  };
  std::vector<Scenario> scenarios;
  for (const LayoutCase& c : cases) scenarios.push_back(case_scenario(c));
  sim::PlanShapeCache kept;
  // Forwards, then backwards, so that each layout follows others that filled the cache.
  for (int pass = 0; pass < 2; ++pass)
    for (std::size_t k = 0; k < scenarios.size(); ++k) {
      const Scenario& s = scenarios[pass == 0 ? k : scenarios.size() - 1 - k];
      const int nodes = s.cluster.nodes.front();
      const Layout l = resolve_layout(s, s.layout, false, nodes);
      EvalOptions with_kept, fresh;
      with_kept.plan_cache = &kept;
      const std::string a = result_to_json(s, evaluate(s, l, nodes, with_kept)).dump();
      const std::string b = result_to_json(s, evaluate(s, l, nodes, fresh)).dump();
      EXPECT_EQ(a, b) << s.hardware.name << " " << describe(l);
    }
}

TEST(Step, AKeptGraphRefilledForAnotherLayoutGivesThatLayoutsStep) {
  // A search thread keeps the graphs of its last runs, and a layout of the same structure
  // (differing only in micro-batch size or recompute) runs on one with its numbers worked out
  // again. Each result must be, byte for byte, the one a thread that never saw another layout
  // gives. Families of such layouts follow one another (more families than the thread keeps
  // graphs, so the second round builds them again): interleaved 175B, 1F1B with int8 compression,
  // ZeRO-1 on a slow network whose links the pipeline transfers share, no TP, and ZeRO-0 on the
  // measured H200 profile.
  const char* const nic25 = R"(, "network": { "nic_Gbps": 25, "nics_per_node": 1 })";
  const LayoutCase families[] = {
      {.model = "gpt3-175b", .nodes = 64, .pp = 8, .vpp = 3, .schedule = "interleaved", .global_batch = 1024},
      {.pp = 4, .bucket_MB = 25, .compression = "int8"},
      {.nodes = 8, .tp = 2, .pp = 4, .network = nic25, .global_batch = 256},
      {.model = "gpt-1.3b", .nodes = 4, .tp = 1, .pp = 4, .global_batch = 64},
      {.model = "gpt3-175b", .hardware = "h200-sxm", .nodes = 32, .tp = 8, .pp = 8, .zero = 0, .global_batch = 512},
  };
  // As a search thread: one plan cache, and one cost model per profile.
  sim::PlanShapeCache plans;
  struct Kept {
    HardwareProfile hw;  // the cost model refers to it
    std::unique_ptr<CostModel> cost;
  };
  std::map<std::string, Kept> costs;
  int runs = 0, reused = 0;
  for (int round = 0; round < 2; ++round)
    for (const LayoutCase& f : families)
      for (int mb : {1, 2})
        for (const char* recompute : {"selective", "full", "none"}) {
          LayoutCase c = f;
          c.mb = mb;
          c.recompute = recompute;
          const Scenario s = case_scenario(c);
          const int nodes = s.cluster.nodes.front();
          const Layout l = resolve_layout(s, s.layout, false, nodes);
          Kept& k = costs[s.hardware.name];
          if (!k.cost) {
            k.hw = s.hardware;
            k.cost = std::make_unique<CostModel>(k.hw, s.training.precision);
          }
          EvalOptions kept;
          kept.plan_cache = &plans;
          kept.cost = k.cost.get();
          const Evaluation a = evaluate(s, l, nodes, kept);
          std::string fresh;
          std::thread([&] { fresh = result_to_json(s, evaluate(s, l, nodes, EvalOptions{})).dump(); }).join();
          EXPECT_EQ(result_to_json(s, a).dump(), fresh) << describe(l);
          ++runs;
          reused += a.step.graph_reused;
        }
  std::printf("[ info ] %d steps, %d on a kept graph\n", runs, reused);
  // Within a family and round every layout but the first of each micro-batch size finds its graph
  // kept (a step simulated in full runs every micro-batch, whose count the size changes), and with
  // TP but the first with full recompute (its recompute is a task of its own).
  int builds = 0;
  for (const LayoutCase& f : families) builds += 2 * 2 * (f.tp > 1 ? 2 : 1);
  EXPECT_GE(reused, runs - builds);
}

TEST(Step, AFullRecomputesTpTrafficRunsBeforeTheBackwardInBothModes) {
  // Full recompute with TP: full mode runs a backward as the recompute's compute, its TP
  // collectives, the backward's compute and its collectives. Symmetric mode fuses a pass's TP
  // traffic into its compute task, which runs all of its compute first; a pipeline transfer that
  // slows the GPU while it runs (the measured comm_compute_interference of h200-sxm) then overlaps
  // other compute, and the steps differed by up to 2.4% on 25 GbE (this interleaved layout; 2.2% on
  // a GPipe layout of 64 nodes; the 1F1B layout here agreed already). With the recompute a task of
  // its own the two modes run the same work in the same order: their steps are the same up to
  // rounding.
  const char* const nic25 = R"(, "network": { "nic_Gbps": 25, "nics_per_node": 1, "fabric": "single-switch" })";
  for (const char* schedule : {"interleaved", "1f1b"})
    for (const char* recompute : {"full", "selective"}) {
      LayoutCase c{.model = "gpt-1.3b", .hardware = "h200-sxm", .nodes = 2, .tp = 8, .pp = 2, .zero = 0, .network = nic25, .global_batch = 32};
      c.schedule = schedule;
      c.vpp = std::string(schedule) == "interleaved" ? 2 : 1;
      c.recompute = recompute;
      const BothModes m = both_modes(c);
      ASSERT_GT(m.s.hardware.comm_compute_interference, 0.0);
      EXPECT_EQ(m.sym.step.full_because, nullptr);
      EXPECT_NEAR(m.sym.step.step_time_s / m.full.step.step_time_s, 1.0, 1e-9) << schedule << ", " << recompute << " recompute";
    }
}

TEST(Step, ZeroThreesNextGatherRunsBesideAFullRecomputeInBothModes) {
  // ZeRO-3 gathers a layer's parameters one layer ahead: the gather of a backward's second layer
  // waits for the compute queued before the first layer's work, of which a full recompute is
  // part, so it runs beside the recompute (full mode, where the recompute is the first layer's
  // first part). With the recompute a task of its own (TP > 1, symmetric mode) the gather was
  // queued after it and waited for it: 0.67% longer than full mode on 8 nodes of one 200 Gb/s NIC
  // (8 GPUs' gathers sharing it); on the 2 nodes here 0.29% with INT8 compression and 0.18%
  // without. Held to rounding, and so is selective recompute, which has no task of its own.
  const char* const one_nic = R"(, "network": { "nic_Gbps": 200, "nics_per_node": 1, "fabric": "single-switch" })";
  for (const char* compression : {"int8", "none"})
    for (const char* recompute : {"full", "selective"}) {
      LayoutCase c{.model = "gpt-1.3b", .hardware = "h100-sxm", .nodes = 2, .tp = 8, .pp = 1, .zero = 3, .network = one_nic, .global_batch = 32};
      c.bucket_MB = 25;
      c.recompute = recompute;
      c.compression = compression;
      const BothModes m = both_modes(c);
      EXPECT_EQ(m.sym.step.full_because, nullptr);
      EXPECT_NEAR(m.sym.step.step_time_s / m.full.step.step_time_s, 1.0, 1e-9) << recompute << " recompute, " << compression;
    }
}

TEST(Step, CommComputeInterferenceSlowsOverlappedCompute) {
  // With a measured GEMM slowdown f while NCCL runs beside it, the backward that overlaps the
  // data-parallel buckets runs slower: the step grows, but by no more than f times the compute of
  // the step (only overlapped compute is slowed). Without data parallelism nothing changes.
  const ModelConfig m = *find_model_preset("gpt-350m");
  HardwareProfile hw = load_hardware_profile("test-gpu", kData);
  auto step = [&](double f, int dp) {
    hw.comm_compute_interference = f;
    const CostModel cost(hw, Precision::bf16);
    StepInput in;
    in.model = &m;
    in.layout.dp = dp;
    in.layout.micro_batch = 8;
    in.global_batch = 8 * dp;
    in.cost = &cost;
    in.net.shape.nodes = 2;
    in.net.shape.gpus_per_node = dp / 2 > 0 ? dp / 2 : 1;
    in.net.shape.nics_per_node = 1;
    in.net.shape.nvlink_Bps = 100e9;
    in.net.shape.nic_Bps = 50e9;
    if (dp == 1) in.net.shape.nodes = 1;
    return simulate_step(in);
  };
  const StepResult base = step(0.0, 16), slowed = step(0.2, 16);
  // Fast enough a network that backward, not the all-reduce, sets the pace.
  ASSERT_LT(base.breakdown_s[kDpComm], 0.2 * base.step_time_s);
  EXPECT_GT(slowed.step_time_s, base.step_time_s * 1.01);
  EXPECT_LE(slowed.step_time_s - base.step_time_s, 0.2 * base.breakdown_s[kCompute] + 1e-9);
  EXPECT_DOUBLE_EQ(step(0.2, 1).step_time_s, step(0.0, 1).step_time_s);
}

TEST(Step, ATasksTimeBeyondItsTimeAloneIsContention) {
  // A recorded task's time alone is its fixed work at full speed plus its slowest flow alone on
  // its path; what it takes beyond that is contention. With a GEMM slowdown f while NCCL runs
  // beside it, a compute task runs at no less than 1/(1 + f) of its speed, so its contention is at
  // most f times its time alone, and the backward passes that overlap the data-parallel buckets
  // have some; with f = 0 compute has none. No task takes less than its time alone.
  const ModelConfig m = *find_model_preset("gpt-350m");
  HardwareProfile hw = load_hardware_profile("test-gpu", kData);
  auto step = [&](double f) {
    hw.comm_compute_interference = f;
    const CostModel cost(hw, Precision::bf16);
    StepInput in;
    in.model = &m;
    in.layout.dp = 16;
    in.layout.micro_batch = 8;
    in.global_batch = 8 * 16;
    in.cost = &cost;
    in.net.shape.nodes = 2;
    in.net.shape.gpus_per_node = 8;
    in.net.shape.nics_per_node = 1;
    in.net.shape.nvlink_Bps = 100e9;
    in.net.shape.nic_Bps = 50e9;
    in.record_timeline = true;
    return simulate_step(in);
  };
  for (double f : {0.0, 0.2}) {
    const StepResult r = step(f);
    const double T = r.step_time_s;
    double compute_contention = 0;
    for (const TimelineEntry& e : r.timeline) {
      const double took = e.end_s - e.start_s;
      EXPECT_GE(took, e.uncontended_s - 1e-12 * T) << e.name;
      if (e.category == kCompute) {
        EXPECT_LE(took - e.uncontended_s, f * e.uncontended_s + 1e-12 * T) << e.name;
        compute_contention += took - e.uncontended_s;
      }
    }
    if (f == 0) EXPECT_LT(compute_contention, 1e-9 * T);
    else EXPECT_GT(compute_contention, 1e-3 * T);
  }
  // Free links and no slowdown: nothing waits on anything beside it.
  Fixture fx;
  HardwareProfile quiet = fx.hw;
  quiet.comm_compute_interference = 0;
  const CostModel cost(quiet, Precision::bf16);
  const ModelConfig eq = equal_stage_model(16);
  StepInput in = pipeline_input(fx, eq, 4, 1, 8, Schedule::one_f_one_b);
  in.cost = &cost;
  in.record_timeline = true;
  const StepResult r = simulate_step(in);
  for (const TimelineEntry& e : r.timeline) EXPECT_NEAR(e.end_s - e.start_s, e.uncontended_s, 1e-12 * r.step_time_s) << e.name;
}

TEST(Step, ZeroStagesMoveTheirClosedFormBytes) {
  // Data-parallel bytes one GPU sends per step, n = 16 replicas of gpt-1.3b (tp = pp = 1,
  // Φ = Φ_L + Φ_E parameters: layers, and embedding + final norm), m = 2 micro-batches, fp32
  // gradients, bf16 weights, ring collectives (a reduce-scatter or all-gather of S bytes sends
  // (n-1)/n S, an all-reduce twice that):
  //   ZeRO-0: one all-reduce of the gradients              2 (n-1)/n 4Φ
  //   ZeRO-1: one reduce-scatter, one weight all-gather    (n-1)/n (4Φ + 2Φ)
  //   ZeRO-2: a reduce-scatter per micro-batch, a gather   (n-1)/n (4Φ m + 2Φ)
  //   ZeRO-3: per micro-batch a reduce-scatter and each layer gathered for forward and for
  //           backward; the embedding and head once        (n-1)/n (4Φ m + 2·2Φ_L m + 2Φ_E)
  const Scenario s = load_scenario(kData + "/test-scenario.json", kData);
  const ParamCount pc = count_params(s.model);
  const double phi_l = static_cast<double>(pc.per_layer) * s.model.layers;
  const double phi_e = static_cast<double>(pc.embedding + pc.final_norm + pc.lm_head), phi = phi_l + phi_e;
  const double n = 16, m = 2, k = (n - 1) / n;
  const double expected[4] = {2 * k * 4 * phi, k * 6 * phi, k * (4 * phi * m + 2 * phi), k * (4 * phi * m + 4 * phi_l * m + 2 * phi_e)};
  for (int zero = 0; zero <= 3; ++zero) {
    bool dp = false;
    const std::string over = "tp=1,pp=1,micro_batch=2,sequence_parallel=false,zero=" + std::to_string(zero);
    const Layout l = resolve_layout(s, apply_layout_overrides(s.layout, over, &dp), dp, 2);
    ASSERT_EQ(l.dp, 16);
    ASSERT_EQ(l.gpus() * l.micro_batch * 2, s.training.global_batch);
    const Evaluation ev = evaluate(s, l, 2, EvalOptions{});
    EXPECT_NEAR(ev.step.dp_bytes_per_gpu / expected[zero], 1.0, 1e-6) << "zero " << zero;
  }
}

TEST(Step, UniformSlowdownScalesTheStep) {
  // With free communication the step is compute alone: every GPU at half speed doubles it.
  Fixture f;
  const ModelConfig m = equal_stage_model(16);
  for (auto [sch, v] : {std::pair{Schedule::gpipe, 1}, std::pair{Schedule::one_f_one_b, 1}, std::pair{Schedule::interleaved, 2}}) {
    StepInput in = pipeline_input(f, m, 4, v, 8, sch);
    const double nominal = simulate_step(in).step_time_s;
    const std::vector<double> half(4, 0.5);
    in.gpu_speed = &half;
    EXPECT_NEAR(simulate_step(in).step_time_s, 2 * nominal, 1e-9 * nominal) << static_cast<int>(sch);
  }
}

TEST(Step, AStragglerStagePacesAGpipePipeline) {
  // GPipe with free communication is two flow shops of identical jobs (the forwards through stages
  // 0..p-1, then the backwards back): a flow shop's makespan is the sum of one job's times plus
  // (m - 1) times the bottleneck's. With stage j at speed 1/k, when its time k a_j (a_j = f_j + b_j)
  // is the largest in both directions:
  //     W(m) = W(1) + (m - 1) k a_j,   a_j = (W_k(1) - W_1(1)) / (k - 1),
  // W being the step less the optimizer, W(1) the one-micro-batch step with the straggler. Untied
  // embeddings: tied, the last stage's update (at the straggler's speed when it is the last) would
  // wait for the first stage's last backward, through the embedding's gradient all-reduce, and
  // could end the step after the first stage's.
  Fixture f;
  ModelConfig m = equal_stage_model(16);
  m.tied_embeddings = false;
  const int p = 4;
  const double k = 2.0;
  auto work = [&](int mb, int slow_stage) {
    StepInput in = pipeline_input(f, m, p, 1, mb, Schedule::gpipe);
    std::vector<double> speed(p, 1.0);
    if (slow_stage >= 0) speed[slow_stage] = 1 / k;
    in.gpu_speed = &speed;
    const StepResult r = simulate_step(in);
    return r.step_time_s - r.breakdown_s[kOptimizer];
  };
  for (int j = 0; j < p; ++j) {
    const double a_j = (work(1, j) - work(1, -1)) / (k - 1);
    for (int mb : {4, 8, 16}) {
      const double want = work(1, j) + (mb - 1) * k * a_j;
      EXPECT_NEAR(work(mb, j), want, 1e-9 * want) << "slow stage " << j << ", " << mb << " micro-batches";
    }
  }
}

TEST(Step, StragglersInSymmetricAndFullModes) {
  // One slow GPU: its stage of its replica paces the pipeline, and the other replicas wait for it
  // at the gradient reduction. Symmetric mode slows its stage in every replica, which gives the
  // same step (the slowest replica sets it either way) within the modes' 1%.
  Scenario s = load_scenario(kData + "/test-scenario.json", kData);
  s.stragglers.given = true;
  s.stragglers.gpus.push_back({13, 0.7});  // stage 1 (GPUs 8-15 with tp 2, pp 2, dp 4), replica 2
  const Layout l = resolve_layout(s, s.layout, false, 2);
  EvalOptions sym, full;
  sym.straggler_baseline = full.straggler_baseline = true;
  full.mode = SimMode::full;
  const Evaluation a = evaluate(s, l, 2, sym);
  const Evaluation b = evaluate(s, l, 2, full);
  EXPECT_EQ(a.stragglers.slowest_gpu, 13);
  EXPECT_EQ(a.stragglers.slowest_speed, 0.7);
  EXPECT_GT(a.step.step_time_s, 1.1 * a.stragglers.step_without_s);
  EXPECT_NEAR(a.step.step_time_s / b.step.step_time_s, 1.0, 0.01);
  // Every GPU drawn from a 3% spread: full mode places every GPU where it is; symmetric mode
  // simulates each replica's pipeline on its own and takes the slowest. With fixed durations a
  // step cannot get shorter when a task gets longer, and replicas meet only at the gradient
  // reduction, so the slowest replica bounds full mode's step from below, and every stage at its
  // slowest GPU of any replica bounds it from above.
  s.stragglers.gpus.clear();
  s.stragglers.speed_stdev = 0.03;
  for (int nodes : {2, 4, 8}) {
    const Layout ln = resolve_layout(s, s.layout, false, nodes);
    const Evaluation sy = evaluate(s, ln, nodes, sym), fu = evaluate(s, ln, nodes, full);
    const double sym_cost = sy.step.step_time_s / sy.stragglers.step_without_s;
    const double full_cost = fu.step.step_time_s / fu.stragglers.step_without_s;
    ASSERT_GT(sy.stragglers.step_upper_s, 0) << nodes;
    EXPECT_GE(sy.stragglers.step_upper_s / sy.stragglers.step_without_s, full_cost - 1e-3) << nodes;
    // Up to what separates the modes without stragglers (a few 1e-3 here).
    EXPECT_LE(sym_cost, full_cost + 5e-3) << nodes;
    EXPECT_GT(sym_cost, full_cost - 5e-3) << nodes;
    EXPECT_GE(sy.stragglers.replicas_simulated, 1) << nodes;
    EXPECT_LE(sy.stragglers.replicas_simulated, ln.dp) << nodes;
  }
}

TEST(Step, ASlowNicInSymmetricAndFullModes) {
  // A DP-heavy step over 25 GbE (the example scenario) with one NIC at half its rate: every ring
  // through it runs at half speed, in both modes alike; a NIC on a node the cluster does not have
  // changes nothing.
  Scenario s = load_scenario(kScenarios + "/slow-network-25gbe.json", kProfiles);
  s.stragglers.given = true;
  s.stragglers.nics.push_back({1, 0, 0.5});
  for (int nodes : {2, 4}) {
    const Layout l = resolve_layout(s, s.layout, false, nodes);
    EvalOptions sym, full;
    sym.straggler_baseline = full.straggler_baseline = true;
    full.mode = SimMode::full;
    const Evaluation a = evaluate(s, l, nodes, sym), b = evaluate(s, l, nodes, full);
    EXPECT_EQ(a.stragglers.slow_nics_here, 1);
    EXPECT_GT(a.step.step_time_s, 1.5 * a.stragglers.step_without_s) << nodes;
    EXPECT_NEAR(a.step.step_time_s / b.step.step_time_s, 1.0, 0.01) << nodes;
  }
  s.stragglers.nics = {{7, 0, 0.5}};
  const Layout l = resolve_layout(s, s.layout, false, 2);
  EvalOptions opt;
  opt.straggler_baseline = true;
  const Evaluation ev = evaluate(s, l, 2, opt);
  EXPECT_EQ(ev.stragglers.slow_nics_here, 0);
  EXPECT_EQ(ev.step.step_time_s, ev.stragglers.step_without_s);
}

TEST(Step, ASlowGpuAndASlowNicInDifferentReplicasBothPaceTheStep) {
  // Over 25 GbE on 4 nodes, tp 8 (a node each), dp 4: GPU 0 computes at 70% and node 1's NIC runs
  // at half rate. The replicas meet at every gradient bucket, whose ring crosses node 1's NIC
  // whichever replica waits on it: the step pays for the slow GPU's backward and the slow NIC's
  // ring together. Symmetric mode simulates replica 0 (the slow GPU) with its collectives at the
  // slowest NIC any replica's ring crosses, and agrees with full mode; it can be no shorter than
  // the step with either part slow alone.
  Scenario s = load_scenario(kScenarios + "/slow-network-25gbe.json", kProfiles);
  s.stragglers.given = true;
  const int nodes = 4;
  bool dp = false;
  const Layout l = resolve_layout(s, apply_layout_overrides(s.layout, "tp=8", &dp), dp, nodes);
  EvalOptions sym, full;
  full.mode = SimMode::full;
  s.stragglers.gpus = {{0, 0.7}};
  const double gpu_alone = evaluate(s, l, nodes, sym).step.step_time_s;
  s.stragglers.gpus.clear();
  s.stragglers.nics = {{1, 0, 0.5}};
  const double nic_alone = evaluate(s, l, nodes, sym).step.step_time_s;
  s.stragglers.gpus = {{0, 0.7}};
  const Evaluation a = evaluate(s, l, nodes, sym), b = evaluate(s, l, nodes, full);
  EXPECT_EQ(a.stragglers.replicas_simulated, 2);  // replica 0 (slow GPU) and 1 (slow NIC)
  EXPECT_GE(a.step.step_time_s, std::max(gpu_alone, nic_alone));
  EXPECT_GE(b.step.step_time_s, std::max(gpu_alone, nic_alone) * (1 - 1e-3));
  EXPECT_NEAR(a.step.step_time_s / b.step.step_time_s, 1.0, 1e-3);
  // NCCL's tree instead: an inner node carries three edges and a leaf one, so the slow NIC costs
  // what its place in the tree makes it cost, which no one GPU per stage can stand for; the step
  // runs one GPU per tensor-parallel group of every replica (a GPU a node) and is full mode's.
  s.cluster.network.allreduce_algorithm = "tree";
  const Evaluation t = evaluate(s, l, nodes, sym), u = evaluate(s, l, nodes, full);
  ASSERT_NE(t.step.every_replica_because, nullptr);
  EXPECT_STREQ(t.step.every_replica_because, "NCCL's tree all-reduce crosses NICs of different speeds");
  EXPECT_EQ(t.step.simulated_gpus, 4);
  EXPECT_EQ(t.stragglers.replicas_simulated, 0);
  EXPECT_NEAR(t.step.step_time_s / u.step.step_time_s, 1.0, 1e-9);
}

TEST(Step, OnlyReplicasNoOtherIsSlowerThanEverywhereAreSimulated) {
  // tp 1, pp 2, dp 3 on 6 one-GPU nodes: GPU d + 3 s is replica d's stage s. Replica 1 is at least
  // as slow as replica 0 at both stages, so replica 0 cannot be the slowest; replicas 1 and 2 are
  // each slower somewhere. Of two identical replicas only the first is kept.
  Layout l;
  l.pp = 2;
  l.dp = 3;
  ClusterShape shape;
  shape.nodes = 6;
  shape.gpus_per_node = 1;
  shape.nics_per_node = 1;
  EXPECT_EQ(slowest_replica_candidates(l, shape, {0.9, 0.8, 0.95, 0.9, 0.9, 0.7}), (std::vector<int>{1, 2}));
  EXPECT_EQ(slowest_replica_candidates(l, shape, {0.8, 0.8, 1.0, 0.9, 0.9, 1.0}), (std::vector<int>{0}));
  // A slow NIC makes its replica a candidate: replica 0's second stage sends through a half-rate NIC.
  shape.nic_speed = {1, 1, 1, 0.5, 1, 1};
  EXPECT_EQ(slowest_replica_candidates(l, shape, {0.9, 0.8, 0.95, 0.9, 0.9, 0.7}), (std::vector<int>{0, 1, 2}));
  for (int g = 0; g < 6; ++g) {
    const RankCoordinates c = rank_coordinates(l, g);
    EXPECT_EQ(c.replica, g % 3);
    EXPECT_EQ(c.stage, g / 3);
  }
}

TEST(Step, TheSlowestGpuSetsADataParallelStep) {
  // Data parallelism over free communication: every replica computes, then waits for the others at
  // the gradient reduction, so the step is the slowest GPU's: nominal / (its speed), exactly. Of n
  // GPUs whose speeds spread by sigma the slowest sits near 1 - sigma sqrt(2 ln n), so the same
  // spread costs more on more GPUs; a GPU's draw does not depend on the cluster's size, so the
  // slowest speed can only fall as the cluster grows. Symmetric mode simulates one replica at the
  // slowest speed; full mode every replica at its own.
  Fixture f;
  const ModelConfig m = equal_stage_model(8);
  StragglerSpec spread;
  spread.given = true;
  spread.speed_stdev = 0.03;
  double last_slowest = 2;
  for (int n : {1, 8, 64, 512}) {
    StepInput in = pipeline_input(f, m, 1, 1, 4 * n, Schedule::one_f_one_b);
    in.net.shape.nodes = n;
    in.layout.dp = n;
    const double nominal = simulate_step(in).step_time_s;
    const std::vector<double> speed = gpu_speeds(spread, n);
    const double slowest = *std::min_element(speed.begin(), speed.end());
    EXPECT_LE(slowest, last_slowest) << n;
    last_slowest = slowest;
    in.gpu_speed = &speed;
    EXPECT_NEAR(simulate_step(in).step_time_s, nominal / slowest, 1e-9 * nominal) << n << " GPUs";
    if (n == 8) {
      in.mode = SimMode::full;
      EXPECT_NEAR(simulate_step(in).step_time_s, nominal / slowest, 1e-9 * nominal) << "full mode";
    }
  }
  EXPECT_LT(last_slowest, 1 - 2 * spread.speed_stdev);  // 512 GPUs: expected 1 - 3.0 sigma
}

TEST(Step, TheLowerBoundNeverExceedsTheStep) {
  // sim::step_lower_bound is what a search skips layouts by, so it must hold for every schedule:
  // random layouts (models, hardware, TP, PP, virtual stages, schedule, micro-batch, recompute,
  // ZeRO 0-3, NICs, fabric, compression), each simulated in symmetric mode, read off its steady
  // state as a search reads it and in full. The bound may not exceed either step; how close it
  // comes is printed (it is the compute and the pipeline's fill, so it should not be far below).
  std::mt19937 rng(23);
  auto pick = [&](std::initializer_list<int> v) { return *(v.begin() + rng() % v.size()); };
  const char* models[] = {"gpt3-175b", "llama2-13b", "gpt-1.3b", "llama3-70b"};
  const char* hardware[] = {"a100-80g-sxm", "h100-sxm", "h200-sxm"};
  const char* fabrics[] = {"", R"(, "fabric": "fat-tree", "oversubscription": 2)"};
  const char* compressions[] = {"none", "int8", "topk:0.01"};
  const char* schedules[] = {"1f1b", "interleaved", "gpipe"};
  const char* recomputes[] = {"none", "selective", "full"};
  int compared = 0;
  double lowest = 1, highest = 0;
  for (int i = 0; i < 120; ++i) {
    const int pp = pick({1, 2, 4, 8}), nodes = pick({2, 4, 8});
    const char* schedule = schedules[rng() % 3];
    const std::string text = std::string(R"({ "name": "r", "model": ")") + models[rng() % 4] + R"(", "training": { "global_batch": )" +
                             std::to_string(pick({64, 256, 512})) + R"( }, "hardware": ")" + hardware[rng() % 3] +
                             R"(", "cluster": { "nodes": )" + std::to_string(nodes) + R"(, "gpus_per_node": 8, "network": { "nic_Gbps": )" +
                             std::to_string(pick({25, 100, 400})) + R"(, "nics_per_node": )" + std::to_string(pick({1, 8})) +
                             fabrics[rng() % 2] + " } }" + R"(, "layout": { "tp": )" + std::to_string(pick({1, 2, 4, 8})) +
                             R"(, "pp": )" + std::to_string(pp) + R"(, "vpp": )" +
                             std::to_string(std::string(schedule) == "interleaved" ? pick({2, 3}) : 1) + R"(, "micro_batch": )" +
                             std::to_string(pick({1, 2})) + R"(, "recompute": ")" + recomputes[rng() % 3] + R"(", "zero": )" +
                             std::to_string(pick({0, 1, 2, 3})) + R"(, "schedule": ")" + schedule + R"(", "compression": ")" +
                             compressions[rng() % 3] + R"(", "bucket_MB": )" + std::to_string(pick({25, 100})) + " } }";
    Scenario s;
    Layout l;
    if (!parse_random_layout(text, nodes, s, l)) continue;
    const CostModel cost(s.hardware, s.training.precision);
    EvalOptions read, full;
    read.cost = full.cost = &cost;
    full.steady_state = false;
    const double bound = step_lower_bound(s, l, cost);
    const double a = evaluate(s, l, nodes, read).step.step_time_s, b = evaluate(s, l, nodes, full).step.step_time_s;
    ++compared;
    EXPECT_GT(bound, 0) << text;
    EXPECT_LE(bound, b) << text;
    // A steady-state reading may fall short of simulating every micro-batch by up to 1e-3 of the
    // step (a drift it accepts); the search allows for twice that.
    EXPECT_LE(bound * (1 - 2e-3), a) << text;
    lowest = std::min(lowest, bound / b);
    highest = std::max(highest, bound / b);
  }
  std::printf("[ info ] %d random layouts: the bound is %.2f-%.2f of the step\n", compared, lowest, highest);
  EXPECT_GE(compared, 50);
}

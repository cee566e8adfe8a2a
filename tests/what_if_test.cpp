// `planner what-if`: each part of the hardware made faster and slower, and which one sets the step.
#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <string>
#include <vector>

#include "input_error.h"
#include "scenario.h"
#include "text_report.h"
#include "what_if.h"

using namespace trainsim;

namespace {

const std::string kProfiles = TRAINSIM_PROFILES;

Scenario scenario(int nodes, const std::string& layout, const std::string& network = "", int gpus_per_node = 8, int global_batch = 64) {
  const std::string text = R"({ "name": "t", "model": "gpt-1.3b", "training": { "global_batch": )" + std::to_string(global_batch) + R"( },
      "hardware": "h200-sxm", "cluster": { "nodes": )" + std::to_string(nodes) + R"(, "gpus_per_node": )" +
                           std::to_string(gpus_per_node) + network + R"( },
      "layout": )" + layout + "}";
  return parse_scenario(text, "t.json", kProfiles);
}

double step_s(const Scenario& s, int nodes) {
  const Layout l = resolve_layout(s, s.layout, false, nodes);
  return evaluate(s, l, nodes, EvalOptions{}).step.step_time_s;
}

}  // namespace

TEST(WhatIf, OneGpuStepDependsOnNoLink) {
  // One GPU (tp = pp = dp = 1 on a node of one GPU) sends nothing: NVLink, the network and
  // latency make no difference, faster or slower; compute does.
  const Scenario s = scenario(1, R"({ "tp": 1, "pp": 1, "dp": 1, "micro_batch": 2, "recompute": "none" })", "", 1);
  const Layout l = resolve_layout(s, s.layout, true, 1);
  const WhatIf w = what_if(s, l, 1, 2.0, "--factor");
  ASSERT_EQ(w.rows.size(), 5u);
  for (const WhatIfRow& r : w.rows) {
    if (r.part == HardwarePart::compute || r.part == HardwarePart::memory) {
      EXPECT_LT(r.faster.step.step_time_s, w.base.step.step_time_s) << part_name(r.part);
      EXPECT_GT(r.slower.step.step_time_s, w.base.step.step_time_s) << part_name(r.part);
    } else {
      EXPECT_EQ(r.faster.step.step_time_s, w.base.step.step_time_s) << part_name(r.part);
      EXPECT_EQ(r.slower.step.step_time_s, w.base.step.step_time_s) << part_name(r.part);
    }
  }
  EXPECT_EQ(w.sets_the_step, HardwarePart::compute);
}

TEST(WhatIf, ComputeAndMemoryBothTwiceAsFastHalveAOneGpuStep) {
  // On one GPU every op takes the larger of FLOPs over the compute rate and bytes over the memory
  // bandwidth (GEMM rates and attention fractions from the measured tables, element-wise kernels
  // and Adam from the measured bandwidths), or the launch interval when that is longer. Without
  // the launch floor, both parts twice as fast halve every op, so the step is exactly half.
  // Either part alone saves less than that.
  Scenario s = scenario(1, R"({ "tp": 1, "pp": 1, "dp": 1, "micro_batch": 2, "recompute": "selective" })", "", 1);
  s.hardware.kernel_launch_us = 0;
  const double base = step_s(s, 1);
  const Scenario both = with_part_scaled(with_part_scaled(s, HardwarePart::compute, 2.0), HardwarePart::memory, 2.0);
  EXPECT_NEAR(step_s(both, 1) / base, 0.5, 1e-9);
  const double compute_only = step_s(with_part_scaled(s, HardwarePart::compute, 2.0), 1);
  const double memory_only = step_s(with_part_scaled(s, HardwarePart::memory, 2.0), 1);
  EXPECT_GT(compute_only, 0.5 * base);
  EXPECT_GT(memory_only, 0.5 * base);
  EXPECT_LT(compute_only, memory_only);  // a 1.3B model's step is mostly GEMMs
}

TEST(WhatIf, DataParallelOverSlowEthernetIsSetByTheNetwork) {
  // Data parallel over 4 nodes with one 25 GbE NIC each: the gradient all-reduce dwarfs the
  // compute, so twice the NIC bandwidth saves most; compute and NVLink matter little. A ring's
  // bandwidth term is 2(n-1)/n S/B, so doubling B removes at most half of the step.
  const Scenario s = scenario(4, R"({ "tp": 1, "pp": 1, "micro_batch": 1, "recompute": "none", "zero": 0 })",
                              R"(, "network": { "nic_Gbps": 25, "nics_per_node": 1 })");
  const Layout l = resolve_layout(s, s.layout, false, 4);
  const WhatIf w = what_if(s, l, 4, 2.0, "--factor");
  EXPECT_EQ(w.sets_the_step, HardwarePart::network);
  EXPECT_EQ(w.most_sensitive_to_slowdown, HardwarePart::network);
  const double base = w.base.step.step_time_s;
  for (const WhatIfRow& r : w.rows) {
    if (r.part != HardwarePart::network) continue;
    EXPECT_GT(r.faster.step.step_time_s, 0.5 * base);
    EXPECT_LT(r.faster.step.step_time_s, 0.8 * base);
  }
}

TEST(WhatIf, NcclSettingsAreTheStepUnderEachSettingTheScenarioDoesNotUse) {
  // Data parallel over 2 nodes with one 25 GbE NIC each. NCCL's tuner (auto) keeps the gradient
  // buckets on rings, which push 2(n-1)/n S = 1.875 S through each port; a tree's chains sum each
  // node's gradients first and its two trees over 2 nodes push S: forced, it cuts the
  // communication nearly in half. Forcing the ring changes nothing (auto's pick); NVLS changes
  // nothing either, for no all-reduce stays inside a node.
  const Scenario s = scenario(2, R"({ "tp": 1, "pp": 1, "micro_batch": 1, "recompute": "none", "zero": 0 })",
                              R"(, "network": { "nic_Gbps": 25, "nics_per_node": 1 })");
  const Layout l = resolve_layout(s, s.layout, false, 2);
  const WhatIf w = what_if(s, l, 2, 2.0, "--factor");
  std::map<std::string, double> step;
  for (const SettingRow& r : w.settings) step[r.setting] = r.eval.step.step_time_s;
  ASSERT_EQ(step.size(), 3u);
  const double base = w.base.step.step_time_s;
  EXPECT_EQ(step.at("allreduce_algorithm=ring"), base);
  EXPECT_EQ(step.at("nvls=true"), base);
  EXPECT_LT(step.at("allreduce_algorithm=tree"), 0.75 * base);
  // The scenario's own setting is not offered; with NVLS on, a forced algorithm (which would leave
  // NVLS out) is not either; a profile without NVLS curves offers no NVLS row.
  Scenario on = s;
  on.cluster.network.nvls = true;
  const auto alts = nccl_alternatives(on);
  ASSERT_EQ(alts.size(), 1u);
  EXPECT_EQ(alts[0].first.setting, "nvls=false");
  Scenario tree = s;
  tree.cluster.network.allreduce_algorithm = "tree";
  std::vector<std::string> offered;
  for (const auto& [row, alt] : nccl_alternatives(tree)) offered.push_back(row.setting);
  EXPECT_EQ(offered, (std::vector<std::string>{"allreduce_algorithm=auto", "allreduce_algorithm=ring"}));
  Scenario a100 = s;
  a100.hardware.intra_nvls_collectives.clear();
  EXPECT_EQ(nccl_alternatives(a100).size(), 2u);
}

TEST(WhatIf, AStepWaitingForItsDataIsSetByTheStorage) {
  // One node, one stage: a step reads its tokens once, tokens x bytes_per_token / storage rate.
  // With storage that takes 8 times the simulated step T, the step is that read, S = 8T (data_wait
  // the rest). Storage twice as fast: S/2 = 4T, still above anything the GPUs do (at most 2T with
  // compute half as fast); half as fast: 2S. No part of the hardware moves the step, the loaders
  // (far faster than the storage) neither; the storage sets it. Without a data block the input
  // pipeline is unlimited and not a part.
  Scenario s = scenario(1, R"({ "tp": 1, "pp": 1, "micro_batch": 1, "recompute": "none" })");
  const Layout l = resolve_layout(s, s.layout, false, 1);
  EXPECT_EQ(parts_of(s).size(), 5u);
  const double T = step_s(s, 1);
  const double tokens = static_cast<double>(s.training.global_batch) * s.model.seq_len;
  s.data.given = true;
  s.data.bytes_per_token = 4;
  s.data.storage_GBps = tokens * 4 / (8 * T * 1e9);
  s.data.loader_tokens_per_s_per_node = 1000 * tokens / T;
  const WhatIf w = what_if(s, l, 1, 2.0, "--factor");
  ASSERT_EQ(w.rows.size(), 7u);
  EXPECT_NEAR(w.base.step.step_time_s, 8 * T, 1e-9 * T);
  EXPECT_EQ(w.sets_the_step, HardwarePart::storage);
  EXPECT_EQ(w.most_sensitive_to_slowdown, HardwarePart::storage);
  for (const WhatIfRow& r : w.rows) {
    if (r.part == HardwarePart::storage) {
      EXPECT_NEAR(r.faster.step.step_time_s, 4 * T, 1e-9 * T);
      EXPECT_NEAR(r.slower.step.step_time_s, 16 * T, 1e-9 * T);
    } else {
      EXPECT_EQ(r.faster.step.step_time_s, w.base.step.step_time_s) << part_name(r.part);
      EXPECT_EQ(r.slower.step.step_time_s, w.base.step.step_time_s) << part_name(r.part);
    }
  }
  EXPECT_EQ(w.rows[5].part, HardwarePart::storage);
  EXPECT_EQ(w.rows[6].part, HardwarePart::loaders);
}

TEST(WhatIf, ScaledNetworkKeepsTheProfilesMeasuredCollectives) {
  // A scenario on the profile's own network uses the collectives measured across nodes; the
  // network made faster must stay "the profile's network" (its figure scaled with it), not fall
  // back to unmeasured alpha-beta; a scenario on another network keeps the profile's figure.
  Scenario s = scenario(2, R"({ "tp": 1, "pp": 1, "micro_batch": 1 })");
  s.hardware.nic_Gbps = s.cluster.network.nic_Gbps;
  s.hardware.nic_efficiency = s.cluster.network.efficiency;
  s.hardware.inter_latency_us = s.cluster.network.latency_us;
  const Scenario fast = with_part_scaled(s, HardwarePart::network, 2.0);
  EXPECT_DOUBLE_EQ(fast.cluster.network.nic_Gbps, 2 * s.cluster.network.nic_Gbps);
  EXPECT_DOUBLE_EQ(fast.hardware.nic_Gbps, fast.cluster.network.nic_Gbps);
  const Scenario low = with_part_scaled(s, HardwarePart::latency, 2.0);
  EXPECT_DOUBLE_EQ(low.cluster.network.latency_us, s.cluster.network.latency_us / 2);
  EXPECT_DOUBLE_EQ(low.hardware.inter_latency_us, low.cluster.network.latency_us);
  Scenario other = s;
  other.cluster.network.nic_Gbps = 25;
  EXPECT_DOUBLE_EQ(with_part_scaled(other, HardwarePart::network, 2.0).hardware.nic_Gbps, s.hardware.nic_Gbps);
  // Scaled by 1, every part leaves the step as it was.
  for (HardwarePart p : kHardwareParts) EXPECT_EQ(step_s(with_part_scaled(s, p, 1.0), 2), step_s(s, 2)) << part_name(p);
}

TEST(WhatIf, FactorMustBeAboveOneAndAtMostAHundred) {
  const Scenario s = scenario(1, R"({ "tp": 1, "pp": 1, "micro_batch": 1 })");
  const Layout l = resolve_layout(s, s.layout, false, 1);
  // Above 1 and at most 100: 1e308 times slower would overflow the step's times.
  for (double f : {1.0, 0.5, -2.0, 100.5, 1e308, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()})
    EXPECT_THROW(what_if(s, l, 1, f, "--factor"), InputError) << f;
}

namespace {

Scenario searched(int nodes) {
  const std::string text = R"({ "name": "t", "model": "gpt-1.3b", "training": { "global_batch": 64 },
      "hardware": "h200-sxm", "cluster": { "nodes": )" + std::to_string(nodes) + R"(, "gpus_per_node": 8 },
      "search": { "tp": [1, 2, 4, 8], "pp": [1, 2], "micro_batch": [1, 2], "recompute": ["none", "selective"], "zero": [0, 1] } })";
  return parse_scenario(text, "t.json", kProfiles);
}

}  // namespace

TEST(WhatIf, SearchedAgainTheBestIsAtLeastTheWinnerKept) {
  // The winner as profiled is one of the space's layouts, and its memory does not depend on the
  // hardware's speeds, so with any part scaled the space's best is at least as fast as keeping it,
  // and exactly it when the same layout wins.
  const Scenario s = searched(2);
  const WhatIfSearch w = what_if_search(s, 2, 2.0, 2, "--factor");
  ASSERT_EQ(w.rows.size(), 5u);
  ASSERT_EQ(w.kept.rows.size(), 5u);
  EXPECT_GT(w.layouts, 10u);
  EXPECT_GT(w.fit, 0u);
  for (std::size_t i = 0; i < w.rows.size(); ++i)
    for (int side = 0; side < 2; ++side) {
      const Evaluation& best = side ? w.rows[i].slower : w.rows[i].faster;
      const Evaluation& kept = side ? w.kept.rows[i].slower : w.kept.rows[i].faster;
      EXPECT_GE(best.tokens_per_s, kept.tokens_per_s * (1 - 1e-12)) << part_name(w.rows[i].part) << " side " << side;
      if (describe(best.layout) == describe(w.kept.base.layout)) {
        EXPECT_EQ(best.step.step_time_s, kept.step.step_time_s) << part_name(w.rows[i].part);
      }
    }
  // Compute twice as fast is worth something whatever the layout.
  EXPECT_GT(w.rows[0].faster.tokens_per_s, w.kept.base.tokens_per_s);
}

TEST(WhatIf, OnOneNodeTheNetworkChangesNoLayoutOfTheSpace) {
  // Inside one node nothing crosses a NIC: every layout's step is the same with the network twice
  // as fast or twice as slow, so the search finds the same winner at the same step.
  const Scenario s = searched(1);
  const WhatIfSearch w = what_if_search(s, 1, 2.0, 2, "--factor");
  const WhatIfSearchRow& net = w.rows[3];
  ASSERT_EQ(net.part, HardwarePart::network);
  for (const Evaluation* ev : {&net.faster, &net.slower}) {
    EXPECT_EQ(describe(ev->layout), describe(w.kept.base.layout));
    EXPECT_EQ(ev->step.step_time_s, w.kept.base.step.step_time_s);
  }
  EXPECT_THROW(what_if_search(s, 1, 1.0, 2, "--factor"), InputError);
}

TEST(WhatIf, TheFabricRowsPriceTheLeafUplinksWhereTheClusterSpansLeaves) {
  // Data parallel on rings over 4 nodes of 8 GPUs and 8 NICs of 25 GbE, leaves of 16 NIC ports
  // (2 nodes a leaf). Each of the 8 rails' rings leaves a leaf once and enters it once, so a leaf's
  // uplink carries 8 ring flows each way, each at most one NIC's rate: at 2:1 the uplink is 8 NICs
  // wide and the step is the one at 1:1, exactly; at 4:1 it is 4 NICs wide, the flows crossing it
  // run at half their rate, and the gradient all-reduce (bandwidth-bound: 1.3 B fp32 gradients
  // over 25 GbE) takes twice as long: its exposed time doubles and the step grows by
  // that much (within 1%: its latency does not double, while the backward hides a little less).
  const Scenario s = scenario(
      4, R"({ "tp": 1, "pp": 1, "micro_batch": 1, "recompute": "none", "zero": 0 })",
      R"(, "network": { "nic_Gbps": 25, "nics_per_node": 8, "fabric": "fat-tree", "nics_per_leaf": 16, "allreduce_algorithm": "ring" })");
  const Layout l = resolve_layout(s, s.layout, false, 4);
  const WhatIf w = what_if(s, l, 4, 2.0, "--factor");
  std::map<std::string, const Evaluation*> by;
  for (const SettingRow& r : w.fabric) by[r.setting] = &r.eval;
  ASSERT_EQ(by.size(), 2u);  // not the scenario's own 1:1
  const double base = w.base.step.step_time_s, dp = w.base.step.breakdown_s[sim::kDpComm];
  EXPECT_NEAR(by.at("oversubscription=2")->step.step_time_s / base, 1.0, 1e-12);
  EXPECT_NEAR(by.at("oversubscription=4")->step.breakdown_s[sim::kDpComm] / dp, 2.0, 0.01);
  EXPECT_NEAR(by.at("oversubscription=4")->step.step_time_s - base, dp, 0.01 * dp);
  // Nothing to price on a single switch, nor where the nodes fit under one leaf.
  Scenario single = s;
  single.cluster.network.fabric = "single-switch";
  EXPECT_TRUE(fabric_alternatives(single, 4).empty());
  EXPECT_TRUE(fabric_alternatives(s, 2).empty());
  Scenario wide = s;
  wide.cluster.network.nics_per_leaf = 32;
  EXPECT_TRUE(fabric_alternatives(wide, 4).empty());
  Scenario over = s;
  over.cluster.network.oversubscription = 2;
  std::vector<std::string> offered;
  for (const auto& [row, alt] : fabric_alternatives(over, 4)) offered.push_back(row.setting);
  EXPECT_EQ(offered, (std::vector<std::string>{"oversubscription=1", "oversubscription=4"}));
}

TEST(WhatIf, TheNetworkLineNamesTheFabricItsRatioAndTheNodesUnderALeaf) {
  // The headers of simulate, sweep and what-if name the fabric, so that a table read in a meeting
  // says which network it priced: the NICs, the fabric, and where oversubscribed, the ratio and how
  // many nodes share a leaf's uplinks (a fat-tree leaf of 32 ports takes 4 nodes of 8 NICs; a rail
  // switch takes one NIC of each node, so 16 ports make a group of 16 nodes).
  const std::string layout = R"({ "tp": 1, "pp": 1, "micro_batch": 1 })";
  EXPECT_EQ(describe_network(scenario(2, layout, R"(, "network": { "nic_Gbps": 25, "nics_per_node": 1, "fabric": "single-switch" })")),
            "1 x 25 Gb/s NICs a node, one switch");
  EXPECT_EQ(describe_network(scenario(2, layout, R"(, "network": { "nic_Gbps": 400, "nics_per_node": 8, "fabric": "fat-tree" })")),
            "8 x 400 Gb/s NICs a node, fat-tree (non-blocking)");
  EXPECT_EQ(describe_fabric(scenario(2, layout, R"(, "network": { "nics_per_node": 8, "fabric": "fat-tree", "oversubscription": 2 })")),
            "fat-tree, 2:1 to the spine, 4 nodes to a leaf");
  EXPECT_EQ(describe_fabric(scenario(
                2, layout, R"(, "network": { "nics_per_node": 8, "fabric": "rail-optimized", "oversubscription": 1.5, "nics_per_leaf": 16 })")),
            "rail-optimized, 1.5:1 to the spine, 16 nodes to a group of rail switches");
}

TEST(WhatIf, FabricRowsThatNeedEveryGpuAreLeftOutPastTheirLimitAndNamed) {
  // 12 nodes of 8 GPUs under rail switches of 32 ports (4 nodes a group), tp 8 · pp 4: a stage is 3
  // nodes, so stages straddle groups whose uplinks, once oversubscribed, carry two stages' traffic
  // on some of their GPUs and one's on others, and one GPU per stage cannot stand for the rest
  // (symmetric_mode_misfit). One GPU per TP group stands for the rest: those rows are priced
  // whatever the limit. With one of node 0's NICs at half rate a TP group's NICs run at different
  // speeds, and one GPU per TP group cannot stand for it either (replica_mode_misfit). The 2:1
  // and 4:1 rows then need every GPU: priced so by default, and left out, each named with the
  // reason, when the caller allows every GPU only up to fewer GPUs than the 96 here (a report
  // does, up to 512).
  const char* rails = R"(, "network": { "nics_per_node": 8, "fabric": "rail-optimized", "nics_per_leaf": 4 })";
  const Scenario eight = scenario(12, R"({ "tp": 8, "pp": 4, "micro_batch": 1 })", rails, 8, 96);
  const WhatIf replicas = what_if(eight, resolve_layout(eight, eight.layout, false, 12), 12, 2.0, "--factor", FabricRows{true, 64});
  ASSERT_EQ(replicas.fabric.size(), 2u);
  for (const SettingRow& r : replicas.fabric) {
    EXPECT_EQ(r.eval.step.full_because, nullptr) << r.description;
    ASSERT_NE(r.eval.step.every_replica_because, nullptr) << r.description;
    EXPECT_EQ(r.eval.step.simulated_gpus, 12) << r.description;
  }
  Scenario s = scenario(12, R"({ "tp": 8, "pp": 4, "micro_batch": 1 })", rails, 8, 96);
  s.stragglers.given = true;
  s.stragglers.nics.push_back({0, 0, 0.5});
  const Layout l = resolve_layout(s, s.layout, false, 12);
  const WhatIf all = what_if(s, l, 12, 2.0, "--factor");
  ASSERT_EQ(all.fabric.size(), 2u);
  for (const SettingRow& r : all.fabric) {
    ASSERT_NE(r.eval.step.full_because, nullptr) << r.description;
    EXPECT_STREQ(r.eval.step.full_because, "pipeline stages straddle leaf switches of the oversubscribed fabric");
  }
  EXPECT_TRUE(all.fabric_left_out.empty());
  const WhatIf limited = what_if(s, l, 12, 2.0, "--factor", FabricRows{true, 64});
  EXPECT_TRUE(limited.fabric.empty());
  EXPECT_EQ(limited.fabric_left_out,
            (std::vector<std::string>{"uplinks to the spine oversubscribed 2:1", "uplinks to the spine oversubscribed 4:1"}));
  ASSERT_NE(limited.fabric_left_out_because, nullptr);
  EXPECT_STREQ(limited.fabric_left_out_because, "pipeline stages straddle leaf switches of the oversubscribed fabric");
  // Within the limit they are priced as by default.
  const WhatIf within = what_if(s, l, 12, 2.0, "--factor", FabricRows{true, 96});
  ASSERT_EQ(within.fabric.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) EXPECT_EQ(within.fabric[i].eval.step.step_time_s, all.fabric[i].eval.step.step_time_s);
  EXPECT_TRUE(what_if(s, l, 12, 2.0, "--factor", FabricRows{false}).fabric.empty());
}

TEST(WhatIf, TheStepsDoNotDependOnHowManyThreadsRanThem) {
  // what_if evaluates its steps on the worker pool, each into its own slot: one thread or four,
  // every row is the same step to the bit, in the same order, and the same part sets the step.
  // GPT-1.3B tp 2 · pp 2 over 2 nodes on a 2:1 fat-tree of 1-node leaves: parts, NCCL settings
  // and fabric rows all present.
  const Scenario s = scenario(2, R"({ "tp": 2, "pp": 2, "micro_batch": 1 })",
                              R"(, "network": { "nics_per_node": 8, "fabric": "fat-tree", "nics_per_leaf": 8, "oversubscription": 2 })");
  const Layout l = resolve_layout(s, s.layout, false, 2);
  const WhatIf one = what_if(s, l, 2, 2.0, "--factor", {}, 1), four = what_if(s, l, 2, 2.0, "--factor", {}, 4);
  ASSERT_FALSE(one.settings.empty());
  ASSERT_EQ(one.fabric.size(), 2u);
  EXPECT_EQ(one.base.step.step_time_s, four.base.step.step_time_s);
  ASSERT_EQ(one.rows.size(), four.rows.size());
  for (std::size_t i = 0; i < one.rows.size(); ++i) {
    EXPECT_EQ(one.rows[i].part, four.rows[i].part);
    EXPECT_EQ(one.rows[i].faster.step.step_time_s, four.rows[i].faster.step.step_time_s);
    EXPECT_EQ(one.rows[i].slower.step.step_time_s, four.rows[i].slower.step.step_time_s);
  }
  ASSERT_EQ(one.settings.size(), four.settings.size());
  for (std::size_t i = 0; i < one.settings.size(); ++i) {
    EXPECT_EQ(one.settings[i].setting, four.settings[i].setting);
    EXPECT_EQ(one.settings[i].eval.step.step_time_s, four.settings[i].eval.step.step_time_s);
  }
  ASSERT_EQ(one.fabric.size(), four.fabric.size());
  for (std::size_t i = 0; i < one.fabric.size(); ++i) EXPECT_EQ(one.fabric[i].eval.step.step_time_s, four.fabric[i].eval.step.step_time_s);
  EXPECT_EQ(one.sets_the_step, four.sets_the_step);
  EXPECT_EQ(one.most_sensitive_to_slowdown, four.most_sensitive_to_slowdown);
}

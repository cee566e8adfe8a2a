// Scenario loading: every class of bad input is an InputError naming the JSON path, what was
// expected and what was found.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "evaluation.h"
#include "input_error.h"
#include "launch_export.h"
#include "result_json.h"
#include "scenario.h"
#include "text_report.h"

using namespace trainsim;

namespace {

const std::string kProfiles = TRAINSIM_TEST_DATA;

std::string base_with(const std::string& layout = R"("layout": { "tp": 2, "pp": 2, "micro_batch": 2 })",
                      const std::string& extra = "") {
  return R"({ "name": "t", "model": "gpt-1.3b", "training": { "global_batch": 64 }, "hardware": "test-gpu",
              "cluster": { "nodes": 2, "gpus_per_node": 8 }, )" + layout + extra + "}";
}

// Returns the error message, or "" when the scenario loads.
std::string error_of(const std::string& text) {
  try {
    parse_scenario(text, "s.json", kProfiles);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Scenario, ValidScenarioLoads) {
  const Scenario s = parse_scenario(base_with(), "s.json", kProfiles);
  EXPECT_EQ(s.model.name, "gpt-1.3b");
  EXPECT_EQ(s.cluster.nodes, std::vector<int>{2});
  const Layout l = resolve_layout(s, s.layout, s.layout_dp_given, 2);
  EXPECT_EQ(l.dp, 4);  // 16 GPUs / (tp 2 x pp 2)
  EXPECT_EQ(s.cluster.network.nic_Gbps, 80);  // from the profile
}

TEST(Scenario, UnknownKeyWithSuggestion) {
  const std::string e = error_of(base_with(R"("layout": { "tp": 2, "micro_bach": 2 })"));
  EXPECT_NE(e.find("layout.micro_bach"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean \"micro_batch\""), std::string::npos) << e;
}

TEST(Scenario, WrongTypeNamesPathExpectedAndFound) {
  const std::string e = error_of(base_with(R"("layout": { "tp": "eight" })"));
  EXPECT_NE(e.find("layout.tp"), std::string::npos) << e;
  EXPECT_NE(e.find("expected an integer"), std::string::npos) << e;
  EXPECT_NE(e.find("\"eight\""), std::string::npos) << e;
  // null is named once ("found null", not "found null null").
  const std::string n = error_of(base_with(R"("layout": { "tp": null })"));
  EXPECT_NE(n.find("layout.tp: expected an integer, found null"), std::string::npos) << n;
  EXPECT_EQ(n.find("null null"), std::string::npos) << n;
}

TEST(Scenario, ImpossibleValues) {
  EXPECT_NE(error_of(base_with(R"("layout": { "tp": 0 })")).find("layout.tp"), std::string::npos);
  EXPECT_NE(error_of(base_with(R"("layout": { "tp": 3 })")).find("does not divide"), std::string::npos);
  EXPECT_NE(error_of(base_with(R"("layout": { "tp": 16, "pp": 1 })")).find("span nodes"), std::string::npos);
  EXPECT_NE(error_of(base_with(R"("layout": { "tp": 2, "pp": 2, "dp": 3 })")).find("tp x pp x dp"), std::string::npos);
  EXPECT_NE(error_of(base_with(R"("layout": { "recompute": "some" })")).find("layout.recompute"), std::string::npos);
  EXPECT_NE(error_of(base_with(R"("layout": { "compression": "topk:2" })")).find("topk fraction"), std::string::npos);
  EXPECT_NE(error_of(base_with(R"("layout": { "micro_batch": 3 })")).find("not divisible"), std::string::npos);
}

TEST(Scenario, UnknownPresetSuggestsClosest) {
  const std::string text = R"({ "name": "t", "model": "llama2-7", "training": { "global_batch": 8 }, "hardware": "test-gpu",
      "cluster": { "nodes": 1 }, "layout": {} })";
  const std::string e = error_of(text);
  EXPECT_NE(e.find("model"), std::string::npos);
  EXPECT_NE(e.find("did you mean \"llama2-7b\""), std::string::npos) << e;
}

TEST(Scenario, UnknownHardwareProfile) {
  const std::string text = R"({ "name": "t", "model": "gpt-125m", "training": { "global_batch": 8 }, "hardware": "test-gpuu",
      "cluster": { "nodes": 1 }, "layout": {} })";
  const std::string e = error_of(text);
  // The key is named once: "hardware: no hardware profile ...".
  EXPECT_NE(e.find("hardware: no hardware profile \"test-gpuu\""), std::string::npos) << e;
  EXPECT_EQ(e.find("hardware: hardware"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean \"test-gpu\""), std::string::npos) << e;
  // A name no file can have (longer than the file system allows) is as unknown, not a crash.
  const std::string long_name(300, 'a');
  const std::string e2 = error_of(R"({ "name": "t", "model": "gpt-125m", "training": { "global_batch": 8 }, "hardware": ")" + long_name +
                                  R"(", "cluster": { "nodes": 1 }, "layout": {} })");
  EXPECT_NE(e2.find("hardware: no hardware profile \"" + long_name + "\""), std::string::npos) << e2;
}

TEST(Scenario, MissingRequiredKeys) {
  EXPECT_NE(error_of(R"({ "name": "t" })").find("model: required key is missing"), std::string::npos);
  const std::string no_batch = R"({ "name": "t", "model": "gpt-125m", "training": {}, "hardware": "test-gpu",
      "cluster": { "nodes": 1 }, "layout": {} })";
  EXPECT_NE(error_of(no_batch).find("training.global_batch"), std::string::npos);
}

TEST(Scenario, AValueListedTwiceIsRefused) {
  // A repeated value would be searched, swept or validated twice over (a search ranked the same
  // layout twice): the second is named, with the first it repeats.
  std::string e = error_of(base_with(R"("layout": {})", R"(, "search": { "tp": [1, 2, 4, 1] })"));
  EXPECT_NE(e.find("search.tp[3]: repeats search.tp[0] (1)"), std::string::npos) << e;
  e = error_of(base_with(R"("layout": {})", R"(, "search": { "recompute": ["none", "full", "full"] })"));
  EXPECT_NE(e.find("search.recompute[2]: repeats search.recompute[1]"), std::string::npos) << e;
  e = error_of(R"({ "name": "t", "model": "gpt-125m", "training": { "global_batch": 8 }, "hardware": "test-gpu",
      "cluster": { "nodes": [1, 2, 2] }, "layout": {} })");
  EXPECT_NE(e.find("cluster.nodes[2]: repeats cluster.nodes[1] (2)"), std::string::npos) << e;
  EXPECT_EQ(error_of(base_with(R"("layout": {})", R"(, "search": { "tp": [1, 2, 4] })")), "");
}

TEST(Scenario, NestedPathsInLists) {
  const std::string e = error_of(base_with(R"("layout": {})", R"(, "search": { "tp": [1, 2, "x"] })"));
  EXPECT_NE(e.find("search.tp[2]"), std::string::npos) << e;
  const std::string n = error_of(R"({ "name": "t", "model": "gpt-125m", "training": { "global_batch": 8 }, "hardware": "test-gpu",
      "cluster": { "nodes": [1, 0] }, "layout": {} })");
  EXPECT_NE(n.find("cluster.nodes[1]"), std::string::npos) << n;
}

TEST(Scenario, NetworkOverridesAndFabric) {
  const std::string ok = base_with(R"("layout": {})", R"(, "search": {})");
  const std::string bad = R"({ "name": "t", "model": "gpt-125m", "training": { "global_batch": 8 }, "hardware": "test-gpu",
      "cluster": { "nodes": 1, "network": { "fabric": "torus" } }, "layout": {} })";
  EXPECT_EQ(error_of(ok), "");
  EXPECT_NE(error_of(bad).find("cluster.network.fabric"), std::string::npos);
  // A single switch has no uplinks: an oversubscription there would be silently ignored.
  auto network = [](const std::string& n) {
    return R"({ "name": "t", "model": "gpt-125m", "training": { "global_batch": 16 }, "hardware": "test-gpu",
      "cluster": { "nodes": 2, "network": )" + n + R"( }, "layout": {} })";
  };
  const std::string single = error_of(network(R"({ "fabric": "single-switch", "oversubscription": 2 })"));
  EXPECT_NE(single.find("cluster.network.oversubscription"), std::string::npos) << single;
  EXPECT_NE(single.find("single switch"), std::string::npos) << single;
  EXPECT_EQ(error_of(network(R"({ "fabric": "single-switch", "oversubscription": 1 })")), "");
  EXPECT_EQ(error_of(network(R"({ "fabric": "fat-tree", "oversubscription": 2 })")), "");
  EXPECT_EQ(error_of(network(R"({ "fabric": "rail-optimized", "oversubscription": 2 })")), "");
  // The leaf switches' NIC ports: 32 unless given; a fat-tree leaf must take a whole node's NICs, a
  // rail switch takes one NIC of each node; a single switch has no leaves.
  auto parsed = [&](const std::string& n) { return parse_scenario(network(n), "s.json", kProfiles).cluster.network; };
  EXPECT_EQ(parsed(R"({ "fabric": "fat-tree" })").nics_per_leaf, 32);
  EXPECT_EQ(parsed(R"({ "fabric": "fat-tree", "nics_per_node": 8, "nics_per_leaf": 48 })").nics_per_leaf, 48);
  EXPECT_EQ(parsed(R"({ "fabric": "rail-optimized", "nics_per_node": 8, "nics_per_leaf": 4 })").nics_per_leaf, 4);
  const std::string narrow = error_of(network(R"({ "fabric": "fat-tree", "nics_per_node": 8, "nics_per_leaf": 4 })"));
  EXPECT_NE(narrow.find("cluster.network.nics_per_leaf"), std::string::npos) << narrow;
  EXPECT_NE(narrow.find("cannot take a node's 8 NICs"), std::string::npos) << narrow;
  const std::string no_leaves = error_of(network(R"({ "fabric": "single-switch", "nics_per_leaf": 16 })"));
  EXPECT_NE(no_leaves.find("cluster.network.nics_per_leaf"), std::string::npos) << no_leaves;
  EXPECT_NE(error_of(network(R"({ "fabric": "fat-tree", "nics_per_leaf": 0 })")).find("cluster.network.nics_per_leaf"), std::string::npos);
  EXPECT_NE(error_of(network(R"({ "fabric": "fat-tree", "nics_per_leaf": 2.5 })")).find("cluster.network.nics_per_leaf"), std::string::npos);
}

TEST(Scenario, AllReduceAlgorithmIsAutoRingOrTree) {
  auto with = [](const std::string& network) {
    return R"({ "name": "t", "model": "gpt-125m", "training": { "global_batch": 8 }, "hardware": "test-gpu",
      "cluster": { "nodes": 1, "network": )" + network + R"( }, "layout": {} })";
  };
  EXPECT_EQ(parse_scenario(with("{}"), "s.json", kProfiles).cluster.network.allreduce_algorithm, "auto");
  EXPECT_EQ(parse_scenario(with(R"({ "allreduce_algorithm": "tree" })"), "s.json", kProfiles).cluster.network.allreduce_algorithm, "tree");
  const std::string e = error_of(with(R"({ "allreduce_algorithm": "nvls" })"));
  EXPECT_NE(e.find("cluster.network.allreduce_algorithm"), std::string::npos) << e;
  EXPECT_NE(e.find("\"nvls\""), std::string::npos) << e;
  EXPECT_NE(error_of(with(R"({ "allreduce_algorithm": 1 })")).find("cluster.network.allreduce_algorithm"), std::string::npos);
}

TEST(Scenario, CustomModelAndPresetOverride) {
  const std::string custom = R"({ "name": "t", "model": { "family": "llama", "layers": 4, "hidden": 512, "heads": 8,
      "kv_heads": 2, "ffn_hidden": 1536, "vocab": 1000, "seq_len": 256 }, "training": { "global_batch": 8 },
      "hardware": "test-gpu", "cluster": { "nodes": 1 }, "layout": {} })";
  const Scenario s = parse_scenario(custom, "s.json", kProfiles);
  EXPECT_EQ(s.model.kv_heads, 2);
  EXPECT_FALSE(s.model.tied_embeddings);
  const std::string over = R"({ "name": "t", "model": { "preset": "llama2-7b", "seq_len": 8192 }, "training": { "global_batch": 8 },
      "hardware": "test-gpu", "cluster": { "nodes": 1 }, "layout": { "tp": 8 } })";
  const Scenario o = parse_scenario(over, "s.json", kProfiles);
  EXPECT_EQ(o.model.seq_len, 8192);
  EXPECT_EQ(o.model.hidden, 4096);
  const std::string badmodel = R"({ "name": "t", "model": { "family": "llama", "layers": 4, "hidden": 500, "heads": 8,
      "ffn_hidden": 1536, "vocab": 1000, "seq_len": 256 }, "training": { "global_batch": 8 },
      "hardware": "test-gpu", "cluster": { "nodes": 1 }, "layout": {} })";
  EXPECT_NE(error_of(badmodel).find("model.heads"), std::string::npos);
}

TEST(Scenario, NotJson) {
  // The parser's own message (where and what), without its library's catalogue tag.
  const std::string e = error_of("{ \"name\": ");
  EXPECT_NE(e.find("not valid JSON: parse error at line 1"), std::string::npos) << e;
  EXPECT_EQ(e.find("json.exception"), std::string::npos) << e;
}

TEST(Scenario, LayoutOverridesFromTheCommandLine) {
  {
    // Blanks around items, keys and values, as typed in a shell, are not part of them.
    bool given = false;
    const Layout t = apply_layout_overrides(Layout{}, " tp=4 , pp = 2,\tschedule = interleaved ,", &given);
    EXPECT_EQ(t.tp, 4);
    EXPECT_EQ(t.pp, 2);
    EXPECT_EQ(t.schedule, Schedule::interleaved);
    EXPECT_THROW(apply_layout_overrides(Layout{}, "tp=4, tp =2", &given), InputError);
    EXPECT_THROW(apply_layout_overrides(Layout{}, "tp=4 2", &given), InputError);
  }
  bool dp_given = false;
  Layout l = apply_layout_overrides(Layout{}, "tp=4,pp=2,recompute=full,compression=int8", &dp_given);
  EXPECT_EQ(l.tp, 4);
  EXPECT_EQ(l.recompute, Recompute::full);
  EXPECT_EQ(l.compression.kind, Compression::Kind::int8);
  EXPECT_FALSE(dp_given);
  try {
    apply_layout_overrides(Layout{}, "tpp=4", &dp_given);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean \"tp\""), std::string::npos);
  }
  // A short name as the result tables print it points to its key.
  for (const auto& [typed, key] : std::vector<std::pair<std::string, std::string>>{
           {"mb=2", "micro_batch"}, {"v=3", "vpp"}, {"z=1", "zero"}, {"sp=true", "sequence_parallel"}, {"bucket=50", "bucket_MB"}}) {
    try {
      apply_layout_overrides(Layout{}, typed, &dp_given);
      ADD_FAILURE() << typed << " was accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("--layout " + typed + ": unknown layout key"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("(did you mean \"" + key + "\"?)"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(apply_layout_overrides(Layout{}, "micro_batch=x", &dp_given), InputError);
  try {
    apply_layout_overrides(Layout{}, "tp=2,pp=2,tp=4", &dp_given);
    ADD_FAILURE() << "a key given twice was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--layout tp=4: \"tp\" is given twice"), std::string::npos) << e.what();
  }
  // A bucket size is held to the scenario file's bounds, an infinite one too.
  EXPECT_EQ(apply_layout_overrides(Layout{}, "bucket_MB=0.001", &dp_given).bucket_MB, 0.001);
  for (const char* bad : {"bucket_MB=inf", "bucket_MB=1e300", "bucket_MB=0.0001", "bucket_MB=0", "bucket_MB=", "bucket_MB=5MB"}) {
    try {
      apply_layout_overrides(Layout{}, bad, &dp_given);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("--layout ") + bad), std::string::npos) << e.what();
    }
  }
}

TEST(Scenario, ValidateCompressionIsWhatTheRunnerImplements) {
  const Scenario s = parse_scenario(base_with(R"("validate": { "compression": ["none", "int8"] })"), "s.json", kProfiles);
  ASSERT_EQ(s.validate.compression.size(), 2u);
  EXPECT_EQ(s.validate.compression[1].kind, Compression::Kind::int8);
  const std::string e = error_of(base_with(R"("validate": { "compression": ["int8", "powersgd:4"] })"));
  EXPECT_NE(e.find("validate.compression[1]"), std::string::npos) << e;
  EXPECT_NE(e.find("\"int8\""), std::string::npos) << e;
  EXPECT_EQ(parse_scenario(base_with(R"("validate": { "zero": [0, 3] })"), "s.json", kProfiles).validate.zero, (std::vector<int>{0, 3}));
  EXPECT_NE(error_of(base_with(R"("validate": { "zero": [0, 4] })")).find("validate.zero[1]"), std::string::npos);
}

TEST(Scenario, ValidateParallelDegreesAreListsOfPositiveIntegers) {
  const Scenario s = parse_scenario(base_with(R"("validate": { "tp": [1, 2, 4], "pp": [2] })"), "s.json", kProfiles);
  EXPECT_EQ(s.validate.tp, (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(s.validate.pp, (std::vector<int>{2}));
  EXPECT_NE(error_of(base_with(R"("validate": { "tp": [2, 0] })")).find("validate.tp[1]"), std::string::npos);
  EXPECT_NE(error_of(base_with(R"("validate": { "pp": "two" })")).find("validate.pp"), std::string::npos);
  EXPECT_EQ(parse_scenario(base_with(R"("validate": { "pp": 4 })"), "s.json", kProfiles).validate.pp, (std::vector<int>{4}));
  EXPECT_EQ(parse_scenario(base_with(R"("validate": { "vpp": [1, 2] })"), "s.json", kProfiles).validate.vpp, (std::vector<int>{1, 2}));
  EXPECT_NE(error_of(base_with(R"("validate": { "vpp": [0] })")).find("validate.vpp[0]"), std::string::npos);
}

TEST(Scenario, ReliabilityAndDataBlocksAreValidated) {
  const Scenario s = parse_scenario(
      base_with(R"("layout": { "tp": 2, "pp": 2, "micro_batch": 2 })",
                R"(, "reliability": { "gpu_mtbf_hours": 50000, "checkpoint_GBps": 200, "restart_minutes": 10 },
                   "data": { "storage_GBps": 5, "bytes_per_token": 2 })"),
      "s.json", kProfiles);
  EXPECT_TRUE(s.reliability.given);
  EXPECT_EQ(s.reliability.node_mtbf_hours, 0);
  EXPECT_EQ(s.reliability.checkpoint_GBps, 200);
  EXPECT_TRUE(s.data.given);
  EXPECT_EQ(s.data.loader_tokens_per_s_per_node, 0);
  EXPECT_EQ(s.data.bytes_per_token, 2);
  const auto with = [](const std::string& block) { return error_of(base_with(R"("layout": { "tp": 2 })", ", " + block)); };
  std::string e = with(R"("reliability": { "gpu_mtbf_hours": 50000, "restart_minutes": 10 })");
  EXPECT_NE(e.find("reliability.checkpoint_GBps: required key is missing"), std::string::npos) << e;
  e = with(R"("reliability": { "checkpoint_GBps": 100, "restart_minutes": 10 })");
  EXPECT_NE(e.find("reliability: needs \"gpu_mtbf_hours\" or \"node_mtbf_hours\""), std::string::npos) << e;
  e = with(R"("reliability": { "gpu_mtbf_hours": -1, "checkpoint_GBps": 100, "restart_minutes": 10 })");
  EXPECT_NE(e.find("reliability.gpu_mtbf_hours"), std::string::npos) << e;
  e = with(R"("reliability": { "gpu_mtbf_hours": 1, "node_mtbf_hour": 9, "checkpoint_GBps": 100, "restart_minutes": 10 })");
  EXPECT_NE(e.find("did you mean \"node_mtbf_hours\""), std::string::npos) << e;
  e = with(R"("reliability": { "gpu_mtbf_hours": 1, "checkpoint_GBps": 100, "restart_minutes": 10, "checkpoint": "later" })");
  EXPECT_NE(e.find("reliability.checkpoint: expected \"sync\" or \"async\", found \"later\""), std::string::npos) << e;
  e = with(R"("data": { "storage_GBps": 5 })");
  EXPECT_NE(e.find("data.bytes_per_token: required with \"storage_GBps\""), std::string::npos) << e;
  e = with(R"("data": { "bytes_per_token": 2 })");
  EXPECT_NE(e.find("data: needs \"loader_tokens_per_s_per_node\" or \"storage_GBps\""), std::string::npos) << e;
}

TEST(Scenario, StragglersBlockIsValidated) {
  const Scenario s = parse_scenario(
      base_with(R"("layout": { "tp": 2 })", R"(, "stragglers": { "gpus": [ { "gpu": 15, "speed": 0.8 } ], "speed_stdev": 0.02, "seed": 7 })"),
      "s.json", kProfiles);
  ASSERT_TRUE(s.stragglers.given);
  ASSERT_EQ(s.stragglers.gpus.size(), 1u);
  EXPECT_EQ(s.stragglers.gpus[0].gpu, 15);
  EXPECT_EQ(s.stragglers.gpus[0].speed, 0.8);
  EXPECT_EQ(s.stragglers.speed_stdev, 0.02);
  EXPECT_EQ(s.stragglers.seed, 7u);
  EXPECT_EQ(parse_scenario(base_with(R"("layout": { "tp": 2 })", R"(, "stragglers": { "speed_stdev": 0.01 })"), "s.json", kProfiles)
                .stragglers.seed,
            1u);
  const auto with = [](const std::string& block) { return error_of(base_with(R"("layout": { "tp": 2 })", ", \"stragglers\": " + block)); };
  std::string e = with(R"({ "gpus": [ { "gpu": 16, "speed": 0.8 } ] })");
  EXPECT_NE(e.find("stragglers.gpus[0].gpu: GPU 16 is not in the largest cluster (16 GPUs"), std::string::npos) << e;
  e = with(R"({ "gpus": [ { "gpu": 3, "speed": 0 } ] })");
  EXPECT_NE(e.find("stragglers.gpus[0].speed"), std::string::npos) << e;
  e = with(R"({ "gpus": [ { "gpu": 3, "speed": 1.5 } ] })");
  EXPECT_NE(e.find("stragglers.gpus[0].speed"), std::string::npos) << e;
  e = with(R"({ "gpus": [ { "gpu": 3, "speed": 0.5 }, { "gpu": 3, "speed": 0.9 } ] })");
  EXPECT_NE(e.find("stragglers.gpus[1].gpu: GPU 3 is listed twice"), std::string::npos) << e;
  e = with(R"({ "gpus": [ { "gpu": 3 } ] })");
  EXPECT_NE(e.find("stragglers.gpus[0].speed: required key is missing"), std::string::npos) << e;
  e = with(R"({ "gpus": [] })");
  EXPECT_NE(e.find("stragglers.gpus: expected a non-empty list"), std::string::npos) << e;
  e = with(R"({ "gpus": [ 3 ] })");
  EXPECT_NE(e.find("stragglers.gpus[0]: expected an object"), std::string::npos) << e;
  e = with(R"({ "speed_stdev": 0.5 })");
  EXPECT_NE(e.find("stragglers.speed_stdev"), std::string::npos) << e;
  e = with(R"({ "seed": 3 })");
  EXPECT_NE(e.find("stragglers: needs \"gpus\""), std::string::npos) << e;
  const Scenario n = parse_scenario(
      base_with(R"("layout": { "tp": 2 })", R"(, "stragglers": { "nics": [ { "node": 1, "nic": 7, "speed": 0.5 } ] })"), "s.json", kProfiles);
  ASSERT_EQ(n.stragglers.nics.size(), 1u);
  EXPECT_EQ(n.stragglers.nics[0].node, 1);
  EXPECT_EQ(n.stragglers.nics[0].nic, 7);
  e = with(R"({ "nics": [ { "node": 2, "nic": 0, "speed": 0.5 } ] })");
  EXPECT_NE(e.find("stragglers.nics[0].node: node 2 is not in the largest cluster (2 nodes)"), std::string::npos) << e;
  e = with(R"({ "nics": [ { "node": 0, "nic": 8, "speed": 0.5 } ] })");
  EXPECT_NE(e.find("stragglers.nics[0].nic: a node has 8 NICs, numbered from 0"), std::string::npos) << e;
  e = with(R"({ "nics": [ { "node": 0, "nic": 1, "speed": 0.5 }, { "node": 0, "nic": 1, "speed": 0.7 } ] })");
  EXPECT_NE(e.find("stragglers.nics[1].nic: NIC 1 of node 0 is listed twice"), std::string::npos) << e;
  e = with(R"({ "nics": [ { "node": 0, "nic": 1, "speed": 2 } ] })");
  EXPECT_NE(e.find("stragglers.nics[0].speed"), std::string::npos) << e;
  e = with(R"({ "speed_stddev": 0.02 })");
  EXPECT_NE(e.find("did you mean \"speed_stdev\""), std::string::npos) << e;
}

TEST(Scenario, CompareBlockMakesOneScenarioPerHardwareOption) {
  // The second option: 4 GPUs per node, its own node counts (the search's too), price and NIC rate;
  // the first keeps the scenario's. With a search block the alternatives leave the layout out.
  const Scenario s = parse_scenario(
      base_with(R"("layout": { "tp": 2, "pp": 2, "micro_batch": 2 })",
                R"(, "search": { "tp": [1, 2], "nodes": [2] }, "cost": { "gpu_hour_usd": 2 },
                   "compare": [ { "hardware": "test-gpu" },
                                { "name": "small nodes", "hardware": "test-gpu", "gpus_per_node": 4, "nodes": [2, 3],
                                  "gpu_hour_usd": 1.5, "network": { "nic_Gbps": 40 }, "precision": "fp8" } ])"),
      "s.json", kProfiles);
  ASSERT_EQ(s.compare.size(), 2u);
  EXPECT_EQ(s.compare[0].name, "test-gpu");
  const Scenario& a = *s.compare[0].scenario;
  EXPECT_EQ(a.cluster.gpus_per_node, 8);
  EXPECT_EQ(a.cost.gpu_hour_usd, 2);
  EXPECT_FALSE(a.has_layout);
  EXPECT_TRUE(a.has_search);
  EXPECT_TRUE(a.compare.empty());
  EXPECT_EQ(s.compare[1].name, "small nodes");
  const Scenario& b = *s.compare[1].scenario;
  EXPECT_EQ(b.cluster.gpus_per_node, 4);
  EXPECT_EQ(b.cluster.nodes, (std::vector<int>{2, 3}));
  EXPECT_EQ(b.search.nodes, (std::vector<int>{2, 3}));
  EXPECT_EQ(b.cost.gpu_hour_usd, 1.5);
  EXPECT_EQ(b.cluster.network.nic_Gbps, 40);
  EXPECT_EQ(b.cluster.network.nics_per_node, 8);  // the profile's
  EXPECT_EQ(b.training.precision, Precision::fp8);
  EXPECT_EQ(a.training.precision, Precision::bf16);
}

TEST(Scenario, CompareBlockIsValidated) {
  auto with = [](const std::string& compare, const std::string& layout = R"("layout": { "tp": 2, "pp": 2, "micro_batch": 2 })") {
    return error_of(base_with(layout, R"(, "compare": )" + compare));
  };
  EXPECT_NE(with("{}").find("compare: expected a non-empty list"), std::string::npos);
  EXPECT_NE(with("[]").find("compare: expected a non-empty list"), std::string::npos);
  EXPECT_NE(with(R"([{ "gpu_hour_usd": 2 }])").find("compare[0].hardware"), std::string::npos);
  const std::string unknown = with(R"([{ "hardware": "test-gpu", "gpu_hour_usb": 2 }])");
  EXPECT_NE(unknown.find("compare[0].gpu_hour_usb"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("did you mean \"gpu_hour_usd\""), std::string::npos) << unknown;
  const std::string profile = with(R"([{ "hardware": "test-gpuu" }])");
  EXPECT_NE(profile.find("compare[0] (test-gpuu): hardware"), std::string::npos) << profile;
  EXPECT_NE(profile.find("did you mean \"test-gpu\""), std::string::npos) << profile;
  EXPECT_NE(with(R"([{ "hardware": "test-gpu" }, { "hardware": "test-gpu" }])").find("compare[1]: a second alternative named"),
            std::string::npos);
  const std::string net = with(R"([{ "hardware": "test-gpu", "network": { "nic_Gbs": 100 } }])");
  EXPECT_NE(net.find("compare[0].network.nic_Gbs"), std::string::npos) << net;
  EXPECT_NE(with(R"([{ "hardware": "test-gpu", "nodes": [2, 0] }])").find("compare[0].nodes[1]"), std::string::npos);
  EXPECT_NE(with(R"([{ "hardware": "test-gpu", "gpus_per_node": 0 }])").find("compare[0].gpus_per_node"), std::string::npos);
  EXPECT_NE(with(R"([{ "hardware": "test-gpu", "precision": "fp4" }])").find("compare[0].precision"), std::string::npos);
  // Without a search block the scenario's layout is what is compared, so it must fit every option.
  const std::string fit = with(R"([{ "hardware": "test-gpu", "gpus_per_node": 3 }])");
  EXPECT_NE(fit.find("compare[0] (test-gpu): layout"), std::string::npos) << fit;
}

TEST(Scenario, EnergyIsTheNodesMaximumPowerForTheTimeToTrain) {
  // 4 DGX H200 nodes at their datasheet maximum of 10.2 kW, PUE 1.25: 51 kW from the grid. Energy
  // to train = 51 kW x the time to train in hours; its cost = that x $0.10 per kWh.
  const std::string text = R"({ "name": "e", "model": "gpt-1.3b", "hardware": "h200-sxm",
      "training": { "global_batch": 64, "tokens_total": 1e10 }, "cluster": { "nodes": 4, "gpus_per_node": 8 },
      "layout": { "tp": 1, "pp": 1, "micro_batch": 2 }, "cost": { "energy_usd_per_kWh": 0.10, "pue": 1.25 } })";
  const Scenario s = parse_scenario(text, "e.json", TRAINSIM_PROFILES);
  EXPECT_EQ(s.hardware.node_max_kW, 10.2);
  EXPECT_EQ(s.hardware.power_provenance.source, "datasheet");
  const Evaluation ev = evaluate(s, resolve_layout(s, s.layout, false, 4), 4, EvalOptions{});
  ASSERT_GT(ev.time_to_train_s, 0);
  EXPECT_DOUBLE_EQ(ev.facility_kW, 4 * 10.2 * 1.25);
  EXPECT_NEAR(ev.energy_kWh, 51.0 * ev.time_to_train_s / 3600.0, 1e-9 * ev.energy_kWh);
  EXPECT_NEAR(ev.energy_usd, 0.10 * ev.energy_kWh, 1e-9 * ev.energy_usd);
  std::ostringstream os;
  print_evaluation(os, s, ev);
  const std::string report = os.str();
  EXPECT_NE(report.find("at the nodes' maximum power (51.0 kW with PUE 1.25, an upper bound)"), std::string::npos) << report;
  EXPECT_EQ(format_energy(1234.0), "1.23 MWh");
  EXPECT_EQ(format_power(1312.0), "1.31 MW");
}

TEST(Scenario, EnergyNeedsTheProfilesNodePower) {
  // test-gpu gives no node power: pricing energy is an error, not a silent zero.
  std::string e = error_of(base_with(R"("layout": { "tp": 2 })", R"(, "cost": { "energy_usd_per_kWh": 0.1 })"));
  EXPECT_NE(e.find("cost.energy_usd_per_kWh: energy needs the hardware profile's node power (power.node_max_kW)"), std::string::npos) << e;
  e = error_of(base_with(R"("layout": { "tp": 2 })", R"(, "cost": { "pue": 1.2 })"));
  EXPECT_NE(e.find("cost.pue"), std::string::npos) << e;
  e = error_of(base_with(R"("layout": { "tp": 2 })", R"(, "cost": { "pue": 0.9 })"));
  EXPECT_NE(e.find("cost.pue"), std::string::npos) << e;
}

TEST(Scenario, AnOptionalAmountGivenAsZeroIsAnErrorNotNone) {
  // Each of these keys means "none" when left out; a zero (or a negative) written in the file is
  // an impossible value, reported at its path, not read as "none".
  const std::string train = R"({ "global_batch": 64 })";
  auto with_training = [](const std::string& training, const std::string& extra = "") {
    return R"({ "name": "t", "model": "gpt-1.3b", "training": )" + training + R"(, "hardware": "test-gpu",
              "cluster": { "nodes": 2, "gpus_per_node": 8 }, "layout": { "tp": 2 })" + extra + "}";
  };
  const std::string tokens = R"({ "global_batch": 64, "tokens_total": 1e9 })";
  const std::pair<std::string, std::string> cases[] = {
      {with_training(R"({ "global_batch": 64, "tokens_total": 0 })"), "training.tokens_total"},
      {with_training(R"({ "global_batch": 64, "tokens_total": 1e9, "deadline_days": 0 })"), "training.deadline_days"},
      {with_training(tokens, R"(, "cost": { "gpu_hour_usd": 0 })"), "cost.gpu_hour_usd"},
      {with_training(tokens, R"(, "cost": { "gpu_hour_usd": 2, "budget_usd": -5 })"), "cost.budget_usd"},
      {with_training(tokens, R"(, "reliability": { "gpu_mtbf_hours": 0, "node_mtbf_hours": 1000, "checkpoint_GBps": 100,
                                   "restart_minutes": 10 })"), "reliability.gpu_mtbf_hours"},
      {with_training(tokens, R"(, "data": { "loader_tokens_per_s_per_node": 0, "storage_GBps": 5, "bytes_per_token": 2 })"),
       "data.loader_tokens_per_s_per_node"},
      {with_training(tokens, R"(, "data": { "storage_GBps": 5, "bytes_per_token": 0 })"), "data.bytes_per_token"},
  };
  for (const auto& [text, key] : cases) {
    const std::string e = error_of(text);
    EXPECT_NE(e.find(key + ": expected a positive number"), std::string::npos) << key << ": " << e;
    EXPECT_NE(e.find("leave the key out"), std::string::npos) << e;
  }
  EXPECT_EQ(error_of(with_training(train)), "");
  EXPECT_EQ(error_of(with_training(tokens, R"(, "cost": { "gpu_hour_usd": 2, "budget_usd": 1e6 })")), "");
}

TEST(Scenario, ADeadlineBudgetOrEnergyPriceWithoutWhatItIsHeldAgainstIsAnError) {
  // Each would otherwise be read and then never used: a deadline and an energy price need the
  // tokens to train, a budget the cost to train them (tokens and a GPU-hour price).
  auto scenario = [](const std::string& training, const std::string& extra) {
    return R"({ "name": "t", "model": "gpt-1.3b", "training": )" + training + R"(, "hardware": "test-gpu-powered",
              "cluster": { "nodes": 2, "gpus_per_node": 8 }, "layout": { "tp": 2 })" + extra + "}";
  };
  std::string e = error_of(scenario(R"({ "global_batch": 64, "deadline_days": 30 })", ""));
  EXPECT_NE(e.find("training.deadline_days: a deadline needs \"tokens_total\""), std::string::npos) << e;
  e = error_of(scenario(R"({ "global_batch": 64 })", R"(, "cost": { "gpu_hour_usd": 2, "budget_usd": 1e6 })"));
  EXPECT_NE(e.find("cost.budget_usd: a budget is held against the cost to train, which needs training.tokens_total"), std::string::npos) << e;
  e = error_of(scenario(R"({ "global_batch": 64, "tokens_total": 1e9 })", R"(, "cost": { "budget_usd": 1e6 })"));
  EXPECT_NE(e.find("cost.budget_usd: a budget is held against the cost to train, which needs \"gpu_hour_usd\""), std::string::npos) << e;
  e = error_of(scenario(R"({ "global_batch": 64 })", R"(, "cost": { "budget_usd": 1e6 })"));
  EXPECT_NE(e.find("which needs \"gpu_hour_usd\" and training.tokens_total"), std::string::npos) << e;
  e = error_of(scenario(R"({ "global_batch": 64 })", R"(, "cost": { "energy_usd_per_kWh": 0.1 })"));
  EXPECT_NE(e.find("cost.energy_usd_per_kWh: an energy price needs training.tokens_total"), std::string::npos) << e;
  // With what each is held against, each loads.
  EXPECT_EQ(error_of(scenario(R"({ "global_batch": 64, "tokens_total": 1e9, "deadline_days": 30 })",
                              R"(, "cost": { "gpu_hour_usd": 2, "budget_usd": 1e6, "energy_usd_per_kWh": 0.1 })")), "");
}

namespace {
// Every leaf and every object of `j` by JSON pointer, the root left out.
void pointers(const nlohmann::json& j, const nlohmann::json::json_pointer& at, std::vector<nlohmann::json::json_pointer>& out) {
  if (j.is_object())
    for (auto it = j.begin(); it != j.end(); ++it) {
      out.push_back(at / it.key());
      pointers(it.value(), at / it.key(), out);
    }
  else if (j.is_array())
    for (std::size_t i = 0; i < j.size(); ++i) {
      out.push_back(at / i);
      pointers(j[i], at / i, out);
    }
}
// The last object key on the path: what an error about the value there must name.
std::string last_key(const nlohmann::json::json_pointer& p) {
  nlohmann::json::json_pointer q = p;
  while (!q.empty()) {
    const std::string k = q.back();
    if (k.empty() || k.find_first_not_of("0123456789") != std::string::npos) return k;
    q.pop_back();
  }
  return "";
}
}  // namespace

TEST(Scenario, EveryMutationOfTheExamplesIsAcceptedOrRejectedNamingTheKey) {
  // Each example scenario, one key at a time: removed, or its value replaced by one of another
  // type. A removal may be accepted (an optional key) or rejected; a value of the wrong type must
  // be rejected. Either way parsing never fails other than with an InputError, and a rejected
  // wrong type names its key.
  std::size_t mutations = 0, rejected = 0;
  for (const auto& e : std::filesystem::directory_iterator(TRAINSIM_SCENARIOS)) {
    if (e.path().extension() != ".json") continue;
    std::ifstream in(e.path());
    const nlohmann::json doc = nlohmann::json::parse(in);
    std::vector<nlohmann::json::json_pointer> all;
    pointers(doc, nlohmann::json::json_pointer(), all);
    for (const auto& p : all) {
      const nlohmann::json& v = doc.at(p);
      std::vector<std::pair<std::string, nlohmann::json>> wrong;
      if (v.is_number()) wrong = {{"a string", "x"}, {"an object", nlohmann::json::object()}};
      else if (v.is_string()) wrong = {{"a number", 7}, {"a list", nlohmann::json::array()}};
      else if (v.is_boolean()) wrong = {{"a number", 3}};
      else if (v.is_array()) wrong = {{"an object", nlohmann::json::object()}, {"a string", "x"}};
      else if (v.is_object()) wrong = {{"a list", nlohmann::json::array()}, {"a number", 1}};
      const std::string where = e.path().filename().string() + " " + p.to_string();
      for (const auto& [what, value] : wrong) {
        nlohmann::json m = doc;
        m.at(p) = value;
        ++mutations;
        try {
          parse_scenario(m.dump(), "m.json", TRAINSIM_PROFILES);
          ADD_FAILURE() << where << " as " << what << " was accepted";
        } catch (const InputError& err) {
          ++rejected;
          EXPECT_NE(std::string(err.what()).find(last_key(p)), std::string::npos) << where << " as " << what << ": " << err.what();
        } catch (const std::exception& err) {
          ADD_FAILURE() << where << " as " << what << ": not an input error: " << err.what();
        }
      }
      nlohmann::json m = doc;
      m.at(p.parent_pointer()).is_object() ? static_cast<void>(m.at(p.parent_pointer()).erase(p.back()))
                                           : m.at(p.parent_pointer()).erase(std::stoul(p.back()));
      ++mutations;
      try {
        parse_scenario(m.dump(), "m.json", TRAINSIM_PROFILES);
      } catch (const InputError&) {
        ++rejected;
      } catch (const std::exception& err) {
        ADD_FAILURE() << where << " removed: not an input error: " << err.what();
      }
    }
  }
  EXPECT_GT(mutations, 1000u);
  std::printf("[ info ] %zu mutations of the example scenarios, %zu rejected\n", mutations, rejected);
}

TEST(Scenario, ExtremeNumbersInTheExamplesAreRejectedOrSimulated) {
  // Each number of each example scenario (the validate scenarios aside: they describe this
  // machine's runs), one at a time, set to 0, -1, 0.5, 1, 1e-9, 1e9 and 1e308. The scenario is
  // either refused with an InputError or its layout at its first node count simulates (symmetric
  // mode; a step that would need every GPU simulated is left out, as a search leaves it out) to a
  // finite positive step, throughput and memory peak. Nothing else may come out: no other
  // exception, no NaN, no infinity.
  std::size_t mutations = 0, rejected = 0, simulated = 0;
  for (const auto& e : std::filesystem::directory_iterator(TRAINSIM_SCENARIOS)) {
    if (e.path().extension() != ".json" || e.path().filename().string().rfind("validate", 0) == 0) continue;
    std::ifstream in(e.path());
    const nlohmann::json doc = nlohmann::json::parse(in);
    std::vector<nlohmann::json::json_pointer> all;
    pointers(doc, nlohmann::json::json_pointer(), all);
    for (const auto& p : all) {
      if (!doc.at(p).is_number()) continue;
      for (const double x : {0.0, -1.0, 0.5, 1.0, 1e-9, 1e9, 1e308}) {
        nlohmann::json m = doc;
        m.at(p) = x;
        const std::string where = e.path().filename().string() + p.to_string() + " = " + nlohmann::json(x).dump();
        ++mutations;
        try {
          const Scenario s = parse_scenario(m.dump(), "m.json", TRAINSIM_PROFILES);
          if (!s.has_layout) continue;
          const int nodes = s.cluster.nodes.front();
          EvalOptions opt;
          opt.every_gpu_if_needed = false;
          const Evaluation ev = evaluate(s, resolve_layout(s, s.layout, s.layout_dp_given, nodes), nodes, opt);
          ++simulated;
          EXPECT_TRUE(std::isfinite(ev.memory.peak().arena_peak_bytes()) && ev.memory.peak().arena_peak_bytes() > 0) << where;
          if (!ev.simulated) continue;  // out of memory: not simulated
          EXPECT_TRUE(std::isfinite(ev.step.step_time_s) && ev.step.step_time_s > 0) << where;
          EXPECT_TRUE(std::isfinite(ev.tokens_per_s) && ev.tokens_per_s > 0) << where;
        } catch (const InputError&) {
          ++rejected;
        } catch (const sim::NeedsEveryGpu&) {
        } catch (const std::exception& err) {
          ADD_FAILURE() << where << ": not an input error: " << err.what();
        }
      }
    }
  }
  EXPECT_GT(mutations, 500u);
  std::printf("[ info ] %zu extreme numbers in the example scenarios: %zu rejected, %zu layouts evaluated\n", mutations, rejected,
              simulated);
}

TEST(Scenario, VocabularyPaddingIsReadAndChecked) {
  auto with_model = [](const std::string& model) {
    return R"({ "name": "t", "model": )" + model + R"(, "training": { "global_batch": 64 }, "hardware": "test-gpu",
              "cluster": { "nodes": 2, "gpus_per_node": 8 }, "layout": { "tp": 2, "pp": 2, "micro_batch": 2 } })";
  };
  const Scenario s = parse_scenario(with_model(R"({ "preset": "gpt-1.3b", "vocab_divisible_by": 128 })"), "s.json", kProfiles);
  EXPECT_EQ(s.model.vocab_divisible_by, 128);
  EXPECT_EQ(parse_scenario(with_model(R"("gpt-1.3b")"), "s.json", kProfiles).model.vocab_divisible_by, 0);
  const std::string e = error_of(with_model(R"({ "preset": "gpt-1.3b", "vocab_divisible_by": 0 })"));
  EXPECT_NE(e.find("model.vocab_divisible_by"), std::string::npos) << e;
}

TEST(Scenario, APaddedVocabularyRunsTheOutputLayerOnAlignedGemms) {
  // GPT-3 175B over 8 TP ranks: 50,257 words split unpadded give each rank 6,282.125 output
  // columns, a shape cuBLAS runs on its slow unaligned kernels (the H200 table this A100 profile
  // derives from measured the 50,257-wide GEMMs at 87-168 TFLOP/s against about 780 for aligned
  // ones of the same size). Padded to 51,200 (6,400 a rank) the last stage's output layer is
  // priced at aligned rates, so the step is shorter, while the parameter count and the model FLOPs
  // behind MFU stay the model's own, and Megatron-LM's export says how to pad.
  const std::string text = R"({ "name": "t", "model": { "preset": "gpt3-175b" VOCAB }, "training": { "global_batch": 1536 },
      "hardware": "a100-80g-sxm", "cluster": { "nodes": 128, "gpus_per_node": 8 },
      "layout": { "tp": 8, "pp": 8, "micro_batch": 1, "sequence_parallel": true, "recompute": "selective", "zero": 1, "schedule": "1f1b" } })";
  auto load = [&](const std::string& vocab) {
    std::string t = text;
    t.replace(t.find("VOCAB"), 5, vocab);
    return parse_scenario(t, "s.json", TRAINSIM_PROFILES);
  };
  const Scenario plain = load(""), padded = load(R"(, "vocab_divisible_by": 128)");
  const Layout l = resolve_layout(plain, plain.layout, false, 128);
  const Evaluation a = evaluate(plain, l, 128, EvalOptions{}), b = evaluate(padded, l, 128, EvalOptions{});
  EXPECT_LT(b.step.step_time_s, 0.95 * a.step.step_time_s);
  EXPECT_EQ(a.params, b.params);
  EXPECT_EQ(a.flops_per_token, b.flops_per_token);
  // The last stage holds the output layer: 943 more rows of 12,288 over 8 ranks, in bf16.
  const double extra = (51200.0 - 50257.0) * 12288 / 8 * 2;
  EXPECT_NEAR(b.memory.per_stage.back().params_bytes - a.memory.per_stage.back().params_bytes, extra, 1.0);
  EXPECT_NE(export_launch(padded, l, 128).megatron_args.find("--make-vocab-size-divisible-by 128"), std::string::npos);
  EXPECT_EQ(export_launch(plain, l, 128).megatron_args.find("--make-vocab-size-divisible-by"), std::string::npos);
  // Unpadded, the export says that Megatron-LM would pad to 51,200 and the plan did not.
  const auto notes = [](const LaunchExport& x) { std::string all; for (const auto& n : x.notes) all += n + "\n"; return all; };
  EXPECT_NE(notes(export_launch(plain, l, 128)).find("pads it to 51200"), std::string::npos) << notes(export_launch(plain, l, 128));
  EXPECT_EQ(notes(export_launch(padded, l, 128)).find("unpadded"), std::string::npos);
  // The result says which vocabulary ran: 50,257 words, padded to 51,200 (or not at all).
  EXPECT_EQ(result_to_json(padded, b)["model"]["vocab"], 50257);
  EXPECT_EQ(result_to_json(padded, b)["model"]["vocab_padded"], 51200);
  EXPECT_EQ(result_to_json(plain, a)["model"]["vocab_padded"], 50257);
}

// The planner and calibrate programs end to end: output formats, exit status 2 on bad input with a
// message naming what and where, and no partial output files.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gemm_shapes.h"
#include "hardware_profile.h"

using trainsim::GemmUse;
using trainsim::parse_gemm_shapes;

namespace {

const std::string kPlanner = PLANNER_EXE;
const std::string kCalibrate = CALIBRATE_EXE;
const std::string kData = TRAINSIM_TEST_DATA;
const std::string kScenarios = TRAINSIM_SCENARIOS;
const std::string kProfiles = TRAINSIM_PROFILES;

struct Outcome {
  int status = -1;
  std::string out, err;
};

// A path named `name` in this process's own directory under the system's temporary one. ctest runs
// tests in parallel processes, so each has its own directory, which it removes as it exits: a test
// run leaves nothing behind, whether its tests pass or fail.
std::string scratch(const std::string& name) {
  struct Directory {
    std::filesystem::path path = std::filesystem::temp_directory_path() / ("trainsim_cli_test_" + std::to_string(getpid()));
    Directory() { std::filesystem::create_directories(path); }
    ~Directory() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const Directory dir;
  return (dir.path / name).string();
}

Outcome run(const std::string& args, const std::string& exe = kPlanner) {
  static int calls = 0;
  const std::string tag = std::to_string(++calls);
  const std::string o = scratch("out_" + tag), e = scratch("err_" + tag);
  const int rc = std::system((exe + " " + args + " >" + o + " 2>" + e).c_str());
  Outcome r;
  r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  auto slurp = [](const std::string& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  r.out = slurp(o);
  r.err = slurp(e);
  std::filesystem::remove(o);
  std::filesystem::remove(e);
  return r;
}

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string p = scratch(name);
  std::ofstream(p) << text;
  return p;
}

// The page `planner report` writes for the scenario at `path` ("" when it fails).
std::string report_page(const std::string& path, const std::string& name) {
  const std::string html = write_temp(name, "");
  if (run("report " + path + " -o " + html).status != 0) return "";
  std::ifstream in(html);
  std::stringstream page;
  page << in.rdbuf();
  std::filesystem::remove(html);
  return page.str();
}

// A copy of the scenario at `path` with its top-level `key` set to `value`, written to a temporary
// file `name`.
std::string scenario_with(const std::string& path, const std::string& key, const nlohmann::json& value, const std::string& name) {
  std::ifstream in(path);
  auto doc = nlohmann::json::parse(in);
  doc[key] = value;
  return write_temp(name, doc.dump());
}

}  // namespace

TEST(Cli, SimulateJsonFollowsTheResultContract) {
  const Outcome r = run("--profiles " + kData + " simulate " + kData + "/test-scenario.json --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* k : {"layout", "gpus", "step_time_s", "tokens_per_s", "mfu", "breakdown_s", "memory", "model"})
    EXPECT_TRUE(j.contains(k)) << k;
  for (const char* k : {"compute", "recompute", "tp_comm", "pp_comm", "dp_comm", "bubble", "optimizer", "data_wait"})
    EXPECT_TRUE(j["breakdown_s"].contains(k)) << k;
  for (const char* k : {"peak_bytes", "device_bytes", "oom", "params_bytes", "grads_bytes", "optimizer_bytes",
                        "activations_bytes", "per_stage_peak_bytes"})
    EXPECT_TRUE(j["memory"].contains(k)) << k;
  EXPECT_EQ(j["gpus"], 16);
  EXPECT_EQ(j["memory"]["per_stage_peak_bytes"].size(), 2u);
}

TEST(Cli, EveryJsonResultNamesTheHardwareAndNetworkItRanOn) {
  // The GPT-3 scenario's network as its file gives it (8 x 200 Gb/s, a non-blocking fat-tree whose
  // leaves take 32 NIC ports: 4 nodes of 8 NICs), and the 25 GbE scenario's single switch, which has
  // no leaves; every command's JSON carries the same block.
  struct Expect {
    const char* scenario;
    const char* hardware;
    int nics;
    double gbps;
    const char* fabric;
    int nodes_per_leaf;  // 0: no leaves
    const char* description;
  };
  const Expect cases[] = {
      {"gpt3-175b-1024-gpus", "a100-80g-sxm", 8, 200, "fat-tree", 4, "8 x 200 Gb/s NICs a node, fat-tree (non-blocking)"},
      {"slow-network-25gbe", nullptr, 1, 25, "single-switch", 0, "1 x 25 Gb/s NICs a node, one switch"},
  };
  for (const Expect& e : cases) {
    const std::string f = kScenarios + "/" + e.scenario + ".json";
    std::ifstream in(f);
    const auto file = nlohmann::json::parse(in);
    std::vector<nlohmann::json> clusters;
    for (const char* cmd : {"simulate", "sweep", "search", "what-if"}) {
      const Outcome r = run(std::string(cmd) + " " + f + " --json");
      ASSERT_EQ(r.status, 0) << cmd << ": " << r.err;
      const auto doc = nlohmann::json::parse(r.out);
      ASSERT_TRUE(doc.contains("cluster")) << cmd;
      clusters.push_back(doc["cluster"]);
    }
    const auto& c = clusters.front();
    for (const auto& other : clusters) EXPECT_EQ(other, c) << e.scenario;
    EXPECT_EQ(c["hardware"], file["hardware"]) << e.scenario;
    if (e.hardware) {
      EXPECT_EQ(c["hardware"], e.hardware);
    }
    EXPECT_EQ(c["gpus_per_node"], 8);
    const auto& n = c["network"];
    EXPECT_EQ(n["nics_per_node"], e.nics);
    EXPECT_EQ(n["nic_Gbps"].get<double>(), e.gbps);
    EXPECT_EQ(n["fabric"], e.fabric);
    EXPECT_EQ(n["oversubscription"].get<double>(), 1.0);
    EXPECT_EQ(n.contains("nodes_per_leaf"), e.nodes_per_leaf > 0) << e.scenario;
    if (e.nodes_per_leaf > 0) {
      EXPECT_EQ(n["nodes_per_leaf"], e.nodes_per_leaf);
    }
    EXPECT_EQ(n["description"], e.description);
  }
}

TEST(Cli, SimulateTextShowsBreakdownAndMemory) {
  const Outcome r = run("--profiles " + kData + " simulate " + kData + "/test-scenario.json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("exposed time on the critical path"), std::string::npos);
  EXPECT_NE(r.out.find("bubble"), std::string::npos);
  EXPECT_NE(r.out.find("memory, peak rank"), std::string::npos);
}

TEST(Cli, TraceIsChromeTraceJson) {
  const std::string trace = scratch("trace.json");
  std::filesystem::remove(trace);
  const Outcome r = run("--profiles " + kData + " simulate " + kData + "/test-scenario.json --trace " + trace);
  ASSERT_EQ(r.status, 0) << r.err;
  std::ifstream in(trace);
  const auto j = nlohmann::json::parse(in);
  ASSERT_TRUE(j.contains("traceEvents"));
  EXPECT_GT(j["traceEvents"].size(), 10u);
  EXPECT_EQ(j["traceEvents"][0]["ph"], "X");
  // With --json, what the trace holds: its tasks, and its critical path, which spans the step, in
  // sum over the stages it runs on.
  const Outcome js = run("--profiles " + kData + " simulate " + kData + "/test-scenario.json --json --trace " + trace);
  ASSERT_EQ(js.status, 0) << js.err;
  const auto result = nlohmann::json::parse(js.out);
  const auto& cp = result["trace"]["critical_path"];
  const double step = result["step_time_s"].get<double>();
  EXPECT_NEAR(cp["seconds"].get<double>(), step, 1e-9 * step);
  double over_stages = 0;
  for (const auto& st : cp["by_stage"]) over_stages += st["seconds"].get<double>();
  EXPECT_NEAR(over_stages, step, 1e-9 * step);
  EXPECT_EQ(cp["by_stage"].size(), 2u);  // pp 2
  EXPECT_GE(cp["contention_s"].get<double>(), 0.0);
  EXPECT_GT(cp["slices"].get<int>(), 10);
  // The file: those tasks, the critical path's, and the names (4 for each GPU, 3 for the path).
  EXPECT_EQ(result["trace"]["slices"].get<std::size_t>() + 4 * 2 + 3, j["traceEvents"].size() - cp["slices"].get<std::size_t>());
}

// --trace-gpus keeps the chosen GPUs' tasks and nothing else: in full mode (every GPU simulated),
// the kept events are exactly the whole trace's events of those GPUs, in the same order. A GPU that
// the step did not simulate, a malformed list, or the option without --trace exits 2 writing nothing.
TEST(Cli, TraceOfChosenGpusIsTheirPartOfTheWholeTrace) {
  const std::string whole = scratch("whole.json"), part = scratch("part.json");
  const std::string sim = "--profiles " + kData + " simulate " + kData + "/test-scenario.json --mode full --trace ";
  ASSERT_EQ(run(sim + whole).status, 0);
  const Outcome r = run(sim + part + " --trace-gpus 4-5,1,5");
  ASSERT_EQ(r.status, 0) << r.err;
  auto read = [](const std::string& p) {
    std::ifstream in(p);
    return nlohmann::json::parse(in)["traceEvents"];
  };
  const auto all = read(whole), kept = read(part);
  // The critical path's process, named so in the metadata: the same in both traces, whichever
  // GPUs the trace keeps.
  auto path_pid = [](const nlohmann::json& events) {
    for (const auto& e : events)
      if (e["ph"] == "M" && e["name"] == "process_name" && e["args"]["name"] == "critical path") return e["pid"].get<int>();
    return -1;
  };
  const int all_path = path_pid(all), kept_path = path_pid(kept);
  ASSERT_GE(all_path, 16);
  ASSERT_GE(kept_path, 6);
  std::vector<nlohmann::json> expected, got, names, path_all, path_kept;
  std::map<int, int> per_gpu;
  for (auto e : all)
    if (e["ph"] == "X") {
      const int g = e["pid"];
      if (g == all_path) {
        e.erase("pid");
        path_all.push_back(e);
        continue;
      }
      ++per_gpu[g];
      if (g == 1 || g == 4 || g == 5) expected.push_back(e);
    }
  EXPECT_EQ(per_gpu.size(), 16u);  // full mode: every GPU of 2 nodes of 8
  for (auto e : kept) {
    if (e["pid"] == kept_path) {
      if (e["ph"] == "X") {
        e.erase("pid");
        path_kept.push_back(e);
      }
      continue;
    }
    (e["ph"] == "X" ? got : names).push_back(e);
  }
  EXPECT_GT(expected.size(), 30u);
  EXPECT_EQ(got, expected);
  EXPECT_FALSE(path_all.empty());
  EXPECT_EQ(path_kept, path_all);
  for (const auto& n : names) {
    const int g = n["pid"];
    EXPECT_TRUE(g == 1 || g == 4 || g == 5) << n.dump();
  }
  EXPECT_EQ(names.size(), 3u * 4);

  const std::string never = scratch("never-gpus.json");
  const std::string symmetric = "--profiles " + kData + " simulate " + kData + "/test-scenario.json --trace " + never;
  for (const std::string& list : {std::string("1"), std::string("0-16"), std::string("x")}) {
    const Outcome bad = run(symmetric + " --trace-gpus " + list);
    EXPECT_EQ(bad.status, 2) << list;
    EXPECT_NE(bad.err.find("--trace-gpus"), std::string::npos) << bad.err;
    EXPECT_FALSE(std::filesystem::exists(never));
  }
  EXPECT_NE(run(symmetric + " --trace-gpus 1").err.find("GPU 1 was not simulated"), std::string::npos);
  EXPECT_EQ(run(symmetric + " --trace-gpus 0,8").status, 0);  // the two stages' representatives
  const Outcome alone = run("--profiles " + kData + " simulate " + kData + "/test-scenario.json --trace-gpus 0");
  EXPECT_EQ(alone.status, 2);
  EXPECT_NE(alone.err.find("--trace"), std::string::npos) << alone.err;
}

TEST(Cli, BadScenarioExitsTwoNamingThePathAndWritesNothing) {
  const std::string bad = write_temp("trainsim_bad.json", R"({ "name": "t", "model": "gpt-125m", "training": { "global_batch": 8 },
      "hardware": "test-gpu", "cluster": { "nodes": 1 }, "layout": { "tp": 2, "zeroo": 1 } })");
  const std::string trace = scratch("never.json");
  std::filesystem::remove(trace);
  const Outcome r = run("--profiles " + kData + " simulate " + bad + " --trace " + trace);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("layout.zeroo"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("did you mean \"zero\""), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(trace));
  EXPECT_TRUE(r.out.empty());
}

TEST(Cli, MissingFileAndBadFlagsExitTwo) {
  EXPECT_EQ(run("simulate /nonexistent/scenario.json").status, 2);
  EXPECT_EQ(run("simulate").status, 2);
  EXPECT_EQ(run("--profiles " + kData + " simulate " + kData + "/test-scenario.json --mode sideways").status, 2);
  const Outcome r = run("--profiles " + kData + " simulate " + kData + "/test-scenario.json --layout tp=3");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("tp"), std::string::npos);
  // A count of zero or below is refused, not taken for "not given" (the default).
  const std::string scenario = kData + "/test-scenario.json";
  for (const std::string& args : {"simulate " + scenario + " --nodes 0", "simulate " + scenario + " --nodes -4",
                                  "sweep " + scenario + " --nodes 1,0", "search " + scenario + " --top 0",
                                  "search " + scenario + " --threads -1", "what-if " + scenario + " --nodes 0"}) {
    const Outcome bad = run("--profiles " + kData + " " + args);
    EXPECT_EQ(bad.status, 2) << args;
    EXPECT_NE(bad.err.find("not in range"), std::string::npos) << args << ": " << bad.err;
    EXPECT_TRUE(bad.out.empty()) << args;
  }
  // A node count given twice, and a directory given for the scenario, are named.
  const Outcome twice = run("--profiles " + kData + " sweep " + scenario + " --nodes 1,2,1");
  EXPECT_EQ(twice.status, 2);
  EXPECT_NE(twice.err.find("--nodes: 1 is given twice"), std::string::npos) << twice.err;
  const Outcome dir = run("simulate " + kScenarios);
  EXPECT_EQ(dir.status, 2);
  EXPECT_NE(dir.err.find(kScenarios + ": is a directory, not a scenario file"), std::string::npos) << dir.err;
}

TEST(Cli, SweepShowsTheSlowdownAndItsReason) {
  const Outcome r = run("sweep " + kScenarios + "/slow-network-25gbe.json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("slower with more GPUs"), std::string::npos) << r.out;
  // The reason named is the category that grew the most: here the gradient all-reduce.
  EXPECT_NE(r.out.find("; DP communication exposed"), std::string::npos) << r.out;
}

TEST(Cli, WhatIfSaysWhenTheUplinksCarryNothing) {
  // Llama 3 70B on 8 nodes of a rail-optimized fabric: a group of rail switches spans 32 nodes, so
  // no traffic reaches the spine and no oversubscription is priced; on 64 nodes (two groups) the
  // 2:1 and 4:1 rows are.
  const std::string f = kScenarios + "/llama3-70b-8-to-64-nodes.json";
  const Outcome eight = run("what-if " + f);
  ASSERT_EQ(eight.status, 0) << eight.err;
  EXPECT_NE(eight.out.find("the 8 nodes fit under one group of rail switches: their uplinks to the spine carry none"), std::string::npos)
      << eight.out;
  EXPECT_EQ(eight.out.find("oversubscribed 2:1"), std::string::npos) << eight.out;
  const Outcome wide = run("what-if " + f + " --nodes 64 --json");
  ASSERT_EQ(wide.status, 0) << wide.err;
  const nlohmann::json rows = nlohmann::json::parse(wide.out)["fabric_settings"];
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["setting"], "oversubscription=2");
  EXPECT_EQ(rows[1]["setting"], "oversubscription=4");
}

TEST(Cli, TablesSayWhichRowsRanOnMoreThanOneGpuPerStage) {
  // The 25 GbE scenario on 4-12 nodes of 8 NICs over a 2:1 fabric of 4 nodes to a leaf (or to a
  // group of rail switches): 6 nodes leave a leaf half full, so one GPU per stage cannot stand for
  // the rest there, and the sweep's and the search's tables say so under them; 4, 8 and 12 fill
  // their leaves and the sweep's layout there uses rings. That step runs one GPU per TP group of
  // every replica (tp 1: each GPU, over the per-GPU shares of NICs and uplinks). With tp 2 and one
  // of node 0's NICs at half rate, a TP pair's NICs run at different speeds, so that step runs on
  // every GPU, and says so.
  auto leaves = [&](const char* fabric) {
    nlohmann::json doc = nlohmann::json::parse(std::ifstream(kScenarios + "/slow-network-25gbe.json"));
    doc["cluster"]["nodes"] = {4, 6, 8, 12};
    doc["cluster"]["network"]["fabric"] = fabric;
    doc["cluster"]["network"]["oversubscription"] = 2;
    doc["cluster"]["network"]["nics_per_node"] = 8;
    if (std::string(fabric) == "rail-optimized") doc["cluster"]["network"]["nics_per_leaf"] = 4;
    doc["training"]["global_batch"] = 384;
    doc["search"]["nodes"] = {4, 6, 8, 12};
    return doc;
  };
  const std::string why = "the nodes do not fill whole leaf switches of the oversubscribed fabric, so one GPU per stage cannot stand for the rest)";
  for (const char* fabric : {"fat-tree", "rail-optimized"}) {
    const std::string f = write_temp("leaves.json", leaves(fabric).dump());
    const Outcome sw = run("sweep " + f);
    ASSERT_EQ(sw.status, 0) << sw.err;
    const std::string half_leaf = "one GPU per tensor-parallel group simulated for 6 nodes (every replica of every stage: " + why;
    EXPECT_NE(sw.out.find("note: " + half_leaf), std::string::npos) << sw.out;
    EXPECT_EQ(sw.out.find("for 4 nodes"), std::string::npos) << sw.out;
    const Outcome se = run("search " + f + " --top 3");
    ASSERT_EQ(se.status, 0) << se.err;
    EXPECT_NE(se.out.find("note: " + half_leaf), std::string::npos) << se.out;
    const Outcome js = run("simulate " + f + " --nodes 6 --json");
    ASSERT_EQ(js.status, 0) << js.err;
    const auto j = nlohmann::json::parse(js.out);
    EXPECT_EQ(j["mode"], "symmetric");
    EXPECT_FALSE(j.contains("every_gpu_simulated_because"));
    EXPECT_TRUE(j.contains("every_replica_simulated_because"));
    std::filesystem::remove(f);
  }
  nlohmann::json doc = leaves("rail-optimized");
  doc["layout"]["tp"] = 2;
  doc["stragglers"] = {{"nics", {{{"node", 0}, {"nic", 0}, {"speed", 0.5}}}}};
  const std::string f = write_temp("leaves.json", doc.dump());
  const Outcome sw = run("sweep " + f);
  ASSERT_EQ(sw.status, 0) << sw.err;
  EXPECT_NE(sw.out.find("note: every GPU simulated for 6 nodes (" + why), std::string::npos) << sw.out;
  EXPECT_EQ(sw.out.find("for 4 nodes"), std::string::npos) << sw.out;
  const Outcome js = run("simulate " + f + " --nodes 6 --json");
  ASSERT_EQ(js.status, 0) << js.err;
  const auto j = nlohmann::json::parse(js.out);
  EXPECT_EQ(j["mode"], "full");
  EXPECT_TRUE(j.contains("every_gpu_simulated_because"));
  std::filesystem::remove(f);
}

TEST(Cli, SweepCountsFailuresWhereTheScenarioGivesThem) {
  const std::string f = kScenarios + "/llama3-405b-2k-to-16k-gpus.json";
  const Outcome text = run("sweep " + f);
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("failures and checkpoints included"), std::string::npos) << text.out;
  const Outcome js = run("sweep " + f + " --json");
  ASSERT_EQ(js.status, 0) << js.err;
  const auto rows = nlohmann::json::parse(js.out)["sweep"];
  ASSERT_GE(rows.size(), 2u);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i]["reliability"];
    EXPECT_GT(r["goodput"].get<double>(), 0.0);
    EXPECT_LT(r["goodput"].get<double>(), 1.0);
    // Each row's time to train is its token count at its throughput, over its goodput.
    EXPECT_NEAR(rows[i]["time_to_train_s"].get<double>() * rows[i]["tokens_per_s"].get<double>() * r["goodput"].get<double>(),
                1.5e13, 1e3);
    if (i > 0) {
      EXPECT_LT(r["goodput"].get<double>(), rows[i - 1]["reliability"]["goodput"].get<double>());
    }
  }
  // The export carries the interval as Megatron-LM's --save-interval, and the token budget as
  // samples: 1.5e13 tokens / 8,192 per sequence = 1,831,054,687.5, rounded up.
  const Outcome ex = run("export " + f + " --nodes 1024");
  ASSERT_EQ(ex.status, 0) << ex.err;
  EXPECT_NE(ex.out.find("--train-samples 1831054688"), std::string::npos) << ex.out;
  const auto at_1024 = std::find_if(rows.begin(), rows.end(), [](const nlohmann::json& r) { return r["nodes"] == 1024; });
  ASSERT_NE(at_1024, rows.end());
  const long long steps = (*at_1024)["reliability"]["checkpoint_interval_steps"].get<long long>();
  EXPECT_NE(ex.out.find("--save-interval " + std::to_string(steps) + "\n"), std::string::npos) << ex.out;
  // Failures ten times as frequent per GPU (every 3,000 h here): from 1,024 to 2,048 nodes the job
  // steps faster but takes longer to train, and the sweep says why.
  std::ifstream scenario(f);
  auto fragile = nlohmann::json::parse(scenario);
  fragile["reliability"]["gpu_mtbf_hours"] = 3000;
  const std::string ff = write_temp("fragile.json", fragile.dump());
  const Outcome fr = run("sweep " + ff);
  ASSERT_EQ(fr.status, 0) << fr.err;
  EXPECT_NE(fr.out.find("longer to train on more GPUs: 2048 nodes step faster than 1024"), std::string::npos) << fr.out;
  std::filesystem::remove(ff);
  EXPECT_NE(report_page(f, "capacity.html").find("<th>goodput</th>"), std::string::npos);
}

TEST(Cli, SweepShowsWhatStragglersCostAtEachSize) {
  const std::string f = kScenarios + "/llama3-70b-stragglers.json";
  const Outcome text = run("sweep " + f);
  ASSERT_EQ(text.status, 0) << text.err;
  const auto at = text.out.find("stragglers at each size, and what they cost the step");
  ASSERT_NE(at, std::string::npos) << text.out;
  const Outcome js = run("sweep " + f + " --json");
  ASSERT_EQ(js.status, 0) << js.err;
  const auto rows = nlohmann::json::parse(js.out)["sweep"];
  ASSERT_EQ(rows.size(), 4u);
  double last = 2;
  for (const auto& r : rows) {
    const auto& st = r["stragglers"];
    // A GPU's speed does not change with the cluster's size: the slowest can only get slower.
    EXPECT_LE(st["slowest_speed"].get<double>(), last);
    last = st["slowest_speed"].get<double>();
    EXPECT_GT(r["step_time_s"].get<double>(), st["step_time_at_nominal_speed_s"].get<double>());
    char row[64];
    std::snprintf(row, sizeof row, "slowest GPU %6d at %5.1f%%", st["slowest_gpu"].get<int>(), 100 * last);
    EXPECT_NE(text.out.find(row, at), std::string::npos) << row << "\n" << text.out;
  }
  // One throttled GPU, named: the simulate output says what it costs.
  const std::string ff = scenario_with(f, "stragglers", nlohmann::json::parse(R"({ "gpus": [ { "gpu": 37, "speed": 0.85 } ] })"),
                                       "straggler.json");
  const Outcome sym = run("simulate " + ff + " --json");
  ASSERT_EQ(sym.status, 0) << sym.err;
  const auto a = nlohmann::json::parse(sym.out);
  EXPECT_EQ(a["stragglers"]["slowest_gpu"], 37);
  EXPECT_EQ(a["stragglers"]["named_gpus_in_cluster"], 1);
  const double cost = a["step_time_s"].get<double>() / a["stragglers"]["step_time_at_nominal_speed_s"].get<double>() - 1;
  EXPECT_GT(cost, 0.05);
  EXPECT_LT(cost, 1 / 0.85 - 1);
  const Outcome txt = run("simulate " + ff);
  EXPECT_NE(txt.out.find("stragglers (1 named GPU): slowest GPU 37 at 85.0% speed"), std::string::npos) << txt.out;
  std::filesystem::remove(ff);
  // The export asks Megatron-LM to log stragglers, where a fleet's spread can be measured.
  const Outcome ex = run("export " + f);
  ASSERT_EQ(ex.status, 0) << ex.err;
  EXPECT_NE(ex.out.find("  --log-straggler"), std::string::npos) << ex.out;
  // The report has their table; its timeline of a 1,024-micro-batch step (over 40,000 tasks)
  // draws what the page's width can show, not a bar per task.
  const std::string page = report_page(f, "stragglers.html");
  EXPECT_NE(page.find("<h2>Stragglers</h2>"), std::string::npos);
  EXPECT_LT(page.size(), 100000u);
}

TEST(Cli, ASlowNicShowsInSimulateAndSweep) {
  const std::string f = scenario_with(kScenarios + "/slow-network-25gbe.json", "stragglers",
                                      nlohmann::json::parse(R"({ "nics": [ { "node": 1, "nic": 0, "speed": 0.5 } ] })"), "slow-nic.json");
  const Outcome js = run("simulate " + f + " --nodes 2 --json");
  ASSERT_EQ(js.status, 0) << js.err;
  const auto r = nlohmann::json::parse(js.out);
  EXPECT_EQ(r["stragglers"]["slow_nics_in_cluster"], 1);
  EXPECT_EQ(r["stragglers"]["slowest_nic_speed"], 0.5);
  // The gradient ring is the step here, and it runs at half speed through that NIC.
  EXPECT_GT(r["step_time_s"].get<double>(), 1.5 * r["stragglers"]["step_time_at_nominal_speed_s"].get<double>());
  const Outcome sw = run("sweep " + f);
  ASSERT_EQ(sw.status, 0) << sw.err;
  EXPECT_NE(sw.out.find("     1 node   0 slow NICs  step"), std::string::npos) << sw.out;
  EXPECT_NE(sw.out.find("     2 nodes  1 slow NIC  step"), std::string::npos) << sw.out;
  std::filesystem::remove(f);
}

TEST(Cli, EveryExampleScenarioSimulates) {
  for (const auto& e : std::filesystem::directory_iterator(kScenarios)) {
    if (e.path().extension() != ".json") continue;
    const Outcome r = run("simulate " + e.path().string() + " --json");
    ASSERT_EQ(r.status, 0) << e.path() << ": " << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_GT(j["memory"]["peak_bytes"].get<double>(), 0) << e.path();
    EXPECT_GT(j["step_time_s"].get<double>(), 0) << e.path();
  }
}

TEST(Cli, EveryPlanningCommandRunsOnEveryExampleScenario) {
  // sweep, what-if, export and report on every scenario in scenarios/; search on those that have a search
  // space, and on the others (the validate inputs) an exit status of 2 that names the missing block.
  for (const auto& e : std::filesystem::directory_iterator(kScenarios)) {
    if (e.path().extension() != ".json") continue;
    const std::string f = e.path().string();
    std::ifstream in(f);
    const nlohmann::json doc = nlohmann::json::parse(in);
    const bool has_search = doc.contains("search");
    const Outcome search = run("search " + f + " --top 3");
    if (has_search) {
      ASSERT_EQ(search.status, 0) << f << ": " << search.err;
      EXPECT_NE(search.out.find("simulated"), std::string::npos) << f;
    } else {
      EXPECT_EQ(search.status, 2) << f;
      EXPECT_NE(search.err.find("no \"search\" block"), std::string::npos) << f << ": " << search.err;
    }
    std::ifstream again(f);
    if (nlohmann::json::parse(again).contains("compare")) {
      const Outcome compare = run("compare " + f + " --json");
      ASSERT_EQ(compare.status, 0) << f << ": " << compare.err;
      EXPECT_FALSE(nlohmann::json::parse(compare.out)["alternatives"].empty()) << f;
    }
    const Outcome sweep = run("sweep " + f + " --json");
    ASSERT_EQ(sweep.status, 0) << f << ": " << sweep.err;
    EXPECT_FALSE(nlohmann::json::parse(sweep.out).empty()) << f;
    const Outcome what_if = run("what-if " + f + " --json");
    ASSERT_EQ(what_if.status, 0) << f << ": " << what_if.err;
    // The five parts of the hardware, and the input pipeline's storage and loaders where the data
    // block limits them.
    std::size_t data_parts = 0;
    if (doc.contains("data"))
      for (const char* k : {"storage_GBps", "loader_tokens_per_s_per_node"}) data_parts += doc["data"].value(k, 0.0) > 0;
    EXPECT_EQ(nlohmann::json::parse(what_if.out)["parts"].size(), 5u + data_parts) << f;
    const Outcome exported = run("export " + f);
    ASSERT_EQ(exported.status, 0) << f << ": " << exported.err;
    EXPECT_NE(exported.out.find("--tensor-model-parallel-size"), std::string::npos) << f;
    const std::string html = write_temp("every_example.html", "");
    const Outcome report = run("report " + f + " -o " + html);
    ASSERT_EQ(report.status, 0) << f << ": " << report.err;
    EXPECT_GT(std::filesystem::file_size(html), 1000u) << f;
    std::filesystem::remove(html);
  }
}

TEST(Cli, WhatIfNamesThePartThatSetsTheStep) {
  // Data parallel over four nodes on one 25 GbE NIC each: the network sets the step. The text
  // says so, the JSON gives every part faster and slower, and a factor that is not above 1 is bad
  // input (exit 2, naming the flag).
  const std::string f = kScenarios + "/slow-network-25gbe.json";
  const Outcome text = run("what-if " + f + " --nodes 4");
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("network bandwidth (NICs) sets this step: 2x faster cuts it by"), std::string::npos) << text.out;
  const Outcome js = run("what-if " + f + " --nodes 4 --factor 1.5 --json");
  ASSERT_EQ(js.status, 0) << js.err;
  const auto j = nlohmann::json::parse(js.out);
  EXPECT_EQ(j["sets_the_step"], "network");
  EXPECT_EQ(j["factor"].get<double>(), 1.5);
  const double base = j["base"]["step_time_s"].get<double>();
  for (const auto& part : j["parts"]) {
    EXPECT_LE(part["faster"]["step_time_s"].get<double>(), base * (1 + 1e-12)) << part["part"];
    EXPECT_GE(part["slower"]["step_time_s"].get<double>(), base * (1 - 1e-12)) << part["part"];
  }
  const Outcome bad = run("what-if " + f + " --factor 0.5");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("--factor"), std::string::npos) << bad.err;
  EXPECT_TRUE(bad.out.empty());
}

TEST(Cli, WhatIfSearchAsksTheSpaceAgain) {
  // --search ranks the scenario's space again with each part changed: the text gives both tables
  // and what is worth the most, the JSON each part's best layout with the winner kept beside it;
  // --search with --layout, or on a scenario without a search block, is bad input.
  const std::string f = kScenarios + "/slow-network-25gbe.json";
  const Outcome text = run("what-if " + f + " --search --nodes 2 --threads 2");
  ASSERT_EQ(text.status, 0) << text.err;
  for (const char* s : {"the search space searched again", "one part 2x faster", "one part 2x slower", "is worth the most:", "winner kept"})
    EXPECT_NE(text.out.find(s), std::string::npos) << s << "\n" << text.out;
  const Outcome js = run("what-if " + f + " --search --nodes 2 --threads 2 --json");
  ASSERT_EQ(js.status, 0) << js.err;
  const auto j = nlohmann::json::parse(js.out);
  EXPECT_EQ(j["nodes"], 2);
  ASSERT_EQ(j["parts"].size(), 5u);
  for (const auto& part : j["parts"])
    for (const char* side : {"faster", "slower"})
      EXPECT_GE(part[side]["tokens_per_s"].get<double>(), part[side]["winner_kept"]["tokens_per_s"].get<double>() * (1 - 1e-12))
          << part["part"] << " " << side;
  const Outcome with_layout = run("what-if " + f + " --search --layout tp=4");
  EXPECT_EQ(with_layout.status, 2);
  EXPECT_NE(with_layout.err.find("--layout"), std::string::npos) << with_layout.err;
  const Outcome no_space = run("what-if " + kScenarios + "/llama3-70b-stragglers.json --search");
  EXPECT_EQ(no_space.status, 2);
  EXPECT_NE(no_space.err.find("search"), std::string::npos) << no_space.err;
  EXPECT_TRUE(no_space.out.empty());
}

TEST(Cli, CompareRanksTheSearchOnEachHardwareOption) {
  // The example comparison: every option's rows and the picks, in text and in JSON; each option's
  // best layout at a size is the one `planner search` finds on a scenario of that hardware alone.
  const std::string f = kScenarios + "/llama3-70b-h100-h200-b200.json";
  const Outcome text = run("compare " + f);
  ASSERT_EQ(text.status, 0) << text.err;
  for (const char* s : {"h100-sxm", "h200-sxm", "b200-sxm", "fastest to train:", "cheapest to train:", "cheapest within the 60-day deadline:"})
    EXPECT_NE(text.out.find(s), std::string::npos) << s << "\n" << text.out;
  const Outcome js = run("compare " + f + " --json");
  ASSERT_EQ(js.status, 0) << js.err;
  const auto doc = nlohmann::json::parse(js.out);
  ASSERT_EQ(doc["alternatives"].size(), 3u);
  EXPECT_EQ(doc["compared_by"], "cost_usd");
  const auto& b200 = doc["alternatives"][2];
  EXPECT_EQ(b200["hardware"], "b200-sxm");
  ASSERT_FALSE(b200["best_per_size"].empty());
  const auto& largest = b200["best_per_size"].back();
  std::ifstream in(f);
  auto alone = nlohmann::json::parse(in);
  alone.erase("compare");
  alone.erase("layout");
  alone["hardware"] = "b200-sxm";
  alone["cost"]["gpu_hour_usd"] = b200["gpu_hour_usd"];
  alone["cluster"]["nodes"] = {largest["nodes"]};
  alone["search"]["nodes"] = {largest["nodes"]};
  const Outcome search = run("search " + write_temp("b200_alone.json", alone.dump()) + " --json --top 1");
  ASSERT_EQ(search.status, 0) << search.err;
  const auto best = nlohmann::json::parse(search.out)["candidates"][0];
  EXPECT_EQ(best["layout"], largest["layout"]);
  EXPECT_EQ(best["step_time_s"], largest["step_time_s"]);
  EXPECT_EQ(best["cost_usd"], largest["cost_usd"]);
  // Power and energy: the nodes' datasheet maximum (DGX B200: 14.3 kW) times the site's PUE, for
  // the time to train; sizes over the site's power are marked.
  EXPECT_NE(text.out.find("energy"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("over the power budget"), std::string::npos) << text.out;
  const double pue = alone["cost"]["pue"].get<double>();
  EXPECT_DOUBLE_EQ(largest["facility_kW"].get<double>(), 14.3 * largest["nodes"].get<int>() * pue);
  EXPECT_LE(largest["facility_kW"].get<double>(), alone["cluster"]["power_budget_kW"].get<double>());
  EXPECT_FALSE(largest["over_power_budget"].get<bool>());
  EXPECT_NEAR(largest["energy_kWh"].get<double>(), largest["facility_kW"].get<double>() * largest["time_to_train_s"].get<double>() / 3600.0,
              1e-6 * largest["energy_kWh"].get<double>());
  // The report shows the same comparison, with the time-against-cost chart.
  const std::string page = report_page(f, "compare_report.html");
  for (const char* s : {"<h2>Hardware options</h2>", "b200-sxm <span class='note'>derived</span>", "h200-sxm <span class='note'>measured</span>",
                        "cheapest within the deadline", "aria-label='time and cost to train'"})
    EXPECT_NE(page.find(s), std::string::npos) << s;
  // A scenario without the block: exit 2, naming it.
  const Outcome none = run("compare " + kScenarios + "/gpt3-175b-1024-gpus.json");
  EXPECT_EQ(none.status, 2);
  EXPECT_NE(none.err.find("no \"compare\" block"), std::string::npos) << none.err;
}

TEST(Cli, CalibrateKernelMixRefusesBadFlagsBeforeMeasuring) {
  // Each refused with exit 2 and the flag named, on any machine (before a GPU is looked for).
  const std::string log = write_temp("bad-clock-log.csv", "2026/12/03 16:51:44.969, 1980 GHz, 480.00 W\n");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"kernel-mix --shares 0.5,1", "--shares[1]"},
      {"kernel-mix --shares -0.1", "--shares[0]"},
      {"kernel-mix --settle 0", "--settle"},
      {"kernel-mix --timed 100", "--timed"},
      {"kernel-mix --gemm 4096,8,4096", "--gemm[1]"},
      {"kernel-mix --attention 1,30,2048,128,4", "--attention"},
      {"kernel-mix --attention 1,32,2048,0,4", "--attention head_dim"},
      {"kernel-mix --attention 64,64,8192,128,4", "16 GiB"},
      {"kernel-mix --layer 8192,768", "--layer"},
      {"kernel-mix --layer 32,768,3072", "--layer tokens"},
      {"kernel-mix --layer 3000,768,3072", "--layer tokens"},
      {"kernel-mix --layer 8192,800,3072", "--layer hidden"},
      {"kernel-mix --layer 65536,8192,65536", "16 GiB"},
      {"kernel-mix --layer 65536,65536,64", "16 GiB"},
      {"kernel-mix --layer-kind mamba", "--layer-kind"},
      {"kernel-mix --layer-kind gpt --layer 8192,768,8", "--layer MLP width"},
      // A GPT-style layer holds more tensors of tokens x hidden than a Llama-style one: this shape
      // passes as Llama's (14 GiB) and not as GPT's (17.5 GiB).
      {"kernel-mix --layer-kind gpt --layer 65536,8192,8192", "16 GiB"},
      {"kernel-mix --clock-log /nonexistent/clocks.csv", "/nonexistent/clocks.csv"},
      {"kernel-mix --clock-log " + log, log + ":1"},
  };
  for (const auto& [args, named] : cases) {
    const Outcome r = run(args, kCalibrate);
    EXPECT_EQ(r.status, 2) << args;
    EXPECT_NE(r.err.find(named), std::string::npos) << args << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << args;
  }
  // --gemm and --attention are one or the other.
  EXPECT_EQ(run("kernel-mix --gemm 64,64,64 --attention 1,32,2048,128,4", kCalibrate).status, 2);
  std::filesystem::remove(log);
}

TEST(Cli, CalibrateGemmConditionsRefusesBadShapesBeforeMeasuring) {
  // Each refused with exit 2 and the flag and its value named, on any machine (before a GPU is
  // looked for).
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"gemm-conditions --shape 8192,32000", "--shape 8192,32000:"},
      {"gemm-conditions --shape 8192,32000,2048,1", "--shape 8192,32000,2048,1:"},
      {"gemm-conditions --shape 8192,x,2048", "'x' is not an integer"},
      {"gemm-conditions --shape 8192,,2048", "--shape 8192,,2048:"},
      {"gemm-conditions --shape 8192,32000,2048,0,2", "ta and tb must be 0 or 1"},
      {"gemm-conditions --shape 8,32000,2048", "from 16 to 131072"},
      {"gemm-conditions --shape 131072,131072,4096", "over 24 GiB"},
      {"gemm-conditions --shape 4096,4096,4096 --shape 1,2,3", "--shape 1,2,3:"},
      {"gemm-conditions --idle-ms -5", "--idle-ms"},
      {"gemm-conditions --idle-ms 20000", "--idle-ms"},
  };
  for (const auto& [args, named] : cases) {
    const Outcome r = run(args, kCalibrate);
    EXPECT_EQ(r.status, 2) << args;
    EXPECT_NE(r.err.find(named), std::string::npos) << args << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << args;
  }
}

// Each calibrate command line exits 2 with a message naming what it refuses, and prints nothing.
static void expect_calibrate_refuses(const std::vector<std::pair<std::string, std::string>>& cases) {
  for (const auto& [args, named] : cases) {
    const Outcome r = run(args, kCalibrate);
    EXPECT_EQ(r.status, 2) << args;
    EXPECT_NE(r.err.find(named), std::string::npos) << args << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << args;
  }
}

TEST(Cli, CalibrateAttentionConditionsRefusesABadIdleTimeBeforeMeasuring) {
  for (const std::string args : {"attention-conditions --idle-ms -5", "attention-conditions --idle-ms 20000",
                                 "attention-conditions --idle-ms nan"}) {
    const Outcome r = run(args, kCalibrate);
    EXPECT_EQ(r.status, 2) << args;
    EXPECT_NE(r.err.find("--idle-ms"), std::string::npos) << args << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << args;
  }
}

TEST(Cli, CalibrateAttentionTableWritesAProfileOnlyFromGoodRuns) {
  // One of --out and --into; --into needs runs; a run that is not one, or one of another part, is
  // refused with exit 2 and its file named, the profile left as it was.
  std::ifstream pin(kProfiles + "/h100-sxm.json");
  const std::string original((std::istreambuf_iterator<char>(pin)), std::istreambuf_iterator<char>());
  const std::string profile = write_temp("attention-into.json", original);
  const std::string not_run = write_temp("not-a-run.json", R"({"attention": []})");
  const nlohmann::json p = nlohmann::json::parse(original);
  nlohmann::json run_doc = {{"attention_run", p["measurements"]["attention"]},
                            {"provenance", {{"source", "measured"}, {"device", "NVIDIA H100 80GB HBM3"}, {"date", "2026-12-07"},
                                            {"command", "calibrate attention-table --out run.json"}}}};
  nlohmann::json other_part = run_doc;
  other_part["provenance"]["device"] = "NVIDIA H200";
  const std::string h200_run = write_temp("h200-run.json", other_part.dump());
  const std::string same_run = write_temp("same-attention-run.json", run_doc.dump());
  expect_calibrate_refuses({
           {"attention-table", "either --out"},
           {"attention-table --out a.json --into " + profile, "either --out"},
           {"attention-table --into " + profile, "needs one or more run files"},
           {"attention-table --into " + profile + " " + not_run, not_run},
           {"attention-table --into " + profile + " /nonexistent-run.json", "/nonexistent-run.json"},
           {"attention-table --into " + profile + " " + h200_run, "was measured on \"NVIDIA H200\""},
           // One run given twice (a shell glob that overlaps): its medians would count it twice.
           {"attention-table --into " + profile + " " + same_run + " " + same_run, same_run + ": is the same run as " + same_run},
       });
  std::ifstream after(profile);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(after)), std::istreambuf_iterator<char>()), original);
  // A good run (the table the profile has, as one card's run) is written in, and the profile loads.
  const std::string good = write_temp("good-run.json", run_doc.dump());
  const Outcome ok = run("attention-table --into " + profile + " " + good, kCalibrate);
  ASSERT_EQ(ok.status, 0) << ok.err;
  const trainsim::HardwareProfile hp = trainsim::load_hardware_profile(profile, kProfiles);
  EXPECT_EQ(hp.attention.size(), p["gpu"]["attention"]["table"]["rows"].size());
  std::filesystem::remove(profile);
}

TEST(Cli, CalibrateKernelTableWritesAProfileOnlyFromGoodRuns) {
  // As attention-table: one of --out and --into; --into needs runs; a run that is not one, or one
  // of another part, is refused with exit 2 and its file named, the profile left as it was.
  std::ifstream pin(kProfiles + "/h100-sxm.json");
  const std::string original((std::istreambuf_iterator<char>(pin)), std::istreambuf_iterator<char>());
  const std::string profile = write_temp("kernel-into.json", original);
  const nlohmann::json p = nlohmann::json::parse(original);
  nlohmann::json run_doc = {{"kernel_run", p["measurements"]["step_kernels"]},
                            {"provenance", {{"source", "measured"}, {"device", "NVIDIA H100 80GB HBM3"}, {"date", "2026-12-07"},
                                            {"command", "calibrate kernel-table --out run.json"}}}};
  nlohmann::json attention_run = {{"attention_run", p["measurements"]["attention"]}, {"provenance", run_doc["provenance"]}};
  const std::string not_run = write_temp("attention-run.json", attention_run.dump());
  nlohmann::json other_part = run_doc;
  other_part["provenance"]["device"] = "NVIDIA H200";
  const std::string h200_run = write_temp("h200-kernel-run.json", other_part.dump());
  const std::string datasheet = kProfiles + "/b200-sxm.json";
  const std::string good = write_temp("good-kernel-run.json", run_doc.dump());
  // A run timed otherwise than the first (calibrate's bursts, no method recorded) is another table.
  nlohmann::json evicted_doc = run_doc;
  evicted_doc["provenance"]["method"] = {{"timing", "evicted"}, {"shapes", "profile"}};
  const std::string evicted_run = write_temp("evicted-kernel-run.json", evicted_doc.dump());
  nlohmann::json misspelt_doc = run_doc;
  misspelt_doc["kernel_run"][0]["kernel"] = "layer_norm";
  const std::string misspelt = write_temp("misspelt-kernel-run.json", misspelt_doc.dump());
  // Found by tools/fuzz_scenarios.py --target calibration: a row of no heads stopped calibrate with
  // a division by zero (SIGFPE); a fractional size was read as its integer part (0.5 heads as 0);
  // a card's UUID that is not a string exited 1 with the JSON library's message.
  auto edited = [&](const char* name, auto edit) {
    nlohmann::json d = run_doc;
    edit(d);
    return write_temp(name, d.dump());
  };
  const std::string no_heads = edited("no-heads-run.json", [](nlohmann::json& d) { d["kernel_run"][0]["heads"] = 0; });
  const std::string half_head = edited("half-head-run.json", [](nlohmann::json& d) { d["kernel_run"][0]["heads"] = 0.5; });
  const std::string odd_group = edited("odd-group-run.json", [](nlohmann::json& d) {
    for (auto& k : d["kernel_run"])
      if (k["llama"].get<bool>()) {
        k["kv_heads"] = 3;
        break;
      }
  });
  const std::string bad_uuid = edited("bad-uuid-run.json", [](nlohmann::json& d) { d["provenance"]["device_uuids"] = {1e-308}; });
  expect_calibrate_refuses({
           {"kernel-table --into " + profile + " " + no_heads, "kernel_run[0].heads: expected a positive integer, found 0"},
           {"kernel-table --into " + profile + " " + half_head, "kernel_run[0].heads: expected an integer, found a number 0.5"},
           {"kernel-table --into " + profile + " " + odd_group, "kv_heads: heads (16) must be divisible by kv_heads (3)"},
           {"kernel-table --into " + profile + " " + bad_uuid, "provenance.device_uuids[0]: expected a string"},
           {"kernel-table", "either --out"},
           {"kernel-table --out a.json --into " + profile, "either --out"},
           {"kernel-table --out a.json " + good, "run files go with --into"},
           {"kernel-table --into " + profile, "needs one or more run files"},
           {"kernel-table --into " + profile + " " + not_run, not_run},
           {"kernel-table --into " + profile + " /nonexistent-run.json", "/nonexistent-run.json"},
           {"kernel-table --into " + profile + " " + h200_run, "was measured on \"NVIDIA H200\""},
           {"kernel-table --out a.json --timing fast", "\"fast\" is not a kernel timing"},
           {"kernel-table --out a.json --shapes all", "\"all\" is not a set of kernel shapes"},
           {"kernel-table --into " + profile + " --timing single " + good, "--timing"},
           {"kernel-table --into " + profile + " " + good + " " + evicted_run, evicted_run},
           {"kernel-table --into " + profile + " " + misspelt, "kernel_run[0]: no step prices a kernel named \"layer_norm\""},
           {"kernel-table --into " + profile + " " + good + " " + good, good + ": is the same run as " + good},
       });
  std::ifstream after(profile);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(after)), std::istreambuf_iterator<char>()), original);
  // A datasheet profile is not one calibrate measured: refused, and left as it was.
  const std::string sheet = write_temp("datasheet-into.json", [&] {
    std::ifstream d(datasheet);
    return std::string((std::istreambuf_iterator<char>(d)), std::istreambuf_iterator<char>());
  }());
  const Outcome r = run("kernel-table --into " + sheet + " " + good, kCalibrate);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("is not a profile measured by calibrate"), std::string::npos) << r.err;
  // A good run (the table the profile has, as one card's run) is written in: the same rates, and
  // the table's own provenance.
  const Outcome ok = run("kernel-table --into " + profile + " " + good, kCalibrate);
  ASSERT_EQ(ok.status, 0) << ok.err;
  const trainsim::HardwareProfile before = trainsim::load_hardware_profile(kProfiles + "/h100-sxm.json", kProfiles);
  const trainsim::HardwareProfile hp = trainsim::load_hardware_profile(profile, kProfiles);
  ASSERT_EQ(hp.memory_kernels.size(), before.memory_kernels.size());
  for (const auto& [k, rows] : before.memory_kernels) {
    ASSERT_EQ(hp.memory_kernels.at(k).size(), rows.size()) << k;
    for (std::size_t i = 0; i < rows.size(); ++i) EXPECT_DOUBLE_EQ(hp.memory_kernels.at(k)[i].GBps, rows[i].GBps) << k;
  }
  std::ifstream written(profile);
  EXPECT_EQ(nlohmann::json::parse(written)["gpu"]["memory_kernels"]["provenance"]["merged_from"].size(), 1u);
  std::filesystem::remove(profile);
}

TEST(Cli, GemmShapesListWhatAScenarioRunsAndCalibrateReadsThem) {
  // planner gemm-shapes: a comment naming the scenario, its models and (tp, micro-batch) pairs and
  // the count, then one shape a line, each once; calibrate --extra-shapes reads that format back.
  const Outcome r = run("gemm-shapes " + kScenarios + "/validate-llama-one-gpu.json");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::vector<GemmUse> shapes = parse_gemm_shapes(r.out, "output");
  EXPECT_NE(r.out.find("llama-1.1b, llama-3b"), std::string::npos) << r.out.substr(0, 300);
  EXPECT_NE(r.out.find(std::to_string(shapes.size()) + " shapes"), std::string::npos) << r.out.substr(0, 300);
  EXPECT_EQ(std::set<GemmUse>(shapes.begin(), shapes.end()).size(), shapes.size());
  // Llama 1.1B's fused gate and up projection at two sequences of 2,048 tokens, forward.
  EXPECT_NE(std::find(shapes.begin(), shapes.end(), GemmUse{4096, 11264, 2048, false, false}), shapes.end());
  // A search scenario's shapes come from its valid layouts: tp 8 over Llama 3 405B's heads.
  const Outcome big = run("gemm-shapes " + kScenarios + "/llama3-405b-2k-to-16k-gpus.json");
  ASSERT_EQ(big.status, 0) << big.err;
  const std::vector<GemmUse> big_shapes = parse_gemm_shapes(big.out, "output");
  EXPECT_NE(std::find(big_shapes.begin(), big_shapes.end(), GemmUse{8192, 16384, 53248 / 8, false, false}), big_shapes.end());
  EXPECT_EQ(run("gemm-shapes /nonexistent.json").status, 2);
  // calibrate refuses a bad file with exit 2 and the file and line named, before looking for a GPU.
  const std::string bad = write_temp("bad-shapes.txt", "# m n k ta tb\n4096 4096 4096 0 0\n4096 4096 0 1\n");
  const std::string empty = write_temp("empty-shapes.txt", "# nothing\n");
  const std::string huge = write_temp("huge-shapes.txt", "200000 200000 200000 0 0\n");
  for (const auto& [args, named] : std::vector<std::pair<std::string, std::string>>{
           {"--extra-shapes " + bad, bad + ":3"},
           {"--extra-shapes " + empty, "no GEMM shapes"},
           {"--extra-shapes " + huge, "24 GiB"},
           {"--extra-shapes /nonexistent/shapes.txt", "/nonexistent/shapes.txt"},
           {"--extra-shapes " + bad + " --across-nodes", "--extra-shapes"}}) {
    const Outcome c = run("--out " + scratch("never.json") + " --base " + std::string(TRAINSIM_SOURCE_DIR) +
                              "/calibrate/datasheets/h100-sxm.json " + args,
                          kCalibrate);
    EXPECT_EQ(c.status, 2) << args << ": " << c.err;
    EXPECT_NE(c.err.find(named), std::string::npos) << args << ": " << c.err;
    EXPECT_FALSE(std::filesystem::exists(scratch("never.json"))) << args;
  }
  for (const auto& f : {bad, empty, huge}) std::filesystem::remove(f);
}

TEST(Cli, CalibrateImportsNcclTestsLogs) {
  const std::string out = scratch("links.json");
  std::filesystem::remove(out);
  const Outcome r = run("import-nccl-tests " + std::string(TRAINSIM_SOURCE_DIR) + "/calibrate/records/imported/dgx-h100-8gpu-all-reduce-nvls.txt " + kData +
                        "/nccl-tests-allreduce-a100.json --out " + out, kCalibrate);
  ASSERT_EQ(r.status, 0) << r.err;
  std::ifstream in(out);
  const auto j = nlohmann::json::parse(in);
  ASSERT_EQ(j["tables"].size(), 2u);
  EXPECT_EQ(j["tables"][0]["gpus"], 8);
  EXPECT_TRUE(j["tables"][1]["fit"].contains("busbw_GBps"));
  // The same tables as a profile's collective entries, which a profile reads as it reads its own.
  ASSERT_EQ(j["collectives"].size(), 2u);
  for (const auto& c : j["collectives"]) {
    EXPECT_EQ(c["provenance"]["source"], "imported");
    EXPECT_NE(c["provenance"]["reference"].get<std::string>().find("dgx-h100-8gpu-all-reduce-nvls.txt"), std::string::npos);
    EXPECT_FALSE(c["segments"]["rows"].empty());
  }
  const Outcome named = run("import-nccl-tests " + kData + "/nccl-tests-allreduce-a100.json --out " + out + " --reference 'a published sweep'", kCalibrate);
  ASSERT_EQ(named.status, 0) << named.err;
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(out))["collectives"][0]["provenance"]["reference"], "a published sweep");
  const Outcome bad = run("import-nccl-tests /nonexistent.txt --out " + out + ".2", kCalibrate);
  EXPECT_EQ(bad.status, 2);
  EXPECT_FALSE(std::filesystem::exists(out + ".2"));
}

TEST(Cli, CalibrateRefitReproducesTheCommittedFits) {
  // The committed profile's fits were made by this code from its raw record: refitting a copy gives
  // the same segments; a profile without a multi-GPU record, or a missing file, is an input error
  // that leaves the file as it was.
  const std::string copy = scratch("refit.json");
  std::filesystem::copy_file(std::string(TRAINSIM_PROFILES) + "/h200-sxm.json", copy, std::filesystem::copy_options::overwrite_existing);
  const Outcome r = run("refit " + copy, kCalibrate);
  ASSERT_EQ(r.status, 0) << r.err;
  std::ifstream a(copy), b(std::string(TRAINSIM_PROFILES) + "/h200-sxm.json");
  const auto ja = nlohmann::json::parse(a), jb = nlohmann::json::parse(b);
  EXPECT_EQ(ja["intra_node"]["collectives"], jb["intra_node"]["collectives"]);
  EXPECT_EQ(run("refit /nonexistent/profile.json", kCalibrate).status, 2);
  const Outcome stray = run("--rank-per-node --out " + copy + ".x", kCalibrate);
  EXPECT_EQ(stray.status, 2);
  EXPECT_NE(stray.err.find("--rank-per-node"), std::string::npos) << stray.err;
  EXPECT_FALSE(std::filesystem::exists(copy + ".x"));
  std::filesystem::copy_file(std::string(TRAINSIM_PROFILES) + "/a100-80g-sxm.json", copy, std::filesystem::copy_options::overwrite_existing);
  const std::string before = nlohmann::json::parse(std::ifstream(copy)).dump();
  EXPECT_EQ(run("refit " + copy, kCalibrate).status, 2);
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(copy)).dump(), before);
  // A malformed record, or a collective measured at too few sizes to fit: exit 2 naming it, the
  // file left as it was (a fit that failed used to exit 1 without saying which collective).
  const nlohmann::json good = nlohmann::json::parse(std::ifstream(std::string(TRAINSIM_PROFILES) + "/h200-sxm.json"));
  nlohmann::json typo = good, sparse = good, half = good, negative = good, name = good;
  typo["measurements"]["collectives"][5]["time_us"] = "x";
  // Read strictly: a fractional GPU count was read as its integer part, a negative size and a
  // misspelt collective were fitted, each with exit 0.
  half["measurements"]["collectives"][7]["gpus"] = 2.5;
  negative["measurements"]["collectives"][9]["bytes"] = -8;
  name["measurements"]["collectives"][3]["collective"] = "allreduce";
  nlohmann::json kept = nlohmann::json::array();
  for (const auto& c : sparse["measurements"]["collectives"])
    if (c["collective"] != "all_gather" || c["bytes"].get<double>() < 1000) kept.push_back(c);
  sparse["measurements"]["collectives"] = kept;
  for (const auto& [doc, said] : {std::pair{typo, std::string("measurements.collectives[5].time_us: ")},
                                  std::pair{half, std::string("measurements.collectives[7].gpus: expected an integer")},
                                  std::pair{negative, std::string("measurements.collectives[9].bytes: expected a number in")},
                                  std::pair{name, std::string("measurements.collectives[3].collective: expected \"all_reduce\"")},
                                  std::pair{sparse, std::string("measurements.collectives: all_gather over 2 GPUs: fit needs at least two points")}}) {
    const std::string text = doc.dump();
    std::ofstream(copy) << text;
    const Outcome r2 = run("refit " + copy, kCalibrate);
    EXPECT_EQ(r2.status, 2) << said;
    EXPECT_NE(r2.err.find(copy + ": " + said), std::string::npos) << r2.err;
    EXPECT_EQ(r2.err.find("json.exception"), std::string::npos) << r2.err;
    EXPECT_EQ(nlohmann::json::parse(std::ifstream(copy)).dump(), nlohmann::json::parse(text).dump());
  }
  std::filesystem::remove(copy);
}

TEST(Cli, CalibrateMergeOfTheRecordedRunsIsTheCommittedProfile) {
  // models/hardware/h200-sxm.json is the merge of the six recorded calibration runs with its
  // runtime memory kept as read off the validation runs, its imported NVLS curve, the element-wise
  // kernels' clock sensitivity read off the kernel-mix record, and the datasheet's peaks and memory
  // figure (its fp32 CUDA-core rate was added to the datasheet after the runs, the memory figure
  // written beside CUDA's total after them too): merging them again, keeping those blocks,
  // gives the committed profile field for field but for the command line in its provenance. A
  // --runtime-memory-from profile without the block is an input error that writes nothing.
  const std::string runs = TRAINSIM_RUNS, committed = std::string(TRAINSIM_PROFILES) + "/h200-sxm.json";
  const std::string out = scratch("merge.json");
  std::filesystem::remove(out);
  std::string args = "merge";
  for (const char* f : {"2026-11-29-run1.json", "2026-11-29-run2-gqa.json", "2026-11-29-run3-attention-mb2.json",
                        "2026-12-02-run4-long-attention.json", "2026-12-02-run5-llama-long-attention.json",
                        "2026-12-06-run6-current-grid.json"})
    args += " " + runs + "/" + f;
  const std::string datasheet = std::string(TRAINSIM_SOURCE_DIR) + "/calibrate/datasheets/h200-sxm.json";
  const Outcome r = run(args + " --name h200-sxm --runtime-memory-from " + committed + " --imported-from " + committed +
                            " --clock-from " + committed + " --peaks-from " + datasheet + " --out " + out,
                        kCalibrate);
  ASSERT_EQ(r.status, 0) << r.err;
  auto without_commands = [](nlohmann::json j) {
    for (auto& [key, v] : j.items())
      if (v.is_object() && v.contains("provenance") && v["provenance"].is_object()) v["provenance"].erase("command");
    j["provenance"].erase("command");
    return j;
  };
  const auto merged = nlohmann::json::parse(std::ifstream(out)), profile = nlohmann::json::parse(std::ifstream(committed));
  EXPECT_EQ(merged["runtime_memory"], profile["runtime_memory"]);
  EXPECT_TRUE(without_commands(merged) == without_commands(profile)) << "the merge differs from the committed profile";
  std::filesystem::remove(out);
  const Outcome bad = run(args + " --runtime-memory-from " + std::string(TRAINSIM_PROFILES) + "/a100-80g-sxm.json --out " + out, kCalibrate);
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("runtime_memory"), std::string::npos) << bad.err;
  EXPECT_FALSE(std::filesystem::exists(out));
  const Outcome no_clock = run(args + " --clock-from " + std::string(TRAINSIM_PROFILES) + "/a100-80g-sxm.json --out " + out, kCalibrate);
  EXPECT_EQ(no_clock.status, 2);
  EXPECT_NE(no_clock.err.find("clock"), std::string::npos) << no_clock.err;
  EXPECT_FALSE(std::filesystem::exists(out));
  const Outcome no_imported = run(args + " --imported-from " + std::string(TRAINSIM_PROFILES) + "/a100-80g-sxm.json --out " + out, kCalibrate);
  EXPECT_EQ(no_imported.status, 2);
  EXPECT_NE(no_imported.err.find("nvls_collectives"), std::string::npos) << no_imported.err;
  EXPECT_FALSE(std::filesystem::exists(out));
  const std::string no_gpu = kScenarios + "/gpt3-175b-1024-gpus.json";
  const Outcome no_peaks = run(args + " --peaks-from " + no_gpu + " --out " + out, kCalibrate);
  EXPECT_EQ(no_peaks.status, 2);
  EXPECT_NE(no_peaks.err.find("gpu.peak_tflops"), std::string::npos) << no_peaks.err;
  EXPECT_FALSE(std::filesystem::exists(out));
  // The recorded run of 2026-11-29 edited by `edit`, merged after another run (so that its parts
  // calibration does not measure are the ones kept); the broken file's path in `file`.
  const std::string file = scratch("broken-run.json");
  auto merge_broken = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json broken = nlohmann::json::parse(std::ifstream(runs + "/2026-11-29-run1.json"));
    edit(broken);
    std::ofstream(file) << broken.dump();
    return run("merge " + runs + "/2026-11-29-run2-gqa.json " + file + " --name h200-sxm --out " + out, kCalibrate);
  };
  // A run with a malformed record: exit 2 naming the file and the record, nothing written.
  for (const auto& [edit, where] : std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>>{
           {[](nlohmann::json& j) { j["measurements"]["step_kernels"][0]["tokens"] = "x"; }, "measurements.step_kernels[0].tokens"},
           {[](nlohmann::json& j) { j["measurements"]["attention"][1].erase("fwd_us"); }, "measurements.attention[1].fwd_us"},
           // Sizes are whole numbers and measured amounts positive: a fractional one was read as
           // its integer part, and a zero rate merged into a profile the planner then refuses.
           {[](nlohmann::json& j) { j["measurements"]["attention"][0]["heads"] = 0.5; }, "measurements.attention[0].heads"},
           {[](nlohmann::json& j) { j["gpu"]["gemm_tflops"]["bf16"][0][1] = 4096.5; }, "gpu.gemm_tflops.bf16[0][1]"},
           {[](nlohmann::json& j) { j["gpu"]["gemm_tflops"]["bf16"][0][3] = 0; }, "gpu.gemm_tflops.bf16[0][3]"},
           {[](nlohmann::json& j) { j["measurements"]["bandwidth"][0]["GBps"] = 0; }, "measurements.bandwidth[0].GBps"},
           {[](nlohmann::json& j) { j["measurements"]["step_kernels"][0]["heads"] = 0; }, "measurements.step_kernels[0].heads"},
           {[](nlohmann::json& j) { j["gpu"]["gemm_tflops"]["bf16"][2] = {1, 2}; }, "gpu.gemm_tflops.bf16[2]"},
           {[](nlohmann::json& j) { j["measurements"]["bandwidth"] = 5; }, "measurements.bandwidth"},
           // A collective record, read strictly (a GPU count of 1.5 was kept as 1).
           {[](nlohmann::json& j) { j["measurements"]["collectives"][3]["gpus"] = 1.5; }, "measurements.collectives[3].gpus"},
           {[](nlohmann::json& j) { j["measurements"]["collectives"][4].erase("wrong"); }, "measurements.collectives[4].wrong"}}) {
    const Outcome r2 = merge_broken(edit);
    EXPECT_EQ(r2.status, 2) << where;
    EXPECT_NE(r2.err.find(file + ": " + where + ": "), std::string::npos) << r2.err;
    EXPECT_EQ(r2.err.find("json.exception"), std::string::npos) << r2.err;
    EXPECT_FALSE(std::filesystem::exists(out));
  }
  // Found by tools/fuzz_scenarios.py --target calibration: a provenance field of another type
  // exited 1 with the JSON library's message; a value the merge keeps from the last run unmeasured
  // (its NVLink rate) wrote a profile the planner refuses, with exit 0. Both exit 2, nothing written.
  for (const auto& [edit, said] : std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>>{
           {[](nlohmann::json& j) { j["provenance"]["source"] = 5; }, "provenance.source: expected a string"},
           {[](nlohmann::json& j) { j["intra_node"]["link_GBps"] = 0; },
            "merge: the merged profile: intra_node.link_GBps: expected a number in [0.001, 100000], found 0"}}) {
    const Outcome r2 = merge_broken(edit);
    EXPECT_EQ(r2.status, 2) << said;
    EXPECT_NE(r2.err.find(said), std::string::npos) << r2.err;
    EXPECT_FALSE(std::filesystem::exists(out));
  }
  // One run given twice, or a copy of it: the medians would count it twice and the provenance
  // list it twice as if two runs agreed.
  const std::string run1 = runs + "/2026-11-29-run1.json", copy = scratch("run1-copy.json");
  std::filesystem::copy_file(run1, copy, std::filesystem::copy_options::overwrite_existing);
  for (const std::string& again : {run1, copy}) {
    const Outcome twice = run("merge " + run1 + " " + runs + "/2026-11-29-run2-gqa.json " + again + " --out " + out, kCalibrate);
    EXPECT_EQ(twice.status, 2);
    EXPECT_NE(twice.err.find(again + ": is the same run as " + run1), std::string::npos) << twice.err;
    EXPECT_FALSE(std::filesystem::exists(out));
  }
  std::filesystem::remove(copy);
}

TEST(Cli, ExportSpellsOutTheBatchArithmetic) {
  const Outcome r = run("export " + kScenarios + "/gpt3-175b-1024-gpus.json --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto& ds = j["deepspeed_config"];
  // DeepSpeed's own rule: train_batch_size = micro-batch x accumulation x data-parallel size.
  EXPECT_EQ(ds["train_batch_size"].get<int>(),
            ds["train_micro_batch_size_per_gpu"].get<int>() * ds["gradient_accumulation_steps"].get<int>() * j["layout"]["dp"].get<int>());
  const std::string meg = j["megatron_args"];
  EXPECT_NE(meg.find("--tensor-model-parallel-size 8"), std::string::npos);
  EXPECT_NE(meg.find("--pipeline-model-parallel-size 8"), std::string::npos);
  EXPECT_NE(meg.find("--num-layers-per-virtual-pipeline-stage 4"), std::string::npos);  // 96 / (8 x 3)
  EXPECT_NE(j["launch_command"].get<std::string>().find("--nnodes=128"), std::string::npos);
  EXPECT_EQ(run("export " + kScenarios + "/gpt3-175b-1024-gpus.json --layout pp=7").status, 2);
}

// The scenario's cluster.network.allreduce_algorithm forces every all-reduce's algorithm, as
// NCCL_ALGO="allreduce:..." does in the job that export writes; "auto" leaves the choice by size
// to the model, as NCCL's tuner makes it, and the job script to NCCL.
TEST(Cli, TheScenarioForcesTheAllReduceAlgorithmAndExportSetsIt) {
  std::ifstream in(kScenarios + "/slow-network-25gbe.json");
  const auto doc = nlohmann::json::parse(in);
  auto with = [&](const nlohmann::json& algo, const std::string& name) {
    auto d = doc;
    d["cluster"]["network"]["allreduce_algorithm"] = algo;
    return write_temp(name, d.dump());
  };
  std::map<std::string, nlohmann::json> sim;
  for (const std::string a : {"auto", "ring", "tree"}) {
    const std::string f = with(a, "allreduce_" + a + ".json");
    const Outcome r = run("simulate " + f + " --nodes 4 --json");
    ASSERT_EQ(r.status, 0) << a << ": " << r.err;
    sim[a] = nlohmann::json::parse(r.out);
    const Outcome text = run("simulate " + f + " --nodes 4");
    EXPECT_EQ(text.out.find("all-reduce forced to " + a) != std::string::npos, a != "auto") << text.out;
    const Outcome ex = run("export " + f + " --nodes 4");
    ASSERT_EQ(ex.status, 0) << ex.err;
    if (a == "auto") EXPECT_EQ(ex.out.find("NCCL_ALGO"), std::string::npos) << ex.out;
    else EXPECT_NE(ex.out.find("\nexport NCCL_ALGO=allreduce:" + a + " "), std::string::npos) << ex.out;
  }
  // 32 GPUs over 4 nodes, one 25 GbE port each. A ring sends 2(n-1)/n S = 1.94 S through each
  // node's port; the tree's chains sum each node's gradients before they cross, and its two trees
  // over 4 nodes send 1.5 S: forced, it is faster. Automatic follows NCCL's tuner, which prices a
  // tree at 8% under a ring's bus bandwidth and so keeps these 25 MB buckets on the ring.
  const double ring = sim["ring"]["breakdown_s"]["dp_comm"].get<double>(), tree = sim["tree"]["breakdown_s"]["dp_comm"].get<double>();
  EXPECT_LT(tree, 0.85 * ring);
  EXPECT_GT(tree, 0.70 * ring);
  EXPECT_EQ(sim["auto"]["step_time_s"], sim["ring"]["step_time_s"]);
  // The symmetric mode simulates node 0, which the tree places where the most bytes cross.
  const Outcome full = run("simulate " + with("tree", "allreduce_tree_full.json") + " --nodes 4 --mode full --json");
  ASSERT_EQ(full.status, 0) << full.err;
  EXPECT_NEAR(nlohmann::json::parse(full.out)["step_time_s"].get<double>(), sim["tree"]["step_time_s"].get<double>(),
              0.02 * sim["tree"]["step_time_s"].get<double>());

  EXPECT_NE(report_page(with("tree", "allreduce_tree_report.json"), "allreduce_tree.html").find("NCCL_ALGO=allreduce:tree"), std::string::npos);

  const std::string bad = with("nvls", "allreduce_bad.json");
  const std::string html = write_temp("allreduce_bad.html", "");
  std::filesystem::remove(html);
  const Outcome r = run("report " + bad + " -o " + html);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("cluster.network.allreduce_algorithm"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(html));
}

// cluster.network.nvls turns NCCL's NVLink SHARP on: all-reduces inside a node take the profile's
// imported NVLS curve, and export's job script sets NCCL_NVLS_ENABLE=1. A profile without such
// curves, or an all-reduce algorithm forced to leave NVLS out, is an input error.
TEST(Cli, NvlsOnPricesAllReducesInsideANodeByTheProfilesNvlsCurve) {
  std::ifstream in(kScenarios + "/llama2-7b-one-node.json");
  const auto doc = nlohmann::json::parse(in);
  auto with = [&](const nlohmann::json& network, const std::string& name, const std::string& hardware = "") {
    auto d = doc;
    d["cluster"]["network"] = network;
    if (!hardware.empty()) d["hardware"] = hardware;
    return write_temp(name, d.dump());
  };
  const std::string on = with({{"nvls", true}}, "nvls_on.json"), off = with({{"nvls", false}}, "nvls_off.json");
  // ZeRO-0: the gradients are all-reduced over the node's 8 GPUs in 25 MB buckets, the last of them
  // exposed after backward. The ring model prices a bucket at 14 x 8.5 us + 1.75 x 25 MB / 310 GB/s
  // = 260 us; the NVLS curve, between its 16 MiB (124 us) and 32 MiB (196 us) points, at 159 us.
  const Outcome a = run("simulate " + on + " --layout zero=0 --json"), b = run("simulate " + off + " --layout zero=0 --json");
  ASSERT_EQ(a.status, 0) << a.err;
  ASSERT_EQ(b.status, 0) << b.err;
  const double dp_on = nlohmann::json::parse(a.out)["breakdown_s"]["dp_comm"], dp_off = nlohmann::json::parse(b.out)["breakdown_s"]["dp_comm"];
  EXPECT_LT(dp_on, 0.75 * dp_off);
  EXPECT_GT(dp_on, 0.5 * dp_off);
  EXPECT_NE(run("simulate " + on).out.find(", NVLS on"), std::string::npos);
  EXPECT_NE(run("export " + on).out.find("\nexport NCCL_NVLS_ENABLE=1 "), std::string::npos);
  EXPECT_NE(run("export " + off).out.find("\nexport NCCL_NVLS_ENABLE=0 "), std::string::npos);

  const Outcome no_curve = run("simulate " + with({{"nvls", true}}, "nvls_a100.json", "a100-80g-sxm"));
  EXPECT_EQ(no_curve.status, 2);
  EXPECT_NE(no_curve.err.find("cluster.network.nvls"), std::string::npos) << no_curve.err;
  EXPECT_NE(no_curve.err.find("a100-80g-sxm"), std::string::npos) << no_curve.err;
  const Outcome forced = run("simulate " + with({{"nvls", true}, {"allreduce_algorithm", "ring"}}, "nvls_ring.json"));
  EXPECT_EQ(forced.status, 2);
  EXPECT_NE(forced.err.find("cluster.network.nvls"), std::string::npos) << forced.err;
}

// A layout that does not fit is exported (the user may know better) with the memory model's
// verdict where it is read: the header, stderr and the JSON; `simulate` says it under the step. Which one does not fit is the
// simulator's own memory report, so the test asks `simulate` first.
TEST(Cli, SimulateAndExportWarnOfALayoutPredictedOutOfMemory) {
  const std::string f = kScenarios + "/llama3-70b-8-to-64-nodes.json";
  for (const char* nodes : {"8", "64"}) {
    const std::string args = f + " --nodes " + nodes + " --layout tp=4,pp=8,vpp=5";
    const Outcome sim = run("simulate " + args + " --json");
    ASSERT_EQ(sim.status, 0) << sim.err;
    const auto mem = nlohmann::json::parse(sim.out)["memory"];
    const Outcome plain = run("simulate " + args);
    EXPECT_EQ(plain.out.find("\nOUT OF MEMORY: stage 0 needs") != std::string::npos, mem["oom"].get<bool>()) << plain.out;
    const Outcome text = run("export " + args), js = run("export " + args + " --json");
    ASSERT_EQ(text.status, 0) << text.err;
    ASSERT_EQ(js.status, 0) << js.err;
    const bool oom = mem["oom"].get<bool>();
    EXPECT_EQ(text.out.find("# WARNING: predicted out of memory: stage 0 needs") != std::string::npos, oom) << nodes << text.out;
    EXPECT_EQ(text.err.find("warning: predicted out of memory") != std::string::npos, oom) << nodes << text.err;
    const auto j = nlohmann::json::parse(js.out);
    EXPECT_EQ(j["memory"]["oom"].get<bool>(), oom);
    EXPECT_DOUBLE_EQ(j["memory"]["peak_bytes"].get<double>(), mem["peak_bytes"].get<double>());
    if (std::string(nodes) == "8") EXPECT_TRUE(oom);  // ZeRO-1 over 2 replicas: 86.8 GiB of 79.6
    else EXPECT_FALSE(oom);
  }
}

TEST(Cli, ReportIsOneSelfContainedPage) {
  const std::string html = scratch("review.html");
  std::filesystem::remove(html);
  const Outcome r = run("report " + kScenarios + "/slow-network-25gbe.json -o " + html);
  ASSERT_EQ(r.status, 0) << r.err;
  std::ifstream in(html);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string page = ss.str();
  EXPECT_EQ(page.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(page.find("</html>"), std::string::npos);
  // Candidates table, breakdown, memory, three scaling charts (the best layout at each size, the
  // winner's layout, and the scenario's, which the search did not pick) and the timeline, all inline.
  std::size_t svgs = 0;
  for (auto p = page.find("<svg"); p != std::string::npos; p = page.find("<svg", p + 1)) ++svgs;
  EXPECT_EQ(svgs, 6u);
  // The scenario's own layout over 25 GbE gets slower from one node to two, and the page says why.
  const auto own = page.find("Scaling of the scenario's layout");
  ASSERT_NE(own, std::string::npos);
  const auto slower = page.find("Slower with more GPUs:</b> 2 nodes give", own);
  ASSERT_NE(slower, std::string::npos);
  EXPECT_NE(page.find("on 1 node; DP communication exposed", slower), std::string::npos);
  EXPECT_NE(page.find("Top candidates"), std::string::npos);
  // The winner's what-if, and the space searched again with each part changed (five parts, each
  // faster and slower).
  EXPECT_NE(page.find("What sets the winner's step"), std::string::npos);
  const auto again = page.find("Would another layout win on other hardware?");
  ASSERT_NE(again, std::string::npos);
  std::size_t rows = 0;
  for (auto p = page.find("<tr><td class='l'", again); p != std::string::npos && p < page.find("</table>", again);
       p = page.find("<tr><td class='l'", p + 1))
    ++rows;
  EXPECT_EQ(rows, 10u);
  // The timeline's top row is the critical path, its bars named for the GPU each task ran on.
  const auto path_row = page.find(">critical path</text>");
  ASSERT_NE(path_row, std::string::npos);
  EXPECT_LT(path_row, page.find(">GPU 0 compute</text>"));
  EXPECT_NE(page.find(" (GPU 0) "), std::string::npos);
  EXPECT_NE(page.find("Critical path (the top row): "), std::string::npos);
  EXPECT_EQ(page.find("http://"), page.find("http://www.w3.org/2000/svg"));  // no external resources
  EXPECT_EQ(page.find("<script"), std::string::npos);
  // A path that cannot be written: exit 2, nothing left behind.
  const Outcome bad = run("report " + kScenarios + "/slow-network-25gbe.json -o /nonexistent/dir/review.html");
  EXPECT_EQ(bad.status, 2);
  EXPECT_FALSE(std::filesystem::exists("/nonexistent/dir/review.html.tmp"));
}

TEST(Cli, ReportPricesTheFabricWhereItCanAndSaysWhereNot) {
  // GPT-3 on 128 nodes of a fat-tree of 4-node leaves: the winner's step with the leaves' uplinks
  // at 2:1 and 4:1, each in symmetric mode (stages of 16 nodes fill whole leaves). Llama 3 405B's
  // winner on 576 B200 nodes under rail groups of 32, pp 16, tp 8: a stage's 36 nodes share a rail
  // group with the next, so once oversubscribed one GPU per TP group is simulated (576 of 4,608)
  // and the rows are priced too, as they are for GPT-3 with TP groups of half a node under rail
  // groups of 12 nodes (256 of 1,024 GPUs, the rails' hand-over through another group's NIC
  // included). With one of node 0's NICs at half rate as well, a TP group's NICs run at different
  // speeds, so every GPU would be simulated (1,024 of them, past the report's 512): the rows are
  // named, not priced.
  auto page = [&](const std::string& scenario) {
    const std::string html = scratch(scenario + ".html");
    const Outcome r = run("report " + (scenario.find('/') == std::string::npos ? kScenarios + "/" + scenario + ".json" : scenario) + " -o " + html);
    EXPECT_EQ(r.status, 0) << r.err;
    std::ifstream in(html);
    std::stringstream ss;
    ss << in.rdbuf();
    std::filesystem::remove(html);
    return ss.str();
  };
  const std::string gpt3 = page("gpt3-175b-1024-gpus");
  EXPECT_NE(gpt3.find("The same hardware with the leaf switches' uplinks to the spine oversubscribed otherwise"), std::string::npos);
  EXPECT_NE(gpt3.find("<td class='l'>uplinks to the spine oversubscribed 2:1</td>"), std::string::npos);
  EXPECT_NE(gpt3.find("<td class='l'>uplinks to the spine oversubscribed 4:1</td>"), std::string::npos);
  EXPECT_EQ(gpt3.find("Not priced here"), std::string::npos);
  const std::string b200 = page("llama3-405b-b200-vs-gb200-nvl72");
  EXPECT_NE(b200.find("<td class='l'>uplinks to the spine oversubscribed 2:1</td>"), std::string::npos);
  EXPECT_NE(b200.find("<td class='l'>uplinks to the spine oversubscribed 4:1</td>"), std::string::npos);
  EXPECT_EQ(b200.find("Not priced here"), std::string::npos);
  nlohmann::json doc = nlohmann::json::parse(std::ifstream(kScenarios + "/gpt3-175b-1024-gpus.json"));
  doc["cluster"]["network"]["fabric"] = "rail-optimized";
  doc["cluster"]["network"]["nics_per_leaf"] = 12;
  doc["search"]["tp"] = {4};
  const std::string halves = page(write_temp("gpt3-tp4-rails.json", doc.dump()));
  EXPECT_NE(halves.find("<td class='l'>uplinks to the spine oversubscribed 2:1</td>"), std::string::npos);
  EXPECT_NE(halves.find("<td class='l'>uplinks to the spine oversubscribed 4:1</td>"), std::string::npos);
  EXPECT_EQ(halves.find("Not priced here"), std::string::npos);
  doc["search"]["tp"] = {8};
  doc["stragglers"] = {{"nics", {{{"node", 0}, {"nic", 0}, {"speed", 0.5}}}}};
  const std::string slow = page(write_temp("gpt3-slow-nic-rails.json", doc.dump()));
  EXPECT_EQ(slow.find("<td class='l'>uplinks to the spine oversubscribed"), std::string::npos);
  EXPECT_NE(slow.find("Not priced here: uplinks to the spine oversubscribed 2:1; uplinks to the spine oversubscribed 4:1 ("),
            std::string::npos);
}

// Llama 3 70B on 8 to 64 nodes: the search's winner (at 64 nodes) keeps a large share of the
// optimizer state per GPU at fewer nodes (ZeRO-1 shards it over data parallelism), so it does not
// fit everywhere. The report's time to train must be the best layout at each size, as `search`
// gives it, and the winner's scaling chart must say where its layout does not fit.
TEST(Cli, ReportTrainsOnTheBestLayoutAtEachSizeAndSaysWhereTheWinnerDoesNotFit) {
  const std::string f = kScenarios + "/llama3-70b-8-to-64-nodes.json";
  const Outcome search = run("search " + f + " --json");
  ASSERT_EQ(search.status, 0) << search.err;
  const auto doc = nlohmann::json::parse(search.out);
  const std::string page = report_page(f, "capacity_sizes.html");
  const auto training = page.find("<h2>Training");
  ASSERT_NE(training, std::string::npos);
  const std::string table = page.substr(training, page.find("</table>", training) - training);
  ASSERT_EQ(doc["best_per_size"].size(), 4u);
  for (const auto& b : doc["best_per_size"]) {
    const std::string row = "<tr><td>" + std::to_string(b["nodes"].get<int>()) + "</td><td>" + std::to_string(b["gpus"].get<int>()) + "</td>";
    const auto at = table.find(row);
    ASSERT_NE(at, std::string::npos) << row;
    char tokens[32];
    std::snprintf(tokens, sizeof tokens, "<td>%.0f</td>", b["tokens_per_s"].get<double>());
    EXPECT_NE(table.substr(at, table.find("</tr>", at) - at).find(tokens), std::string::npos) << row << " " << tokens;
  }
  // The chart of the best layout at each size has a point for each of the search's, with its
  // throughput and its degrees under its GPU count.
  const auto chart = page.find("<h2>Scaling with the best layout at each size</h2>");
  ASSERT_NE(chart, std::string::npos);
  const std::string section = page.substr(chart, page.find("<h2>", chart + 4) - chart);
  for (const auto& b : doc["best_per_size"]) {
    const auto& l = b["layout"];
    char point[64];
    std::snprintf(point, sizeof point, "<title>%d GPUs: %.0f tokens/s, tp%d pp%d dp%d", b["gpus"].get<int>(), b["tokens_per_s"].get<double>(),
                  l["tp"].get<int>(), l["pp"].get<int>(), l["dp"].get<int>());
    EXPECT_NE(section.find(point), std::string::npos) << point;
    const std::string degrees = "tp" + std::to_string(l["tp"].get<int>()) + " pp" + std::to_string(l["pp"].get<int>()) + " dp" +
                                std::to_string(l["dp"].get<int>()) + (l["vpp"].get<int>() > 1 ? " v" + std::to_string(l["vpp"].get<int>()) : "") + "</text>";
    EXPECT_NE(section.find(degrees), std::string::npos) << degrees;
  }
  // The winner's layout at each size, simulated on its own: the page names exactly the sizes
  // where it is out of memory.
  const auto& w = doc["candidates"][0]["layout"];
  const std::string layout = "tp=" + std::to_string(w["tp"].get<int>()) + ",pp=" + std::to_string(w["pp"].get<int>()) +
                             ",vpp=" + std::to_string(w["vpp"].get<int>()) + ",micro_batch=" + std::to_string(w["micro_batch"].get<int>()) +
                             ",recompute=" + w["recompute"].get<std::string>() + ",schedule=" + w["schedule"].get<std::string>();
  int oom = 0;
  for (int nodes : {8, 16, 32, 64}) {
    const Outcome sim = run("simulate " + f + " --json --nodes " + std::to_string(nodes) + " --layout " + layout);
    ASSERT_EQ(sim.status, 0) << sim.err;
    const bool out = nlohmann::json::parse(sim.out)["memory"]["oom"].get<bool>();
    oom += out;
    EXPECT_EQ(page.find("Out of memory on " + std::to_string(nodes * 8) + " GPUs") != std::string::npos, out) << nodes;
  }
  EXPECT_GT(oom, 0);
  // The smallest size whose best layout trains within the scenario's 60 days, by search's times.
  int smallest = 0;
  for (const auto& b : doc["best_per_size"])
    if (b["time_to_train_s"].get<double>() <= 60 * 86400.0 && (smallest == 0 || b["nodes"].get<int>() < smallest)) smallest = b["nodes"].get<int>();
  ASSERT_GT(smallest, 0);
  EXPECT_NE(page.find("Smallest size that meets the 60-day deadline: " + std::to_string(smallest) + " nodes"), std::string::npos) << smallest;
}

// The winner's layout is charted across the sizes only where it is not the search's best at every
// one of them (else that chart is the best-at-each-size chart again).
TEST(Cli, ReportChartsTheWinnersLayoutOnlyWhereItIsNotTheBestAtEverySize) {
  int charted_once = 0;
  for (const char* name : {"llama3-405b-2k-to-16k-gpus", "llama3-70b-8-to-64-nodes"}) {
    const std::string f = kScenarios + "/" + name + ".json";
    const Outcome search = run("search " + f + " --json");
    ASSERT_EQ(search.status, 0) << search.err;
    const auto doc = nlohmann::json::parse(search.out);
    // The winner's layout, its data parallel degree apart, at every size.
    auto without_dp = [](nlohmann::json l) {
      l.erase("dp");
      return l;
    };
    std::ifstream in(f);
    const auto scenario = nlohmann::json::parse(in);
    bool everywhere = doc["best_per_size"].size() == scenario["search"]["nodes"].size();
    for (const auto& b : doc["best_per_size"]) everywhere &= without_dp(b["layout"]) == without_dp(doc["candidates"][0]["layout"]);
    const std::string page = report_page(f, std::string(name) + ".html");
    EXPECT_NE(page.find("<h2>Scaling with the best layout at each size</h2>"), std::string::npos) << name;
    EXPECT_EQ(page.find("<h2>Scaling of the winner's layout</h2>") == std::string::npos, everywhere) << name;
    charted_once += everywhere;
  }
  EXPECT_EQ(charted_once, 1);  // one scenario of each kind
}

// `planner validate` is handed to planner-gpu where CUDA is built, before the command line is
// parsed: the top-level --profiles option (both spellings) and the arguments must arrive intact,
// and a --profiles with no value must be refused, not read past the end of the arguments.
TEST(Cli, ValidateGetsItsArgumentsWhereverItRuns) {
  for (const std::string& profiles : {"--profiles " + std::string(TRAINSIM_PROFILES), "--profiles=" + std::string(TRAINSIM_PROFILES)}) {
    const Outcome r = run(profiles + " validate /nonexistent/scenario.json");
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_NE(r.err.find("/nonexistent/scenario.json: cannot open scenario file"), std::string::npos) << r.err;
  }
  const Outcome bare = run("--profiles");
  EXPECT_EQ(bare.status, 2);
  EXPECT_NE(bare.err.find("--profiles"), std::string::npos) << bare.err;
}

TEST(Cli, ValidatesHardwareOverrideIsAProfileOrAnInputError) {
  // `--hardware` predicts the scenario's runs with another profile (the GPU's own); a name that is
  // no profile stops before any GPU work, naming the option, wherever validate runs.
  const Outcome r = run("validate " + kScenarios + "/validate-one-gpu.json --hardware h100-pcie");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("--hardware"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("h100-pcie"), std::string::npos) << r.err;
}

TEST(Cli, ValidateRefusesAnUnknownRepeatedKernelClassBeforeAnyGpuWork) {
  // TRAINSIM_REPEAT_KERNEL_CLASS (a power diagnostic: gemm or attention, optionally :2-8) is read
  // before the GPU is looked for, so a misspelt one stops with exit 2, naming the variable,
  // whether or not this machine has a GPU.
  for (const char* bad : {"softmax", "gemm:1", "gemm:9", "attention:x", "gemm:22", ":2"}) {
    const Outcome r = run("validate " + kScenarios + "/validate-small-gpt.json", std::string("TRAINSIM_REPEAT_KERNEL_CLASS='") + bad + "' " + kPlanner);
    EXPECT_EQ(r.status, 2) << bad << ": " << r.err;
    EXPECT_NE(r.err.find("TRAINSIM_REPEAT_KERNEL_CLASS"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(bad), std::string::npos) << r.err;
  }
}

TEST(Cli, ReportRendersInHeadlessChromium) {
  if (!std::filesystem::exists("/usr/bin/chromium")) GTEST_SKIP() << "chromium is not installed";
  const std::string html = scratch("render.html");
  ASSERT_EQ(run("report " + kScenarios + "/llama2-7b-one-node.json -o " + html).status, 0);
  // The DOM after layout, as the browser built it: not blank, the charts are there.
  const std::string profile = scratch("chromium");
  const Outcome r = run("--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking "
                        "--disable-component-update --disable-sync --user-data-dir=" + profile + " --dump-dom file://" + html,
                        "timeout 60 /usr/bin/chromium");
  std::filesystem::remove_all(profile);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("<svg"), std::string::npos);
  EXPECT_NE(r.out.find("Top candidates"), std::string::npos);
  EXPECT_NE(r.out.find("<rect"), std::string::npos);
}

TEST(Cli, SearchShardedOverMpiRanksMatchesOneProcess) {
  if (!std::filesystem::exists("/usr/bin/mpirun")) GTEST_SKIP() << "mpirun is not installed";
  const std::string args = "search " + kScenarios + "/slow-network-25gbe.json --json";
  const Outcome one = run(args);
  ASSERT_EQ(one.status, 0) << one.err;
  // Two ranks on this machine (loopback); Open MPI's own allocations are not ours to leak-check.
  const Outcome two = run(args, "env ASAN_OPTIONS=detect_leaks=0 mpirun --allow-run-as-root --oversubscribe -np 2 " + kPlanner);
  ASSERT_EQ(two.status, 0) << two.err;
  auto a = nlohmann::json::parse(one.out), b = nlohmann::json::parse(two.out);
  a.erase("wall_s");
  b.erase("wall_s");
  // How many layouts the step's lower bound spares simulating depends on what the search has
  // simulated before it: the ranks share their best between batches, but each starts on its own
  // share before it has any, so they skip a few fewer. What is ranked is the same.
  EXPECT_GT(a["pruned_bound"].get<int>(), 0);
  EXPECT_GT(b["pruned_bound"].get<int>(), 0);
  a.erase("pruned_bound");
  b.erase("pruned_bound");
  EXPECT_EQ(a, b);
}

TEST(Cli, ADerivedProfilesTimesAreMarkedAsEstimates) {
  // a100-80g-sxm and b200-sxm are derived (datasheets and the H200's carried-over efficiency),
  // h100-sxm and h200-sxm measured: the text says which times are estimates, once per profile, and
  // the JSON names each profile's source.
  const std::string note = "is a derived profile (datasheets and a calibrated part's efficiency): its times are estimates";
  const Outcome a100 = run("simulate " + kScenarios + "/gpt3-175b-1024-gpus.json");
  ASSERT_EQ(a100.status, 0) << a100.err;
  EXPECT_NE(a100.out.find("note: a100-80g-sxm " + note), std::string::npos) << a100.out;
  const Outcome a100_json = run("simulate " + kScenarios + "/gpt3-175b-1024-gpus.json --json");
  ASSERT_EQ(a100_json.status, 0) << a100_json.err;
  EXPECT_EQ(nlohmann::json::parse(a100_json.out)["cluster"]["hardware_profile"], "derived");
  const Outcome h200 = run("simulate " + kScenarios + "/slow-network-25gbe.json --json");
  ASSERT_EQ(h200.status, 0) << h200.err;
  EXPECT_EQ(nlohmann::json::parse(h200.out)["cluster"]["hardware_profile"], "measured");
  const Outcome h200_text = run("sweep " + kScenarios + "/slow-network-25gbe.json");
  ASSERT_EQ(h200_text.status, 0) << h200_text.err;
  EXPECT_EQ(h200_text.out.find(note), std::string::npos) << h200_text.out;
  const Outcome cmp = run("compare " + kScenarios + "/llama3-70b-h100-h200-b200.json");
  ASSERT_EQ(cmp.status, 0) << cmp.err;
  std::size_t notes = 0;
  for (std::size_t at = cmp.out.find(note); at != std::string::npos; at = cmp.out.find(note, at + 1)) ++notes;
  EXPECT_EQ(notes, 1u) << cmp.out;
  EXPECT_NE(cmp.out.find("note: b200-sxm " + note), std::string::npos) << cmp.out;
  const Outcome cmp_json = run("compare " + kScenarios + "/llama3-70b-h100-h200-b200.json --json");
  ASSERT_EQ(cmp_json.status, 0) << cmp_json.err;
  std::map<std::string, std::string> source;
  const auto doc = nlohmann::json::parse(cmp_json.out);
  for (const auto& alt : doc["alternatives"]) source[alt["hardware"].get<std::string>()] = alt["hardware_profile"].get<std::string>();
  EXPECT_EQ(source, (std::map<std::string, std::string>{{"b200-sxm", "derived"}, {"h100-sxm", "measured"}, {"h200-sxm", "measured"}}));
}

TEST(Cli, ReadmeExamplesAreThePlannersOutput) {
  // Every block of README.md that starts with `$ build/planner ...` is that command's output, run
  // from the repository's root: line for line, but for the wall time a search prints ("in 0.04 s").
  // A line "..." stands for any number of lines left out (at the end: the rest of the output).
  const std::string root = TRAINSIM_SOURCE_DIR;
  std::ifstream in(root + "/README.md");
  ASSERT_TRUE(in) << "README.md";
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  // "in 0.04 s" becomes "in _ s".
  auto norm = [](const std::string& l) {
    auto digit = [&](std::size_t i) { return i < l.size() && l[i] >= '0' && l[i] <= '9'; };
    std::string out;
    for (std::size_t i = 0; i < l.size();) {
      if (l.compare(i, 3, "in ") == 0 && digit(i + 3)) {
        std::size_t e = i + 3;
        while (digit(e)) ++e;
        if (e < l.size() && l[e] == '.' && digit(e + 1)) {
          ++e;
          while (digit(e)) ++e;
          if (l.compare(e, 2, " s") == 0) {
            out += "in _";
            i = e;
            continue;
          }
        }
      }
      out += l[i++];
    }
    return out;
  };
  int blocks = 0;
  for (std::size_t i = 0; i + 1 < lines.size(); ++i) {
    if (lines[i] != "```" || lines[i + 1].rfind("$ build/planner ", 0) != 0) continue;
    const std::string args = lines[i + 1].substr(std::string("$ build/planner ").size());
    std::vector<std::string> expected;
    std::size_t j = i + 2;
    for (; j < lines.size() && lines[j] != "```"; ++j) expected.push_back(lines[j]);
    i = j;
    ++blocks;
    const Outcome r = run(args, "cd " + root + " && " + kPlanner);
    ASSERT_EQ(r.status, 0) << args << "\n" << r.err;
    std::vector<std::string> actual;
    std::istringstream out(r.out);
    for (std::string l; std::getline(out, l);) actual.push_back(l);
    while (!actual.empty() && actual.back().empty()) actual.pop_back();
    std::size_t a = 0;
    bool skipping = false;
    for (const std::string& e : expected) {
      if (e == "...") {
        skipping = true;
        continue;
      }
      while (skipping && a < actual.size() && norm(actual[a]) != norm(e)) ++a;
      skipping = false;
      ASSERT_LT(a, actual.size()) << args << ": the README's line is not in the output: " << e;
      EXPECT_EQ(norm(actual[a]), norm(e)) << args << ", output line " << a + 1;
      ++a;
    }
    if (!skipping) {
      EXPECT_EQ(a, actual.size()) << args << ": the output goes on past the README's block";
    }
  }
  EXPECT_GE(blocks, 10);
}

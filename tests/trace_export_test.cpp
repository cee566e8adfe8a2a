// The Chrome/Perfetto trace writer and the --trace-gpus list: what is written reads back as the
// timeline it came from, and bad lists are input errors naming the option.
#include "trace_export.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "input_error.h"

namespace trainsim {
namespace {

std::filesystem::path scratch_dir() {
  const auto p = std::filesystem::temp_directory_path() / ("trainsim_trace_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(p);
  return p;
}

sim::TimelineEntry entry(int gpu, int stream, double start, double end, std::string name, int category) {
  sim::TimelineEntry e;
  e.gpu = gpu;
  e.stream = stream;
  e.start_s = start;
  e.end_s = end;
  e.name = std::move(name);
  e.category = category;
  return e;
}

TEST(TraceExport, EventsReadBackAsTheTimelineHasThem) {
  sim::StepResult r;
  // Names a JSON writer must escape, and times whose shortest forms differ in kind (zero, tiny,
  // seventeen digits, large): each must read back as the same double.
  r.timeline = {entry(0, 0, 0.0, 0.0237541404643398, "F mb0 c0", 0),
                entry(0, 2, 1e-9, 3e-9, "PP send \"act\" \\ mb1", 3),
                entry(7, 1, 12.345678901234567, 300000.5, "tab\there\nnewline \x01 é", 4),
                entry(512, 0, 0.1 + 0.2, 0.7, "", 1)};
  const auto dir = scratch_dir();
  const std::string path = (dir / "t.json").string();
  write_chrome_trace(r, path);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  std::ifstream in(path);
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["displayTimeUnit"], "ms");
  const auto& ev = j["traceEvents"];
  ASSERT_EQ(ev.size(), r.timeline.size() + 3 * 4);  // three GPUs (0, 7, 512), each named as a process with three named threads
  for (std::size_t i = 0; i < r.timeline.size(); ++i) {
    const auto& e = r.timeline[i];
    SCOPED_TRACE(i);
    EXPECT_EQ(ev[i]["ph"], "X");
    EXPECT_EQ(ev[i]["name"].get<std::string>(), e.name);
    EXPECT_EQ(ev[i]["cat"].get<std::string>(), sim::category_name(e.category));
    EXPECT_EQ(ev[i]["pid"].get<int>(), e.gpu);
    EXPECT_EQ(ev[i]["tid"].get<int>(), e.stream);
    EXPECT_EQ(ev[i]["ts"].get<double>(), e.start_s * 1e6);
    EXPECT_EQ(ev[i]["dur"].get<double>(), (e.end_s - e.start_s) * 1e6);
  }
  std::vector<int> named;
  for (std::size_t i = r.timeline.size(); i < ev.size(); ++i) {
    EXPECT_EQ(ev[i]["ph"], "M");
    if (ev[i]["name"] == "process_name") {
      named.push_back(ev[i]["pid"].get<int>());
      EXPECT_EQ(ev[i]["args"]["name"], "GPU " + std::to_string(named.back()));
    }
  }
  EXPECT_EQ(named, (std::vector<int>{0, 7, 512}));
  std::filesystem::remove_all(dir);
}

TEST(TraceExport, TheCriticalPathIsOneTrackAboveTheGpus) {
  sim::StepResult r;
  r.timeline = {entry(0, 0, 0, 1, "F mb0", 0), entry(0, 2, 1, 1.5, "PP send", 3), entry(3, 0, 1.5, 2, "F mb0", 0)};
  r.critical_path = r.timeline;
  const auto dir = scratch_dir();
  const std::string path = (dir / "t.json").string();
  write_chrome_trace(r, path);
  std::ifstream in(path);
  const auto ev = nlohmann::json::parse(in)["traceEvents"];
  // Its process comes after the largest GPU number, is named, and sorts first.
  std::vector<nlohmann::json> slices;
  bool named = false, first = false;
  for (const auto& e : ev) {
    if (e["pid"] != 4) continue;
    if (e["ph"] == "X") slices.push_back(e);
    named = named || (e["name"] == "process_name" && e["args"]["name"] == "critical path");
    first = first || (e["name"] == "process_sort_index" && e["args"]["sort_index"] == -1);
  }
  EXPECT_TRUE(named);
  EXPECT_TRUE(first);
  ASSERT_EQ(slices.size(), 3u);
  EXPECT_EQ(slices[0]["name"], "F mb0 (GPU 0)");
  EXPECT_EQ(slices[1]["name"], "PP send (GPU 0)");
  EXPECT_EQ(slices[2]["name"], "F mb0 (GPU 3)");
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(slices[i]["tid"], 0);
    EXPECT_EQ(slices[i]["ts"].get<double>(), r.timeline[i].start_s * 1e6);
  }
  std::filesystem::remove_all(dir);
}

TEST(TraceExport, ATaskSlowedBeyondItsTimeAloneSaysByHowMuch) {
  sim::StepResult r;
  r.timeline = {entry(0, 0, 0, 2e-3, "alone", 0), entry(0, 0, 2e-3, 5e-3, "slowed", 0), entry(0, 0, 5e-3, 6e-3, "barely", 0)};
  r.timeline[0].uncontended_s = 2e-3;
  r.timeline[1].uncontended_s = 2e-3;      // 1 ms of its 3 waited on something beside it
  r.timeline[2].uncontended_s = 0.9999e-3;  // under a thousandth: not worth saying
  const auto dir = scratch_dir();
  const std::string path = (dir / "t.json").string();
  write_chrome_trace(r, path);
  std::ifstream in(path);
  const auto ev = nlohmann::json::parse(in)["traceEvents"];
  EXPECT_FALSE(ev[0].contains("args"));
  ASSERT_TRUE(ev[1].contains("args"));
  EXPECT_NEAR(ev[1]["args"]["contention_us"].get<double>(), 1000.0, 1e-9);
  EXPECT_NEAR(ev[1]["args"]["uncontended_us"].get<double>(), 2000.0, 1e-9);
  EXPECT_FALSE(ev[2].contains("args"));
  std::filesystem::remove_all(dir);
}

TEST(TraceExport, TheSummarySaysWhichStagesHoldTheCriticalPathAndHowMuchIsContention) {
  // pp 2 (GPU 0 stage 0, GPU 1 stage 1): 1 s on stage 0, then 3 s on stage 1 of which 0.5 s beyond
  // its time alone.
  sim::StepResult r;
  r.timeline = {entry(0, 0, 0, 1, "F mb0", 0), entry(1, 0, 1, 4, "F mb0", 0)};
  r.timeline[0].uncontended_s = 1;
  r.timeline[1].uncontended_s = 2.5;
  r.critical_path = r.timeline;
  Layout l;
  l.pp = 2;
  EXPECT_EQ(describe_trace(r, l, "t.json"),
            "trace t.json: 2 slices of 2 GPUs; its critical path, 2 slices, runs on stage 1 75.0%, stage 0 25.0%; contention 500.0 ms of "
            "it (12.5%)");
  r.critical_path.clear();
  EXPECT_EQ(describe_trace(r, l, "t.json"), "trace t.json: 2 slices of 2 GPUs");
}

TEST(TraceExport, AnUnwritablePathIsAnInputErrorAndLeavesNothing) {
  sim::StepResult r;
  r.timeline = {entry(0, 0, 0, 1, "F", 0)};
  const auto dir = scratch_dir();
  const std::string path = (dir / "missing" / "t.json").string();
  try {
    write_chrome_trace(r, path);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--trace " + path), std::string::npos) << e.what();
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  // A time that is not a number cannot be written as JSON: refused, and the partial file removed.
  r.timeline.push_back(entry(0, 0, 1, std::numeric_limits<double>::infinity(), "G", 0));
  const std::string ok = (dir / "t.json").string();
  EXPECT_THROW(write_chrome_trace(r, ok), std::logic_error);
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  std::filesystem::remove_all(dir);
}

TEST(TraceExport, GpuListsAreNumbersAndRangesBelowTheLayoutsCount) {
  EXPECT_EQ(parse_trace_gpus("0-3,2,8", 16), (std::vector<int>{0, 1, 2, 3, 8}));
  EXPECT_EQ(parse_trace_gpus("15", 16), (std::vector<int>{15}));
  EXPECT_EQ(parse_trace_gpus("4-4,0-15", 16).size(), 16u);
  for (const char* bad : {"", "x", "3-1", "16", "0-16", "1,", ",1", "-1", "0-", " 1", "1 ", "1.5", "1e1", "99999999999", "0--3"}) {
    SCOPED_TRACE(bad);
    try {
      parse_trace_gpus(bad, 16);
      ADD_FAILURE() << "accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("--trace-gpus: ", 0), 0u) << e.what();
    }
  }
}

TEST(TraceExport, AGpuThatWasNotSimulatedIsRefusedNamingThoseThatWere) {
  sim::StepResult r;
  r.timeline_simulated_gpus = {0, 8};
  EXPECT_NO_THROW(check_traced_gpus(r, {0, 8}));
  EXPECT_NO_THROW(check_traced_gpus(r, {}));
  try {
    check_traced_gpus(r, {0, 3});
    FAIL() << "accepted";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("GPU 3 was not simulated"), std::string::npos) << m;
    EXPECT_NE(m.find("ran GPUs 0, 8,"), std::string::npos) << m;
    EXPECT_NE(m.find("--mode full"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace trainsim

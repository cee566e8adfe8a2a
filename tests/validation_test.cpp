// Predictions against real runs: every run `planner validate` recorded on the H200 or H100 is predicted
// again with the current model and the committed profile, and compared with its measurement.
#include <gtest/gtest.h>

#include <cstdio>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <array>
#include <nlohmann/json.hpp>

#include "cost_model.h"
#include "evaluation.h"
#include "gemm_shapes.h"
#include "in_step_gemms.h"
#include "hardware_profile.h"
#include "layer_ops.h"
#include "memory_model.h"
#include "model_presets.h"
#include "power_model.h"
#include "scenario.h"

using namespace trainsim;

namespace {

const std::string kScenarios = TRAINSIM_SCENARIOS;
const std::string kProfiles = TRAINSIM_PROFILES;
const std::string kRecords = TRAINSIM_VALIDATION;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// A record's model: one of the scenario's validate.models (custom shapes), else a preset.
ModelConfig model_named(const Scenario& s, const std::string& name) {
  for (const auto& m : s.validate.models)
    if (m.name == name) return m;
  const auto p = find_model_preset(name);
  EXPECT_TRUE(p.has_value()) << name;
  return p ? *p : ModelConfig{};
}

// The GEMMs a kernel-class record timed inside its steps (those `keep` takes), each priced two
// ways: the |error| of each against its time in the step, and the sums over the steps (a GEMM's
// time times its calls a step), added to `out`.
struct InPlacePricing {
  std::vector<double> err_a, err_b;
  double sum_a = 0, sum_b = 0, measured = 0;
};
using GemmPrice = std::function<double(double m, double n, double k, bool accumulate)>;
void price_in_place(const nlohmann::json& record, const std::function<bool(const nlohmann::json&)>& keep, const GemmPrice& a,
                    const GemmPrice& b, InPlacePricing& out) {
  for (const auto& run : record["runs"])
    for (const auto& g : run["kernel_classes"]["gemm_shapes"]) {
      if (!keep(g)) continue;
      const double m = g["m"].get<double>(), n = g["n"].get<double>(), k = g["k"].get<double>();
      const bool acc = g["accumulate"].get<bool>();
      const double measured = g["measured_s"].get<double>(), calls = g["calls_per_step"].get<double>();
      const double ta = a(m, n, k, acc), tb = b(m, n, k, acc);
      out.err_a.push_back(std::fabs(ta / measured - 1.0));
      out.err_b.push_back(std::fabs(tb / measured - 1.0));
      out.sum_a += ta * calls;
      out.sum_b += tb * calls;
      out.measured += measured * calls;
    }
}

}  // namespace

TEST(Validation, H200OneGpuRunsWithinFivePercentMedian) {
  // Issue target: median |error| of step time and of memory peak each at most 5% over the recorded
  // real runs (GPT 125M-6.7B, micro-batch 1-8, recompute none, selective and full; and the small
  // shapes at micro-batch 1-8 twice, before and after attention at micro-batch 2 was measured; run7
  // and run8 on two other H200 hosts two days after the profile's calibration, and the small shapes
  // once more with every GEMM timed in place; run9 the same day, with runtime memory measured;
  // run10 and the small shapes' run10 two days after it, on the H200 lent then; the small shapes'
  // run11 beside a clock log and run11 on later code, the same day; the small shapes' run12 with
  // the GPU's clock and power read over each run's timed steps, run12 so on a third card and the
  // small shapes' run13 on a fourth; run13 and run14 on two more cards two days after that, the
  // second on the code whose engine changed its memory layout; run15 on another card that day;
  // run16 and the small shapes' run14 and run15 on the card of the sixth calibration run, with the
  // five-run profile before it was merged: calibrate/records/2026-12-06-session-53-h200-calibration/;
  // run17 and the small shapes' run16 held out on a card new to the project, its calibration done
  // on others: calibrate/records/2026-12-07-session-57-h200-held-out/).
  const Scenario base = load_scenario(kScenarios + "/validate-one-gpu.json", kProfiles);
  std::vector<double> time_err, mem_err;
  for (const char* file : {"h200-one-gpu.json", "h200-one-gpu-full-recompute.json", "h200-one-gpu-run2.json",
                           "h200-one-gpu-full-recompute-run2.json", "h200-one-gpu-run3.json",
                           "h200-one-gpu-full-recompute-run3.json", "h200-one-gpu-run4.json",
                           "h200-one-gpu-full-recompute-run4.json", "h200-one-gpu-run5.json", "h200-one-gpu-kernel-classes.json",
                           "h200-one-gpu-run6.json", "h200-small-gpt-kernel-classes.json",
                           "h200-small-gpt-kernel-classes-recalibrated.json", "h200-one-gpu-run7.json",
                           "h200-one-gpu-run8.json", "h200-small-gpt-gemm-shapes.json", "h200-one-gpu-run9.json",
                           "h200-one-gpu-run10.json", "h200-small-gpt-run10.json", "h200-small-gpt-run11.json",
                           "h200-one-gpu-run11.json", "h200-small-gpt-run12.json", "h200-one-gpu-run12.json",
                           "h200-small-gpt-run13.json", "h200-one-gpu-run13.json", "h200-one-gpu-run14.json",
                           "h200-one-gpu-run15.json", "h200-one-gpu-run16.json", "h200-small-gpt-run14.json",
                           "h200-small-gpt-run15.json", "h200-one-gpu-run17.json", "h200-small-gpt-run16.json"}) {
    std::ifstream in(kRecords + "/" + file);
    ASSERT_TRUE(in) << file;
    const auto doc = nlohmann::json::parse(in);
    for (const auto& run : doc["runs"]) {
      Scenario s = base;
      s.model = *find_model_preset(run["model"].get<std::string>());
      s.training.global_batch = run["global_batch"].get<int>();
      Layout l;
      l.micro_batch = run["layout"]["micro_batch"].get<int>();
      l.recompute = parse_recompute(run["layout"]["recompute"].get<std::string>(), "record");
      const Evaluation ev = evaluate(s, l, 1, EvalOptions{});
      ASSERT_TRUE(run["measured"]["finite"].get<bool>());
      time_err.push_back(std::fabs(ev.step.step_time_s / run["measured"]["step_time_s"].get<double>() - 1.0));
      mem_err.push_back(std::fabs(ev.memory.peak().arena_peak_bytes() / run["measured"]["device_used_bytes"].get<double>() - 1.0));
    }
  }
  ASSERT_GE(time_err.size(), 10u);
  std::printf("[ info ] %zu runs: median |error| step time %.2f%%, memory peak %.2f%%; max %.1f%%, %.1f%%\n", time_err.size(),
              100 * median(time_err), 100 * median(mem_err), 100 * *std::max_element(time_err.begin(), time_err.end()),
              100 * *std::max_element(mem_err.begin(), mem_err.end()));
  EXPECT_LE(median(time_err), 0.05) << "median step-time error";
  EXPECT_LE(median(mem_err), 0.05) << "median memory-peak error";
  // No single run may be off by more than a quarter.
  EXPECT_LT(*std::max_element(time_err.begin(), time_err.end()), 0.25);
  EXPECT_LT(*std::max_element(mem_err.begin(), mem_err.end()), 0.25);
}

TEST(Validation, H100OneGpuRunsWithItsMeasuredProfileAndWithTheCarryOverRule) {
  // Two H100 80GB HBM3 cards on 2026-12-05, the GPT, small-GPT and Llama one-GPU scenarios run as
  // if they named h100-sxm (tools/gpu_session.sh with HARDWARE=h100-sxm; record
  // calibrate/records/2026-12-05-h100-session-38-calibrate-validate/). Each run is predicted with
  // the committed h100-sxm (measured on those two cards and, since 2026-12-06, three more) and with
  // the profile derived for it from the H200, calibrate/datasheets/h100-sxm.json (datasheet peaks and the H200's tables by the
  // carry-over rule, models/carry_over.cpp; the project's H100 profile before one could be
  // measured, then under the rule as it stood, which these runs led to revise). The measured profile is held
  // to the issue's 5% at the median; so is the rule, whose tables are each within 10% of the
  // H100's at the median (Profiles.TheCarryOverRuleHeldAgainstTheMeasuredH100), and every run by
  // the rule to 10%. The -run3
  // records (and Llama's -run2) ran on a third H100, the -run4 records (and Llama's -run3) on a
  // fourth, neither one the profile was measured on (records
  // calibrate/records/2026-12-05-h100-session-41-gpu-tests-validate-sim-bench/ and
  // calibrate/records/2026-12-05-h100-session-42-validate-gpu-tests-sim-bench/). On a fifth, the
  // long-sequence (4,096 and 8,192 tokens), full-recompute and padded-vocabulary scenarios
  // (calibrate/records/2026-12-05-h100-session-42-long-sequence-full-recompute-padded-vocab/). On
  // a sixth, the -run5 records and Llama's -run4
  // (calibrate/records/2026-12-06-h100-session-46-checksum-scratch-sim-bench/, call 2). On a
  // seventh, Llama's -run5 (calibrate/records/2026-12-06-h100-session-47-llama-clock-check/). On an
  // eighth, after the weight-gradient table was merged into the profile, Llama's -run6 and the GPT
  // -run6 (calibrate/records/2026-12-06-h100-session-47-held-out-check/); on a ninth, Llama's -run7
  // (the same record, call 2). On a tenth, after the grid of 4,096 tokens was merged, Llama's -run8,
  // the GPT -run7 and the small GPT's -run6, on the card of the fifth calibration run
  // (calibrate/records/2026-12-06-h100-session-48-token-grid/, call 3); on an eleventh, held out,
  // Llama's -run9 and the GPT -run8 (the same record, call 4). On a twelfth, held out, the
  // GEMM-bound scenario's -run2 (calibrate/records/2026-12-06-h100-session-49-gemm-bound/, call 1: Llama 3 8B's
  // layer shapes at 1,545-1,605 MHz under the cap), and on a thirteenth, held out, its eight runs
  // with Llama 3 8B's and 70B's shapes (1,395-1,605 MHz), Llama's -run10, the GPT -run9 and the
  // small GPT's -run7 (the same record, call 2); on a fourteenth, held out, Llama's -run11 and the
  // GEMM-bound scenario's -run3 (call 4); on a fifteenth, held out, its -run4 (call 5). On a
  // sixteenth, held out, the small GPT's -run8 (calibrate/records/2026-12-06-session-51-power-by-kind/,
  // call 1, run in session 52); on a seventeenth, held out, the small GPT's -run9 and the GPT
  // -run10 (calibrate/records/2026-12-06-session-52-h200-current-grid/, call 3); on an eighteenth,
  // held out, the small GPT's -run10, Llama's -run12 and the GPT -run11
  // (calibrate/records/2026-12-07-session-55-h100-held-out/); on a nineteenth, held out, the small
  // GPT's -run11, Llama's -run13 and the GPT -run12
  // (calibrate/records/2026-12-07-session-57-h100-held-out/); on a twentieth, held out, the small
  // GPT's -run12, Llama's -run14 and the GPT -run13, the first runs to see the clock line held
  // through the limit (calibrate/records/2026-12-07-session-57-h100-clock-line-blind/); on a
  // twenty-first, held out, the small GPT's -run13, Llama's -run15 and the GPT -run14
  // (calibrate/records/2026-12-07-session-58-h100-held-out/); on a twenty-second, held out, the
  // small GPT's -run14, Llama's -run16 and the GPT -run15
  // (calibrate/records/2026-12-07-session-58-gpt-kernel-classes/); on a twenty-third, the GPT -run16
  // and the small GPT's -run15, held out from the profile but for its attention table, which this
  // card's own run joined after them (calibrate/records/2026-12-07-session-58-attention-table/,
  // call 2: they ran with the table of call 1's card alone); on a twenty-fourth, held out, the GPT
  // -run17 and the small GPT's -run16 (the same record, call 3); on a twenty-fifth, held out,
  // Llama's -run17 (call 4). The cards after those, each held out with its GPT, small GPT and
  // Llama runs, are listed with their records in tests/validation/README.md.
  const HardwareProfile measured = load_hardware_profile("h100-sxm", kProfiles);
  std::ifstream ds(std::string(TRAINSIM_SOURCE_DIR) + "/calibrate/datasheets/h100-sxm.json");
  ASSERT_TRUE(ds);
  const std::string ds_text((std::istreambuf_iterator<char>(ds)), std::istreambuf_iterator<char>());
  const HardwareProfile derived = parse_hardware_profile(ds_text, "calibrate/datasheets/h100-sxm.json", kProfiles);
  std::vector<double> err_measured, err_derived, signed_derived, mem_err;
  std::vector<double> long_derived;  // signed, the runs of 4,096 tokens and more
  double worst_measured = 0;
  for (const auto& [file, scenario] : {std::pair<std::string, std::string>{"h100-one-gpu.json", "validate-one-gpu.json"},
                                       {"h100-one-gpu-run2.json", "validate-one-gpu.json"},
                                       {"h100-small-gpt.json", "validate-small-gpt.json"},
                                       {"h100-small-gpt-run2.json", "validate-small-gpt.json"},
                                       {"h100-llama-one-gpu.json", "validate-llama-one-gpu.json"},
                                       {"h100-one-gpu-run3.json", "validate-one-gpu.json"},
                                       {"h100-small-gpt-run3.json", "validate-small-gpt.json"},
                                       {"h100-llama-one-gpu-run2.json", "validate-llama-one-gpu.json"},
                                       {"h100-one-gpu-run4.json", "validate-one-gpu.json"},
                                       {"h100-small-gpt-run4.json", "validate-small-gpt.json"},
                                       {"h100-llama-one-gpu-run3.json", "validate-llama-one-gpu.json"},
                                       {"h100-long-sequence.json", "validate-long-sequence.json"},
                                       {"h100-one-gpu-full-recompute.json", "validate-full-recompute.json"},
                                       {"h100-padded-vocab.json", "validate-padded-vocab.json"},
                                       {"h100-one-gpu-run5.json", "validate-one-gpu.json"},
                                       {"h100-small-gpt-run5.json", "validate-small-gpt.json"},
                                       {"h100-llama-one-gpu-run4.json", "validate-llama-one-gpu.json"},
                                       {"h100-llama-one-gpu-run5.json", "validate-llama-one-gpu.json"},
                                       {"h100-llama-one-gpu-run6.json", "validate-llama-one-gpu.json"},
                                       {"h100-one-gpu-run6.json", "validate-one-gpu.json"},
                                       {"h100-llama-one-gpu-run7.json", "validate-llama-one-gpu.json"},
                                       {"h100-llama-one-gpu-run8.json", "validate-llama-one-gpu.json"},
                                       {"h100-one-gpu-run7.json", "validate-one-gpu.json"},
                                       {"h100-small-gpt-run6.json", "validate-small-gpt.json"},
                                       {"h100-llama-one-gpu-run9.json", "validate-llama-one-gpu.json"},
                                       {"h100-one-gpu-run8.json", "validate-one-gpu.json"},
                                       {"h100-gemm-heavy-run2.json", "validate-gemm-heavy.json"},
                                       {"h100-gemm-heavy.json", "validate-gemm-heavy.json"},
                                       {"h100-llama-one-gpu-run10.json", "validate-llama-one-gpu.json"},
                                       {"h100-one-gpu-run9.json", "validate-one-gpu.json"},
                                       {"h100-small-gpt-run7.json", "validate-small-gpt.json"},
                                       {"h100-llama-one-gpu-run11.json", "validate-llama-one-gpu.json"},
                                       {"h100-gemm-heavy-run3.json", "validate-gemm-heavy.json"},
                                       {"h100-gemm-heavy-run4.json", "validate-gemm-heavy.json"},
                                       {"h100-small-gpt-run8.json", "validate-small-gpt.json"},
                                       {"h100-small-gpt-run9.json", "validate-small-gpt.json"},
                                       {"h100-one-gpu-run10.json", "validate-one-gpu.json"},
                                       {"h100-small-gpt-run10.json", "validate-small-gpt.json"},
                                       {"h100-llama-one-gpu-run12.json", "validate-llama-one-gpu.json"},
                                       {"h100-one-gpu-run11.json", "validate-one-gpu.json"},
                                       {"h100-small-gpt-run11.json", "validate-small-gpt.json"},
                                       {"h100-llama-one-gpu-run13.json", "validate-llama-one-gpu.json"},
                                       {"h100-one-gpu-run12.json", "validate-one-gpu.json"},
                                       {"h100-small-gpt-run12.json", "validate-small-gpt.json"},
                                       {"h100-llama-one-gpu-run14.json", "validate-llama-one-gpu.json"},
                                       {"h100-one-gpu-run13.json", "validate-one-gpu.json"},
                                       {"h100-small-gpt-run13.json", "validate-small-gpt.json"},
                                       {"h100-llama-one-gpu-run15.json", "validate-llama-one-gpu.json"},
                                       {"h100-one-gpu-run14.json", "validate-one-gpu.json"},
                                       {"h100-small-gpt-run14.json", "validate-small-gpt.json"},
                                       {"h100-llama-one-gpu-run16.json", "validate-llama-one-gpu.json"},
                                       {"h100-one-gpu-run15.json", "validate-one-gpu.json"},
                                       {"h100-one-gpu-run16.json", "validate-one-gpu.json"},
                                       {"h100-small-gpt-run15.json", "validate-small-gpt.json"},
                                       {"h100-one-gpu-run17.json", "validate-one-gpu.json"},
                                       {"h100-small-gpt-run16.json", "validate-small-gpt.json"},
                                       {"h100-llama-one-gpu-run17.json", "validate-llama-one-gpu.json"},
                                       {"h100-one-gpu-run18.json", "validate-one-gpu.json"},
                                       {"h100-small-gpt-run17.json", "validate-small-gpt.json"},
                                       {"h100-one-gpu-run19.json", "validate-one-gpu.json"},
                                       {"h100-small-gpt-run18.json", "validate-small-gpt.json"},
                                       {"h100-llama-one-gpu-run18.json", "validate-llama-one-gpu.json"},
                                       {"h100-one-gpu-run20.json", "validate-one-gpu.json"},
                                       {"h100-small-gpt-run19.json", "validate-small-gpt.json"},
                                       {"h100-llama-one-gpu-run19.json", "validate-llama-one-gpu.json"},
                                       {"h100-one-gpu-run21.json", "validate-one-gpu.json"},
                                       {"h100-small-gpt-run20.json", "validate-small-gpt.json"},
                                       {"h100-llama-one-gpu-run20.json", "validate-llama-one-gpu.json"},
                                       {"h100-one-gpu-run22.json", "validate-one-gpu.json"},
                                       {"h100-small-gpt-run21.json", "validate-small-gpt.json"},
                                       {"h100-llama-one-gpu-run21.json", "validate-llama-one-gpu.json"},
                                       {"h100-one-gpu-run23.json", "validate-one-gpu.json"},
                                       {"h100-small-gpt-run22.json", "validate-small-gpt.json"},
                                       {"h100-llama-one-gpu-run22.json", "validate-llama-one-gpu.json"},
                                       {"h100-one-gpu-run24.json", "validate-one-gpu.json"},
                                       {"h100-small-gpt-run23.json", "validate-small-gpt.json"},
                                       {"h100-llama-one-gpu-run23.json", "validate-llama-one-gpu.json"},
                                       {"h100-one-gpu-run25.json", "validate-one-gpu.json"},
                                       {"h100-small-gpt-run24.json", "validate-small-gpt.json"},
                                       {"h100-llama-one-gpu-run24.json", "validate-llama-one-gpu.json"},
                                       {"h100-one-gpu-run26.json", "validate-one-gpu.json"},
                                       {"h100-small-gpt-run25.json", "validate-small-gpt.json"},
                                       {"h100-llama-one-gpu-run25.json", "validate-llama-one-gpu.json"},
                                       {"h100-one-gpu-run27.json", "validate-one-gpu.json"},
                                       {"h100-small-gpt-run26.json", "validate-small-gpt.json"}}) {
    const Scenario base = load_scenario(kScenarios + "/" + scenario, kProfiles);
    std::ifstream in(kRecords + "/" + file);
    ASSERT_TRUE(in) << file;
    const auto doc = nlohmann::json::parse(in);
    ASSERT_EQ(doc["hardware"], "h100-sxm") << file;
    ASSERT_NE(doc["measured_on"]["device"].get<std::string>().find("H100"), std::string::npos) << file;
    for (const auto& run : doc["runs"]) {
      Scenario s = base;
      s.model = model_named(base, run["model"].get<std::string>());
      s.training.global_batch = run["global_batch"].get<int>();
      Layout l;
      l.micro_batch = run["layout"]["micro_batch"].get<int>();
      l.recompute = parse_recompute(run["layout"]["recompute"].get<std::string>(), "record");
      ASSERT_TRUE(run["measured"]["finite"].get<bool>());
      const double meas = run["measured"]["step_time_s"].get<double>();
      s.hardware = measured;
      const Evaluation ev = evaluate(s, l, 1, EvalOptions{});
      err_measured.push_back(std::fabs(ev.step.step_time_s / meas - 1.0));
      worst_measured = std::max(worst_measured, err_measured.back());
      mem_err.push_back(std::fabs(ev.memory.peak().arena_peak_bytes() / run["measured"]["device_used_bytes"].get<double>() - 1.0));
      s.hardware = derived;
      const double derived_err = evaluate(s, l, 1, EvalOptions{}).step.step_time_s / meas - 1.0;
      err_derived.push_back(std::fabs(derived_err));
      signed_derived.push_back(derived_err);
      if (s.model.seq_len >= 4096) long_derived.push_back(derived_err);
    }
  }
  ASSERT_EQ(err_measured.size(), 598u);
  std::printf("[ info ] %zu H100 runs: median |error| step time %.2f%% with the measured profile (max %.1f%%), %.2f%% with the "
              "carry-over rule (max %.1f%%, signed %.1f%% to %.1f%%); memory peak %.2f%% (max %.1f%%)\n",
              err_measured.size(), 100 * median(err_measured), 100 * worst_measured, 100 * median(err_derived),
              100 * *std::max_element(err_derived.begin(), err_derived.end()),
              100 * *std::min_element(signed_derived.begin(), signed_derived.end()),
              100 * *std::max_element(signed_derived.begin(), signed_derived.end()), 100 * median(mem_err),
              100 * *std::max_element(mem_err.begin(), mem_err.end()));
  EXPECT_LE(median(err_measured), 0.05);
  EXPECT_LE(median(err_derived), 0.05);
  EXPECT_LT(*std::max_element(err_derived.begin(), err_derived.end()), 0.10);
  // Where attention is most of the step an error in carrying it over cannot cancel against the
  // other kernels': the long sequences, printed apart and held to 5% at the median. (Carried
  // wholly at the peak ratio, the unfused attention came out 24-40% fast on the H100 and these
  // steps 8-20% short.)
  ASSERT_EQ(long_derived.size(), 8u);
  std::printf("[ info ] by the carry-over rule, the %zu runs of 4,096 and 8,192 tokens: median %.1f%%, from %.1f%% to %.1f%%\n",
              long_derived.size(), 100 * median(long_derived), 100 * *std::min_element(long_derived.begin(), long_derived.end()),
              100 * *std::max_element(long_derived.begin(), long_derived.end()));
  std::vector<double> long_abs;
  for (double e : long_derived) long_abs.push_back(std::fabs(e));
  EXPECT_LE(median(long_abs), 0.05);
  EXPECT_LE(median(mem_err), 0.05);
  EXPECT_LT(worst_measured, 0.25);
}

TEST(Validation, TheModelsGemmsAreTheRunnersGemms) {
  // Every GEMM the runner called in the recorded steps (GPT 125M and 350M, micro-batches 1-8, each
  // call timed in place) has its shape (m x n x k, as cuBLAS sees it) and its count among the
  // model's ops for that step, and the model's ops have no other: the model costs the shapes that
  // run. (The output layer's weight-gradient GEMM once had m and n the other way round, which the
  // GEMM table prices 1.5x slower: the model's step came out 4-9% long.) Against their time in the
  // step, the cost model's times for shapes of at least 50 us a call (shorter ones carry the timing
  // events' own microseconds) are within 5% at the median, and none is off by a quarter.
  const Scenario base = load_scenario(kScenarios + "/validate-small-gpt.json", kProfiles);
  const CostModel cost(base.hardware, base.training.precision);
  std::ifstream in(kRecords + "/h200-small-gpt-gemm-shapes.json");
  ASSERT_TRUE(in);
  const auto doc = nlohmann::json::parse(in);
  std::vector<double> err;
  for (const auto& run : doc["runs"]) {
    const ModelConfig m = model_named(base, run["model"].get<std::string>());
    const int mb = run["layout"]["micro_batch"].get<int>(), micro = run["microbatches"].get<int>();
    const OpContext ctx{m, 1, false, Recompute::none, mb, Precision::bf16};
    std::map<std::array<double, 3>, int> model, runner;
    auto add = [&](const std::vector<Op>& ops, int times) {
      for (const Op& op : ops)
        if (op.kind == OpKind::gemm) model[{op.m, op.n, op.k}] += times;
    };
    const LayerOps layer = transformer_layer_ops(ctx), head = head_ops(ctx), emb = embedding_ops(ctx);
    for (const auto* ops : {&layer.forward, &layer.backward}) add(*ops, m.layers * micro);
    for (const LayerOps* part : {&head, &emb})
      for (const auto* ops : {&part->forward, &part->backward}) add(*ops, micro);
    for (const auto& g : run["kernel_classes"]["gemm_shapes"]) {
      const std::array<double, 3> shape{g["m"].get<double>(), g["n"].get<double>(), g["k"].get<double>()};
      runner[shape] += g["calls_per_step"].get<int>();
      const double per_call = g["measured_s"].get<double>();
      if (per_call >= 50e-6) err.push_back(cost.gemm_time_s(shape[0], shape[1], shape[2]) / per_call - 1.0);
    }
    EXPECT_EQ(model, runner) << run["model"] << " mb" << mb;
  }
  ASSERT_GE(err.size(), 20u);
  std::vector<double> abs_err;
  for (double e : err) abs_err.push_back(std::fabs(e));
  std::printf("[ info ] %zu GEMM shapes of 50 us and more timed in place: median |error| of the cost model %.1f%%, max %.1f%%\n",
              err.size(), 100 * median(abs_err), 100 * *std::max_element(abs_err.begin(), abs_err.end()));
  EXPECT_LE(median(abs_err), 0.05);
  for (double e : abs_err) EXPECT_LT(e, 0.25);
}

namespace {

// The validate scenarios by the name their records give: name -> file.
std::map<std::string, std::string> validate_scenarios_by_name() {
  std::map<std::string, std::string> by_name;
  for (const auto& e : std::filesystem::directory_iterator(kScenarios)) {
    const std::string f = e.path().filename().string();
    if (f.rfind("validate-", 0) != 0) continue;
    std::ifstream in(e.path());
    by_name[nlohmann::json::parse(in).at("name").get<std::string>()] = e.path().string();
  }
  return by_name;
}

// Every record in tests/validation, in name order.
std::vector<std::string> record_files() {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(kRecords))
    if (e.path().extension() == ".json") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

Layout layout_of(const nlohmann::json& j) {
  Layout l;
  l.tp = j.value("tp", 1);
  l.pp = j.value("pp", 1);
  l.dp = j["dp"].get<int>();
  l.micro_batch = j["micro_batch"].get<int>();
  l.recompute = parse_recompute(j["recompute"].get<std::string>(), "record");
  l.bucket_MB = j["bucket_MB"].get<double>();
  l.compression = parse_compression(j["compression"].get<std::string>(), "record");
  l.zero = j["zero"].get<int>();
  l.vpp = j.value("vpp", 1);
  if (j.contains("schedule")) l.schedule = parse_schedule(j["schedule"].get<std::string>(), "record");
  return l;
}

// A one-GPU run `planner validate` recorded with its clock on the H100 or H200 (NVML's median SM
// clock over the timed steps), priced by the current cost model kernel class by kernel class
// (runs that timed their kernels one by one or repeated a class of them left out: their clock is not the step's).
struct ClockRun {
  std::string hw, model;
  int micro_batch = 0;
  std::string recompute;
  Family family = Family::gpt;
  bool gemm_bound = false;  // scenarios/validate-gemm-heavy.json
  KernelClasses k;
  double sm_mhz = 0;
  double power_w = -1;       // NVML's median power over the timed steps; -1: not recorded
  double power_instant_w = -1;  // the mean of NVML's instantaneous readings over them; -1: not recorded
  double timed_s = 0;        // the timed steps' wall time; 0: not recorded
  double predicted_s = -1;   // the simulated step; -1: the run did not finish
  double measured_s = -1;
  double micro_batch_s = -1;  // the measured step over its micro-batches; -1: the run did not finish
  double at_launch_interval_s = 0;  // time in kernels the cost model prices at the launch interval
};
std::vector<ClockRun> one_gpu_clock_runs() {
  const std::map<std::string, std::string> scenario_file = validate_scenarios_by_name();
  std::vector<ClockRun> runs;
  for (const auto& file : record_files()) {
    std::ifstream in(file);
    const auto doc = nlohmann::json::parse(in);
    if (!doc.contains("runs") || !doc.contains("hardware")) continue;
    const std::string hw = doc["hardware"].get<std::string>();
    if (hw != "h100-sxm" && hw != "h200-sxm") continue;
    const auto sf = scenario_file.find(doc.value("scenario", std::string()));
    if (sf == scenario_file.end()) continue;
    Scenario base = load_scenario(sf->second, kProfiles);
    base.hardware = load_hardware_profile(hw, kProfiles);
    const CostModel cost(base.hardware, base.training.precision);
    for (const auto& run : doc["runs"]) {
      const auto& m = run["measured"];
      if (!m.contains("gpu_clock") || !m["gpu_clock"].contains("sm_mhz") || run.contains("kernel_classes") ||
          run.contains("repeated_kernel_class"))
        continue;
      const Layout l = layout_of(run["layout"]);
      if (l.tp * l.pp * l.dp != 1) continue;
      ClockRun r;
      r.hw = hw;
      r.model = run["model"].get<std::string>();
      r.micro_batch = l.micro_batch;
      r.recompute = run["layout"]["recompute"].get<std::string>();
      r.gemm_bound = std::filesystem::path(sf->second).filename() == "validate-gemm-heavy.json";
      const ModelConfig model = model_named(base, r.model);
      r.family = model.family;
      const OpContext c{model, 1, false, l.recompute, l.micro_batch, base.training.precision};
      const double micro_batches = run["global_batch"].get<double>() / l.micro_batch;
      r.k = one_gpu_kernel_classes(cost, c, model.layers, micro_batches);
      auto count = [&](const LayerOps& ops, double times) {
        for (const auto* list : {&ops.forward, &ops.backward, &ops.recompute})
          for (const Op& op : *list)
            if (cost.op_time_s(op) <= cost.launch_s()) r.at_launch_interval_s += cost.launch_s() * times;
      };
      count(transformer_layer_ops(c), model.layers * micro_batches);
      count(embedding_ops(c), micro_batches);
      count(head_ops(c), micro_batches);
      r.sm_mhz = m["gpu_clock"]["sm_mhz"].get<double>();
      r.power_w = m["gpu_clock"].value("power_w", -1.0);
      r.power_instant_w = m["gpu_clock"].value("power_instant_w", -1.0);
      if (m["gpu_clock"].contains("timed_wall_s"))
        r.timed_s = m["gpu_clock"]["timed_wall_s"][1].get<double>() - m["gpu_clock"]["timed_wall_s"][0].get<double>();
      if (m.contains("step_time_s") && m.value("finite", false)) {
        Scenario sc = base;
        sc.model = model;
        sc.training.global_batch = run["global_batch"].get<int>();
        r.predicted_s = evaluate(sc, l, 1, EvalOptions{}).step.step_time_s;
        r.measured_s = m["step_time_s"].get<double>();
        r.micro_batch_s = r.measured_s / micro_batches;
      }
      runs.push_back(std::move(r));
    }
  }
  return runs;
}

KernelMix mix_of(const KernelClasses& k) { return {k.gemm_s, k.gemm_flops, k.attention_s, k.attention_flops, k.other_s}; }

// Re-predicts the runs of a data-parallel record (one GPU per rank, `nodes` x `gpn` GPUs) with the
// current model: the step-time and memory errors, and the predicted and measured step of one GPU
// running the same global batch.
struct DpRun {
  double time_err = 0, mem_err = 0, pred = 0, meas = 0, pred_one = 0, meas_one = 0;
};
std::vector<DpRun> repredict(const std::string& scenario, const std::string& record, int nodes, int gpn) {
  const Scenario base = load_scenario(kScenarios + "/" + scenario, kProfiles);
  std::ifstream in(kRecords + "/" + record);
  EXPECT_TRUE(in) << record;
  const auto doc = nlohmann::json::parse(in);
  std::vector<DpRun> out;
  for (const auto& run : doc["runs"]) {
    EXPECT_TRUE(run["measured"]["finite"].get<bool>());
    EXPECT_TRUE(run["measured"]["replicas_agree"].get<bool>());
    Scenario s = base;
    s.model = model_named(base, run["model"].get<std::string>());
    s.training.global_batch = run["global_batch"].get<int>();
    s.cluster.nodes = {nodes};
    s.cluster.gpus_per_node = gpn;
    const Layout l = layout_of(run["layout"]);
    const Evaluation ev = evaluate(s, l, nodes, EvalOptions{});
    DpRun r;
    r.pred = ev.step.step_time_s;
    r.meas = run["measured"]["step_time_s"].get<double>();
    r.time_err = std::fabs(r.pred / r.meas - 1.0);
    r.mem_err = std::fabs(ev.memory.peak().arena_peak_bytes() / run["measured"]["device_used_bytes"].get<double>() - 1.0);
    if (run.contains("one_gpu")) {
      Scenario one = s;
      one.cluster.nodes = {1};
      one.cluster.gpus_per_node = 1;
      Layout l1 = l;
      l1.tp = l1.pp = l1.dp = 1;
      l1.zero = 0;
      l1.compression = Compression{};
      r.pred_one = evaluate(one, l1, 1, EvalOptions{}).step.step_time_s;
      r.meas_one = run["one_gpu"]["measured_step_time_s"].get<double>();
    }
    out.push_back(r);
  }
  return out;
}

// Prints a set's median and largest errors, and holds each run's step time within 15% (the
// issue's 5% medians are held over all runs of a GPU count together).
void report_set(const char* what, const std::vector<DpRun>& runs) {
  std::vector<double> t, m;
  for (const auto& r : runs) t.push_back(r.time_err), m.push_back(r.mem_err);
  std::printf("[ info ] %zu %s: median |error| step time %.2f%%, memory peak %.2f%%; max %.1f%%, %.1f%%\n", t.size(), what,
              100 * median(t), 100 * median(m), 100 * *std::max_element(t.begin(), t.end()), 100 * *std::max_element(m.begin(), m.end()));
  EXPECT_LT(*std::max_element(t.begin(), t.end()), 0.15) << what;
}

}  // namespace

TEST(Validation, AnH100RunAtTheCardsEdgeHoldsTheBuffersTheModelCounts) {
  // The Llama 3B shape at micro-batch 2 without recompute on one H100 (record
  // calibrate/records/2026-12-06-h100-session-45-setup-agreement-oom/, call 2, run with a profile
  // that gave the card nvidia-smi's 81,559 MiB, as derived profiles did before they carried the
  // driver's reservation): the layout whose run had stopped in session 38 (which allocation failed
  // was not logged) and in call 1, where the 1.47 GiB the GEMM autotuner set aside for its own
  // use was what did not fit. With the autotuner taking no device memory it ran, within 1.1% of the
  // 79.18 GiB CUDA reports, leaving less free than the model's fragmentation allowance. Predicted again with the measured h100-sxm: the buffers the model counts (its
  // peak less the fragmentation allowance, what a runner with one exact arena holds) within 0.5% of
  // what the run held, as for every run of the record; and the model's fit, which adds 5% of
  // activations and buffers for a caching allocator's fragmentation, refuses the layout on this
  // card: it errs on the side of calling a layout that runs too large, not the other. Step times
  // within 10% each (the 3B runs at the power cap, 5-6% slower than predicted elsewhere too).
  const HardwareProfile measured = load_hardware_profile("h100-sxm", kProfiles);
  const Scenario base = load_scenario(kScenarios + "/validate-llama-one-gpu.json", kProfiles);
  std::ifstream in(kRecords + "/h100-llama-one-gpu-vendor-memory.json");
  ASSERT_TRUE(in);
  const auto doc = nlohmann::json::parse(in);
  ASSERT_NE(doc["measured_on"]["device"].get<std::string>().find("H100"), std::string::npos);
  int runs = 0;
  bool edge = false;
  for (const auto& run : doc["runs"]) {
    Scenario s = base;
    s.model = model_named(base, run["model"].get<std::string>());
    s.training.global_batch = run["global_batch"].get<int>();
    s.hardware = measured;
    const Layout l = layout_of(run["layout"]);
    ASSERT_TRUE(run["measured"]["finite"].get<bool>());
    const double used = run["measured"]["device_used_bytes"].get<double>();
    const Evaluation ev = evaluate(s, l, 1, EvalOptions{});
    EXPECT_NEAR(ev.memory.peak().arena_peak_bytes() / used, 1.0, 0.005) << run["model"] << " mb" << l.micro_batch;
    EXPECT_NEAR(ev.step.step_time_s / run["measured"]["step_time_s"].get<double>(), 1.0, 0.10) << run["model"] << " mb" << l.micro_batch;
    if (s.model.name == "llama-3b" && l.micro_batch == 2) {
      edge = true;
      EXPECT_LE(used, measured.memory_bytes);
      EXPECT_LT(measured.memory_bytes - used, ev.memory.peak().fragmentation_bytes);
      EXPECT_TRUE(ev.memory.oom);
      std::printf("[ info ] Llama 3B mb2 on one H100: held %.2f GiB of %.2f; the model counts %.2f GiB of buffers, %.2f GiB with "
                  "its fragmentation allowance\n",
                  used / (1 << 30), measured.memory_bytes / (1 << 30), ev.memory.peak().arena_peak_bytes() / (1 << 30),
                  ev.memory.peak().peak_bytes / (1 << 30));
    }
    ++runs;
  }
  EXPECT_EQ(runs, 4);
  EXPECT_TRUE(edge);
}

TEST(Validation, APaddedVocabularyShortensTheStepByWhatTheModelSays) {
  // GPT 125M and 350M on one H200 (record h200-padded-vocab.json, 2026-12-02; run again on
  // 2026-12-03, h200-padded-vocab-run2.json, and on another card, -run3.json), each with the 50,257-word vocabulary as it is and
  // padded to 50,304 (vocab_divisible_by 128), micro-batches 4 and 8: the padded runs took
  // 21.4-22.2% (125M) and 12.1-12.7% (350M) less time, the unaligned output GEMMs being the
  // difference. The model, which prices them from the profile's measured aligned and unaligned
  // GEMM tables (not from these runs), must give every run within 5% and each padded step's ratio
  // to its unpadded one within 2 points of the measured ratio.
  const Scenario base = load_scenario(kScenarios + "/validate-padded-vocab.json", kProfiles);
  std::vector<double> err;
  std::map<std::string, std::vector<double>> shorter_measured, shorter_predicted;  // by model: 1 - padded / unpadded
  for (const char* file : {"h200-padded-vocab.json", "h200-padded-vocab-run2.json", "h200-padded-vocab-run3.json"}) {
    std::ifstream in(kRecords + "/" + file);
    ASSERT_TRUE(in) << file;
    const auto doc = nlohmann::json::parse(in);
    std::map<std::pair<std::string, int>, std::pair<double, double>> by_run;  // (model, mb) -> predicted, measured
    for (const auto& run : doc["runs"]) {
      Scenario s = base;
      s.model = model_named(base, run["model"].get<std::string>());
      s.training.global_batch = run["global_batch"].get<int>();
      const Layout l = layout_of(run["layout"]);
      const double pred = evaluate(s, l, 1, EvalOptions{}).step.step_time_s, meas = run["measured"]["step_time_s"].get<double>();
      EXPECT_LT(std::fabs(pred / meas - 1.0), 0.05) << file << " " << run["model"] << " mb" << l.micro_batch;
      err.push_back(std::fabs(pred / meas - 1.0));
      by_run[{run["model"].get<std::string>(), l.micro_batch}] = {pred, meas};
    }
    int pairs = 0;
    for (const auto& [key, plain] : by_run) {
      const auto padded = by_run.find({key.first + "-pad", key.second});
      if (padded == by_run.end()) continue;
      ++pairs;
      const double measured = padded->second.second / plain.second, predicted = padded->second.first / plain.first;
      EXPECT_LT(measured, 0.95) << file << " " << key.first << " mb" << key.second;
      EXPECT_NEAR(predicted, measured, 0.02) << file << " " << key.first << " mb" << key.second;
      shorter_measured[key.first].push_back(1.0 - measured);
      shorter_predicted[key.first].push_back(1.0 - predicted);
    }
    EXPECT_EQ(pairs, 4) << file;
  }
  ASSERT_EQ(err.size(), 24u);
  std::printf("[ info ] %zu padded-vocabulary runs: median |error| step time %.2f%%; max %.1f%%\n", err.size(), 100 * median(err),
              100 * *std::max_element(err.begin(), err.end()));
  for (const auto& [model, m] : shorter_measured) {
    const auto& p = shorter_predicted[model];
    std::printf("[ info ] %s: the padded step %.1f-%.1f%% shorter measured, %.1f-%.1f%% predicted\n", model.c_str(),
                100 * *std::min_element(m.begin(), m.end()), 100 * *std::max_element(m.begin(), m.end()),
                100 * *std::min_element(p.begin(), p.end()), 100 * *std::max_element(p.begin(), p.end()));
  }
}

TEST(Validation, LongSequencesOnOneGpu) {
  // GPT 350M and a Llama-style 1.1B at 4,096 and 8,192 tokens a sequence on one H200 (record
  // h200-long-sequence.json, 2026-12-02), where the unfused attention's s x s tensors take 58-82%
  // of the step. With the attention table measured at 2,048 tokens only (and one 4,096-token
  // shape) the model read their rates off the nearest shorter sequence and over-predicted the
  // steps by 3-14% (median 7.4%); the kernel-class run (h200-long-sequence-kernel-classes.json)
  // put it on attention at micro-batch 1 (+12-17%). calibrate now measures attention at 4,096 and
  // 8,192 tokens (run records calibrate/records/h200-runs/2026-12-02-run4-long-attention.json and -run5-*, a
  // microbenchmark of the same kernels, not these steps). Each run within 5% (as the padded-vocabulary set), median 2%; memory 1%,
  // but GPT 350M at 4,096 tokens and micro-batch 1, within 6%: over by 3.7-4.1% on the five-run
  // profile and by 4.4-5.0% on the six-run one, whose current-grid run prices its weight-gradient
  // GEMMs as they accumulate into fp32 (slower, as the step runs them). Against that layout's
  // kernel-class run (h200-long-sequence-kernel-classes.json) the six-run profile prices its GEMMs
  // 1.8% short but its attention 4.8% and its element-wise kernels 5.6% long: the over-prediction
  // is theirs, and the five-run profile's cheaper GEMMs hid more of it.
  // The same layouts run again with the five-run profile (h200-long-sequence-rerun.json), and once
  // more a day later (h200-long-sequence-run3.json) and on another card (-run4.json), count too.
  const Scenario base = load_scenario(kScenarios + "/validate-long-sequence.json", kProfiles);
  std::vector<double> t, m;
  for (const char* file : {"h200-long-sequence.json", "h200-long-sequence-rerun.json", "h200-long-sequence-run3.json",
                           "h200-long-sequence-run4.json"}) {
    std::ifstream in(kRecords + "/" + file);
    ASSERT_TRUE(in) << file;
    const auto doc = nlohmann::json::parse(in);
    for (const auto& run : doc["runs"]) {
      ASSERT_TRUE(run["measured"]["finite"].get<bool>());
      Scenario s = base;
      s.model = model_named(base, run["model"].get<std::string>());
      ASSERT_GE(s.model.seq_len, 4096);
      s.training.global_batch = run["global_batch"].get<int>();
      const Layout l = layout_of(run["layout"]);
      const Evaluation ev = evaluate(s, l, 1, EvalOptions{});
      const double te = ev.step.step_time_s / run["measured"]["step_time_s"].get<double>() - 1.0;
      const double me = ev.memory.peak().arena_peak_bytes() / run["measured"]["device_used_bytes"].get<double>() - 1.0;
      const bool attention_at_batch_1 = run["model"] == "gpt-350m-s4k" && l.micro_batch == 1;
      EXPECT_LT(std::fabs(te), attention_at_batch_1 ? 0.06 : 0.05) << run["model"] << " mb" << l.micro_batch;
      EXPECT_LT(std::fabs(me), 0.01) << run["model"] << " mb" << l.micro_batch;
      t.push_back(std::fabs(te));
      m.push_back(std::fabs(me));
    }
  }
  ASSERT_EQ(t.size(), 32u);
  EXPECT_LT(median(t), 0.02);
  std::printf("[ info ] %zu long-sequence runs: median |error| step time %.2f%%, memory peak %.2f%%; max %.1f%%\n", t.size(),
              100 * median(t), 100 * median(m), 100 * *std::max_element(t.begin(), t.end()));
}

TEST(Validation, WeightGradientsArePricedAsTheyAccumulateIntoFp32) {
  // The H100's Llama steps with every GEMM timed in place (h100-llama-one-gpu-kernel-classes.json,
  // record calibrate/records/2026-12-06-h100-session-47-wgrad-accumulate/, call 1, on a card the
  // profile was not measured on): each weight-gradient GEMM adds its bf16 product into the fp32
  // gradient (beta = 1). Priced from the profile's table of GEMMs timed that way, the 20 such
  // shapes come out nearer their time in the step than priced as GEMMs with a bf16 output, which
  // read and write a quarter of the output's bytes: the median |error| falls, and so does the
  // shortfall summed over a step. (Two of the four steps ran at 1,725-1,755 MHz under the power
  // cap, where every GEMM is slower than calibrate timed it; the check is which table is nearer.)
  const HardwareProfile hp = load_hardware_profile("h100-sxm", kProfiles);
  ASSERT_TRUE(hp.gemm.count(kGemmAccumulateFp32));
  const CostModel cost(hp, Precision::bf16);
  std::ifstream in(kRecords + "/h100-llama-one-gpu-kernel-classes.json");
  ASSERT_TRUE(in);
  const auto doc = nlohmann::json::parse(in);
  InPlacePricing p;
  price_in_place(
      doc, [](const nlohmann::json& g) { return g["accumulate"].get<bool>() && g["fp32_out"].get<bool>(); },
      [&](double m, double n, double k, bool) { return cost.gemm_time_s(m, n, k, true); },
      [&](double m, double n, double k, bool) { return cost.gemm_time_s(m, n, k, false); }, p);
  const auto& acc_err = p.err_a;
  const auto& plain_err = p.err_b;
  const double acc_sum = p.sum_a, plain_sum = p.sum_b, measured_sum = p.measured;
  ASSERT_EQ(acc_err.size(), 20u);
  std::printf("[ info ] %zu weight-gradient GEMMs timed in the H100's Llama steps: median |error| %.1f%% priced as they "
              "accumulate into fp32, %.1f%% with a bf16 output; summed over the steps %+.1f%% and %+.1f%%\n",
              acc_err.size(), 100 * median(acc_err), 100 * median(plain_err), 100 * (acc_sum / measured_sum - 1),
              100 * (plain_sum / measured_sum - 1));
  EXPECT_LT(median(acc_err), median(plain_err));
  EXPECT_LT(std::fabs(acc_sum / measured_sum - 1), std::fabs(plain_sum / measured_sum - 1));
}

TEST(Validation, TheGemmShapesOfAModelAreTheOnesTheRunnerRan) {
  // `planner gemm-shapes` lists what `calibrate --extra-shapes` times: each layer's and the
  // logits' GEMMs, from the cost model's own ops, oriented as the step runs them. The kernel-class
  // records hold every GEMM the runner itself ran inside the Llama steps (m, n, k and its
  // transposes, on two cards): for each run, the shapes listed for its model, tp 1 and its
  // micro-batch are exactly those, no more and no fewer.
  const Scenario s = load_scenario(kScenarios + "/validate-llama-one-gpu.json", kProfiles);
  int runs = 0;
  for (const char* file : {"h100-llama-one-gpu-kernel-classes.json", "h100-llama-one-gpu-kernel-classes-run2.json"}) {
    std::ifstream in(kRecords + "/" + file);
    ASSERT_TRUE(in) << file;
    const auto doc = nlohmann::json::parse(in);
    for (const auto& run : doc["runs"]) {
      ASSERT_EQ(run["layout"]["tp"].get<int>(), 1);
      std::set<GemmUse> ran;
      for (const auto& g : run["kernel_classes"]["gemm_shapes"])
        ran.insert({g["m"].get<int>(), g["n"].get<int>(), g["k"].get<int>(), g["ta"].get<bool>(), g["tb"].get<bool>()});
      const ModelConfig m = model_named(s, run["model"].get<std::string>());
      const std::vector<GemmUse> listed = model_gemm_shapes(m, 1, run["layout"]["micro_batch"].get<int>());
      EXPECT_EQ(std::set<GemmUse>(listed.begin(), listed.end()), ran) << file << " " << m.name;
      EXPECT_EQ(listed.size(), 15u);  // four layer GEMMs three ways, and the logits' three
      ++runs;
    }
  }
  EXPECT_EQ(runs, 8);
}

TEST(Validation, GemmsOfAMicroBatchOfTwoSequencesArePricedFromTheirOwnRows) {
  // calibrate's shape grid once timed 2,048, 8,192 and 16,384 tokens; a GEMM of a micro-batch of
  // two 2,048 sequences (4,096 tokens) took the nearest row in log space, often another shape's
  // (the table keys m, n, k without the transposes) or the mean of neighbours at 2,048 and 8,192
  // tokens. Since 2026-12-06 the grid also times 4,096 tokens, a hidden size of 3,072 and Llama's
  // vocabularies from a hidden size of 2,048 (two H100 runs, record
  // calibrate/records/2026-12-06-h100-session-48-token-grid/). Against every GEMM timed inside the
  // H100's Llama steps on two cards (the kernel-class records: one before the grid grew, one
  // after, on the card of the fifth calibration run), the 30 GEMMs at 4,096 tokens on each card
  // are priced twice from the committed profile: from all its rows, and from only the rows of the
  // grid before (the shapes of the first calibration run, at the merged profile's rates). With
  // their own rows the steps' summed time of those GEMMs comes nearer on each card, and the median
  // |error| over both is no worse. (Both ways over-price them: the logits' three GEMMs run 10-27%
  // faster inside a step than calibrate times the same shape on the same card, which the profile
  // does not yet explain.)
  const HardwareProfile hp = load_hardware_profile("h100-sxm", kProfiles);
  std::ifstream first(std::string(TRAINSIM_SOURCE_DIR) +
                      "/calibrate/records/2026-12-05-h100-session-38-calibrate-validate/h100-sxm.run1.json");
  ASSERT_TRUE(first);
  const auto first_run = nlohmann::json::parse(first);
  std::set<std::array<double, 3>> old_grid;
  for (const auto& r : first_run["gpu"]["gemm_tflops"]["bf16"])
    old_grid.insert({r[0].get<double>(), r[1].get<double>(), r[2].get<double>()});
  HardwareProfile before = hp;
  for (auto& [dtype, rows] : before.gemm)
    std::erase_if(rows, [&](const GemmPoint& p) { return !old_grid.count({p.m, p.n, p.k}); });
  ASSERT_LT(before.gemm.at("bf16").size(), hp.gemm.at("bf16").size());
  const CostModel grid(hp, Precision::bf16), old(before, Precision::bf16);
  std::vector<double> grid_err, old_err;
  for (const char* file : {"h100-llama-one-gpu-kernel-classes.json", "h100-llama-one-gpu-kernel-classes-run2.json"}) {
    std::ifstream in(kRecords + "/" + file);
    ASSERT_TRUE(in) << file;
    const auto doc = nlohmann::json::parse(in);
    InPlacePricing p;
    // Tokens: the rows of a forward or input-gradient GEMM, a weight gradient's depth.
    price_in_place(
        doc, [](const nlohmann::json& g) { return (g["accumulate"].get<bool>() ? g["k"] : g["m"]).get<int>() == 4096; },
        [&](double m, double n, double k, bool acc) { return grid.gemm_time_s(m, n, k, acc); },
        [&](double m, double n, double k, bool acc) { return old.gemm_time_s(m, n, k, acc); }, p);
    ASSERT_EQ(p.err_a.size(), 30u) << file;
    grid_err.insert(grid_err.end(), p.err_a.begin(), p.err_a.end());
    old_err.insert(old_err.end(), p.err_b.begin(), p.err_b.end());
    const double grid_sum = p.sum_a, old_sum = p.sum_b, measured_sum = p.measured;
    std::printf("[ info ] %s: the 30 GEMMs at 4,096 tokens summed over the steps %+.1f%% from their own rows, %+.1f%% "
                "from the grid before\n", file, 100 * (grid_sum / measured_sum - 1), 100 * (old_sum / measured_sum - 1));
    EXPECT_LT(std::fabs(grid_sum / measured_sum - 1), std::fabs(old_sum / measured_sum - 1)) << file;
  }
  std::printf("[ info ] median |error| of the 60: %.1f%% from their own rows, %.1f%% from the grid before\n",
              100 * median(grid_err), 100 * median(old_err));
  EXPECT_LE(median(grid_err), median(old_err));
}

TEST(Validation, TheLongerAGemmTheLongerCalibratesTablePricesItAgainstTheStep) {
  // What the README says of the H100's GEMMs (How accurate, the denser grid): summed by their time
  // in the step, the GEMMs of the three Llama kernel-class records (three cards) come out short
  // under 0.1 ms, long over 1 ms, and the longer the further. calibrate times each GEMM after a
  // device copy as long as it, capped at 512 MiB (about 0.38 ms at the H100's copy rate): up to
  // about 0.3 ms a GEMM runs about 40% of that time, a 2 ms one 84% of it, and the more of its time a GPU spends in GEMMs
  // the lower the clock its power cap holds it to (calibrate/records/2026-12-06-h100-session-46-kernel-mix/:
  // a GEMM in a mix at share 0.95 takes 1.12-1.15 times its time alone). The Llama steps spend
  // 31-52% of their time in GEMMs: the long ones run at a lower duty than calibrate's and the short
  // ones at a higher one (calibrate/records/2026-12-06-h100-session-48-token-grid/, call 4).
  // The GEMM-bound scenario's step (scenarios/validate-gemm-heavy.json, Llama 3 8B's layer shapes,
  // calibrate/records/2026-12-06-h100-session-49-gemm-bound/, call 1) spends two thirds of its time in GEMMs, so
  // the same account says that each length of GEMM is priced shorter against it than against the
  // Llama steps. This holds the binning to its sums, the README to both; a model of the GEMMs'
  // duty would turn them round and should change both.
  const HardwareProfile hp = load_hardware_profile("h100-sxm", kProfiles);
  const CostModel cost(hp, Precision::bf16);
  struct Record {
    std::vector<GemmLengthBin> bins;
    double gemm_share = 0;  // GEMM time over step time, the smallest of its runs'
  };
  auto binned = [&](const char* file) {
    Record r;
    std::ifstream in(kRecords + "/" + file);
    EXPECT_TRUE(in) << file;
    const auto doc = nlohmann::json::parse(in);
    std::vector<InStepGemm> gemms;
    double measured = 0, predicted = 0;
    r.gemm_share = 1;
    for (const auto& run : doc["runs"]) {
      double in_gemms = 0;
      for (const auto& g : run["kernel_classes"]["gemm_shapes"]) {
        const InStepGemm x{g["measured_s"].get<double>(),
                           cost.gemm_time_s(g["m"].get<double>(), g["n"].get<double>(), g["k"].get<double>(), g["accumulate"].get<bool>()),
                           g["calls_per_step"].get<double>()};
        gemms.push_back(x);
        measured += x.measured_s * x.calls_per_step;
        predicted += x.predicted_s * x.calls_per_step;
        in_gemms += x.measured_s * x.calls_per_step;
      }
      r.gemm_share = std::min(r.gemm_share, in_gemms / run["measured"]["step_time_s"].get<double>());
    }
    r.bins = gemms_by_length(gemms);
    EXPECT_EQ(r.bins.size(), 4u) << file;
    int n = 0;
    double m_sum = 0, p_sum = 0;
    for (const auto& b : r.bins) {
      n += b.gemms;
      m_sum += b.measured_s;
      p_sum += b.predicted_s;
    }
    EXPECT_EQ(n, static_cast<int>(gemms.size())) << file;
    EXPECT_NEAR(m_sum, measured, 1e-12) << file;
    EXPECT_NEAR(p_sum, predicted, 1e-12) << file;
    std::printf("[ info ] %s (GEMMs %.0f%% of the step or more): %s\n", file, 100 * r.gemm_share, describe(r.bins).c_str());
    return r;
  };
  auto ratio = [](const GemmLengthBin& b) { return b.predicted_s / b.measured_s; };
  std::vector<Record> llama;
  for (const char* file : {"h100-llama-one-gpu-kernel-classes.json", "h100-llama-one-gpu-kernel-classes-run2.json",
                           "h100-llama-one-gpu-kernel-classes-run3.json"}) {
    llama.push_back(binned(file));
    const auto& bins = llama.back().bins;
    ASSERT_EQ(bins.size(), 4u);
    for (const auto& b : bins) EXPECT_GT(b.gemms, 0) << file;
    // Short under 0.1 ms, long from 1 ms, and in between the longer the bin the longer it is priced.
    EXPECT_LT(ratio(bins.front()), 1.0) << file;
    EXPECT_GT(ratio(bins.back()), 1.0) << file;
    for (std::size_t i = 1; i < bins.size(); ++i) EXPECT_GT(ratio(bins[i]), ratio(bins[i - 1])) << file << " bin " << i;
  }
  const Record bound = binned("h100-gemm-heavy-kernel-classes.json");
  int compared = 0;
  for (const Record& l : llama) {
    EXPECT_GT(bound.gemm_share, 1.2 * l.gemm_share);
    for (std::size_t i = 0; i < bound.bins.size(); ++i) {
      if (bound.bins[i].gemms == 0 || l.bins[i].gemms == 0) continue;
      EXPECT_LT(ratio(bound.bins[i]), ratio(l.bins[i])) << "bin " << i;
      ++compared;
    }
  }
  EXPECT_GE(compared, 9);  // 0.1-0.3 ms, 0.3-1 ms and from 1 ms, against each Llama record
  // The text leaves out empty bins and names the open-ended ones.
  EXPECT_EQ(describe(gemms_by_length({{50e-6, 55e-6, 2}, {2e-3, 1e-3, 1}})), "under 0.1 ms +10.0% (1), from 1 ms -50.0% (1)");
}

TEST(Validation, TheMeasuredClockExplainsPartOfThePowerCappedStepsShortfall) {
  // A step at the 700 W power cap runs below the 1,980 MHz that calibrate times its kernels at,
  // and the model, which does not know the clock a step will hold, prices those steps short. Half
  // of a power model is measured already: inside sustained mixes with GEMMs or attention, a Llama
  // layer's element-wise kernels take 1 + s (1980 / f - 1) times their time at full clock, at a
  // median SM clock f. Each profile's `clock` section gives s, read off that part's kernel-mix
  // record by one stated rule (0.564 on the H200, record
  // calibrate/records/2026-12-03-h200-session-15-kernel-mix/; 0.437 on the H100,
  // calibrate/records/2026-12-06-h100-session-46-kernel-mix/; the rule and its script in
  // calibrate/records/2026-12-06-h100-session-47-llama-clock-check/). Those are synthetic mixes,
  // not these steps. Here every one-GPU run that `planner validate` recorded with its clock (NVML
  // over the timed steps) below 1,850 MHz is re-predicted twice: as the model prices it, and with
  // the time the model gives its memory-bound kernels (micro-batches x (layers x the layer's
  // memory-bound ops + the embedding's and the head's)) stretched by the profile's factor at the
  // run's own clock. The rule must bring the median error closer to zero without overshooting it:
  // the clock explains part of the shortfall, not more than all of it. (GEMMs slow with the clock
  // too, 1.02-1.17 times in the same mixes, but calibrate's table is timed at an unknown clock of
  // its own, so nothing is applied to them here.) The GEMM-bound scenario's steps
  // (scenarios/validate-gemm-heavy.json: two thirds of their time in GEMMs, at 1,395-1,635 MHz)
  // are held apart: they are not priced short as they are (+0.1% at the median over four cards),
  // and the rule alone takes them long, further from the runs. Their GEMMs, summed, are not priced
  // short (+1.1% and -0.1% in the kernel-class runs, calibrate/records/2026-12-06-h100-session-49-gemm-bound/,
  // call 1): the long ones, most of the GEMM time, were timed by calibrate at a higher duty than
  // the step's and make up for the short ones
  // (Validation.TheLongerAGemmTheLongerCalibratesTablePricesItAgainstTheStep), so stretching the
  // element-wise kernels to the clock takes the step past its measured time. The H200's capped
  // steps went the same way when its sixth calibration run (the current grid, with its first table
  // of weight-gradient GEMMs accumulating into fp32, most of the change: -2.4% without it) was
  // merged into its profile: priced -2.9% at the median before, -0.8% after, and the rule takes
  // them to +0.5%. They are held to what they show now: within 1.5% as priced (halfway between the
  // -0.8% now and the -2.9% before, so that the test fails if the shortfall comes back), the rule
  // past zero.
  struct Part {
    std::vector<double> before, after;  // signed errors of the capped runs
  };
  std::map<std::string, Part> parts;
  std::map<std::string, HardwareProfile> profiles;
  for (const char* hw : {"h100-sxm", "h200-sxm"}) {
    profiles[hw] = load_hardware_profile(hw, kProfiles);
    ASSERT_GE(profiles[hw].elementwise_clock_sensitivity, 0) << hw << " has no clock section";
  }
  for (const ClockRun& r : one_gpu_clock_runs()) {
    if (r.sm_mhz >= 1850) continue;
    ASSERT_GT(r.predicted_s, 0) << r.hw << " " << r.model << ": a capped run that did not finish";
    Part& part = parts[r.hw + (r.gemm_bound ? ", GEMM-bound" : "")];
    const double memory_bound = r.k.other_s;
    ASSERT_GT(memory_bound, 0.05 * r.predicted_s) << r.model;
    ASSERT_LT(memory_bound, 0.5 * r.predicted_s) << r.model;
    part.before.push_back(r.predicted_s / r.measured_s - 1.0);
    const double stretched = memory_bound * (profiles.at(r.hw).elementwise_clock_factor(r.sm_mhz) - 1.0);
    ASSERT_GT(stretched, 0) << r.model;
    part.after.push_back((r.predicted_s + stretched) / r.measured_s - 1.0);
  }
  ASSERT_EQ(parts.size(), 3u);  // no GEMM-bound steps recorded on the H200
  for (const auto& [hw, p] : parts) {
    ASSERT_GE(p.before.size(), 8u) << hw;
    std::vector<double> abs_before, abs_after;
    for (double e : p.before) abs_before.push_back(std::fabs(e));
    for (double e : p.after) abs_after.push_back(std::fabs(e));
    std::printf("[ info ] %s, %zu runs below 1,850 MHz: median error %+.2f%% as priced, %+.2f%% with the clock rule "
                "(median |error| %.2f%% -> %.2f%%; largest %.1f%% -> %.1f%%)\n",
                hw.c_str(), p.before.size(), 100 * median(p.before), 100 * median(p.after), 100 * median(abs_before),
                100 * median(abs_after), 100 * *std::max_element(abs_before.begin(), abs_before.end()),
                100 * *std::max_element(abs_after.begin(), abs_after.end()));
    EXPECT_GT(median(p.after), median(p.before)) << hw;
    if (hw.find("GEMM-bound") != std::string::npos) {
      // Priced about right as they are; the rule alone takes them long, further from the runs.
      EXPECT_GT(median(p.after), 0.0) << hw << ": the rule alone overshoots where the GEMMs hold the clock";
      EXPECT_GT(median(abs_after), median(abs_before)) << hw;
      continue;
    }
    if (hw == "h200-sxm") {
      EXPECT_LT(std::fabs(median(p.before)), 0.015) << hw << ": priced about right as they are";
      EXPECT_GT(median(p.after), 0.0) << hw << ": the rule alone takes them past their measured time";
      continue;
    }
    EXPECT_LT(median(p.before), 0.0) << hw << ": the capped steps are priced short";
    EXPECT_LE(median(p.after), 0.0) << hw << ": the clock explains no more than the shortfall";
    EXPECT_LT(median(abs_after), median(abs_before)) << hw;
  }
}

TEST(Validation, TheClockAStepHoldsIsPredictedFromItsKernelMix) {
  // The first half of a power model: the SM clock a step will hold, before any run
  // (models/power_model.h). Each profile's `clock.power_model` is read off that part's kernel-mix
  // sweeps alone (tools/power_rule.py): each kind of kernel's power at the highest clock, and the
  // line the sweeps' capped mixes draw from that estimate to the clock they held, held through
  // the highest clock at the power limit (Profiles.EachMeasuredClockLineMeetsTheHighestClockAtThePowerLimit;
  // fitted freely before 2026-12-07, it put steps just over the limit 80-110 MHz down and came
  // 32 and 42 MHz from the held clocks on the mean, against 12 and 27 now). Here every one-GPU run `planner validate` recorded with
  // its clock, on either part, is priced by the cost model kernel class by kernel class, its power
  // estimated from that mix and its clock read off the line, against the median clock NVML gave
  // over its timed steps. The prediction must beat taking every step at the highest clock: on the
  // mean over all runs (most hold the highest clock, where both are right) and at the median over
  // those the cap held below 1,850 MHz.
  struct Part {
    std::vector<double> model, flat;              // |predicted - measured| MHz: the model, the highest clock
    std::vector<double> model_capped, flat_capped;  // the same, runs held below 1,850 MHz
    std::vector<double> signed_err;
    // |step error| as priced, and with the element-wise kernels stretched to the predicted clock
    // by the clock rule (not applied by the simulator: reported for what it would do).
    std::vector<double> priced, at_predicted;
  };
  std::map<std::string, Part> parts;
  std::map<std::string, HardwareProfile> profiles;
  for (const char* hw : {"h100-sxm", "h200-sxm"}) {
    profiles[hw] = load_hardware_profile(hw, kProfiles);
    ASSERT_TRUE(profiles[hw].has_clock_power_model()) << hw;
  }
  for (const ClockRun& r : one_gpu_clock_runs()) {
    const HardwareProfile& hw = profiles.at(r.hw);
    Part& part = parts[r.hw];
    const double predicted = held_clock_mhz(hw, mix_of(r.k), r.family);
    if (r.predicted_s > 0) {
      part.priced.push_back(std::fabs(r.predicted_s / r.measured_s - 1.0));
      part.at_predicted.push_back(std::fabs((r.predicted_s + r.k.other_s * (hw.elementwise_clock_factor(predicted) - 1.0)) / r.measured_s - 1.0));
    }
    part.model.push_back(std::fabs(predicted - r.sm_mhz));
    part.flat.push_back(std::fabs(hw.max_sm_mhz - r.sm_mhz));
    part.signed_err.push_back(predicted - r.sm_mhz);
    if (r.sm_mhz < 1850) {
      part.model_capped.push_back(part.model.back());
      part.flat_capped.push_back(part.flat.back());
    }
  }
  ASSERT_EQ(parts.size(), 2u);
  auto mean = [](const std::vector<double>& v) {
    double sum = 0;
    for (double x : v) sum += x;
    return sum / static_cast<double>(v.size());
  };
  for (const auto& [hw, p] : parts) {
    ASSERT_GE(p.model_capped.size(), 8u) << hw;
    std::printf("[ info ] %s, %zu one-GPU runs: the clock predicted from the kernel mix %.0f MHz from the measured on the mean "
                "(%+.0f to %+.0f), the highest clock %.0f; the %zu held below 1,850 MHz: %.0f against %.0f at the median\n",
                hw.c_str(), p.model.size(), mean(p.model), *std::min_element(p.signed_err.begin(), p.signed_err.end()),
                *std::max_element(p.signed_err.begin(), p.signed_err.end()), mean(p.flat), p.model_capped.size(),
                median(p.model_capped), median(p.flat_capped));
    std::printf("[ info ] %s, %zu of them: median |error| of step time %.2f%% as priced, %.2f%% with the element-wise kernels at "
                "the predicted clock (max %.1f%% -> %.1f%%)\n",
                hw.c_str(), p.priced.size(), 100 * median(p.priced), 100 * median(p.at_predicted),
                100 * *std::max_element(p.priced.begin(), p.priced.end()), 100 * *std::max_element(p.at_predicted.begin(), p.at_predicted.end()));
    EXPECT_LT(mean(p.model), mean(p.flat)) << hw;
    EXPECT_LT(median(p.model_capped), median(p.flat_capped)) << hw;
  }
}

TEST(Validation, ThePowerEstimateOfAStepAtTheHighestClockRunsHigh) {
  // The power model's estimate (models/power_model.h: the time-weighted mean of each kernel
  // class's power, read off the kernel-mix sweeps) against the power NVML gave over the timed
  // steps of every one-GPU run that held the highest clock (within one 15 MHz step), where both
  // are the power at that clock. Priced with the Llama-style element-wise kernels' power (the
  // Llama runs on both parts) it runs high on every such run. Part of that is the reading on
  // the shortest runs: NVML's power is a mean over the last second, which lags a run's start, so a
  // run timed for under a second after a short warm-up reads low (GPT 125M, timed 0.5 s: 483 W
  // against 572 W read instantaneously beside it; GPT 350M, timed 1.2 s: 578 and 584 W; record
  // calibrate/records/2026-12-06-session-50-sustained/, call 2). Not through gaps between kernels:
  // no kernel of these steps is short enough to be priced at the launch interval (asserted), and
  // timed in place the GPU is idle between kernels for 0.4-3.0% of a step
  // (ThePowerEstimateRunsHighOnTheStepsOwnKernelTimes); nor through the card being cooler in a
  // short run (sustained for half a minute, two such steps drew 9-12 W more and held the same
  // clock: Validation.AStepSustainedForHalfAMinuteHoldsTheClockAndTimeOfAFewTimedSteps). Where it
  // went, read inside the small GPT steps: mostly their element-wise kernels, then their GEMMs
  // (EachKernelClassDrawsWhatRepeatingItInTheStepAdds); GPT's element-wise kernels (LayerNorm,
  // bias+GELU, bias+dropout) draw less than Llama's alone too. Both profiles now give a GPT-style
  // layer's element-wise kernels their own power, the median of sweeps of them alone at the GPT
  // validation steps' shapes (h100-sxm 442 W, forty rows on six cards, 369-484 W:
  // calibrate/records/2026-12-06-session-54-h100-gpt-power/,
  // calibrate/records/2026-12-07-session-55-h100-held-out/,
  // calibrate/records/2026-12-07-session-57-h100-held-out/ and -clock-line-blind/,
  // calibrate/records/2026-12-07-session-58-h100-held-out/; h200-sxm 444 W, fourteen rows on two
  // cards, 361-474 W: calibrate/records/2026-12-06-session-53-h200-calibration/, call 1, and
  // calibrate/records/2026-12-07-session-57-h200-held-out/; the Llama-style kernels'
  // 529 and 548 W before). The excess over the runs timed for a second or more fell from 69 to
  // 48 W (H100) and from 65 to 41 W (H200) at the median; it stays above zero there.
  // Run by run a GPT step priced that way may now read above the estimate by the readings' noise
  // (2%: the 1 s mean and the instantaneous readings of one run, below) plus what one median
  // leaves out: the step's element-wise share of its kernel time times the rows' spread above
  // the median (the sweeps draw more with hidden size: on the second H100 card 436 W at hidden
  // 768, 478 W at 1,536, 484 W at 2,048, all at 8,192 tokens).
  // The highest share-0 row of each part's GPT-style sweeps (the records above).
  const std::map<std::string, double> kGptSweepMaxW{{"h100-sxm", 484.0}, {"h200-sxm", 474.0}};
  std::map<std::string, HardwareProfile> profiles;
  for (const char* hw : {"h100-sxm", "h200-sxm"}) profiles[hw] = load_hardware_profile(hw, kProfiles);
  std::map<std::string, std::vector<double>> excess, excess_timed_1s;
  // The same runs with every step priced by the Llama-style element-wise kernels' power, as both
  // profiles priced them before GPT's own were swept.
  std::map<std::string, std::vector<double>> excess_llama_power, excess_llama_power_1s;
  std::vector<double> excess_instant;  // against the instantaneous readings, where recorded
  // The step shapes (part, model, micro-batch, recompute) with instantaneous readings, and those
  // of them held to the 1 s mean alone: counted by shape, since every record of a scenario on a
  // part repeats its shapes (by run, each H100 record of the GPT scenario adds two exempt runs of
  // its ten, so a bound by run drifts as records accumulate; by shape it does not). Three
  // of 25 shapes are exempt (GPT 760M mb4 and mb2, Llama 1.1B mb2, on the H100). The bound,
  // fewer than one in five, is a chosen guard against the criterion widening, not a measured
  // figure (a tenth by shape would fail today; doubling the 5% tolerance exempts about half as
  // many runs again).
  std::set<std::string> instant_shapes, aliased_shapes;
  std::vector<double> short_instant_ratio;  // instantaneous over 1 s mean, runs timed under 2 s
  for (const ClockRun& r : one_gpu_clock_runs()) {
    const HardwareProfile& hw = profiles.at(r.hw);
    if (r.power_w <= 0 || r.sm_mhz < hw.max_sm_mhz - 15) continue;
    const double estimate = mix_power_w(hw, mix_of(r.k), r.family);
    // GPT steps on a part whose GPT-style element-wise kernels were swept: priced by those, and
    // held to the estimate less the readings' noise and the sweeps' spread above their median.
    const bool own_elementwise = r.family == Family::gpt && hw.clock_power.memory_bound_w_gpt > 0;
    const double elementwise_share = r.k.other_s / (r.k.gemm_s + r.k.attention_s + r.k.other_s);
    auto allowance = [&](double reading) {
      return own_elementwise ? 0.02 * reading + elementwise_share * (kGptSweepMaxW.at(r.hw) - hw.clock_power.memory_bound_w_gpt)
                             : 0.0;
    };
    const std::string& part = r.hw;
    EXPECT_GT(estimate, r.power_w - allowance(r.power_w)) << r.hw << " " << r.model;
    EXPECT_EQ(r.at_launch_interval_s, 0.0) << r.hw << " " << r.model;
    excess[part].push_back(estimate - r.power_w);
    if (r.timed_s >= 1.0) excess_timed_1s[part].push_back(estimate - r.power_w);
    const double llama_estimate = mix_power_w(hw, mix_of(r.k), Family::llama);
    excess_llama_power[part].push_back(llama_estimate - r.power_w);
    if (r.timed_s >= 1.0) excess_llama_power_1s[part].push_back(llama_estimate - r.power_w);
    // The instantaneous value changes every 0.101 s however often it is read (nvidia-smi every
    // 5 ms beside GPT 760M steps: calibrate/records/2026-12-07-session-55-h100-held-out/, call 2).
    // So a run whose micro-batch, over which its kernels swing the power, takes within 5% of a
    // whole number of refreshes may be read at the same few phases of it every time (over the 8
    // micro-batches such runs time, a 5% mismatch moves the readings by at most 40% of a
    // micro-batch, too little to cover it), and the mean miss the run's by up to half the swing: GPT 760M mb4 (0.198 s a micro-batch) read 579 and 667 W
    // by turns on the eighteenth H100 card (h100-one-gpu-run11.json), 4.8% under its 1 s mean,
    // and 5.0% over it on the card of call 2, where its 1 s mean matched micro-batch 2's as on the
    // eighteenth. Such runs are held to the 1 s mean alone where the phases are few: a micro-batch
    // of n refreshes is read at n phases of it, and from four on the phases are taken to cover it
    // (the one such shape recorded, GPT 2.7B mb1 at 5.7 refreshes, reads within 0.7% of its 1 s
    // mean on both cards).
    const double intervals = r.micro_batch_s / 0.101;
    const bool may_alias = intervals >= 0.5 && std::fabs(intervals / std::round(intervals) - 1.0) < 0.05 &&
                           std::round(intervals) <= 3;
    if (r.power_instant_w > 0) instant_shapes.insert(r.hw + " " + r.model + " mb" + std::to_string(r.micro_batch) + " " + r.recompute);
    if (may_alias && r.power_instant_w > 0) {
      aliased_shapes.insert(r.hw + " " + r.model + " mb" + std::to_string(r.micro_batch) + " " + r.recompute);
      std::printf("[ info ] %s %s: %.3f s a micro-batch; the instantaneous readings' mean %.1f%% from the 1 s mean\n",
                  r.hw.c_str(), r.model.c_str(), r.micro_batch_s, 100 * (r.power_instant_w / r.power_w - 1.0));
    }
    if (r.power_instant_w > 0 && !may_alias) {
      // The instantaneous readings do not lag. The 1 s mean does, low where a run draws more than
      // the one before it: up to 20% under them on runs timed for half a second (GPT 125M at the
      // start of its scenario on the H200); from 2 s on they agree within 1.6% (held to 2%, the
      // readings' noise). Under 2 s a run has ten to twenty distinct readings of a power that
      // swings within each micro-batch, and their mean may fall a little under the 1 s mean too
      // (GPT 350M mb4 on the nineteenth H100 card, h100-one-gpu-run12.json, timed 1.19 s: 565
      // against 582 W, 2.8% under; the same micro-batch timed for 1.2 s on two other cards +1.7%
      // and -1.3%, for 2.3 s on four -0.5% to +0.6%), so those runs are held together: the lag
      // puts their readings above the 1 s mean at the median.
      if (r.timed_s >= 2.0) {
        EXPECT_LT(std::fabs(r.power_instant_w / r.power_w - 1.0), 0.02) << r.hw << " " << r.model;
      } else {
        short_instant_ratio.push_back(r.power_instant_w / r.power_w);
      }
      EXPECT_GT(estimate, r.power_instant_w - allowance(r.power_instant_w)) << r.hw << " " << r.model;
      excess_instant.push_back(estimate - r.power_instant_w);
    }
  }
  ASSERT_GE(excess_instant.size(), 7u);
  EXPECT_LT(aliased_shapes.size() * 5, instant_shapes.size()) << "the exemption for aliasing stays narrow";
  std::printf("[ info ] %zu of %zu step shapes with instantaneous readings held to the 1 s mean alone\n", aliased_shapes.size(),
              instant_shapes.size());
  ASSERT_GE(short_instant_ratio.size(), 20u);
  std::printf("[ info ] %zu runs timed under 2 s: the instantaneous readings' mean %+.1f%% from the 1 s mean at the median (%+.1f%% to %+.1f%%)\n",
              short_instant_ratio.size(), 100 * (median(short_instant_ratio) - 1.0),
              100 * (*std::min_element(short_instant_ratio.begin(), short_instant_ratio.end()) - 1.0),
              100 * (*std::max_element(short_instant_ratio.begin(), short_instant_ratio.end()) - 1.0));
  EXPECT_GT(median(short_instant_ratio), 1.0) << "the 1 s mean lags a short run";
  std::printf("[ info ] %zu runs with instantaneous readings: the estimate %.0f W above them at the median (%+.0f to %+.0f W)\n",
              excess_instant.size(), median(excess_instant), *std::min_element(excess_instant.begin(), excess_instant.end()),
              *std::max_element(excess_instant.begin(), excess_instant.end()));
  ASSERT_EQ(excess.size(), 2u);
  for (const auto& [hw, e] : excess) {
    const std::vector<double>& e1 = excess_timed_1s[hw];
    ASSERT_GE(e.size(), 40u) << hw;
    ASSERT_GE(e1.size(), 20u) << hw;
    std::printf("[ info ] %s, %zu one-GPU runs at the highest clock: the power estimate %.0f W above the measured at the median "
                "(%+.0f to %+.0f W); the %zu timed for 1 s or more: %.0f W (%+.0f to %+.0f W)\n",
                hw.c_str(), e.size(), median(e), *std::min_element(e.begin(), e.end()), *std::max_element(e.begin(), e.end()),
                e1.size(), median(e1), *std::min_element(e1.begin(), e1.end()), *std::max_element(e1.begin(), e1.end()));
    EXPECT_LE(median(e1), median(e)) << hw << ": the shortest runs read low";
    EXPECT_GT(median(e1), 0.0) << hw;
    const std::vector<double>& l = excess_llama_power[hw];
    const std::vector<double>& l1 = excess_llama_power_1s[hw];
    std::printf("[ info ] %s, the same with the Llama-style kernels' power for every step: %.0f W above at the median; the %zu "
                "timed for 1 s or more: %.0f W\n",
                hw.c_str(), median(l), l1.size(), median(l1));
    EXPECT_GT(median(l), median(e)) << hw << ": GPT's element-wise kernels draw less than Llama's";
  }
}

namespace {

// The GPT scenario's ten steps with every kernel timed in place (TRAINSIM_TIME_KERNEL_CLASSES=1),
// one record a card: two of session 58's and one of session 60's.
const char* const kH100GptKernelClassRecords[] = {"h100-one-gpu-kernel-classes.json", "h100-one-gpu-kernel-classes-run2.json",
                                                  "h100-one-gpu-kernel-classes-run3.json"};

}  // namespace

TEST(Validation, AStepsAttentionRunsAtTheTableTimedAfterIdle) {
  // The GPT scenario's ten steps with every kernel timed in place on two H100s
  // (h100-one-gpu-kernel-classes.json, calibrate/records/2026-12-07-session-58-gpt-kernel-classes/,
  // run with the attention table calibrate had timed shape after shape; -run2.json,
  // calibrate/records/2026-12-07-session-58-attention-table/, call 4, a card held out from the
  // table as it now is, each shape timed after 300 ms idle; -run3.json, a third card held out,
  // calibrate/records/2026-12-07-session-60-kernel-timing/, call 2). Priced with the current
  // profile, each step's attention is within 3% of what it measured in place, on all three cards (3%: a chosen bound,
  // twice the largest measured with the new table, well under the old table's 8.0%): +0.2..+1.2% on the
  // second, where the table timed shape after shape had GPT 2.7B at micro-batch 1 (batch 1, 32
  // heads of 80, a shape calibrate timed right after a larger one) +8.0% and the other nine
  // steps +1.6..+2.4% (calibrate/records/2026-12-07-session-58-attention-order/).
  Scenario base = load_scenario(kScenarios + "/validate-one-gpu.json", kProfiles);
  base.hardware = load_hardware_profile("h100-sxm", kProfiles);
  const CostModel cost(base.hardware, base.training.precision);
  std::vector<double> err;
  for (const char* file : kH100GptKernelClassRecords) {
    std::ifstream in(kRecords + "/" + file);
    ASSERT_TRUE(in) << file;
    const auto doc = nlohmann::json::parse(in);
    ASSERT_EQ(doc.at("runs").size(), 10u) << file;
    for (const auto& run : doc.at("runs")) {
      const Layout l = layout_of(run.at("layout"));
      const ModelConfig model = model_named(base, run.at("model").get<std::string>());
      const OpContext c{model, 1, false, l.recompute, l.micro_batch, base.training.precision};
      const KernelClasses predicted = one_gpu_kernel_classes(cost, c, model.layers, run.at("global_batch").get<double>() / l.micro_batch);
      const double measured = run.at("kernel_classes").at("measured_s").at("attention").get<double>();
      const std::string what = std::string(file) + " " + run.at("model").get<std::string>() + " mb" + std::to_string(l.micro_batch);
      EXPECT_LT(std::fabs(predicted.attention_s / measured - 1.0), 0.03) << what;
      err.push_back(predicted.attention_s / measured - 1.0);
    }
  }
  std::printf("[ info ] %zu GPT steps' attention timed in place on three H100s: the model %+.1f%% to %+.1f%% (median %+.1f%%)\n",
              err.size(), 100 * *std::min_element(err.begin(), err.end()), 100 * *std::max_element(err.begin(), err.end()),
              100 * median(err));
}

TEST(Validation, TheGeluBackwardReadsShortBecauseTheRunnerWritesItInPlace) {
  // The runner writes the GeLU backward over its incoming gradient (kernels/step_run_layers.cu,
  // gelu_backward(dff, gin, dff)); calibrate times it into another buffer, as Megatron-LM runs it,
  // and the profile is priced from that. So, priced with the current h100-sxm, the GeLU backward
  // reads short on every GPT step of the three cards whose kernels were timed in place: 14-24%
  // when these records were made. Asserted: more than 8% short (the claim), and not more than 30%
  // (a price gone wrong some other way). Why: on the third card, `calibrate kernel-conditions`
  // timed the kernel both ways at every one of those steps' shapes
  // (calibrate/records/2026-12-07-session-60-kernel-timing/call1/kernel-conditions.txt, the burst
  // column, ten calls back to back as calibrate times it): out of place it read 13-19% under the
  // step's time (asserted: more than 12% under), in place 1-7% under it (asserted: within 8%), the
  // rest of the bursts' shortfall at small shapes being L2 reuse across a burst.
  Scenario base = load_scenario(kScenarios + "/validate-one-gpu.json", kProfiles);
  base.hardware = load_hardware_profile("h100-sxm", kProfiles);
  const CostModel cost(base.hardware, base.training.precision);
  auto in_step_per_call = [](const nlohmann::json& run) {
    for (const auto& k : run.at("kernel_classes").at("kernels"))
      if (k.at("kernel") == "gelu_bias.bwd") return k.at("measured_s").get<double>() / k.at("calls_per_step").get<double>();
    return 0.0;
  };
  std::vector<double> priced;
  for (const char* file : kH100GptKernelClassRecords) {
    std::ifstream in(kRecords + "/" + file);
    ASSERT_TRUE(in) << file;
    const auto record = nlohmann::json::parse(in);
    for (const auto& run : record.at("runs")) {
      const Layout l = layout_of(run.at("layout"));
      const ModelConfig model = model_named(base, run.at("model").get<std::string>());
      const OpContext c{model, 1, false, l.recompute, l.micro_batch, base.training.precision};
      double price = 0;
      for (const Op& op : transformer_layer_ops(c).backward)
        if (op.kind == OpKind::memory && op.kernel == "gelu_bias.bwd") price += cost.op_time_s(op);
      const double measured = in_step_per_call(run);
      ASSERT_GT(price, 0) << file;
      ASSERT_GT(measured, 0) << file;
      const std::string what = std::string(file) + " " + run.at("model").get<std::string>() + " mb" + std::to_string(l.micro_batch);
      EXPECT_GT(price / measured, 0.70) << what;
      EXPECT_LT(price / measured, 0.92) << what;
      priced.push_back(price / measured - 1.0);
    }
  }
  ASSERT_EQ(priced.size(), 30u);

  // The third card's burst timings, out of place and in place, by (tokens, hidden).
  std::map<std::pair<int, int>, double> out_of_place, in_place;
  std::ifstream cond(std::string(TRAINSIM_SOURCE_DIR) +
                     "/calibrate/records/2026-12-07-session-60-kernel-timing/call1/kernel-conditions.txt");
  ASSERT_TRUE(cond);
  for (std::string line; std::getline(cond, line);) {
    const std::string plain = "gelu_bias.bwd", in_place_row = plain + " in place";
    if (line.rfind(plain, 0) != 0) continue;
    const bool ip = line.rfind(in_place_row, 0) == 0;
    std::istringstream fields(line.substr((ip ? in_place_row : plain).size()));
    int tokens = 0, hidden = 0;
    double burst_us = 0;
    fields >> tokens >> hidden >> burst_us;  // the burst column, "us" left unread
    ASSERT_TRUE(fields) << line;
    (ip ? in_place : out_of_place)[{tokens, hidden}] = burst_us * 1e-6;
  }
  ASSERT_EQ(in_place.size(), 24u);
  ASSERT_EQ(out_of_place.size(), 24u);
  std::ifstream in(kRecords + "/h100-one-gpu-kernel-classes-run3.json");
  const auto doc = nlohmann::json::parse(in);
  for (const auto& run : doc.at("runs")) {
    const int hidden = model_named(base, run.at("model").get<std::string>()).hidden;
    const std::pair<int, int> shape{run.at("layout").at("micro_batch").get<int>() * 2048, hidden};
    const double measured = in_step_per_call(run);
    const std::string what = run.at("model").get<std::string>() + " at " + std::to_string(shape.first) + " tokens";
    ASSERT_TRUE(in_place.count(shape) && out_of_place.count(shape)) << what;
    EXPECT_LT(out_of_place.at(shape) / measured, 0.88) << what;
    EXPECT_LT(std::fabs(in_place.at(shape) / measured - 1.0), 0.08) << what;
  }
  std::printf("[ info ] the GeLU backward in 30 GPT steps on three H100s: priced %+.1f%% to %+.1f%% (median %+.1f%%)\n",
              100 * *std::min_element(priced.begin(), priced.end()), 100 * *std::max_element(priced.begin(), priced.end()),
              100 * median(priced));
}

TEST(Validation, ThePowerEstimateRunsHighOnTheStepsOwnKernelTimes) {
  // The small GPT steps on an H100 with every GEMM, attention and other kernel timed in place
  // (h100-small-gpt-kernel-classes.json; calibrate/records/2026-12-06-session-52-h200-current-grid/,
  // call 1) and NVML's instantaneous power read beside them. The power model's excess over the
  // measured power (ThePowerEstimateOfAStepAtTheHighestClockRunsHigh) is not the cost model
  // mis-sharing the step among the kernel classes: each class's measured time is within 5% of the
  // step of the predicted, the GPU is idle between kernels for a few percent of the step at most
  // (0.4-3.0% measured; held under 5%), and the estimate from the measured class times, with the
  // idle time counted at 0 W (the least it could draw), is still above the instantaneous readings
  // on every run by more than their noise (2%, as in ThePowerEstimateOfAStepAtTheHighestClockRunsHigh):
  // 41-85 W measured with the GPT-style element-wise kernels' own power (63-108 W with the
  // Llama-style kernels' before). Nor the kinds' power at these shapes: swept alone, GPT 125M's
  // GEMMs draw 789-857 W (the model: 772-911; session 51's record, call 1), its attention 609-615 W
  // (618) and its GPT-style element-wise kernels 369-436 W on six cards (442; the records of
  // sessions 54, 55, 57 and 58). Where it goes instead: EachKernelClassDrawsWhatRepeatingItInTheStepAdds.
  std::ifstream in(kRecords + "/h100-small-gpt-kernel-classes.json");
  ASSERT_TRUE(in);
  const auto doc = nlohmann::json::parse(in);
  Scenario base = load_scenario(kScenarios + "/validate-small-gpt.json", kProfiles);
  base.hardware = load_hardware_profile("h100-sxm", kProfiles);
  const CostModel cost(base.hardware, base.training.precision);
  std::vector<double> excess;
  for (const auto& run : doc.at("runs")) {
    const auto& m = run.at("measured");
    const auto& kc = run.at("kernel_classes");
    const Layout l = layout_of(run.at("layout"));
    const ModelConfig model = model_named(base, run.at("model").get<std::string>());
    const OpContext c{model, 1, false, l.recompute, l.micro_batch, base.training.precision};
    const KernelClasses predicted = one_gpu_kernel_classes(cost, c, model.layers, run.at("global_batch").get<double>() / l.micro_batch);
    const double step = m.at("step_time_s").get<double>();
    const auto& meas = kc.at("measured_s");
    const double gemm = meas.at("gemm").get<double>(), attention = meas.at("attention").get<double>();
    const double other = meas.at("other_kernels").get<double>(), idle = meas.at("between_kernels").get<double>();
    const std::string what = run.at("model").get<std::string>() + " mb" + std::to_string(l.micro_batch);
    EXPECT_LT(std::fabs(gemm - predicted.gemm_s), 0.05 * step) << what;
    EXPECT_LT(std::fabs(attention - predicted.attention_s), 0.05 * step) << what;
    EXPECT_LT(std::fabs(other - predicted.other_s), 0.05 * step) << what;
    EXPECT_LT(idle, 0.05 * step) << what;
    double gemm_flops = 0;
    for (const auto& g : kc.at("gemm_shapes"))
      gemm_flops += 2 * g.at("m").get<double>() * g.at("n").get<double>() * g.at("k").get<double>() * g.at("calls_per_step").get<double>();
    const KernelMix mix{gemm, gemm_flops, attention, predicted.attention_flops, other};
    const double estimate = mix_power_w(base.hardware, mix, Family::gpt) * (gemm + attention + other) / (gemm + attention + other + idle);
    const double instant = m.at("gpu_clock").at("power_instant_w").get<double>();
    ASSERT_GE(m.at("gpu_clock").at("sm_mhz").get<double>(), base.hardware.max_sm_mhz - 15) << what;
    EXPECT_GT(estimate - instant, 0.02 * instant) << what;
    excess.push_back(estimate - instant);
  }
  ASSERT_EQ(excess.size(), 7u);
  std::printf("[ info ] %zu small GPT steps priced by their measured kernel classes: the estimate %.0f-%.0f W above the "
              "instantaneous power\n",
              excess.size(), *std::min_element(excess.begin(), excess.end()), *std::max_element(excess.begin(), excess.end()));
}

namespace {

// The runs of a record by "model mbN".
std::map<std::string, nlohmann::json> runs_by_layout(const std::string& file) {
  std::ifstream in(kRecords + "/" + file);
  EXPECT_TRUE(in) << file;
  std::map<std::string, nlohmann::json> runs;
  const auto doc = nlohmann::json::parse(in);
  for (const auto& run : doc.at("runs"))
    runs[run.at("model").get<std::string>() + " mb" + std::to_string(run.at("layout").at("micro_batch").get<int>())] = run;
  return runs;
}

// One step's kernel classes read by repeating them (EachKernelClassDrawsWhatRepeatingItInTheStepAdds):
// the GEMMs' [0] and the attention's [1] time in the step and power there, and the rest's.
struct ClassPower {
  std::string what;
  nlohmann::json plain;
  double T1 = 0, P1 = 0, dt[2] = {0, 0}, watts[2] = {0, 0}, rest_w = 0;
  bool top = false;  // all three runs held the highest clock (within 15 MHz)
};
std::vector<ClassPower> class_power_in_steps(const std::string& plain_file, const std::string& gemm_file,
                                             const std::string& attention_file, double max_mhz) {
  const auto plain = runs_by_layout(plain_file), gemm = runs_by_layout(gemm_file), attention = runs_by_layout(attention_file);
  std::vector<ClassPower> out;
  for (const auto& [what, p] : plain) {
    EXPECT_TRUE(gemm.count(what) && attention.count(what)) << what;
    if (!gemm.count(what) || !attention.count(what)) continue;
    ClassPower& cp = out.emplace_back();
    cp.what = what;
    cp.plain = p;
    cp.T1 = p.at("measured").at("step_time_s").get<double>();
    cp.P1 = p.at("measured").at("gpu_clock").at("power_instant_w").get<double>();
    cp.top = p.at("measured").at("gpu_clock").at("sm_mhz").get<double>() >= max_mhz - 15;
    int c = 0;
    for (const auto* rep : {&gemm.at(what), &attention.at(what)}) {
      const int n = rep->at("repeated_kernel_class").at("times").get<int>();
      EXPECT_GE(n, 2) << what;
      const double T2 = rep->at("measured").at("step_time_s").get<double>();
      const double P2 = rep->at("measured").at("gpu_clock").at("power_instant_w").get<double>();
      cp.top = cp.top && rep->at("measured").at("gpu_clock").at("sm_mhz").get<double>() >= max_mhz - 15;
      EXPECT_GT(T2, cp.T1) << what;
      cp.dt[c] = (T2 - cp.T1) / (n - 1);
      cp.watts[c] = (P2 * T2 - cp.P1 * cp.T1) / (T2 - cp.T1);
      ++c;
    }
    const double rest = cp.T1 - cp.dt[0] - cp.dt[1];
    cp.rest_w = (cp.P1 * cp.T1 - cp.watts[0] * cp.dt[0] - cp.watts[1] * cp.dt[1]) / rest;
  }
  return out;
}

}  // namespace

TEST(Validation, EachKernelClassDrawsWhatRepeatingItInTheStepAdds) {
  // Where a step's power goes, class by class, inside the step (record
  // calibrate/records/2026-12-06-session-52-h200-current-grid/, call 3, one H100): the small GPT
  // steps ran plain (h100-small-gpt-run9.json), then with every GEMM call run n = 3 times
  // (-repeat-gemm), then every attention forward and backward (-repeat-attention), back to back.
  // With T1, P1 the plain step and its power (the mean of NVML's instantaneous readings) and T2,
  // P2 the step with class c repeated, c takes (T2 - T1) / (n - 1) of the step and draws
  // (P2 T2 - P1 T1) / (T2 - T1) there; the rest of the step (element-wise kernels, the optimizer,
  // the idle time between kernels) draws what is left. Only steps whose three runs held the
  // highest clock (within 15 MHz): elsewhere the added time is partly the clock's.
  // The method's check: the class times so read agree with the same classes timed in place on
  // another card (h100-small-gpt-kernel-classes.json) within 5%, at micro-batches of 2 and more.
  // At micro-batch 1 the in-place GEMM times run 10-12% over the repeats': there the step makes
  // 4-5,000 GEMM calls of 10-40 us, and the events around each add their own microseconds.
  // What it shows: the attention draws about what the model gives it (within 60 W of its 618 W),
  // the GEMMs less than the model gives their rate, and the rest of the step far less than the
  // Llama-style element-wise kernels' 529 W (read off them in sustained loops), the one power the
  // profile gave every step's element-wise kernels before GPT's own were swept: by more than 60 W
  // on every step. That is where ThePowerEstimateOfAStepAtTheHighestClockRunsHigh's excess sat;
  // against GPT's own: TheRestOfAGptStepDrawsWhatGptStyleKernelsDrawAlone.
  const auto in_place = runs_by_layout("h100-small-gpt-kernel-classes.json");
  Scenario base = load_scenario(kScenarios + "/validate-small-gpt.json", kProfiles);
  base.hardware = load_hardware_profile("h100-sxm", kProfiles);
  const HardwareProfile& hw = base.hardware;
  const CostModel cost(hw, base.training.precision);
  int used = 0;
  for (const ClassPower& cp : class_power_in_steps("h100-small-gpt-run9.json", "h100-small-gpt-repeat-gemm.json",
                                                    "h100-small-gpt-repeat-attention.json", hw.max_sm_mhz)) {
    const std::string& what = cp.what;
    const nlohmann::json& p = cp.plain;
    const double* dt = cp.dt;
    const double* watts = cp.watts;
    ASSERT_TRUE(in_place.count(what)) << what;
    if (!cp.top) continue;
    ++used;
    const auto& kc = in_place.at(what).at("kernel_classes");
    const int micro_batch = p.at("layout").at("micro_batch").get<int>();
    if (micro_batch >= 2) EXPECT_NEAR(dt[0] / kc.at("measured_s").at("gemm").get<double>(), 1.0, 0.05) << what;
    else EXPECT_LT(dt[0], kc.at("measured_s").at("gemm").get<double>()) << what;
    EXPECT_NEAR(dt[1] / kc.at("measured_s").at("attention").get<double>(), 1.0, 0.05) << what;
    double flops = 0;
    for (const auto& g : kc.at("gemm_shapes"))
      flops += 2 * g.at("m").get<double>() * g.at("n").get<double>() * g.at("k").get<double>() * g.at("calls_per_step").get<double>();
    const Layout l = layout_of(p.at("layout"));
    const ModelConfig model = model_named(base, p.at("model").get<std::string>());
    const KernelClasses predicted = one_gpu_kernel_classes(cost, {model, 1, false, l.recompute, l.micro_batch, base.training.precision},
                                                           model.layers, p.at("global_batch").get<double>() / l.micro_batch);
    const double gemm_model = mix_power_w(hw, KernelMix{dt[0], flops, 0, 0, 0}, Family::gpt);
    const double attention_model = mix_power_w(hw, KernelMix{0, 0, dt[1], predicted.attention_flops, 0}, Family::gpt);
    const double rest = cp.T1 - dt[0] - dt[1], rest_w = cp.rest_w;
    std::printf("[ info ] %-13s GEMMs %5.1f ms at %3.0f W (the model %3.0f W), attention %5.1f ms at %3.0f W (%3.0f W), "
                "the rest %5.1f ms at %3.0f W (%3.0f W)\n",
                what.c_str(), 1e3 * dt[0], watts[0], gemm_model, 1e3 * dt[1], watts[1], attention_model, 1e3 * rest, rest_w,
                hw.clock_power.memory_bound_w);
    EXPECT_LT(watts[0], gemm_model) << what;
    EXPECT_NEAR(watts[1], attention_model, 60.0) << what;
    EXPECT_LT(rest_w, hw.clock_power.memory_bound_w - 60.0) << what;
  }
  EXPECT_GE(used, 6);
}

TEST(Validation, TheRestOfAGptStepDrawsWhatGptStyleKernelsDrawAlone) {
  // The same reading on both parts, against GPT's own element-wise kernels swept alone
  // (`calibrate kernel-mix --layer-kind gpt` at the GPT steps' shapes). H200: the eight small GPT
  // steps of h200-small-gpt-run15.json plain, -repeat-gemm and -repeat-attention with n = 2, all
  // within 15 MHz of 1,980 (record calibrate/records/2026-12-06-session-53-h200-calibration/,
  // call 4), and on the same card the sweeps (call 1: 361-474 W, against 507 W for Llama-style
  // kernels of GPT 125M's shape; on a second card 365-469 W, session 57's record). H100: the seven steps of EachKernelClassDrawsWhatRepeatingItInTheStepAdds
  // (n = 3, session 52's record, call 3) and the sweeps on six other cards (the records of
  // sessions 54, 55, 57 and 58: 369-484 W; Llama-style kernels 495-512 W). Each profile's figure for them
  // (memory_bound_w_by_family.gpt, 444 and 442 W, the median of those sweeps, not of these steps)
  // is what the rest of these steps (GPT's element-wise kernels, the cross-entropy, the optimizer,
  // the idle time) draws at the median, within 60 W, where the Llama-style kernels' 548 and 529 W
  // are more than 60 W over it. One step reads far lower (on the H200, GPT 125M at micro-batch 8,
  // 226 W: two micro-batches a step, timed for under a second), so the median, not each step, is held.
  struct Reading {
    const char* part;
    const char* plain;
    const char* repeat_gemm;
    const char* repeat_attention;
  };
  for (const Reading& r : {Reading{"h100-sxm", "h100-small-gpt-run9.json", "h100-small-gpt-repeat-gemm.json", "h100-small-gpt-repeat-attention.json"},
                           Reading{"h200-sxm", "h200-small-gpt-run15.json", "h200-small-gpt-repeat-gemm.json", "h200-small-gpt-repeat-attention.json"}}) {
    const HardwareProfile hw = load_hardware_profile(r.part, kProfiles);
    ASSERT_GT(hw.clock_power.memory_bound_w_gpt, 0) << r.part;
    std::vector<double> rest_w;
    for (const ClassPower& cp : class_power_in_steps(r.plain, r.repeat_gemm, r.repeat_attention, hw.max_sm_mhz)) {
      if (!cp.top) continue;
      rest_w.push_back(cp.rest_w);
      if (std::string(r.part) == "h200-sxm")  // the H100's steps are printed by EachKernelClassDrawsWhatRepeatingItInTheStepAdds
        std::printf("[ info ] %-13s GEMMs %5.1f ms at %3.0f W, attention %5.1f ms at %3.0f W, the rest %5.1f ms at %3.0f W\n",
                    cp.what.c_str(), 1e3 * cp.dt[0], cp.watts[0], 1e3 * cp.dt[1], cp.watts[1],
                    1e3 * (cp.T1 - cp.dt[0] - cp.dt[1]), cp.rest_w);
    }
    ASSERT_GE(rest_w.size(), 6u) << r.part;
    std::printf("[ info ] the rest of %zu small GPT steps on one %s: %.0f W at the median; the profile's GPT-style kernels "
                "%.0f W, Llama-style %.0f W\n",
                rest_w.size(), r.part, median(rest_w), hw.clock_power.memory_bound_w_gpt, hw.clock_power.memory_bound_w);
    EXPECT_NEAR(median(rest_w), hw.clock_power.memory_bound_w_gpt, 60.0) << r.part;
    EXPECT_LT(median(rest_w), hw.clock_power.memory_bound_w - 60.0) << r.part;
  }
}

TEST(Validation, AStepSustainedForHalfAMinuteHoldsTheClockAndTimeOfAFewTimedSteps) {
  // planner validate times three or four steps of a freshly built model; training runs for hours.
  // Two steps whose power estimate falls just above the limit (Llama 1.1B and GPT 1.3B at
  // micro-batch 4) ran on an H100 (calibrate/records/2026-12-06-session-50-sustained/, call 1)
  // short on the cold card, then for 80 timed steps each (34 and 42 s), then short again on the
  // warm card and after 30 s idle. The sustained runs must hold the short runs' clock within one
  // 15 MHz step, their step time within 1% and their power within 15 W (the card warmed from 46
  // to 58 C; the nvidia-smi log beside the runs, `sustained.py` in the record, shows no drift in
  // 10 s bins). All of them are steps at the power limit: NVML flags the power cap over most of
  // every timed window, at 1,965 MHz, one step below the highest clock (the power model predicts
  // 1,831-1,849 MHz for them: Validation.ThePowerEstimateOfAStepAtTheHighestClockRunsHigh).
  auto runs_of = [](const std::string& name) {
    std::ifstream in(kRecords + "/h100-near-limit-" + name + ".json");
    EXPECT_TRUE(in) << name;
    std::map<std::string, nlohmann::json> by_model;
    const auto doc = nlohmann::json::parse(in);
    for (const auto& run : doc.at("runs")) by_model[run["model"].get<std::string>()] = run["measured"];
    return by_model;
  };
  const auto sustained = runs_of("sustained");
  ASSERT_EQ(sustained.size(), 2u);
  for (const char* name : {"short-cold", "short-warm", "short-after-idle"}) {
    const auto short_runs = runs_of(name);
    for (const auto& [model, m] : sustained) {
      ASSERT_TRUE(short_runs.count(model)) << name << " " << model;
      const auto& s = short_runs.at(model);
      const auto& window = m["gpu_clock"]["timed_wall_s"];
      EXPECT_GT(window[1].get<double>() - window[0].get<double>(), 30.0) << model;
      EXPECT_LE(std::fabs(m["gpu_clock"]["sm_mhz"].get<double>() - s["gpu_clock"]["sm_mhz"].get<double>()), 15.0) << name << " " << model;
      EXPECT_LT(std::fabs(m["step_time_s"].get<double>() / s["step_time_s"].get<double>() - 1.0), 0.01) << name << " " << model;
      EXPECT_LT(std::fabs(m["gpu_clock"]["power_w"].get<double>() - s["gpu_clock"]["power_w"].get<double>()), 15.0) << name << " " << model;
      for (const auto* r : {&m, &s}) {
        EXPECT_GT((*r)["gpu_clock"]["power_capped_fraction"].get<double>(), 0.5) << name << " " << model;
        EXPECT_GE((*r)["gpu_clock"]["sm_mhz"].get<double>(), 1950.0) << name << " " << model;
      }
    }
  }
}

TEST(Validation, H200TwoGpuDataParallel) {
  // Two replicas, one per H200, gradients summed by NCCL over NVLink during the last backward:
  // plain, ZeRO-1, INT8 and Top-K 1%, 25 MB and 200 MB buckets, GPT 125M and 350M. The model
  // uses the profile's collectives measured on this same pair of GPUs and its measured GEMM
  // slowdown while NCCL runs.
  const auto runs = repredict("validate-data-parallel.json", "h200-dp2-nvlink.json", 1, 2);
  ASSERT_GE(runs.size(), 12u);
  report_set("two-GPU data-parallel runs", runs);
}

TEST(Validation, H200TwoGpuTensorAndPipelineParallel) {
  // GPT 125M and 350M on two H200s over NVLink as tp2, pp2 (1F1B over 8 micro-batches) and dp2,
  // every layout started from one GPU's weights and checked against it. TP all-reduces and PP
  // send/recv use the collectives measured on this pair. Each run within 15%; the issue's 5% median is held over all two-GPU runs together (H200TwoGpuRunsWithinFivePercentMedian).
  const auto runs = repredict("validate-model-parallel.json", "h200-tp-pp-2gpu-nvlink.json", 1, 2);
  ASSERT_GE(runs.size(), 6u);
  report_set("GPT tp2/pp2/dp2 runs", runs);
}

TEST(Validation, H200TwoGpuZeroStages) {
  // GPT 125M, 350M and the Llama-style 1.1B as two replicas on two H200s under ZeRO-1, -2 and -3:
  // sharded Adam states; also sharded gradients, every micro-batch's buckets reduce-scattered;
  // also sharded weights, each bucket gathered ahead of its forward and backward. Each run matched
  // one GPU's losses and gradient norm. Each run within 15%; the issue's 5% median is held over all two-GPU runs together (H200TwoGpuRunsWithinFivePercentMedian).
  const auto runs = repredict("validate-zero.json", "h200-zero-2gpu-nvlink.json", 1, 2);
  ASSERT_GE(runs.size(), 9u);
  report_set("ZeRO-1/2/3 runs", runs);
}

TEST(Validation, H200TwoGpuInterleavedPipeline) {
  // GPT 125M and 350M as two pipeline stages on two H200s with one, two and three chunks of layers
  // per stage (1F1B and interleaved 1F1B over 8 micro-batches), each matching one GPU's losses.
  // Interleaving shrinks the bubble, (p - 1)/(v m) of the ideal time; the predicted scaling
  // efficiency against one GPU must follow the measured one within 3 points. Each run within 15%;
  // the issue's 5% median is held over all two-GPU runs together.
  const auto runs = repredict("validate-interleaved.json", "h200-interleaved-2gpu-nvlink.json", 1, 2);
  ASSERT_GE(runs.size(), 6u);
  for (const auto& r : runs) {
    ASSERT_GT(r.meas_one, 0.0);
    EXPECT_NEAR(r.pred_one / (2 * r.pred), r.meas_one / (2 * r.meas), 0.03);
  }
  report_set("pp2 v1/v2/v3 runs", runs);
}

TEST(Validation, H200LlamaRunsOnOneAndTwoGpus) {
  // Llama-style shapes (1.1B, 3B, Llama 2 7B) on one H200, held to a 5% median of step time and
  // memory, and the 1.1B as tp2, pp2 and dp2 on two, each run within 15% (they count in the
  // two-GPU median). The 1.1B's grouped-query attention (8 query heads per K/V head) is priced
  // from the profile's attention table measured with that grouping. -run11 held out, on a card
  // none of the profile's calibration runs used (calibrate/records/2026-12-07-session-57-h200-held-out/).
  std::vector<double> t1, m1, t2, m2;
  {
    const Scenario base = load_scenario(kScenarios + "/validate-llama-one-gpu.json", kProfiles);
    for (const char* file : {"h200-llama-one-gpu.json", "h200-llama-one-gpu-kernel-classes.json", "h200-llama-one-gpu-run2.json",
                             "h200-llama-one-gpu-run3.json", "h200-llama-one-gpu-run4.json", "h200-llama-one-gpu-run5.json",
                             "h200-llama-one-gpu-run6.json", "h200-llama-one-gpu-run7.json", "h200-llama-one-gpu-run8.json",
                             "h200-llama-one-gpu-run9.json", "h200-llama-one-gpu-run10.json",
                             "h200-llama-one-gpu-run11.json"}) {
      std::ifstream in(kRecords + "/" + file);
      ASSERT_TRUE(in) << file;
      const auto doc = nlohmann::json::parse(in);
      for (const auto& run : doc["runs"]) {
        Scenario s = base;
        s.model = model_named(base, run["model"].get<std::string>());
        s.training.global_batch = run["global_batch"].get<int>();
        const Layout l = layout_of(run["layout"]);
        const Evaluation ev = evaluate(s, l, 1, EvalOptions{});
        t1.push_back(std::fabs(ev.step.step_time_s / run["measured"]["step_time_s"].get<double>() - 1.0));
        m1.push_back(std::fabs(ev.memory.peak().arena_peak_bytes() / run["measured"]["device_used_bytes"].get<double>() - 1.0));
      }
    }
  }
  for (const auto& r : repredict("validate-llama-model-parallel.json", "h200-llama-tp-pp-2gpu-nvlink.json", 1, 2))
    t2.push_back(r.time_err), m2.push_back(r.mem_err);
  ASSERT_GE(t1.size(), 6u);
  ASSERT_GE(t2.size(), 3u);
  std::printf("[ info ] Llama: %zu one-GPU runs median |error| step %.2f%%, memory %.2f%% (max %.1f%%); %zu two-GPU runs %.2f%%, %.2f%% (max %.1f%%)\n",
              t1.size(), 100 * median(t1), 100 * median(m1), 100 * *std::max_element(t1.begin(), t1.end()), t2.size(), 100 * median(t2),
              100 * median(m2), 100 * *std::max_element(t2.begin(), t2.end()));
  EXPECT_LE(median(t1), 0.05);
  EXPECT_LE(median(m1), 0.05);
  EXPECT_LT(*std::max_element(t2.begin(), t2.end()), 0.15);
}

TEST(Validation, H200TwoGpuRunsWithinFivePercentMedian) {
  // Issue #8's target over every timed two-GPU layout recorded (one GPU per rank over NVLink):
  // data parallel with two bucket sizes, INT8, Top-K and ZeRO-1; TP 2 and PP 2 of GPT and Llama;
  // ZeRO-1/2/3; 1F1B and interleaved pipelines. Median |error| of step time and of memory peak at
  // most 5% each, over the first measurement of the 40 layouts and, separately, over their second
  // (`-rerun`: the same scenarios on another two-GPU machine, hours later).
  for (const char* suffix : {".json", "-rerun.json"}) {
    std::vector<DpRun> all;
    for (auto [scenario, record] : {std::pair{"validate-data-parallel.json", "h200-dp2-nvlink"},
                                    std::pair{"validate-model-parallel.json", "h200-tp-pp-2gpu-nvlink"},
                                    std::pair{"validate-llama-model-parallel.json", "h200-llama-tp-pp-2gpu-nvlink"},
                                    std::pair{"validate-zero.json", "h200-zero-2gpu-nvlink"},
                                    std::pair{"validate-interleaved.json", "h200-interleaved-2gpu-nvlink"}})
      for (const auto& r : repredict(scenario, std::string(record) + suffix, 1, 2)) all.push_back(r);
    ASSERT_GE(all.size(), 40u) << suffix;
    std::vector<double> t, m;
    for (const auto& r : all) t.push_back(r.time_err), m.push_back(r.mem_err);
    std::printf("[ info ] %zu two-GPU runs (%s): median |error| step time %.2f%%, memory peak %.2f%%\n", t.size(), suffix,
                100 * median(t), 100 * median(m));
    EXPECT_LE(median(t), 0.05) << suffix;
    EXPECT_LE(median(m), 0.05) << suffix;
  }
}

TEST(Validation, H200FourGpuRunsWithinFivePercentMedian) {
  // The same on four H200s over NVLink (NV18 between every pair): four-way data parallelism (two
  // bucket sizes, INT8, Top-K, ZeRO-1/2/3), a four-stage pipeline in 1F1B and interleaved order,
  // four-way tensor parallelism, and the Llama-style 1.1B as dp4, pp2 dp2, tp2 dp2, tp2 pp2 and tp4.
  // Every run matched one GPU's losses. Median |error| of step time and memory peak at most 5%
  // (issue #8), each run's step time within 15%. For the tensor- and pipeline-parallel layouts
  // (whose scaling the bubble and the TP all-reduces set: pp4 44-59%, tp4 53-59% of one GPU's
  // throughput per GPU) the predicted scaling efficiency is within 5 points of the measured one.
  // The data-parallel runs are not held to it: there it is 0-5 points high on every run (Llama
  // 1.1B under ZeRO-3: 92% vs 87%), four-GPU collectives being the two-GPU fit's extrapolation.
  std::vector<double> t, m;
  int model_parallel = 0;
  for (auto [scenario, record] : {std::pair{"validate-4gpu.json", "h200-4gpu-nvlink.json"},
                                  std::pair{"validate-llama-model-parallel.json", "h200-llama-4gpu-nvlink.json"},
                                  std::pair{"validate-zero.json", "h200-zero-4gpu-nvlink.json"},
                                  std::pair{"validate-data-parallel.json", "h200-dp4-nvlink.json"}}) {
    const bool mp = std::string(record).find("zero") == std::string::npos && std::string(record).find("dp4") == std::string::npos;
    for (const auto& r : repredict(scenario, record, 1, 4)) {
      t.push_back(r.time_err), m.push_back(r.mem_err);
      if (mp && r.meas_one > 0) {
        ++model_parallel;
        EXPECT_NEAR(r.pred_one / (4 * r.pred), r.meas_one / (4 * r.meas), 0.05) << record;
      }
    }
  }
  ASSERT_GE(t.size(), 35u);
  ASSERT_GE(model_parallel, 10);
  std::printf("[ info ] %zu four-GPU runs: median |error| step time %.2f%%, memory peak %.2f%%; max %.1f%%, %.1f%%\n", t.size(),
              100 * median(t), 100 * median(m), 100 * *std::max_element(t.begin(), t.end()), 100 * *std::max_element(m.begin(), m.end()));
  EXPECT_LE(median(t), 0.05);
  EXPECT_LE(median(m), 0.05);
  EXPECT_LT(*std::max_element(t.begin(), t.end()), 0.15);
  // These runs are held out of the runtime-memory figures (read off the one- and two-GPU runs):
  // with the fixed 1 GiB allowance the 125M's tp4 and pp4 were 20% and 12% under.
  EXPECT_LT(*std::max_element(m.begin(), m.end()), 0.08);
}

TEST(Validation, RuntimeMemoryIsWhatTheRunsHeldOutsideTheirArena) {
  // The profile's runtime memory is read off the recorded runs, rank by rank: device memory in
  // use less the runner's arena (every tensor the memory model counts, allocated at once).
  // context: median over one-GPU runs; first communicator: median over ranks whose only
  // communicator is the world (data parallel, no compression), less the context; each further
  // one: median over ranks with more (tensor or pipeline parallel), less context and first, per
  // further communicator (nccl_communicators()). The four-GPU runs are held out (test above).
  std::vector<double> one, first;
  std::vector<std::pair<double, int>> more;  // (outside less context, communicators)
  for (const auto& entry : std::filesystem::directory_iterator(kRecords)) {
    if (entry.path().extension() != ".json") continue;  // the folder's README
    std::ifstream in(entry.path());
    const auto doc = nlohmann::json::parse(in);
    if (!doc.contains("runs") || doc.value("hardware", "") != "h200-sxm") continue;
    for (const auto& run : doc["runs"]) {
      if (run.contains("repeated_kernel_class")) continue;  // a power diagnostic
      const auto& m = run["measured"];
      const Layout l = layout_of(run["layout"]);
      std::vector<double> outside;
      if (m.contains("per_rank_device_used_bytes")) {
        for (std::size_t r = 0; r < m["per_rank_device_used_bytes"].size(); ++r)
          outside.push_back(m["per_rank_device_used_bytes"][r].get<double>() - m["per_rank_allocated_bytes"][r].get<double>());
      } else if (m.contains("allocated_bytes") && l.tp * l.pp * l.dp == 1) {
        outside.push_back(m["device_used_bytes"].get<double>() - m["allocated_bytes"].get<double>());
      }
      for (std::size_t r = 0; r < outside.size(); ++r) {
        const int stage = static_cast<int>(r) / (l.tp * l.dp);
        const int n = nccl_communicators(l, stage);
        if (n == 0) one.push_back(outside[r]);
        else if (n == 1 && l.compression.kind == Compression::Kind::none) first.push_back(outside[r]);
        else if (n > 1) more.push_back({outside[r], n});
      }
    }
  }
  ASSERT_GE(one.size(), 100u);
  ASSERT_GE(first.size(), 20u);
  ASSERT_GE(more.size(), 20u);
  const HardwareProfile hp = load_hardware_profile("h200-sxm", kProfiles);
  const double context = median(one), first_comm = median(first) - context;
  std::vector<double> further;
  for (auto [o, n] : more) further.push_back((o - context - first_comm) / (n - 1));
  std::printf("[ info ] outside the arena: context %.3f GiB (%zu runs), first communicator %.3f GiB (%zu ranks), "
              "each further %.3f GiB (%zu ranks)\n", context / (1 << 30), one.size(), first_comm / (1 << 30), first.size(),
              median(further) / (1 << 30), further.size());
  // A new record moves these medians: the profile's runtime_memory is then rewritten to them.
  EXPECT_NEAR(hp.context_bytes, context, 1.0) << "models/hardware/h200-sxm.json runtime_memory.context_bytes";
  EXPECT_NEAR(hp.nccl_first_communicator_bytes, first_comm, 1.0) << "runtime_memory.nccl_first_communicator_bytes";
  EXPECT_NEAR(hp.nccl_further_communicator_bytes, median(further), 1.0) << "runtime_memory.nccl_further_communicator_bytes";
  // calibrate measures the context on its own (runtime_memory.h, before any benchmark): 692.9 MB
  // on 2026-12-01 (calibrate/records/2026-12-01-h200-session-3-*), 1.2% under the runs' median.
  EXPECT_NEAR(692912128.0 / context, 1.0, 0.03);
  // The linear rule describes every two-GPU rank to within 0.3 GiB (the farthest: GPT 125M pp2
  // ranks, 2.6 GiB outside against 2.34).
  for (auto [o, n] : more) EXPECT_NEAR(o, context + first_comm + (n - 1) * median(further), 0.3 * (1 << 30)) << n;
}

TEST(Validation, MoreGpusLessThroughputOverSocketsIsPredicted) {
  // The same replicas with NCCL's peer-to-peer and shared-memory paths off: gradients cross TCP
  // sockets at about 0.5 GB/s. Two GPUs take several times longer per global batch than one did:
  // measured and predicted (with the socket path the profile h200-socket-loopback measured), the
  // throughput on two GPUs is under half of one GPU's, and the cause is exposed DP communication.
  const auto runs = repredict("validate-slow-path.json", "h200-dp2-socket.json", 2, 1);
  ASSERT_GE(runs.size(), 4u);
  std::vector<double> t;
  for (const auto& r : runs) {
    ASSERT_GT(r.meas_one, 0);
    EXPECT_GT(r.meas, 2.0 * r.meas_one) << "measured: two GPUs slower than one";
    EXPECT_GT(r.pred, 2.0 * r.pred_one) << "predicted: two GPUs slower than one";
    t.push_back(r.time_err);
  }
  std::printf("[ info ] %zu socket runs: median |error| step time %.1f%%, max %.1f%%\n", t.size(), 100 * median(t),
              100 * *std::max_element(t.begin(), t.end()));
}

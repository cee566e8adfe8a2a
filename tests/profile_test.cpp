// Shipped hardware profiles load, say where their numbers come from, and derived parts follow the
// stated carry-over rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <nlohmann/json.hpp>

#include "carry_over.h"
#include "cost_model.h"
#include "evaluation.h"
#include "hardware_profile.h"
#include "input_error.h"
#include "measured_collective.h"
#include "model_presets.h"
#include "profile_device_match.h"
#include "scenario.h"
#include "nccl_tests_import.h"

using namespace trainsim;

namespace {
const std::string kProfiles = TRAINSIM_PROFILES;
const std::string kData = TRAINSIM_TEST_DATA;
const std::string kSource = TRAINSIM_SOURCE_DIR;
}  // namespace

TEST(Profiles, ShippedProfilesLoadWithProvenance) {
  for (const char* name : {"h200-sxm", "h100-sxm", "a100-80g-sxm", "b200-sxm", "gb200-nvl72"}) {
    const HardwareProfile hp = load_hardware_profile(name, kProfiles);
    EXPECT_EQ(hp.name, name);
    EXPECT_FALSE(hp.provenance.source.empty());
    EXPECT_FALSE(hp.intra_provenance.reference.empty() && hp.intra_provenance.source != "measured");
    EXPECT_GT(hp.intra_busbw_GBps, 0);
    EXPECT_GT(hp.nic_Gbps, 0);
    EXPECT_FALSE(hp.gemm.at("bf16").empty());
    EXPECT_GT(hp.node_max_kW, 0) << name;  // the system's maximum input power, from its datasheet
    EXPECT_EQ(hp.power_provenance.source, "datasheet") << name;
    EXPECT_FALSE(hp.power_provenance.reference.empty()) << name;
  }
}

TEST(Profiles, H200IsMeasuredOnAnH200) {
  const HardwareProfile hp = load_hardware_profile("h200-sxm", kProfiles);
  EXPECT_EQ(hp.provenance.source, "measured");
  EXPECT_NE(hp.provenance.device.find("H200"), std::string::npos);
  EXPECT_FALSE(hp.provenance.date.empty());
  EXPECT_FALSE(hp.provenance.command.empty());
  // Issue targets for the measured part: GEMM ceiling near 800 TFLOP/s, copy >= 3.7 TB/s, PCIe ~55 GB/s.
  EXPECT_GT(hp.measured_tflops.at("bf16"), 760);
  EXPECT_GE(hp.memory_bandwidth_GBps, 3700);
  EXPECT_GT(hp.h2d_GBps, 50);
}

TEST(Profiles, H100IsMeasuredOnAnH100) {
  const HardwareProfile hp = load_hardware_profile("h100-sxm", kProfiles);
  EXPECT_EQ(hp.provenance.source, "measured");
  EXPECT_NE(hp.provenance.device.find("H100"), std::string::npos);
  EXPECT_EQ(hp.provenance.device_uuids.size(), 5u);  // five calibration runs on five cards, merged
  // The same SM and clock as the H200: the GEMM ceiling near 800 TFLOP/s; the copy near its
  // datasheet's 3.35 TB/s as the H200's is near 4.8.
  EXPECT_GT(hp.measured_tflops.at("bf16"), 760);
  EXPECT_GT(hp.memory_bandwidth_GBps, 0.8 * 3350);
  EXPECT_LT(hp.memory_bandwidth_GBps, 3350);
  // What CUDA reports as the device's memory, below nvidia-smi's 81,559 MiB.
  EXPECT_LT(hp.memory_bytes, 81559.0 * (1 << 20));
  EXPECT_GT(hp.memory_bytes, 79.0 * (1 << 30));
}

TEST(Profiles, EachMeasuredClockLineMeetsTheHighestClockAtThePowerLimit) {
  // tools/power_rule.py holds each part's line (the clock a capped mix holds against the power it
  // would draw at full clock) through (limit_w, the highest clock): a mix that draws exactly the
  // limit needs no lower clock, so one a watt over it may not be read a hundred MHz down (the
  // free line the profiles had before gave 1,904 and 1,871 MHz at 700 W). The coefficients are
  // rounded to 0.1 MHz and 1e-4 MHz/W, so the line meets it within 0.1 MHz.
  for (const char* name : {"h100-sxm", "h200-sxm"}) {
    const HardwareProfile hp = load_hardware_profile(name, kProfiles);
    ASSERT_TRUE(hp.has_clock_power_model()) << name;
    const auto& m = hp.clock_power;
    EXPECT_NEAR(m.line_mhz + m.line_mhz_per_w * m.limit_w, hp.max_sm_mhz, 0.1) << name;
    // And it falls: at 100 W over the limit, 150-300 MHz down (the sweeps' capped mixes at
    // 790-1,010 W held 1,365-1,808 MHz).
    const double at_100_over = m.line_mhz + m.line_mhz_per_w * (m.limit_w + 100);
    EXPECT_GT(hp.max_sm_mhz - at_100_over, 150) << name;
    EXPECT_LT(hp.max_sm_mhz - at_100_over, 300) << name;
  }
}

// The rule every part not measured here is derived by (models/carry_over.cpp), held against the
// H100, a part it was applied to before one could be measured: calibrate/datasheets/h100-sxm.json
// is that profile (datasheet peaks, derive_from h200-sxm). Measured 2026-12-05 on two H100 80GB
// HBM3 (calibrate/records/2026-12-05-h100-session-38-*) and 2026-12-06 on a third and a fourth
// (calibrate/records/2026-12-06-h100-session-47-wgrad-accumulate/, -48-token-grid/). The H100 has the H200's SMs, clocks and
// peaks and 3.35 / 4.8 = 0.70 of its memory bandwidth, so what the rule must get right is which
// part of each measured time is memory traffic:
// - GEMMs, at the H200's fraction of the peak: per shape the measured rate to a median 1%.
// - The step's element-wise and row-wise kernels run on the H100 at a median 0.95 of the H200's
//   GB/s. They reach about a third of the device copy's rate, so about a third of their time is
//   memory traffic (carried at 0.70) and the rest runs on CUDA cores (carried at the fp32 ratio,
//   1.0 here): derived / measured 0.93 at the median. The rule before (all of it at 0.70) gave 0.73.
// - The unfused attention runs at 0.70-0.92 of the H200's rate: its probability matrices go
//   through memory (models/carry_over.cpp counts their bytes from the kernels). With those bytes
//   carried at 0.70 and the rest at the peak ratio, derived / measured fraction 0.95 (forward) and
//   1.07 (backward) at the median; the rule before (all of it at the peak ratio) gave 1.24 and 1.40.
// Nothing here is fitted: the byte counts come from the kernels' structure and the ratios from the
// datasheets. Each class is held to 10% of the measured tables at the median.
TEST(Profiles, TheCarryOverRuleHeldAgainstTheMeasuredH100) {
  std::ifstream in(kSource + "/calibrate/datasheets/h100-sxm.json");
  ASSERT_TRUE(in);
  std::stringstream text;
  text << in.rdbuf();
  const HardwareProfile derived = parse_hardware_profile(text.str(), "calibrate/datasheets/h100-sxm.json", kProfiles);
  const HardwareProfile measured = load_hardware_profile("h100-sxm", kProfiles);
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::vector<double> gemm;
  for (const GemmPoint& d : derived.gemm.at("bf16"))
    for (const GemmPoint& m : measured.gemm.at("bf16"))
      if (d.m == m.m && d.n == m.n && d.k == m.k) {
        gemm.push_back(d.tflops / m.tflops);
        break;
      }
  ASSERT_GT(gemm.size(), 500u);
  EXPECT_NEAR(median(gemm), 1.0, 0.02);
  std::vector<double> kernels;
  for (const auto& [name, pts] : derived.memory_kernels) {
    const auto it = measured.memory_kernels.find(name);
    if (it == measured.memory_kernels.end()) continue;
    for (const BandwidthPoint& d : pts)
      for (const BandwidthPoint& m : it->second)
        if (d.bytes == m.bytes && d.width == m.width) {
          kernels.push_back(d.GBps / m.GBps);
          break;
        }
  }
  ASSERT_GT(kernels.size(), 100u);
  EXPECT_NEAR(median(kernels), 1.0, 0.1);
  std::vector<double> fwd, bwd;
  for (const auto& d : derived.attention)
    for (const auto& m : measured.attention)
      if (d.batch_heads == m.batch_heads && d.seq == m.seq && d.head_dim == m.head_dim && d.kv_group == m.kv_group &&
          d.dropout == m.dropout) {
        fwd.push_back(d.fwd_fraction / m.fwd_fraction);
        bwd.push_back(d.bwd_fraction / m.bwd_fraction);
        break;
      }
  ASSERT_GT(fwd.size(), 40u);
  EXPECT_NEAR(median(fwd), 1.0, 0.1);
  EXPECT_NEAR(median(bwd), 1.0, 0.1);
  // The device copy by size (3 MiB to 12 GiB): the small copies reach a tenth to a third of the
  // large ones' rate and carry mostly at the core ratio (0.78 and 0.79 of the three cards' median;
  // the rule before gave 0.58 and 0.66), the large ones at the bandwidth ratio (0.99-1.04). The
  // small copies' rates differ by up to a third between the cards themselves (3 MiB: 405, 549 and
  // 482 GB/s on the three calibration runs; the two cards' median was 466, and the rule's 0.81 of
  // it), so each size is held to 20% of the range the cards measured rather than to their median.
  // The compression kernels, at a fifth and a fifteenth of the copy's rate: INT8 0.88, Top-K 1.02
  // (before: 0.67, 0.73), within 20% of the median.
  std::vector<HardwareProfile> cards;
  for (const char* run : {"2026-12-05-h100-session-38-calibrate-validate/h100-sxm.run1.json",
                          "2026-12-05-h100-session-38-calibrate-validate/h100-sxm.run2.json",
                          "2026-12-06-h100-session-47-wgrad-accumulate/h100-sxm.run3.json"}) {
    std::ifstream r(kSource + "/calibrate/records/" + run);
    ASSERT_TRUE(r) << run;
    std::stringstream t;
    t << r.rdbuf();
    cards.push_back(parse_hardware_profile(t.str(), run, kProfiles));
  }
  ASSERT_EQ(derived.memory_bound.size(), measured.memory_bound.size());
  for (std::size_t i = 0; i < derived.memory_bound.size(); ++i) {
    ASSERT_EQ(derived.memory_bound[i].bytes, measured.memory_bound[i].bytes);
    double lo = 1e300, hi = 0;
    for (const HardwareProfile& c : cards) {
      ASSERT_EQ(c.memory_bound.at(i).bytes, measured.memory_bound[i].bytes);
      lo = std::min(lo, c.memory_bound[i].GBps);
      hi = std::max(hi, c.memory_bound[i].GBps);
    }
    EXPECT_GE(derived.memory_bound[i].GBps, 0.8 * lo) << derived.memory_bound[i].bytes;
    EXPECT_LE(derived.memory_bound[i].GBps, 1.2 * hi) << derived.memory_bound[i].bytes;
  }
  EXPECT_NEAR(derived.int8_quantize_GBps / measured.int8_quantize_GBps, 1.0, 0.2);
  EXPECT_NEAR(derived.topk_select_GBps / measured.topk_select_GBps, 1.0, 0.2);
  std::printf("[ info ] carry-over rule against the measured H100, derived / measured (median, range): GEMM %.3f, step "
              "kernels %.3f (%.2f-%.2f), attention forward %.3f (%.2f-%.2f), backward %.3f (%.2f-%.2f)\n",
              median(gemm), median(kernels), *std::min_element(kernels.begin(), kernels.end()),
              *std::max_element(kernels.begin(), kernels.end()), median(fwd), *std::min_element(fwd.begin(), fwd.end()),
              *std::max_element(fwd.begin(), fwd.end()), median(bwd), *std::min_element(bwd.begin(), bwd.end()),
              *std::max_element(bwd.begin(), bwd.end()));
}

// The rule's arithmetic on a part made up for it. Base: bf16 peak 100 TFLOP/s, CUDA cores 10,
// device copy 1,000 GB/s (datasheet 1,000). Target: bf16 200, CUDA cores 10, datasheet 2,000 GB/s.
// - An element-wise kernel at 500 GB/s spends half its time moving bytes at the copy's rate: that
//   half takes half as long, the other half as long: 0.5 / 2 + 0.5 / 1 = 0.75 of the time, so
//   500 / 0.75 = 666.7 GB/s. The copy itself (all bytes) carries at 2x: 2,000.
// - Attention, one head of 1,000 tokens and 100 wide with dropout, forward at 0.1 of the peak:
//   4 * 1e6 * 100 = 4e8 FLOPs in 4e8 / 1e13 = 40 us, of which 10 bytes * 1e6 elements at 1,000
//   GB/s = 10 us (a quarter) in memory. That quarter at 2x, the rest at 2x: 20 us, 0.1 of the new
//   peak. With the target's datasheet bandwidth the base's (1x): 10 + 30 / 2 = 25 us, 4e8 / 25 us
//   = 16 TFLOP/s, 0.08 of the new peak. Backward, 15 bytes and twice the FLOPs at 0.2: 8e8 / 2e13
//   = 40 us, 15 us of it memory: 15 + 25 / 2 = 27.5 us, 8e8 / 27.5 us / 2e14 = 0.145.
TEST(Profiles, TheCarryOverRuleSplitsEachTimeIntoMemoryTrafficAndCompute) {
  HardwareProfile base;
  base.name = "made-up-base";
  base.peak_tflops = {{"bf16", 100}, {"fp32", 10}};
  base.memory_bandwidth_GBps = 1000;
  base.memory_kernels["layernorm"] = {BandwidthPoint{1e6, 500, 1024}};
  base.memory_bound = {BandwidthPoint{1e6, 1000, 0}};
  base.attention_fwd_fraction = 0.1;
  base.attention_bwd_fraction = 0.2;
  HardwareProfile::AttentionPoint p;
  p.batch_heads = 1, p.seq = 1000, p.head_dim = 100, p.fwd_fraction = 0.1, p.bwd_fraction = 0.2, p.dropout = true;
  base.attention = {p};
  base.memory_bytes = 99e9, base.datasheet_memory_bytes = 100e9;
  EXPECT_EQ(attention_score_bytes(p, false), 10e6);
  EXPECT_EQ(attention_score_bytes(p, true), 15e6);
  for (const double datasheet : {2000.0, 1000.0}) {
    HardwareProfile hp;
    hp.name = "made-up-target";
    hp.peak_tflops = {{"bf16", 200}, {"fp32", 10}};
    hp.memory_bytes = 50e9;
    carry_over(hp, base, datasheet, 1000, "test");
    EXPECT_NEAR(hp.memory_bandwidth_GBps, datasheet, 1e-9);
    EXPECT_NEAR(hp.memory_bound[0].GBps, datasheet, 1e-9);
    ASSERT_EQ(hp.attention.size(), 1u);
    if (datasheet == 2000) {
      EXPECT_NEAR(hp.memory_kernels.at("layernorm")[0].GBps, 500 / 0.75, 1e-9);
      EXPECT_NEAR(hp.attention[0].fwd_fraction, 0.1, 1e-12);
      EXPECT_NEAR(hp.attention[0].bwd_fraction, 0.2, 1e-12);
    } else {
      EXPECT_NEAR(hp.memory_kernels.at("layernorm")[0].GBps, 500, 1e-9);
      EXPECT_NEAR(hp.attention[0].fwd_fraction, 0.08, 1e-12);
      EXPECT_NEAR(hp.attention[0].bwd_fraction, 8e8 / 27.5e-6 / 2e14, 1e-12);
    }
    EXPECT_EQ(hp.attention_fwd_fraction, hp.attention[0].fwd_fraction);
  }
  // Without the CUDA cores' rate of both parts the memory-bound tables cannot be carried.
  HardwareProfile no_fp32;
  no_fp32.peak_tflops = {{"bf16", 200}};
  no_fp32.memory_bytes = 50e9;
  try {
    carry_over(no_fp32, base, 2000, 1000, "derive_from");
    ADD_FAILURE() << "carried without the fp32 rate";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("peak_tflops.fp32"), std::string::npos) << e.what();
  }
}

TEST(Profiles, ADerivedPartsMemoryIsItsVendorFigureLessTheBasesDriverReservation) {
  // What the driver keeps of the device memory carries over in bytes: the base's vendor figure
  // (nvidia-smi's total) less what CUDA could allocate there. Made up: 100 GB reported, 99 GB to
  // CUDA, so a part of 50 GB reported gets 49 GB; one whose file gives its own vendor figure gave
  // its allocatable memory as measured, and keeps it.
  HardwareProfile base;
  base.name = "made-up-base";
  base.peak_tflops = {{"bf16", 100}, {"fp32", 10}};
  base.memory_bandwidth_GBps = 1000;
  base.memory_bytes = 99e9, base.datasheet_memory_bytes = 100e9;
  HardwareProfile hp;
  hp.peak_tflops = {{"bf16", 200}, {"fp32", 10}};
  hp.memory_bytes = 50e9;
  carry_over(hp, base, 1000, 1000, "test");
  EXPECT_EQ(hp.memory_bytes, 49e9);
  EXPECT_EQ(hp.datasheet_memory_bytes, 50e9);
  HardwareProfile own;
  own.peak_tflops = {{"bf16", 200}, {"fp32", 10}};
  own.memory_bytes = 49.5e9, own.datasheet_memory_bytes = 50e9;
  carry_over(own, base, 1000, 1000, "test");
  EXPECT_EQ(own.memory_bytes, 49.5e9);
  // A base without its vendor figure cannot say what its driver keeps.
  base.datasheet_memory_bytes = 0;
  try {
    HardwareProfile again;
    again.peak_tflops = {{"bf16", 200}, {"fp32", 10}};
    again.memory_bytes = 50e9;
    carry_over(again, base, 1000, 1000, "derive_from");
    ADD_FAILURE() << "carried without the base's vendor memory figure";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("gpu.datasheet_memory_bytes"), std::string::npos) << e.what();
  }
  // Against the measured H100: the H200 reports 143,771 MiB (150,754,820,096 bytes) and CUDA
  // allocated 150,109,880,320, so the driver kept 644,939,776 bytes (615 MiB); the H100 reports
  // 81,559 MiB (85,520,809,984 bytes), so the rule gives 84,875,870,208 bytes (80,944 MiB). CUDA
  // gave 85,017,493,504 (81,079 MiB) on the H100: the rule is 0.17% under, where the vendor figure
  // alone was 0.59% over (enough to call a layout at 79.6 GiB a fit).
  std::ifstream in(kSource + "/calibrate/datasheets/h100-sxm.json");
  std::stringstream text;
  text << in.rdbuf();
  const HardwareProfile derived = parse_hardware_profile(text.str(), "h100-sxm.json", kProfiles);
  const HardwareProfile measured = load_hardware_profile("h100-sxm", kProfiles);
  EXPECT_EQ(derived.memory_bytes, 84875870208.0);
  EXPECT_EQ(derived.datasheet_memory_bytes, measured.datasheet_memory_bytes);
  EXPECT_NEAR(derived.memory_bytes / measured.memory_bytes, 1.0, 0.002);
  EXPECT_GT(derived.datasheet_memory_bytes / measured.memory_bytes - 1.0, 0.005);
  // A file's vendor figure below its allocatable memory is an input error naming the key.
  std::string bad = text.str();
  const std::string key = "\"memory_bytes\": 85520809984";
  ASSERT_NE(bad.find(key), std::string::npos);
  bad.replace(bad.find(key), key.size(), key + ", \"datasheet_memory_bytes\": 8e10");
  try {
    parse_hardware_profile(bad, "bad.json", kProfiles);
    ADD_FAILURE() << "a vendor figure below CUDA's";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.json: gpu.datasheet_memory_bytes: is below gpu.memory_bytes"), std::string::npos) << e.what();
  }
}

TEST(Profiles, ADerivedProfilesBaseIsLookedUpBesideIt) {
  // calibrate/datasheets/h100-sxm.json derives from h200-sxm, which beside it is the datasheet file
  // calibrate fills (no tables): loaded from there it is an input error that says where the base
  // was looked for; beside the calibrated profiles it loads.
  try {
    load_hardware_profile(kSource + "/calibrate/datasheets/h100-sxm.json", kProfiles);
    ADD_FAILURE() << "derived from a profile without tables";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("derive_from: \"h200-sxm\", resolved beside this profile as "), std::string::npos) << what;
    EXPECT_NE(what.find("calibrate/datasheets/h200-sxm.json"), std::string::npos) << what;
    EXPECT_NE(what.find("no GEMM table"), std::string::npos) << what;
  }
  std::ifstream in(kSource + "/calibrate/datasheets/h100-sxm.json");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_FALSE(parse_hardware_profile(text.str(), "h100-sxm.json", kProfiles).gemm.empty());
}

TEST(Profiles, DerivedProfilesCarryEfficiencyAsFractionOfPeak) {
  // Rule: GEMM rate at each shape = H200's rate x (this peak / H200 peak).
  const HardwareProfile h200 = load_hardware_profile("h200-sxm", kProfiles);
  const HardwareProfile a100 = load_hardware_profile("a100-80g-sxm", kProfiles);
  ASSERT_EQ(a100.gemm.at("bf16").size(), h200.gemm.at("bf16").size());
  const double r = 312.0 / 989.5;
  EXPECT_NEAR(a100.gemm.at("bf16")[10].tflops, h200.gemm.at("bf16")[10].tflops * r, 1e-9);
  // Memory-bound: same fraction of datasheet bandwidth (2039 / 4800 of H200's achieved).
  EXPECT_NEAR(a100.memory_bandwidth_GBps, h200.memory_bandwidth_GBps * 2039.0 / 4800.0, 1e-6);
  EXPECT_EQ(a100.provenance.source, "derived");
}

TEST(Profiles, B200CarriesTheH200sEfficiencyToItsOwnPeaks) {
  // The rule on a different architecture: every GEMM and element-wise rate scaled by the datasheet
  // ratios (bf16 2,250 / 989.5 TFLOP/s, 8.0 / 4.8 TB/s); links and memory are the B200's own.
  const HardwareProfile h200 = load_hardware_profile("h200-sxm", kProfiles);
  const HardwareProfile b200 = load_hardware_profile("b200-sxm", kProfiles);
  ASSERT_EQ(b200.gemm.at("bf16").size(), h200.gemm.at("bf16").size());
  for (std::size_t i = 0; i < h200.gemm.at("bf16").size(); i += 97)
    EXPECT_NEAR(b200.gemm.at("bf16")[i].tflops, h200.gemm.at("bf16")[i].tflops * 2250.0 / 989.5, 1e-9);
  EXPECT_NEAR(b200.memory_bandwidth_GBps, h200.memory_bandwidth_GBps * 8000.0 / 4800.0, 1e-6);
  EXPECT_EQ(b200.comm_compute_interference, h200.comm_compute_interference);
  EXPECT_EQ(b200.intra_busbw_GBps, 700);
  EXPECT_EQ(b200.gpus_per_node, 8);
  EXPECT_GT(b200.memory_bytes, 1.9e11);
  EXPECT_TRUE(b200.intra_collectives.empty());  // the H200's two-GPU fits do not describe NVLink 5
}

TEST(Profiles, CostModelUsesNearestMeasuredShape) {
  const HardwareProfile hp = load_hardware_profile("test-gpu", kData);
  const CostModel c(hp, Precision::bf16);
  // One table point at 4096^3 = 500 TFLOP/s: 2 * 4096^3 FLOPs take 2 * 4096^3 / 500e12 s.
  EXPECT_NEAR(c.gemm_time_s(4096, 4096, 4096), 2.0 * 4096 * 4096 * 4096 / 500e12, 1e-12);
  // Memory-bound: bytes over 2000 GB/s.
  EXPECT_NEAR(c.memory_time_s(2e9), 1e-3, 1e-12);
}

TEST(Profiles, Gb200HostLinkIsNvlinkC2cAtTheH200sFractionOfItsDatasheet) {
  // 900 GB/s bidirectional per superchip, shared by its two GPUs: 225 GB/s per GPU and direction,
  // at the fraction of PCIe Gen5's 64 GB/s the H200 measured. The DGX parts keep PCIe.
  const HardwareProfile h200 = load_hardware_profile("h200-sxm", kProfiles);
  const HardwareProfile gb = load_hardware_profile("gb200-nvl72", kProfiles);
  EXPECT_NEAR(gb.h2d_GBps, 225.0 * h200.h2d_GBps / 64.0, 0.1);
  EXPECT_NEAR(gb.d2h_GBps, 225.0 * h200.d2h_GBps / 64.0, 0.1);
  EXPECT_LT(load_hardware_profile("b200-sxm", kProfiles).d2h_GBps, 64.0);
}

TEST(Profiles, RuntimeMemoryIsMeasuredOnTheHoppersAndCarriedOverInBytes) {
  const HardwareProfile h200 = load_hardware_profile("h200-sxm", kProfiles);
  EXPECT_EQ(h200.runtime_memory_provenance.source, "measured");
  EXPECT_GT(h200.context_bytes, 0);
  EXPECT_GT(h200.nccl_first_communicator_bytes, h200.nccl_further_communicator_bytes);
  // The H100's context was measured on its own card; its communicators, which need two GPUs, are
  // the H200's in bytes, and the provenance says so.
  const HardwareProfile h100 = load_hardware_profile("h100-sxm", kProfiles);
  EXPECT_EQ(h100.runtime_memory_provenance.source, "measured");
  EXPECT_GT(h100.context_bytes, 0.25 * (1 << 30));
  EXPECT_NE(h100.context_bytes, h200.context_bytes);
  EXPECT_EQ(h100.nccl_first_communicator_bytes, h200.nccl_first_communicator_bytes);
  EXPECT_EQ(h100.nccl_further_communicator_bytes, h200.nccl_further_communicator_bytes);
  EXPECT_NE(h100.runtime_memory_provenance.rule.find("carried over in bytes from h200-sxm"), std::string::npos)
      << h100.runtime_memory_provenance.rule;
  for (const char* name : {"a100-80g-sxm", "b200-sxm", "gb200-nvl72"}) {
    const HardwareProfile hp = load_hardware_profile(name, kProfiles);
    EXPECT_EQ(hp.context_bytes, h200.context_bytes) << name;
    EXPECT_EQ(hp.nccl_first_communicator_bytes, h200.nccl_first_communicator_bytes) << name;
    EXPECT_EQ(hp.nccl_further_communicator_bytes, h200.nccl_further_communicator_bytes) << name;
    EXPECT_EQ(hp.runtime_memory_provenance.source, "derived") << name;
    EXPECT_NE(hp.runtime_memory_provenance.rule.find("h200-sxm"), std::string::npos) << name;
  }
  // The section is read strictly: a missing figure, an unknown key and a missing provenance.
  std::ifstream in(kProfiles + "/h200-sxm.json");
  const nlohmann::json good = nlohmann::json::parse(in);
  auto fails_at = [&](const std::function<void(nlohmann::json&)>& edit, const std::string& where) {
    nlohmann::json bad = good;
    edit(bad["runtime_memory"]);
    try {
      parse_hardware_profile(bad.dump(), "p.json", kProfiles);
      ADD_FAILURE() << "accepted a profile broken at " << where;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(where), std::string::npos) << e.what();
    }
  };
  fails_at([](nlohmann::json& r) { r.erase("context_bytes"); }, "runtime_memory.context_bytes");
  fails_at([](nlohmann::json& r) { r["nccl_bytes"] = 1; }, "runtime_memory.nccl_bytes");
  fails_at([](nlohmann::json& r) { r.erase("provenance"); }, "runtime_memory.provenance");
  fails_at([](nlohmann::json& r) { r["nccl_further_communicator_bytes"] = -1; }, "runtime_memory.nccl_further_communicator_bytes");
}

TEST(Profiles, BadProfilesAreInputErrors) {
  EXPECT_THROW(parse_hardware_profile("{}", "p.json", kProfiles), InputError);
  try {
    parse_hardware_profile(R"({"schema_version": 1, "name": "x", "provenance": {"source": "guess"}})", "p.json", kProfiles);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("provenance.source"), std::string::npos) << e.what();
  }
  try {
    parse_hardware_profile(R"({"schema_version": 1, "name": "x", "provenance": {"source": "datasheet"}})", "p.json", kProfiles);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("reference"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_hardware_profile("no-such-gpu", kProfiles), InputError);
}

TEST(Profiles, MeasuredTablesAreReadStrictly) {
  // The committed two-GPU profile with one thing broken at a time: the error names the path.
  std::ifstream in(kProfiles + "/h200-sxm.json");
  const nlohmann::json good = nlohmann::json::parse(in);
  auto fails_at = [&](const std::function<void(nlohmann::json&)>& edit, const std::string& where) {
    nlohmann::json p = good;
    edit(p);
    try {
      parse_hardware_profile(p.dump(), "p.json", kProfiles);
      ADD_FAILURE() << "accepted a profile broken at " << where;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(where), std::string::npos) << e.what();
    }
  };
  EXPECT_NO_THROW(parse_hardware_profile(good.dump(), "p.json", kProfiles));
  fails_at([](nlohmann::json& p) { p["intra_node"]["peer_copies"]["columns"][2] = "kind"; }, "intra_node.peer_copies.columns");
  fails_at([](nlohmann::json& p) { p["intra_node"]["peer_copies"]["rows"][0][3] = "fast"; }, "intra_node.peer_copies.rows[0][3]");
  fails_at([](nlohmann::json& p) { p["intra_node"]["collectives"][0]["collective"] = "allreduce"; }, "intra_node.collectives[0].collective");
  fails_at([](nlohmann::json& p) { p["intra_node"]["collectives"][0]["segments"]["rows"] = nlohmann::json::array(); },
           "intra_node.collectives[0].segments.rows");
  fails_at([](nlohmann::json& p) {
    auto& rows = p["intra_node"]["collectives"][1]["segments"]["rows"];
    std::swap(rows[0], rows[1]);
  }, "intra_node.collectives[1].segments.rows[1]");
  fails_at([](nlohmann::json& p) { p["intra_node"]["provenance"]["nics"] = "eth0"; }, "intra_node.provenance.nics");
  // Every rate in a table divides work, so a zero rate is refused where it is read rather than
  // becoming an infinite task in the simulator; shapes are positive integers, fractions of peak at
  // most 1. Each was accepted once, and a zero rate then stopped a step with an internal error.
  fails_at([](nlohmann::json& p) { p["gpu"]["gemm_tflops"]["bf16"][0][3] = 0; }, "gpu.gemm_tflops.bf16[0][3]");
  fails_at([](nlohmann::json& p) { p["gpu"]["gemm_tflops"]["bf16"][0][0] = 0.5; }, "gpu.gemm_tflops.bf16[0][0]");
  fails_at([](nlohmann::json& p) { p["gpu"]["gemm_tflops"]["bf16"][0][2] = 0; }, "gpu.gemm_tflops.bf16[0][2]");
  fails_at([](nlohmann::json& p) { p["gpu"]["attention"]["table"]["rows"][0][5] = 0; }, "gpu.attention.table.rows[0][5]");
  fails_at([](nlohmann::json& p) { p["gpu"]["attention"]["table"]["rows"][0][6] = 1.5; }, "gpu.attention.table.rows[0][6]");
  fails_at([](nlohmann::json& p) { p["gpu"]["attention"]["table"]["rows"][0][3] = 0; }, "gpu.attention.table.rows[0][3]");
  fails_at([](nlohmann::json& p) { p["gpu"]["memory_bound"]["points"][0][1] = 0; }, "gpu.memory_bound.points[0][1]");
  fails_at([](nlohmann::json& p) { p["gpu"]["memory_kernels"]["adam"][0][1] = 0; }, "gpu.memory_kernels.adam[0][1]");
  fails_at([](nlohmann::json& p) { p["gpu"]["memory_kernels"]["adam"][0][2] = 0.5; }, "gpu.memory_kernels.adam[0][2]");
  // A kernel no step prices (a misspelt row would leave its op on the generic curve).
  fails_at([](nlohmann::json& p) { p["gpu"]["memory_kernels"]["layer_norm"] = p["gpu"]["memory_kernels"]["layernorm"]; },
           "gpu.memory_kernels.layer_norm: no step prices a kernel named \"layer_norm\" (did you mean \"layernorm\"?)");
  fails_at([](nlohmann::json& p) { p["gpu"]["peak_tflops"]["bf16"] = 0; }, "gpu.peak_tflops.bf16");
  fails_at([](nlohmann::json& p) { p["gpu"]["measured_tflops"]["bf16"] = -1; }, "gpu.measured_tflops.bf16");
  fails_at([](nlohmann::json& p) { p["host_link"]["h2d_GBps"] = 0; }, "host_link.h2d_GBps");
  fails_at([](nlohmann::json& p) { p["intra_node"]["peer_copies"]["rows"][0][3] = 0; }, "intra_node.peer_copies.rows[0][3]");
  // The cards measured, by UUID: a list of names, read back as written.
  nlohmann::json named = good;
  named["provenance"]["device_uuids"] = {"GPU-00010203-0405-0607-0809-0a0b0c0d0e0f"};
  EXPECT_EQ(parse_hardware_profile(named.dump(), "p.json", kProfiles).provenance.device_uuids,
            std::vector<std::string>{"GPU-00010203-0405-0607-0809-0a0b0c0d0e0f"});
  fails_at([](nlohmann::json& p) { p["provenance"]["device_uuids"] = "GPU-0"; }, "provenance.device_uuids");
  fails_at([](nlohmann::json& p) { p["provenance"]["device_uuids"] = {7}; }, "provenance.device_uuids[0]");
  // The GEMM slowdown beside point-to-point traffic is optional, and read like the all-reduce's.
  EXPECT_EQ(parse_hardware_profile(good.dump(), "p.json", kProfiles).p2p_compute_interference, -1);
  nlohmann::json p2p = good;
  p2p["interference"]["gemm_slowdown_with_p2p"] = 0.07;
  EXPECT_EQ(parse_hardware_profile(p2p.dump(), "p.json", kProfiles).pipeline_transfer_interference(), 0.07);
  fails_at([](nlohmann::json& p) { p["interference"]["gemm_slowdown_with_p2p"] = -0.1; }, "interference.gemm_slowdown_with_p2p");
  fails_at([](nlohmann::json& p) { p["interference"]["gemm_slowdown_with_p2p"] = "small"; }, "interference.gemm_slowdown_with_p2p");
  // The element-wise kernels' clock sensitivity: 1 + s (max / f - 1) times their time below the
  // maximum clock, 1 at it or above and where a profile has no `clock` section.
  const HardwareProfile clocked = parse_hardware_profile(good.dump(), "p.json", kProfiles);
  EXPECT_EQ(clocked.max_sm_mhz, 1980);
  EXPECT_DOUBLE_EQ(clocked.elementwise_clock_factor(1650), 1 + clocked.elementwise_clock_sensitivity * 0.2);
  EXPECT_EQ(clocked.elementwise_clock_factor(1980), 1.0);
  EXPECT_EQ(clocked.elementwise_clock_factor(2100), 1.0);
  nlohmann::json unclocked = good;
  unclocked.erase("clock");
  EXPECT_EQ(parse_hardware_profile(unclocked.dump(), "p.json", kProfiles).elementwise_clock_factor(1500), 1.0);
  fails_at([](nlohmann::json& p) { p["clock"]["elementwise_sensitivity"] = -0.1; }, "clock.elementwise_sensitivity");
  fails_at([](nlohmann::json& p) { p["clock"]["elementwise_sensitivity"] = "half"; }, "clock.elementwise_sensitivity");
  fails_at([](nlohmann::json& p) { p["clock"].erase("max_sm_mhz"); }, "clock.max_sm_mhz");
  fails_at([](nlohmann::json& p) { p["clock"].erase("provenance"); }, "clock.provenance");
  fails_at([](nlohmann::json& p) { p["clock"]["boost_mhz"] = 1980; }, "clock.boost_mhz");
  // The clock's power model is optional; where given, every part of it is checked.
  EXPECT_TRUE(parse_hardware_profile(good.dump(), "p.json", kProfiles).has_clock_power_model());
  nlohmann::json unpowered = good;
  unpowered["clock"].erase("power_model");
  EXPECT_FALSE(parse_hardware_profile(unpowered.dump(), "p.json", kProfiles).has_clock_power_model());
  fails_at([](nlohmann::json& p) { p["clock"]["power_model"].erase("limit_w"); }, "clock.power_model.limit_w");
  fails_at([](nlohmann::json& p) { p["clock"]["power_model"]["memory_bound_w"] = 0; }, "clock.power_model.memory_bound_w");
  fails_at([](nlohmann::json& p) { p["clock"]["power_model"]["gemm_w"] = nlohmann::json::array(); }, "clock.power_model.gemm_w");
  fails_at([](nlohmann::json& p) { p["clock"]["power_model"]["gemm_w"][1] = {100, 700}; }, "clock.power_model.gemm_w[1][0]");
  fails_at([](nlohmann::json& p) { p["clock"]["power_model"]["attention_w"][0] = {115}; }, "clock.power_model.attention_w[0]");
  fails_at([](nlohmann::json& p) { p["clock"]["power_model"]["attention_w"][0][1] = "hot"; }, "clock.power_model.attention_w[0][1]");
  fails_at([](nlohmann::json& p) { p["clock"]["power_model"]["clock_line_mhz"] = {2700}; }, "clock.power_model.clock_line_mhz");
  fails_at([](nlohmann::json& p) { p["clock"]["power_model"]["clock_line_mhz"][1] = 0.5; }, "clock.power_model.clock_line_mhz[1]");
  fails_at([](nlohmann::json& p) { p["clock"]["power_model"].erase("provenance"); }, "clock.power_model.provenance");
  fails_at([](nlohmann::json& p) { p["clock"]["power_model"]["idle_w"] = 90; }, "clock.power_model.idle_w");
  // A family's own element-wise power is optional, and checked where given.
  const nlohmann::json gpt_w = {
      {"gpt", 440}, {"provenance", {{"source", "measured"}, {"device", "NVIDIA H200"}, {"date", "2026-12-06"}, {"command", "calibrate kernel-mix"}}}};
  nlohmann::json by_family = good;
  by_family["clock"]["power_model"]["memory_bound_w_by_family"] = gpt_w;
  EXPECT_EQ(parse_hardware_profile(by_family.dump(), "p.json", kProfiles).clock_power.memory_bound_w_gpt, 440);
  nlohmann::json one_power = good;
  one_power["clock"]["power_model"].erase("memory_bound_w_by_family");
  EXPECT_EQ(parse_hardware_profile(one_power.dump(), "p.json", kProfiles).clock_power.memory_bound_w_gpt, 0);
  auto with_family = [&gpt_w](const char* key, const nlohmann::json& v) {
    return [&gpt_w, key, v](nlohmann::json& p) {
      nlohmann::json f = gpt_w;
      if (v.is_null()) f.erase(key);
      else f[key] = v;
      p["clock"]["power_model"]["memory_bound_w_by_family"] = f;
    };
  };
  fails_at(with_family("gpt", -1), "clock.power_model.memory_bound_w_by_family.gpt");
  fails_at(with_family("mamba", 400), "clock.power_model.memory_bound_w_by_family.mamba");
  fails_at(with_family("provenance", nullptr), "clock.power_model.memory_bound_w_by_family.provenance");
}

TEST(Profiles, EveryColumnOfTheMeasuredTablesSetToAnOddValueIsRefusedOrSimulated) {
  // Each table of the two measured profiles (GEMM rates by precision, attention, memory-bound
  // curves, every element-wise kernel), one column of every row at a time, set to 0, -1, 0.5,
  // 1e-308 and 1e308: the profile is either refused with an InputError naming that table, or a
  // GPT 1.3B layout on it (tp 2, pp 2, dp 2) simulates to a finite positive step. A zero or
  // vanishing rate used to load and stop the step with an internal error.
  const std::string dir = testing::TempDir() + "odd-columns";
  std::filesystem::create_directories(dir);
  const std::string scenario = R"({ "name": "t", "model": "gpt-1.3b", "training": { "global_batch": 64 }, "hardware": "h",
      "cluster": { "nodes": 1 }, "layout": { "tp": 2, "pp": 2, "micro_batch": 2 } })";
  std::size_t cases = 0, refused = 0;
  for (const char* name : {"h100-sxm", "h200-sxm"}) {
    std::ifstream in(kProfiles + "/" + name + ".json");
    const nlohmann::json good = nlohmann::json::parse(in);
    std::vector<std::pair<nlohmann::json::json_pointer, std::string>> tables;
    const nlohmann::json& gpu = good.at("gpu");
    for (const auto& [k, v] : gpu.at("gemm_tflops").items())
      if (k != "columns") tables.push_back({nlohmann::json::json_pointer("/gpu/gemm_tflops/" + k), "gpu.gemm_tflops." + k});
    tables.push_back({nlohmann::json::json_pointer("/gpu/attention/table/rows"), "gpu.attention.table.rows"});
    tables.push_back({nlohmann::json::json_pointer("/gpu/memory_bound/points"), "gpu.memory_bound.points"});
    for (const auto& [k, v] : gpu.at("memory_kernels").items())
      if (k != "provenance") tables.push_back({nlohmann::json::json_pointer("/gpu/memory_kernels/" + k), "gpu.memory_kernels." + k});
    for (const auto& [at, path] : tables) {
      const std::size_t columns = good.at(at).at(0).size();
      for (std::size_t c = 0; c < columns; ++c)
        for (const double x : {0.0, -1.0, 0.5, 1e-308, 1e308}) {
          nlohmann::json p = good;
          for (auto& row : p.at(at)) row[c] = x;
          std::ofstream(dir + "/h.json") << p.dump();
          const std::string where = std::string(name) + " " + path + "[*][" + std::to_string(c) + "] = " + nlohmann::json(x).dump();
          ++cases;
          try {
            const Scenario s = parse_scenario(scenario, "s.json", dir);
            const Evaluation ev = evaluate(s, resolve_layout(s, s.layout, s.layout_dp_given, 1), 1, EvalOptions{});
            EXPECT_TRUE(std::isfinite(ev.step.step_time_s) && ev.step.step_time_s > 0) << where;
          } catch (const InputError& e) {
            ++refused;
            EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << where << ": " << e.what();
          } catch (const std::exception& e) {
            ADD_FAILURE() << where << ": not an input error: " << e.what();
          }
        }
    }
  }
  EXPECT_GT(cases, 500u);
  std::printf("[ info ] %zu odd columns in the measured profiles' tables: %zu refused, the rest simulated\n", cases, refused);
}

TEST(Profiles, MisalignedShapesOnlyMatchMisalignedMeasurements) {
  // A vocabulary of 50257 is not a multiple of 8 and runs far slower; an aligned query nearby
  // (an MLP of 49152) must not borrow that rate, and a misaligned query must.
  HardwareProfile hp = load_hardware_profile("test-gpu", kData);
  hp.gemm["bf16"] = {{4096, 4096, 4096, 500}, {4096, 50257, 4096, 100}};
  const CostModel c(hp, Precision::bf16);
  EXPECT_DOUBLE_EQ(c.gemm_rate_tflops(4096, 49152, 4096), 500);
  EXPECT_DOUBLE_EQ(c.gemm_rate_tflops(8192, 50257, 2048), 100);
}

TEST(Profiles, WeightGradientsTakeTheTableOfGemmsAccumulatedIntoFp32) {
  // Mixed precision adds each micro-batch's weight gradient into an fp32 buffer: a GEMM whose fp32
  // output is read and written again. Where the profile measured such GEMMs (gpu.gemm_tflops's
  // bf16_accumulate_fp32 rows), the layer's four weight gradients and the logits' are timed from
  // them; every other GEMM, every GEMM of an fp8 step, and a profile without the table keep the
  // bf16 table. Here the bf16 table says 500 TFLOP/s and the accumulating one 250 for every shape,
  // so a step's weight gradients take twice as long and nothing else moves.
  HardwareProfile hp = load_hardware_profile("test-gpu", kData);
  const HardwareProfile plain = hp;
  hp.gemm[kGemmAccumulateFp32] = {{4096, 4096, 4096, 250}};
  const CostModel with(hp, Precision::bf16), without(plain, Precision::bf16), fp8(hp, Precision::fp8);
  EXPECT_DOUBLE_EQ(with.gemm_rate_tflops(4096, 4096, 4096), 500);
  EXPECT_DOUBLE_EQ(with.gemm_rate_tflops(4096, 4096, 4096, true), 250);
  EXPECT_DOUBLE_EQ(without.gemm_rate_tflops(4096, 4096, 4096, true), 500);
  EXPECT_DOUBLE_EQ(fp8.gemm_time_s(4096, 4096, 4096, true), fp8.gemm_time_s(4096, 4096, 4096));
  const auto preset = find_model_preset("llama3-8b");
  ASSERT_TRUE(preset.has_value());
  const ModelConfig m = *preset;
  const LayerOps ops = transformer_layer_ops({m, 1, false, Recompute::none, 2, Precision::bf16});
  const LayerOps head = head_ops({m, 1, false, Recompute::none, 2, Precision::bf16});
  int weight_gradients = 0;
  for (const auto* list : {&ops.forward, &ops.backward, &head.forward, &head.backward})
    for (const Op& op : *list) {
      if (op.kind != OpKind::gemm) continue;
      const bool wgrad = op.name.find(".wgrad") != std::string::npos;
      EXPECT_EQ(op.accumulate, wgrad) << op.name;
      weight_gradients += wgrad;
      if (wgrad) EXPECT_NEAR(with.op_time_s(op), 2 * without.op_time_s(op), 1e-12) << op.name;
      else EXPECT_EQ(with.op_time_s(op), without.op_time_s(op)) << op.name;
    }
  EXPECT_EQ(weight_gradients, 5);  // Q/K/V, attention output, gate/up, down; the logits
  // The table is read like the others, and written by calibrate apart from each dtype's ceiling.
  std::ifstream in(kProfiles + "/h200-sxm.json");
  nlohmann::json j = nlohmann::json::parse(in);
  j["gpu"]["gemm_tflops"][kGemmAccumulateFp32] = {{2048, 4096, 8192, 600.0}};
  const HardwareProfile read = parse_hardware_profile(j.dump(), "p.json", kProfiles);
  ASSERT_EQ(read.gemm.at(kGemmAccumulateFp32).size(), 1u);
  EXPECT_EQ(read.gemm.at(kGemmAccumulateFp32)[0].tflops, 600.0);
  j["gpu"]["gemm_tflops"][kGemmAccumulateFp32] = {{2048, 4096, 8192}};
  EXPECT_THROW(parse_hardware_profile(j.dump(), "p.json", kProfiles), InputError);
}

TEST(Profiles, EquidistantMeasuredShapesShareTheQuery) {
  // n = 8192 lies exactly between measured n = 4096 and n = 16384 in log space: the time is the
  // average of the two shapes' times, i.e. the harmonic mean of 400 and 600 TFLOP/s = 480.
  HardwareProfile hp = load_hardware_profile("test-gpu", kData);
  hp.gemm["bf16"] = {{4096, 4096, 4096, 400}, {4096, 16384, 4096, 600}, {1024, 1024, 1024, 100}};
  const CostModel c(hp, Precision::bf16);
  EXPECT_NEAR(c.gemm_rate_tflops(4096, 8192, 4096), 480.0, 1e-9);
  // Off the midpoint the nearer shape alone counts.
  EXPECT_DOUBLE_EQ(c.gemm_rate_tflops(4096, 6000, 4096), 400);
  EXPECT_DOUBLE_EQ(c.gemm_rate_tflops(4096, 12000, 4096), 600);
}

TEST(Profiles, StepKernelsUseTheNearestMeasuredHiddenSize) {
  // A LayerNorm measured at hidden 768 (1,000 GB/s) and 2048 (2,000 GB/s) at the same bytes:
  // a model of hidden 1536 is nearer 2048 in log space (|ln(1536/2048)| = 0.288 < ln 2 = 0.693)
  // and gets 2,000 GB/s, so 1 GB takes 0.5 ms; hidden 768 gets 1 ms; without a width both points
  // share the bytes axis and the first wins.
  HardwareProfile hw = load_hardware_profile("h200-sxm", kProfiles);
  hw.memory_kernels["layernorm"] = {{1e9, 1000, 768}, {1e9, 2000, 2048}};
  const CostModel cm(hw, Precision::bf16);
  EXPECT_NEAR(cm.kernel_time_s("layernorm", 1e9, 1536), 0.5e-3, 1e-12);
  EXPECT_NEAR(cm.kernel_time_s("layernorm", 1e9, 768), 1e-3, 1e-12);
  EXPECT_NEAR(cm.kernel_time_s("layernorm", 1e9, 4096), 0.5e-3, 1e-12);
}

namespace {
// An attention op over `batch_heads` heads of `seq` tokens, `head_dim` wide (causal: 4 b s^2 d FLOPs).
Op attention_op(double batch_heads, double seq, double head_dim, double kv_group = 1, bool dropout = true) {
  Op op;
  op.kind = OpKind::attention;
  op.name = "attention";
  op.m = batch_heads; op.n = seq; op.k = head_dim;
  op.kv_group = kv_group;
  op.dropout = dropout;
  op.flops = 4.0 * batch_heads * seq * seq * head_dim;
  return op;
}
}  // namespace

TEST(Profiles, AttentionUsesTheMeasuredGroupingAndDropout) {
  // Two measured attention shapes, alike but for K/V grouping and dropout: gpt-style (one K/V head
  // per query head, dropout) at 10% of peak and Llama-style (8 query heads per K/V head, no dropout)
  // at 20%. Each op takes the rate of its own kind, so the Llama op takes half the time; with only
  // the gpt-style row measured, both get it.
  HardwareProfile hw = load_hardware_profile("h200-sxm", kProfiles);
  const Op gpt = attention_op(64, 2048, 64), llama = attention_op(64, 2048, 64, 8, false);
  hw.attention = {{64, 2048, 64, 0.1, 0.1, 1, true}, {64, 2048, 64, 0.2, 0.2, 8, false}};
  const CostModel both(hw, Precision::bf16);
  EXPECT_NEAR(both.op_time_s(llama) / both.op_time_s(gpt), 0.5, 1e-9);
  hw.attention.pop_back();
  const CostModel gpt_only(hw, Precision::bf16);
  EXPECT_NEAR(gpt_only.op_time_s(llama), gpt_only.op_time_s(gpt), 1e-15);
}

TEST(Profiles, AnUnmeasuredAttentionShapeTakesTheRowOfItsHeadSizeFirst) {
  // Llama 3 70B over 4 TP ranks at 8,192 tokens: 16 query heads, 128 wide, 8 per K/V head. Two rows
  // measured: 64-wide heads at its sequence (10% of peak) and 128-wide heads at 2,048 tokens (20%).
  // In summed log distance the 64-wide row is nearer (log 2 + log 2 against log 2 + log 4), yet head
  // size moves the rate most (0.08 against 0.21 of peak at 8,192 tokens in the H200's table): the
  // op takes the 128-wide row's 20%, half the time the other would give.
  HardwareProfile hw = load_hardware_profile("h200-sxm", kProfiles);
  const Op op = attention_op(16, 8192, 128, 8, false);
  hw.attention = {{32, 8192, 64, 0.1, 0.1, 8, false}, {32, 2048, 128, 0.2, 0.2, 8, false}};
  const double t = CostModel(hw, Precision::bf16).op_time_s(op);
  EXPECT_NEAR(t, op.flops / (0.2 * hw.peak("bf16") * 1e12), 1e-12);
  // Of two rows with its head size, the one with its grouping, though at another length.
  hw.attention = {{16, 8192, 128, 0.1, 0.1, 1, false}, {16, 2048, 128, 0.2, 0.2, 8, false}};
  EXPECT_NEAR(CostModel(hw, Precision::bf16).op_time_s(op), t, 1e-12);
}

TEST(Profiles, AttentionTableWithGroupingIsReadStrictly) {
  // The calibrated profile's table names kv_group and dropout; a row with dropout 2 is refused.
  nlohmann::json p;
  {
    std::ifstream in(kProfiles + "/h200-sxm.json");
    p = nlohmann::json::parse(in);
  }
  auto& table = p["gpu"]["attention"]["table"];
  table["columns"] = {"batch_heads", "seq", "head_dim", "kv_group", "dropout", "forward_fraction", "backward_fraction"};
  table["rows"] = {{64, 2048, 64, 8, 0, 0.2, 0.2}};
  const std::string dir = testing::TempDir() + "grouped-attention";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/h.json") << p.dump();
  const HardwareProfile hw = load_hardware_profile("h", dir);
  ASSERT_EQ(hw.attention.size(), 1u);
  EXPECT_EQ(hw.attention[0].kv_group, 8);
  EXPECT_FALSE(hw.attention[0].dropout);
  table["rows"] = {{64, 2048, 64, 8, 2, 0.2, 0.2}};
  std::ofstream(dir + "/h.json") << p.dump();
  try {
    load_hardware_profile("h", dir);
    FAIL() << "dropout 2 accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("gpu.attention.table.rows[0]"), std::string::npos) << e.what();
  }
}

TEST(Profiles, NvlsCurvesAreThePublishedEightGpuSweeps) {
  // h100-sxm and h200-sxm carry the all-reduce of 8 GPUs with NCCL's defaults, NVLS on, imported
  // from published nccl-tests sweeps (calibrate/records/imported; the commands in their
  // provenance). The piecewise fit keeps every published size from 1 MiB up within 5%, and the
  // largest sizes at the published ~480 GB/s of bus bandwidth, against the 367-370 of a ring.
  for (const auto& [name, log] : {std::pair<std::string, std::string>{"h100-sxm", "dgx-h100-8gpu-all-reduce-nvls.txt"},
                                  {"h200-sxm", "h200-8gpu-all-reduce-nvls.txt"}}) {
    const HardwareProfile hp = load_hardware_profile(name, kProfiles);
    ASSERT_EQ(hp.intra_nvls_collectives.size(), 1u) << name;
    const CollectiveFit& fit = hp.intra_nvls_collectives[0];
    EXPECT_EQ(fit.collective, "all_reduce");
    EXPECT_EQ(fit.gpus, 8);
    EXPECT_EQ(fit.provenance.source, "imported");
    EXPECT_NE(fit.provenance.reference.find("NVLS"), std::string::npos) << fit.provenance.reference;
    const auto curves = measured_collectives(hp.intra_nvls_collectives);
    const auto tables = calib::import_nccl_tests_file(kSource + "/calibrate/records/imported/" + log);
    ASSERT_EQ(tables.size(), 1u);
    int checked = 0;
    for (const auto& p : tables[0].points) {
      if (p.bytes < (1 << 20)) continue;
      EXPECT_NEAR(sim::measured_time_s(curves.at(0), p.bytes) * 1e6 / p.time_us, 1.0, 0.05) << name << " at " << p.bytes << " B";
      ++checked;
    }
    EXPECT_GE(checked, 15) << name;
    const double S = 16.0 * (1ull << 30);
    EXPECT_NEAR(1.75 * S / sim::measured_time_s(curves.at(0), S) / 1e9, 480.0, 10.0) << name;
  }
}

TEST(Profiles, ValidateSaysWhenTheGpuIsNotTheProfilesPart) {
  // The names and memory as CUDA gives them on the two parts measured here.
  const HardwareProfile h200 = load_hardware_profile("h200-sxm", kProfiles);
  const HardwareProfile h100 = load_hardware_profile("h100-sxm", kProfiles);
  EXPECT_TRUE(profile_device_mismatches(h200, "NVIDIA H200", h200.memory_bytes).empty());
  EXPECT_TRUE(profile_device_mismatches(h100, "NVIDIA H100 80GB HBM3", 85017493504.0).empty());
  EXPECT_TRUE(profile_device_mismatches(h100, "NVIDIA H100 80GB HBM3", 0).empty());  // memory unknown
  // An H200 scenario on an H100: another part, and less memory.
  const auto both = profile_device_mismatches(h200, "NVIDIA H100 80GB HBM3", 85017493504.0);
  ASSERT_EQ(both.size(), 2u);
  EXPECT_NE(both[0].find("measured on NVIDIA H200 and this GPU is NVIDIA H100 80GB HBM3"), std::string::npos) << both[0];
  EXPECT_NE(both[1].find("79.18 GiB and the profile h200-sxm 139.80 GiB"), std::string::npos) << both[1];
  // A derived profile names no device: only its memory is checked. The H100 datasheet file's
  // nvidia-smi figure less the H200's driver reservation (79.05 GiB) is under what CUDA hands out
  // on the H100; the figure itself, 81,559 MiB, is over it.
  std::ifstream in(kSource + "/calibrate/datasheets/h100-sxm.json");
  std::stringstream text;
  text << in.rdbuf();
  HardwareProfile derived = parse_hardware_profile(text.str(), "h100-sxm.json", kProfiles);
  EXPECT_TRUE(profile_device_mismatches(derived, "NVIDIA H100 80GB HBM3", 85017493504.0).empty());
  derived.memory_bytes = derived.datasheet_memory_bytes;
  const auto mem = profile_device_mismatches(derived, "NVIDIA H100 80GB HBM3", 85017493504.0);
  ASSERT_EQ(mem.size(), 1u);
  EXPECT_NE(mem[0].find("79.65 GiB"), std::string::npos) << mem[0];
  // More memory than the profile is not a mismatch.
  EXPECT_TRUE(profile_device_mismatches(h100, "NVIDIA H100 80GB HBM3", 2 * h100.memory_bytes).empty());
}

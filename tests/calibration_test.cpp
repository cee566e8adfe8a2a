// Fits and nccl-tests import, on the CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "alpha_beta_fit.h"
#include "attention_table.h"
#include "gpu_links.h"
#include "input_error.h"
#include "kernel_table.h"
#include "cost_model.h"
#include "nccl_tests_import.h"
#include "nccl_transport.h"
#include "profile_merge.h"
#include "profile_writer.h"
#include "hardware_profile.h"
#include <nlohmann/json.hpp>

using namespace trainsim;
using namespace trainsim::calib;

namespace {
const std::string kData = TRAINSIM_TEST_DATA;
const std::string kProfiles = TRAINSIM_PROFILES;
// Published nccl-tests sweeps imported into the profiles, laid out as nccl-tests logs.
const std::string kImported = std::string(TRAINSIM_SOURCE_DIR) + "/calibrate/records/imported";
}

TEST(AlphaBetaFit, RecoversAKnownModel) {
  // t(S) = 20 us + S * 2(n-1)/n / 100 GB/s for an 8-GPU all-reduce, sizes 1 MiB .. 1 GiB.
  LinkTable t{"all_reduce", 8, {}, "synthetic"};
  for (double S = 1 << 20; S <= (1 << 30); S *= 2) t.points.push_back({S, 20.0 + S * 1.75 / 100e3, 0, 0, 0});
  const AlphaBetaFit f = fit_alpha_beta(t, 1 << 20);
  EXPECT_NEAR(f.alpha_us, 20.0, 1e-6);
  EXPECT_NEAR(f.busbw_GBps, 100.0, 1e-6);
  EXPECT_NEAR(f.r2, 1.0, 1e-9);
  EXPECT_LT(f.max_rel_error, 1e-9);
}

TEST(AlphaBetaFit, RelativeWeightingKeepsSmallSizesAccurate) {
  // Noise of +-3% on every point: the fit stays within a few percent everywhere, small sizes
  // included (an unweighted fit would be dominated by the largest sizes).
  LinkTable t{"all_gather", 4, {}, "synthetic"};
  int i = 0;
  for (double S = 1 << 20; S <= (1 << 30); S *= 2, ++i)
    t.points.push_back({S, (10.0 + S * 0.75 / 50e3) * (i % 2 ? 1.03 : 0.97), 0, 0, 0});
  const AlphaBetaFit f = fit_alpha_beta(t, 1 << 20);
  EXPECT_LT(f.max_rel_error, 0.07);
  EXPECT_NEAR(f.busbw_GBps, 50.0, 2.5);
}

TEST(AlphaBetaFit, RejectsTooFewPoints) {
  LinkTable t{"all_reduce", 2, {{1e3, 5, 0, 0, 0}}, "x"};
  EXPECT_THROW(fit_alpha_beta(t, 1 << 20), std::invalid_argument);
}

TEST(AlphaBetaFit, PiecewiseFindsTheProtocolSwitch) {
  // Two regimes of a 2-GPU all-reduce (bus factor 1): up to 16 MiB t = 10 us + S / 100 GB/s, from
  // 16 MiB on t = 60 us + S / 300 GB/s (at 16 MiB the two give 177.77 and 115.92 us). One line
  // misses by far more than 5%; the piecewise fit finds the two regimes, the second starting at
  // the first point of its own (16 MiB belongs to the second line, so the first ends at 8 MiB).
  LinkTable t{"all_reduce", 2, {}, "synthetic"};
  for (double S = 1 << 20; S <= (1 << 30); S *= 2)
    t.points.push_back({S, S < (16 << 20) ? 10.0 + S / 100e3 : 60.0 + S / 300e3, 0, 0, 0});
  EXPECT_GT(fit_alpha_beta(t, 1 << 20).max_rel_error, 0.05);
  const auto segs = fit_piecewise_alpha_beta(t, 1 << 20, 0.05);
  ASSERT_GE(segs.size(), 2u);
  ASSERT_LE(segs.size(), 3u);
  EXPECT_NEAR(segs.front().fit.alpha_us, 10.0, 1e-6);
  EXPECT_NEAR(segs.front().fit.busbw_GBps, 100.0, 1e-6);
  EXPECT_NEAR(segs.back().fit.alpha_us, 60.0, 1e-6);
  EXPECT_NEAR(segs.back().fit.busbw_GBps, 300.0, 1e-6);
  for (const auto& p : t.points) EXPECT_LT(std::fabs(predict_us(segs, "all_reduce", 2, p.bytes) / p.time_us - 1.0), 0.05) << p.bytes;
}

TEST(AlphaBetaFit, PiecewiseKeepsANoisyPointAlone) {
  // Latency-bound sizes whose times do not grow (1 MiB slower than 2 MiB, as NCCL's protocol
  // switch gives): no line with a non-negative latency holds both within 5%, so 1 MiB stands alone
  // at its measured time and every point is still within the tolerance.
  LinkTable t{"send_recv", 2, {{1 << 20, 25.5, 0, 0, 0}, {2 << 20, 19.9, 0, 0, 0}, {4 << 20, 29.7, 0, 0, 0}, {8 << 20, 48.5, 0, 0, 0}}, "synthetic"};
  const auto segs = fit_piecewise_alpha_beta(t, 1 << 20, 0.05);
  ASSERT_GE(segs.size(), 2u);
  EXPECT_EQ(segs.front().min_bytes, segs.front().max_bytes);
  EXPECT_NEAR(predict_us(segs, "send_recv", 2, 1 << 20), 25.5, 0.05);  // plus S / 1e5 GB/s, 0.01 us
  for (const auto& p : t.points) EXPECT_LT(std::fabs(predict_us(segs, "send_recv", 2, p.bytes) / p.time_us - 1.0), 0.05) << p.bytes;
}

TEST(NcclTestsImport, TextLog) {
  // DGX H100 all_reduce_perf sample (NVIDIA/dgxc-benchmarking's README, as h100-sxm imports it).
  const auto tables = import_nccl_tests_file(kImported + "/dgx-h100-8gpu-all-reduce-nvls.txt");
  ASSERT_EQ(tables.size(), 1u);
  const LinkTable& t = tables[0];
  EXPECT_EQ(t.collective, "all_reduce");
  EXPECT_EQ(t.gpus, 8);
  ASSERT_EQ(t.points.size(), 32u);
  EXPECT_DOUBLE_EQ(t.points.front().bytes, 8);
  EXPECT_DOUBLE_EQ(t.points.front().time_us, 13.67);
  double peak = 0;
  for (const auto& p : t.points) peak = std::max(peak, p.busbw_GBps);
  EXPECT_DOUBLE_EQ(peak, 480.16);  // at 8 GiB
  // busbw = algbw * 2(n-1)/n, as nccl-tests computes it (rounding in the log's two decimals).
  for (const auto& p : t.points) {
    if (p.algbw_GBps > 10) {
      EXPECT_NEAR(p.busbw_GBps / p.algbw_GBps, busbw_factor("all_reduce", 8), 0.01);
    }
  }
}

TEST(NcclTestsImport, JsonLog) {
  const auto tables = import_nccl_tests_file(kData + "/nccl-tests-allreduce-a100.json");
  ASSERT_EQ(tables.size(), 1u);
  EXPECT_EQ(tables[0].collective, "all_reduce");
  EXPECT_EQ(tables[0].gpus, 8);
  EXPECT_EQ(tables[0].points.size(), 20u);
  EXPECT_DOUBLE_EQ(tables[0].points.back().busbw_GBps, 234.89);
  // A ring on NVLink 3: the fitted bus bandwidth over 1 MiB and up lands near the plateau.
  const AlphaBetaFit f = fit_alpha_beta(tables[0], 1 << 20);
  EXPECT_NEAR(f.busbw_GBps, 234.89, 0.1 * 234.89);
}

TEST(NcclTestsImport, ProgramNames) {
  EXPECT_EQ(collective_from_program("./build/all_gather_perf"), "all_gather");
  EXPECT_EQ(collective_from_program("alltoall_perf"), "all_to_all");
  EXPECT_EQ(collective_from_program("/opt/nccl-tests/sendrecv_perf"), "send_recv");
}

TEST(NcclTestsImport, BadInputNamesFileAndLine) {
  try {
    parse_nccl_tests_text("# Collective test starting: all_reduce_perf\n# nThread 1 nGpus 2\n 1024 256 float sum -1 abc 0.1 0.1 0\n",
                          "log.txt");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("log.txt:3"), std::string::npos) << e.what();
  }
  // A row nccl-tests could not have printed (a time not above 0 or not finite, a negative or
  // fractional size, a negative bandwidth, a count of wrong elements that is not one) is refused
  // with its line: it was dropped from the fit unsaid, or cast to an integer from NaN.
  for (const std::string row : {" 1024 256 float sum -1 -1 0.1 0.1 0", " 1024 256 float sum -1 0 0.1 0.1 0",
                                " 1024 256 float sum -1 nan 0.1 0.1 0", " 1024 256 float sum -1 inf 0.1 0.1 0",
                                " -1024 256 float sum -1 5.0 0.1 0.1 0", " 1024.5 256 float sum -1 5.0 0.1 0.1 0",
                                " 1024 256 float sum -1 5.0 -0.1 0.1 0", " 1024 256 float sum -1 5.0 0.1 nan 0",
                                " 1024 256 float sum -1 5.0 0.1 0.1 nan", " 1024 256 float sum -1 5.0 0.1 0.1 -1",
                                " 1024 256 float sum -1 5.0 0.1 0.1 99999999999999999999"}) {
    try {
      parse_nccl_tests_text("# Collective test starting: all_reduce_perf\n# nThread 1 nGpus 2\n" + row + "\n", "log.txt");
      ADD_FAILURE() << "accepted: " << row;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("log.txt:3: expected "), std::string::npos) << e.what();
    }
  }
  const std::string json_doc = R"({"args": ["all_reduce_perf"], "config": {"nthreads": 1, "ngpus": 2},
                                   "results": [{"size": 1024, "out_of_place": {"time": 0, "alg_bw": 0.1, "bus_bw": 0.1}}]})";
  try {
    parse_nccl_tests_json(json_doc, "x.json");
    ADD_FAILURE() << "a zero time accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("x.json: results[0]: expected a positive time"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_nccl_tests_text("nothing here\n", "empty.txt"), InputError);
  EXPECT_THROW(parse_nccl_tests_json("{\"version\": 2}", "x.json"), InputError);
  // A log whose rank lines were cut or repeated: its busbw / algbw (2(n-1)/n for all-reduce) says
  // how many ranks ran, so a count read wrong is refused at the first row that shows it (from
  // 10 GB/s, where two decimals resolve the ratio) rather than shifting every derived bus bandwidth.
  const std::string rows = " 1048576 262144 float sum -1 100.0 10.49 18.35 0\n 4194304 1048576 float sum -1 200.0 20.97 36.70 0\n";
  auto header = [](int ranks) {
    std::string h = "# Collective test starting: all_reduce_perf\n";
    for (int r = 0; r < ranks; ++r) h += "#  Rank  " + std::to_string(r) + " Group  0 Pid  1 on host device  0 [0x0] GPU\n";
    return h;
  };
  EXPECT_EQ(parse_nccl_tests_text(header(8) + rows, "log.txt")[0].gpus, 8);  // 18.35 / 10.49 = 1.749, 2 x 7/8 = 1.75
  for (const int wrong : {7, 9}) {
    try {
      parse_nccl_tests_text(header(wrong) + rows, "log.txt");
      ADD_FAILURE() << wrong << " rank lines accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("log.txt:" + std::to_string(wrong + 2) + ": busbw / algbw = 1.7493 says 8 ranks ran, but the log was read as " +
                                           std::to_string(wrong)),
                std::string::npos)
          << e.what();
    }
  }
  // Send/recv's factor is 1 at every size: nothing to check, any count reads.
  EXPECT_EQ(parse_nccl_tests_text("# Collective test starting: sendrecv_perf\n# nThread 1 nGpus 3\n 1048576 262144 float sum -1 100.0 10.49 10.49 0\n",
                                  "log.txt")[0].gpus,
            3);
}

TEST(NcclTransport, ReadsTheNetworkAndItsNics) {
  std::ifstream ib(kData + "/nccl/ib-cluster.log");
  const NcclTransport t = parse_nccl_debug_log(ib);
  EXPECT_EQ(t.network, "IB");
  ASSERT_EQ(t.nics.size(), 4u);
  EXPECT_EQ(t.nics[0], "mlx5_0:1/IB");
  EXPECT_EQ(t.nics[3], "mlx5_3:1/IB");
  EXPECT_FALSE(socket_fallback_error(t, 2, "rank 0").has_value());

  std::ifstream sock(kData + "/nccl/socket-fallback.log");
  const NcclTransport s = parse_nccl_debug_log(sock);
  EXPECT_EQ(s.network, "Socket");
  ASSERT_EQ(s.nics.size(), 1u);
  EXPECT_EQ(s.nics[0], "eth0:10.0.0.5<0>");
  // One node never crosses the network; across nodes the fall-back is an error naming the NIC.
  EXPECT_FALSE(socket_fallback_error(s, 1, "rank 0").has_value());
  const auto err = socket_fallback_error(s, 2, "rank 3 (node002)");
  ASSERT_TRUE(err.has_value());
  EXPECT_NE(err->find("rank 3 (node002)"), std::string::npos);
  EXPECT_NE(err->find("eth0"), std::string::npos);
}

TEST(NcclTransport, PluginNamesKeepTheirSpacesAndTheChosenModuleWins) {
  // IB devices found, but NCCL_NET=Socket (or a plugin) chose another module: its NICs are reported.
  std::istringstream log(
      "h:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>\n"
      "h:1:1 [0] NCCL INFO NET/Socket : Using [0]ib0:10.0.0.1<0>\r\n"
      "h:1:1 [0] NCCL INFO Using network Socket\n");
  const NcclTransport t = parse_nccl_debug_log(log);
  EXPECT_EQ(t.network, "Socket");
  ASSERT_EQ(t.nics.size(), 1u);
  EXPECT_EQ(t.nics[0], "ib0:10.0.0.1<0>");
  std::istringstream efa("h:1:1 [0] NCCL INFO Using network AWS Libfabric\n");
  EXPECT_EQ(parse_nccl_debug_log(efa).network, "AWS Libfabric");
  std::istringstream none("NCCL version 2.28.3+cuda13.0\n");
  EXPECT_EQ(parse_nccl_debug_log(none).network, "");
}

TEST(NcclTransport, FlagsALinkClassFarUnderItsExpectedRate) {
  // A 400 Gb/s NIC negotiated at 100 Gb/s: all-reduce bus bandwidth 11 GB/s where 48 is expected.
  std::vector<gpu::CollectiveSample> s;
  for (double bytes = 1 << 20; bytes <= (1 << 30); bytes *= 4) {
    s.push_back({"all_reduce", 16, bytes, 0, 0, std::min(11.0, bytes / 1e7), 0});
    s.push_back({"all_gather", 16, bytes, 0, 0, std::min(46.0, bytes / 1e7), 0});
  }
  const auto issues = link_rate_issues(s, 48.0, 0.15, 64e6, "inter-node (IB)");
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_NE(issues[0].find("all_reduce over 16 GPUs"), std::string::npos);
  EXPECT_NE(issues[0].find("77% under"), std::string::npos);
  EXPECT_TRUE(link_rate_issues(s, 0.0, 0.15, 64e6, "x").empty());
}

TEST(NcclTransport, ARealNccl228LogFromTheH200Machine) {
  // Written by `calibrate --across-nodes` under mpirun on the one-GPU H200 machine (no IB device:
  // NCCL picks sockets over eth0, and its NET/IB line carries only an "[RO]" flag).
  std::ifstream log(kData + "/nccl/h200-one-gpu-socket.log");
  ASSERT_TRUE(log.good());
  const NcclTransport t = parse_nccl_debug_log(log);
  EXPECT_EQ(t.network, "Socket");
  ASSERT_EQ(t.nics.size(), 1u);
  EXPECT_EQ(t.nics[0], "eth0:192.0.2.2<0>");
  EXPECT_FALSE(socket_fallback_error(t, 1, "rank 0").has_value());
  EXPECT_TRUE(socket_fallback_error(t, 4, "rank 0").has_value());
}

TEST(GpuLinks, ReadsTheMatrixNvidiaSmiPrintedOnTheTwoH200Machine) {
  // `nvidia-smi topo -m` from the nvidia-h200-x2 machine, colour codes and all: GPU0 and GPU1
  // joined by 18 bonded NVLinks; the CPU and NUMA columns are not GPUs.
  std::ifstream in(kData + "/nvidia-smi/h200-x2-topo.txt");
  ASSERT_TRUE(in);
  std::stringstream text;
  text << in.rdbuf();
  const GpuLinks links = parse_topo_matrix(text.str());
  ASSERT_EQ(links.size(), 1u);
  EXPECT_EQ(links.at({0, 1}), "NV18");
  EXPECT_EQ(describe_link("NV18"), "NVLink x18");
  EXPECT_EQ(describe_link("SYS"), "PCIe (SYS)");
}

TEST(GpuLinks, FourGpusOverPcieAndNoMatrixAtAll) {
  const std::string text =
      "\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\n"
      "GPU0\t X \tPIX\tSYS\tSYS\t0-15\n"
      "GPU1\tPIX\t X \tSYS\tSYS\t0-15\n"
      "GPU2\tSYS\tSYS\t X \tNODE\t16-31\n"
      "GPU3\tSYS\tSYS\tNODE\t X \t16-31\n\nLegend:\n  X    = Self\n";
  const GpuLinks links = parse_topo_matrix(text);
  EXPECT_EQ(links.size(), 6u);
  EXPECT_EQ(links.at({0, 1}), "PIX");
  EXPECT_EQ(links.at({2, 3}), "NODE");
  EXPECT_EQ(links.at({1, 3}), "SYS");
  EXPECT_TRUE(parse_topo_matrix("No devices were found\n").empty());
}

TEST(ProfileMerge, EachSampleTakesTheMedianOfItsRuns) {
  // Three runs of one part: a recorded H200 calibration, the same with every time 10% longer and
  // with every time 30% longer. Each sample's median is the 10% run's, so every fitted rate (GEMM
  // TFLOP/s, step-kernel GB/s, attention fraction) is the first run's divided by 1.1; the merged
  // profile loads as any other and lists its three runs.
  std::ifstream in(TRAINSIM_RUNS "/2026-11-29-run1.json");
  ASSERT_TRUE(in);
  const nlohmann::json a = nlohmann::json::parse(in);
  auto slower = [&](double f) {
    nlohmann::json p = a;
    for (auto& [dtype, rows] : p["gpu"]["gemm_tflops"].items())
      if (dtype != "columns")
        for (auto& r : rows) r[3] = r[3].get<double>() / f;
    auto& raw = p["measurements"];
    for (auto& k : raw["step_kernels"]) k["time_us"] = k["time_us"].get<double>() * f;
    for (auto& x : raw["attention"]) {
      x["fwd_us"] = x["fwd_us"].get<double>() * f;
      x["bwd_us"] = x["bwd_us"].get<double>() * f;
      x["fwd_tflops"] = x["fwd_tflops"].get<double>() / f;
      x["bwd_tflops"] = x["bwd_tflops"].get<double>() / f;
    }
    for (auto& b : raw["bandwidth"]) {
      b["time_us"] = b["time_us"].get<double>() * f;
      b["GBps"] = b["GBps"].get<double>() / f;
    }
    return p;
  };
  const nlohmann::json merged = merge_profiles({slower(1.3), a, slower(1.1)}, "h200-merged", "test", "2026-11-29");
  const HardwareProfile one = parse_hardware_profile(a.dump(), "run1.json", kProfiles);
  const HardwareProfile m = parse_hardware_profile(merged.dump(), "merged.json", kProfiles);
  ASSERT_EQ(m.gemm.at("bf16").size(), one.gemm.at("bf16").size());
  for (std::size_t i = 0; i < one.gemm.at("bf16").size(); i += 37)
    EXPECT_NEAR(m.gemm.at("bf16")[i].tflops, one.gemm.at("bf16")[i].tflops / 1.1, 1e-9 * one.gemm.at("bf16")[i].tflops) << i;
  ASSERT_EQ(m.memory_kernels.size(), one.memory_kernels.size());
  for (const auto& [kernel, points] : one.memory_kernels)
    for (std::size_t i = 0; i < points.size(); ++i)
      EXPECT_NEAR(m.memory_kernels.at(kernel)[i].GBps, points[i].GBps / 1.1, 1e-9 * points[i].GBps) << kernel;
  ASSERT_EQ(m.attention.size(), one.attention.size());
  EXPECT_NEAR(m.attention[0].fwd_fraction, one.attention[0].fwd_fraction / 1.1, 1e-9);
  EXPECT_NEAR(m.attention[0].bwd_fraction, one.attention[0].bwd_fraction / 1.1, 1e-9);
  EXPECT_EQ(m.provenance.merged_runs, 3);
  EXPECT_EQ(merged["provenance"]["merged_from"].size(), 3u);
  // The cards the runs were measured on: each named once, in the order the runs first name them
  // (runs from before cards were named add none).
  nlohmann::json on_a = a, on_b = slower(1.1), unnamed = slower(1.3);
  on_a["provenance"]["device_uuids"] = {"GPU-a"};
  on_b["provenance"]["device_uuids"] = {"GPU-b", "GPU-a"};
  const nlohmann::json cards = merge_profiles({on_a, unnamed, on_b}, "h200-merged", "test", "2026-11-29");
  EXPECT_EQ(cards["provenance"]["device_uuids"], nlohmann::json({"GPU-a", "GPU-b"}));
  EXPECT_EQ(parse_hardware_profile(cards.dump(), "merged.json", kProfiles).provenance.device_uuids,
            (std::vector<std::string>{"GPU-a", "GPU-b"}));
  EXPECT_FALSE(merged["provenance"].contains("device_uuids"));
}

// A card as calibrate describes an H100 (its UUID set by each test).
static gpu::DeviceInfo h100_card() {
  gpu::DeviceInfo dev;
  dev.name = "NVIDIA H100 80GB HBM3";
  dev.driver = "580.159.04";
  dev.cuda_runtime = "13.0";
  dev.nccl = "2.28.3";
  return dev;
}

TEST(AttentionTable, RunsMergeByTheirPerShapeMedianAndReplaceTheProfilesTable) {
  // Three cards' runs of one GPT shape (b 1, 32 heads of 80, 2,048 tokens, dropout): its forward
  // FLOP count is 4 b h s^2 d = 4 * 32 * 2048^2 * 80 = 42.95 GFLOP, the backward twice that. Times
  // 600, 540 and 560 us forward take the median 560 us, so 42.95e9 / 560e-6 = 76.7 TFLOP/s; the
  // backward 950, 1000 and 940 us take 950. A shape only the second run has keeps its own times.
  const double flops = 4.0 * 32 * 2048.0 * 2048 * 80;
  auto sample = [&](int b, double f_us, double b_us) {
    gpu::AttentionSample s{b, 32, 2048, 80, f_us, b_us, b * flops / (f_us * 1e6), 2 * b * flops / (b_us * 1e6)};
    s.kv_group = 1;
    s.dropout = true;
    return s;
  };
  gpu::DeviceInfo dev = h100_card();
  std::vector<nlohmann::json> runs;
  std::vector<std::vector<gpu::AttentionSample>> samples;
  const std::vector<std::vector<gpu::AttentionSample>> made = {
      {sample(1, 600, 950)}, {sample(1, 540, 1000), sample(2, 1050, 1850)}, {sample(1, 560, 940)}};
  for (std::size_t i = 0; i < made.size(); ++i) {
    dev.uuids = {"GPU-card" + std::to_string(i)};
    runs.push_back(calib::attention_run_json(made[i], dev, "calibrate attention-table --out r.json", "2026-12-07"));
    samples.push_back(calib::attention_run_samples(runs.back(), "run" + std::to_string(i)));
  }
  const auto merged = calib::merge_attention_runs(samples);
  ASSERT_EQ(merged.size(), 2u);
  EXPECT_DOUBLE_EQ(merged[0].fwd_us, 560);
  EXPECT_DOUBLE_EQ(merged[0].bwd_us, 950);
  EXPECT_NEAR(merged[0].fwd_tflops, flops / 560e6, 1e-9);
  EXPECT_NEAR(merged[0].bwd_tflops, 2 * flops / 950e6, 1e-9);
  EXPECT_EQ(merged[1].batch, 2);
  EXPECT_DOUBLE_EQ(merged[1].fwd_us, 1050);

  std::ifstream in(kProfiles + "/h100-sxm.json");
  nlohmann::json profile = nlohmann::json::parse(in);
  calib::set_attention_table(profile, merged, runs, "each shape after 300 ms idle", "calibrate attention-table --into p.json",
                             "2026-12-07");
  const double peak = profile["gpu"]["peak_tflops"]["bf16"].get<double>();
  const auto& rows = profile["gpu"]["attention"]["table"]["rows"];
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0][0].get<int>(), 32);  // batch x heads
  EXPECT_NEAR(rows[0][5].get<double>(), flops / 560e6 / peak, 1e-12);
  EXPECT_EQ(profile["measurements"]["attention"].size(), 2u);
  EXPECT_EQ(profile["gpu"]["attention"]["provenance"]["merged_from"].size(), 3u);
  const HardwareProfile hp = parse_hardware_profile(profile.dump(), "h100-sxm.json", kProfiles);
  ASSERT_EQ(hp.attention.size(), 2u);
  EXPECT_NEAR(hp.attention[0].fwd_fraction, flops / 560e6 / peak, 1e-12);

  // What is not a run is refused, naming the file and the sample.
  EXPECT_THROW(calib::attention_run_samples(nlohmann::json::object(), "x.json"), InputError);
  nlohmann::json bad = runs[0];
  bad["attention_run"][0]["fwd_us"] = -1;
  try {
    calib::attention_run_samples(bad, "bad.json");
    ADD_FAILURE() << "a negative time was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.json: attention_run[0]"), std::string::npos) << e.what();
  }
  bad = runs[0];
  bad["provenance"]["source"] = "datasheet";
  EXPECT_THROW(calib::attention_run_samples(bad, "bad.json"), InputError);
}

TEST(AttentionTable, TheH100sTableIsItsTwoRecordedRunsMedians) {
  // models/hardware/h100-sxm.json's gpu.attention and measurements.attention are what
  // `calibrate attention-table --into` makes of the two runs recorded in
  // calibrate/records/2026-12-07-session-58-attention-table/, number for number.
  const std::string dir = std::string(TRAINSIM_SOURCE_DIR) + "/calibrate/records/2026-12-07-session-58-attention-table/";
  std::vector<std::vector<gpu::AttentionSample>> samples;
  for (const char* f : {"h100-sxm-run1.json", "h100-sxm-run2.json"}) {
    std::ifstream in(dir + f);
    ASSERT_TRUE(in) << f;
    samples.push_back(calib::attention_run_samples(nlohmann::json::parse(in), f));
  }
  const auto merged = calib::merge_attention_runs(samples);
  std::ifstream pin(kProfiles + "/h100-sxm.json");
  nlohmann::json profile = nlohmann::json::parse(pin);
  nlohmann::json attention = profile["gpu"]["attention"];
  ASSERT_TRUE(attention.contains("provenance"));
  EXPECT_EQ(attention["provenance"]["merged_from"].size(), 2u);
  attention.erase("provenance");
  EXPECT_EQ(attention, calib::attention_json(merged, profile["gpu"]["peak_tflops"]["bf16"].get<double>()));
  EXPECT_EQ(profile["measurements"]["attention"], calib::attention_samples_json(merged));
}

TEST(KernelTable, RunsMergeByTheirPerShapeMedianAndReplaceTheProfilesTable) {
  // The dropout-residual backward at 8,192 tokens of a 768-wide GPT layer moves 7 bytes an element
  // (the upstream gradient read, the 1-byte mask read, the gradient written, the gradient read
  // again for the bias gradient: 2 + 1 + 2 + 2), 7 * 8192 * 768 = 44,040,192 bytes. Times 60, 52
  // and 56 us take the median 56 us: 44,040,192 / 56e-6 = 786.4 GB/s, and the cost model prices
  // that op at exactly 56 us again. The 4,096-token shape only the second run has keeps its 30 us.
  auto sample = [](int tokens, double us) {
    gpu::KernelSample s;
    s.kernel = "dropout_residual.bwd";
    s.tokens = tokens, s.hidden = 768, s.ffn = 3072, s.vocab = 50257, s.heads = 12, s.seq = 2048;
    s.time_us = us;
    return s;
  };
  gpu::DeviceInfo dev = h100_card();
  std::vector<nlohmann::json> runs;
  std::vector<std::vector<gpu::KernelSample>> samples;
  const std::vector<std::vector<gpu::KernelSample>> made = {{sample(8192, 60)}, {sample(8192, 52), sample(4096, 30)}, {sample(8192, 56)}};
  for (std::size_t i = 0; i < made.size(); ++i) {
    dev.uuids = {"GPU-card" + std::to_string(i)};
    runs.push_back(calib::kernel_run_json(made[i], dev, "calibrate kernel-table --out r.json", "2026-12-07"));
    samples.push_back(calib::kernel_run_samples(runs.back(), "run" + std::to_string(i)));
  }
  const auto merged = calib::merge_kernel_runs(samples);
  ASSERT_EQ(merged.size(), 2u);
  EXPECT_DOUBLE_EQ(merged[0].time_us, 56);
  EXPECT_EQ(merged[1].tokens, 4096);
  EXPECT_DOUBLE_EQ(merged[1].time_us, 30);

  std::ifstream in(kProfiles + "/h100-sxm.json");
  nlohmann::json profile = nlohmann::json::parse(in);
  calib::set_kernel_table(profile, merged, runs, "ten calls back to back", "calibrate kernel-table --into p.json", "2026-12-07");
  const auto& mk = profile["gpu"]["memory_kernels"];
  ASSERT_EQ(mk.size(), 2u);  // the table replaced: this kernel's rows and the provenance
  const auto& rows = mk["dropout_residual.bwd"];
  ASSERT_EQ(rows.size(), 2u);
  const double bytes = 7.0 * 8192 * 768;
  EXPECT_DOUBLE_EQ(rows[0][0].get<double>(), bytes);
  EXPECT_NEAR(rows[0][1].get<double>(), bytes / 56e3, 1e-9);
  EXPECT_EQ(rows[0][2].get<int>(), 768);
  EXPECT_EQ(mk["provenance"]["merged_from"].size(), 3u);
  EXPECT_EQ(mk["provenance"]["device_uuids"].size(), 3u);
  EXPECT_EQ(profile["measurements"]["step_kernels"].size(), 2u);
  const HardwareProfile hp = parse_hardware_profile(profile.dump(), "h100-sxm.json", kProfiles);
  ASSERT_EQ(hp.memory_kernels.size(), 1u);
  EXPECT_NEAR(CostModel(hp, Precision::bf16).kernel_time_s("dropout_residual.bwd", bytes, 768), 56e-6, 1e-12);

  // What is not a run is refused, naming the file and the sample.
  EXPECT_THROW(calib::kernel_run_samples(nlohmann::json::object(), "x.json"), InputError);
  EXPECT_THROW(calib::attention_run_samples(runs[0], "x.json"), InputError);  // a kernel run is not an attention run
  nlohmann::json bad = runs[0];
  bad["kernel_run"][0]["time_us"] = 0;
  try {
    calib::kernel_run_samples(bad, "bad.json");
    ADD_FAILURE() << "a zero time was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.json: kernel_run[0]"), std::string::npos) << e.what();
  }
  bad = runs[0];
  bad["kernel_run"][0]["tokens"] = 3000;  // not whole sequences of 2,048
  EXPECT_THROW(calib::kernel_run_samples(bad, "bad.json"), InputError);
  bad = runs[0];
  bad["kernel_run"][0].erase("llama");
  EXPECT_THROW(calib::kernel_run_samples(bad, "bad.json"), InputError);
  bad = runs[0];
  bad["provenance"]["source"] = "datasheet";
  EXPECT_THROW(calib::kernel_run_samples(bad, "bad.json"), InputError);
}

TEST(KernelTable, ARunRecordsHowItWasTimedAndOnlyRunsTimedAlikeMakeATable) {
  gpu::KernelSample s;
  s.kernel = "layernorm", s.tokens = 2048, s.hidden = 768, s.ffn = 3072, s.vocab = 50257, s.heads = 12, s.seq = 2048, s.time_us = 9;
  const gpu::DeviceInfo dev = h100_card();
  const nlohmann::json evicted = calib::kernel_run_json({s}, dev, "calibrate kernel-table --out e.json --timing evicted", "2026-12-07",
                                                        gpu::StepKernelTiming::evicted, gpu::StepKernelShapes::profile);
  EXPECT_EQ(evicted["provenance"]["method"], (nlohmann::json{{"timing", "evicted"}, {"shapes", "profile"}}));
  // Every timing's name reads back as itself.
  for (auto t : {gpu::StepKernelTiming::burst, gpu::StepKernelTiming::single, gpu::StepKernelTiming::evicted,
                 gpu::StepKernelTiming::after_compute, gpu::StepKernelTiming::under_load})
    EXPECT_EQ(calib::parse_kernel_timing(calib::kernel_timing_name(t), "t"), t);
  EXPECT_THROW(calib::parse_kernel_timing("fast", "t"), InputError);

  // The rule says how the runs were timed; a run with no method was timed in bursts.
  const std::string rule = calib::kernel_table_rule({evicted, evicted}, {"a.json", "b.json"});
  EXPECT_NE(rule.find("after a write over twice the L2 cache"), std::string::npos) << rule;
  EXPECT_NE(rule.find("--timing evicted"), std::string::npos) << rule;
  const nlohmann::json burst = calib::kernel_run_json({s}, dev, "calibrate kernel-table --out b.json", "2026-12-07");
  EXPECT_NE(calib::kernel_table_rule({burst}, {"b.json"}).find("ten calls back to back"), std::string::npos);
  // Runs timed two ways are refused, naming the one that differs from the first.
  try {
    calib::kernel_table_rule({burst, burst, evicted}, {"b1.json", "b2.json", "e.json"});
    ADD_FAILURE() << "runs timed two ways made one table";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("e.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("\"evicted\""), std::string::npos) << e.what();
  }
  nlohmann::json odd = evicted;
  odd["provenance"]["method"]["timing"] = "warm";
  EXPECT_THROW(calib::kernel_table_rule({odd}, {"o.json"}), InputError);
}

TEST(KernelTable, TheMeasuredProfilesTablesAreTheirRecordedSamplesRates) {
  // gpu.memory_kernels of each measured profile is what memory_kernels_json makes of its own raw
  // record (measurements.step_kernels): the bytes the workload model counts for each op over the
  // sample's time, row for row.
  for (const char* name : {"h100-sxm", "h200-sxm"}) {
    std::ifstream in(kProfiles + "/" + name + ".json");
    const nlohmann::json p = nlohmann::json::parse(in);
    std::vector<gpu::KernelSample> samples;
    for (const auto& k : p["measurements"]["step_kernels"]) {
      gpu::KernelSample s;
      s.kernel = k["kernel"], s.tokens = k["tokens"], s.hidden = k["hidden"], s.ffn = k["ffn"], s.vocab = k["vocab"];
      s.heads = k["heads"], s.seq = k["seq"], s.kv_heads = k["kv_heads"], s.llama = k["llama"], s.time_us = k["time_us"];
      samples.push_back(s);
    }
    nlohmann::json table = p["gpu"]["memory_kernels"];
    table.erase("provenance");
    EXPECT_EQ(table, calib::memory_kernels_json(samples)) << name;
  }
}

TEST(ProfileWriter, RuntimeMemoryIsWrittenAsMeasuredAndKeptWhereAOneGpuRunCannotMeasureIt) {
  // A one-GPU run measures the context only: the communicators' figures stay from the base
  // profile and the section says so; with two GPUs every figure is this run's.
  std::ifstream in(TRAINSIM_RUNS "/2026-11-29-run1.json"), bin(kProfiles + "/h200-sxm.json");
  ASSERT_TRUE(in && bin);
  const nlohmann::json run = nlohmann::json::parse(in), base = nlohmann::json::parse(bin);
  gpu::Measurements m = single_gpu_measurements(run);
  m.context_bytes = 6.5e8;
  const nlohmann::json one = make_profile(m, base, "h200-test", "test", "2026-12-01");
  const HardwareProfile p1 = parse_hardware_profile(one.dump(), "one.json", kProfiles);
  EXPECT_EQ(p1.context_bytes, 6.5e8);
  EXPECT_EQ(p1.nccl_first_communicator_bytes, base["runtime_memory"]["nccl_first_communicator_bytes"].get<double>());
  EXPECT_NE(p1.runtime_memory_provenance.rule.find("kept from the base profile"), std::string::npos);
  m.nccl_comm_gpus = 2;
  m.nccl_first_comm_bytes = 9e8;
  m.nccl_further_comm_bytes = 4e8;
  const HardwareProfile p2 = parse_hardware_profile(make_profile(m, base, "h200-test", "test", "2026-12-01").dump(), "two.json", kProfiles);
  EXPECT_EQ(p2.nccl_first_communicator_bytes, 9e8);
  EXPECT_EQ(p2.nccl_further_communicator_bytes, 4e8);
  EXPECT_EQ(p2.runtime_memory_provenance.source, "measured");
  // No context measured (an older run): the base profile's section is left as it was.
  m.context_bytes = -1;
  const nlohmann::json old = make_profile(m, base, "h200-test", "test", "2026-12-01");
  EXPECT_EQ(old["runtime_memory"], base["runtime_memory"]);
}

TEST(ProfileWriter, TheAccumulatingWeightGradientTableIsWrittenBesideTheDtypes) {
  // calibrate times the weight-gradient shapes again accumulating into fp32: the profile gets them
  // as gpu.gemm_tflops.bf16_accumulate_fp32, read back as such, and not as a dtype's ceiling
  // (gpu.measured_tflops keeps bf16's best), and a merge takes each shape's median like any other.
  std::ifstream in(TRAINSIM_RUNS "/2026-11-29-run1.json"), bin(kProfiles + "/h200-sxm.json");
  ASSERT_TRUE(in && bin);
  const nlohmann::json run = nlohmann::json::parse(in), base = nlohmann::json::parse(bin);
  gpu::Measurements m = single_gpu_measurements(run);
  const std::size_t bf16_rows = run["gpu"]["gemm_tflops"]["bf16"].size();
  m.gemm.push_back({gpu::kBf16AccumulateFp32, 3072, 3072, 2048, 2.0 * 3072 * 3072 * 2048 / 5e8, 500});
  m.gemm.push_back({gpu::kBf16AccumulateFp32, 8192, 3072, 2048, 2.0 * 8192 * 3072 * 2048 / 9e8, 900});
  const nlohmann::json p = make_profile(m, base, "h200-test", "test", "2026-12-06");
  EXPECT_EQ(p["gpu"]["gemm_tflops"][kGemmAccumulateFp32].size(), 2u);
  EXPECT_EQ(p["gpu"]["gemm_tflops"]["bf16"].size(), bf16_rows);
  EXPECT_FALSE(p["gpu"]["measured_tflops"].contains(kGemmAccumulateFp32));
  EXPECT_EQ(p["gpu"]["measured_tflops"]["bf16"], run["gpu"]["measured_tflops"]["bf16"]);
  const HardwareProfile hp = parse_hardware_profile(p.dump(), "p.json", kProfiles);
  ASSERT_EQ(hp.gemm.at(kGemmAccumulateFp32).size(), 2u);
  EXPECT_EQ(hp.gemm.at(kGemmAccumulateFp32)[1].tflops, 900);
  nlohmann::json slower = p;
  for (auto& r : slower["gpu"]["gemm_tflops"][kGemmAccumulateFp32]) r[3] = r[3].get<double>() / 2;
  const nlohmann::json merged = merge_profiles({p, slower, p}, "h200-merged", "test", "2026-12-06");
  EXPECT_NEAR(merged["gpu"]["gemm_tflops"][kGemmAccumulateFp32][1][3].get<double>(), 900, 1e-6);
}

TEST(ProfileWriter, TheClockSectionIsKeptFromTheBaseProfile) {
  // calibrate's own run does not measure the element-wise kernels' clock sensitivity (the
  // kernel-mix diagnostic does, beside a clock log): a recalibration on top of a profile that has
  // it keeps it as it was, provenance and all, and so does a merge of such runs.
  std::ifstream in(TRAINSIM_RUNS "/2026-11-29-run1.json"), bin(kProfiles + "/h200-sxm.json");
  ASSERT_TRUE(in && bin);
  const nlohmann::json run = nlohmann::json::parse(in), base = nlohmann::json::parse(bin);
  ASSERT_TRUE(base.contains("clock"));
  const nlohmann::json again = make_profile(single_gpu_measurements(run), base, "h200-test", "test", "2026-12-06");
  EXPECT_EQ(again["clock"], base["clock"]);
  const HardwareProfile p = parse_hardware_profile(again.dump(), "again.json", kProfiles);
  EXPECT_EQ(p.elementwise_clock_sensitivity, base["clock"]["elementwise_sensitivity"].get<double>());
  EXPECT_EQ(p.clock_provenance.reference, base["clock"]["provenance"]["reference"].get<std::string>());
  EXPECT_EQ(merge_profiles({again, again}, "h200-merged", "test", "2026-12-06")["clock"], base["clock"]);
}

TEST(ProfileWriter, AFirstCalibrationOfADerivedPartCarriesWhatOneGpuCannotMeasure) {
  // calibrate --base calibrate/datasheets/h100-sxm.json on one GPU, as the H100 was first measured:
  // that file derives its GPU tables from h200-sxm and has no interference or runtime memory of its
  // own. Without them the written profile would price GEMMs beside NCCL with no slowdown at all;
  // with carry_unmeasured they are h200-sxm's, marked derived from it, the context this run's.
  std::ifstream in(TRAINSIM_RUNS "/2026-11-29-run1.json"), din(std::string(TRAINSIM_SOURCE_DIR) + "/calibrate/datasheets/h100-sxm.json"),
      hin(kProfiles + "/h200-sxm.json");
  ASSERT_TRUE(in && din && hin);
  const nlohmann::json run = nlohmann::json::parse(in), datasheet = nlohmann::json::parse(din), h200 = nlohmann::json::parse(hin);
  ASSERT_FALSE(datasheet.contains("interference"));
  ASSERT_FALSE(datasheet.contains("runtime_memory"));
  gpu::Measurements m = single_gpu_measurements(run);
  m.context_bytes = 6.9e8;
  m.interference_slowdown = -1;  // one GPU: not measured
  m.device.memory_bytes = 85017493504.0;  // what CUDA reported on the H100 (the run's tables are an H200's)
  const nlohmann::json base = carry_unmeasured(datasheet, h200);
  const HardwareProfile p = parse_hardware_profile(make_profile(m, base, "h100-test", "test", "2026-12-05").dump(), "p.json", kProfiles);
  // CUDA's total is the profile's memory; the datasheet's figure (nvidia-smi's) is kept beside it.
  EXPECT_EQ(p.memory_bytes, 85017493504.0);
  EXPECT_EQ(p.datasheet_memory_bytes, datasheet["gpu"]["memory_bytes"].get<double>());
  const HardwareProfile origin = load_hardware_profile("h200-sxm", kProfiles);
  EXPECT_EQ(p.comm_compute_interference, origin.comm_compute_interference);
  EXPECT_GT(p.comm_compute_interference, 0);
  EXPECT_EQ(p.context_bytes, 6.9e8);
  EXPECT_EQ(p.nccl_first_communicator_bytes, origin.nccl_first_communicator_bytes);
  EXPECT_NE(p.runtime_memory_provenance.rule.find("NCCL communicators kept from h200-sxm, measured"), std::string::npos)
      << p.runtime_memory_provenance.rule;
  // The next one-GPU calibration over this profile still names where the communicators came from,
  // not the run that kept them.
  const nlohmann::json first = make_profile(m, base, "h100-test", "test", "2026-12-05");
  const HardwareProfile again = parse_hardware_profile(make_profile(m, first, "h100-test", "test", "2026-12-06").dump(), "p.json", kProfiles);
  EXPECT_EQ(again.nccl_first_communicator_bytes, origin.nccl_first_communicator_bytes);
  EXPECT_EQ(again.datasheet_memory_bytes, p.datasheet_memory_bytes);  // not the measured profile's CUDA total
  EXPECT_NE(again.runtime_memory_provenance.rule.find("NCCL communicators kept from h200-sxm, measured"), std::string::npos)
      << again.runtime_memory_provenance.rule;
  // The shipped h100-sxm, whose rule was written out by hand, keeps its clause the same way.
  std::ifstream sin(kProfiles + "/h100-sxm.json");
  const nlohmann::json shipped = nlohmann::json::parse(sin);
  const HardwareProfile next = parse_hardware_profile(make_profile(m, shipped, "h100-test", "test", "2026-12-06").dump(), "p.json", kProfiles);
  EXPECT_NE(next.runtime_memory_provenance.rule.find("NCCL communicators carried over in bytes from h200-sxm"), std::string::npos)
      << next.runtime_memory_provenance.rule;
  // What the run measures replaces what was carried. The point-to-point figure is written only
  // where it was measured; without it pipeline transfers take the all-reduce's.
  m.interference_slowdown = 0.2;
  const HardwareProfile measured = parse_hardware_profile(make_profile(m, base, "h100-test", "test", "2026-12-05").dump(), "p.json", kProfiles);
  EXPECT_EQ(measured.comm_compute_interference, 0.2);
  EXPECT_EQ(measured.p2p_compute_interference, -1);
  EXPECT_EQ(measured.pipeline_transfer_interference(), 0.2);
  m.p2p_interference_slowdown = 0.05;
  const HardwareProfile with_p2p = parse_hardware_profile(make_profile(m, base, "h100-test", "test", "2026-12-05").dump(), "p.json", kProfiles);
  EXPECT_EQ(with_p2p.comm_compute_interference, 0.2);
  EXPECT_EQ(with_p2p.pipeline_transfer_interference(), 0.05);
  // A base that derives from nothing is left as it is.
  EXPECT_EQ(carry_unmeasured(h200, h200), h200);
}

// Fits and nccl-tests import, on the CPU.
#include <gtest/gtest.h>

#include <cmath>

#include "alpha_beta_fit.h"
#include "input_error.h"
#include "nccl_tests_import.h"

using namespace trainsim;
using namespace trainsim::calib;

namespace {
const std::string kData = TRAINSIM_TEST_DATA;
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

TEST(NcclTestsImport, TextLog) {
  // DGX H100 all_reduce_perf sample (fixture built from NVIDIA/dgxc-benchmarking's README).
  const auto tables = import_nccl_tests_file(kData + "/nccl-tests-allreduce-dgxh100.txt");
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
  EXPECT_THROW(parse_nccl_tests_text("nothing here\n", "empty.txt"), InputError);
  EXPECT_THROW(parse_nccl_tests_json("{\"version\": 2}", "x.json"), InputError);
}

// Per-GPU speeds: the counter-based normal draws and the named stragglers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "stragglers.h"

using namespace trainsim;

TEST(Stragglers, WithoutASpecEveryGpuRunsAtNominalSpeed) {
  const std::vector<double> v = gpu_speeds(StragglerSpec{}, 16);
  ASSERT_EQ(v.size(), 16u);
  for (double x : v) EXPECT_EQ(x, 1.0);
}

TEST(Stragglers, AGpuKeepsItsSpeedAsTheClusterGrows) {
  StragglerSpec s;
  s.given = true;
  s.speed_stdev = 0.02;
  const std::vector<double> small = gpu_speeds(s, 64), large = gpu_speeds(s, 512);
  EXPECT_TRUE(std::equal(small.begin(), small.end(), large.begin()));
  EXPECT_EQ(gpu_speeds(s, 512), large);  // deterministic
  s.seed = 2;
  EXPECT_NE(gpu_speeds(s, 64), small);
}

TEST(Stragglers, DrawsHaveTheGivenMeanAndSpread) {
  // 200,000 draws of 1 + sigma z: the sample mean's standard error is sigma / sqrt(n) = 4.5e-5 at
  // sigma 0.02, the sample standard deviation's relative one 1 / sqrt(2n) = 0.16%.
  StragglerSpec s;
  s.given = true;
  s.speed_stdev = 0.02;
  const int n = 200000;
  const std::vector<double> v = gpu_speeds(s, n);
  double sum = 0, sq = 0;
  for (double x : v) sum += x;
  const double mean = sum / n;
  for (double x : v) sq += (x - mean) * (x - mean);
  const double sd = std::sqrt(sq / (n - 1));
  EXPECT_NEAR(mean, 1.0, 5 * 0.02 / std::sqrt(n));
  EXPECT_NEAR(sd / 0.02, 1.0, 5 / std::sqrt(2.0 * n));
}

TEST(Stragglers, TheSlowestOfManyFollowsTheExtremeValueLaw) {
  // The largest of 1,024 standard normals has mean 3.2482 and standard deviation 0.3508 (the
  // integral of x n phi(x) Phi(x)^(n-1), evaluated numerically); averaged over 400 seeds the
  // slowest of 1,024 GPUs lies 3.2482 sigma below nominal, give or take 0.3508 / sqrt(400) = 0.018.
  StragglerSpec s;
  s.given = true;
  s.speed_stdev = 0.01;
  double sum = 0;
  for (int seed = 0; seed < 400; ++seed) {
    s.seed = static_cast<std::uint64_t>(seed);
    const std::vector<double> v = gpu_speeds(s, 1024);
    sum += (1 - *std::min_element(v.begin(), v.end())) / s.speed_stdev;
  }
  EXPECT_NEAR(sum / 400, 3.2482, 4 * 0.3508 / std::sqrt(400.0));
}

TEST(Stragglers, NamedGpusTakeTheirGivenSpeed) {
  StragglerSpec s;
  s.given = true;
  s.speed_stdev = 0.02;
  s.gpus = {{5, 0.5}, {100, 0.25}};
  const std::vector<double> spread_only = [&] {
    StragglerSpec t = s;
    t.gpus.clear();
    return gpu_speeds(t, 64);
  }();
  const std::vector<double> v = gpu_speeds(s, 64);  // GPU 100 is not in a 64-GPU cluster
  for (int g = 0; g < 64; ++g) EXPECT_EQ(v[g], g == 5 ? 0.5 : spread_only[g]) << g;
  EXPECT_EQ(gpu_speeds(s, 128)[100], 0.25);
}

TEST(Stragglers, SlowNicsAreNumberedByNodeAndIndex) {
  StragglerSpec s;
  s.given = true;
  EXPECT_TRUE(nic_speeds(s, 4, 8).empty());  // no slow NIC: every NIC at its rate
  s.nics = {{1, 3, 0.5}, {9, 0, 0.25}};      // node 9 is not in a 4-node cluster
  const std::vector<double> v = nic_speeds(s, 4, 8);
  ASSERT_EQ(v.size(), 32u);
  for (int n = 0; n < 32; ++n) EXPECT_EQ(v[n], n == 1 * 8 + 3 ? 0.5 : 1.0) << n;
  s.nics = {{9, 0, 0.25}};
  EXPECT_TRUE(nic_speeds(s, 4, 8).empty());
}

// The clock a mix of kernels holds under the power limit (models/power_model.h), against numbers
// worked by hand from a small made-up power model.
#include <gtest/gtest.h>

#include "power_model.h"

using namespace trainsim;

namespace {

// Memory-bound kernels 500 W; GEMMs 700 W at 200 TFLOP/s and 1,000 W at 800; attention 600 W
// (one pair: at every rate); a 700 W limit; a capped mix holds 3,500 - 2 W MHz; 1,980 MHz at most.
HardwareProfile made_up() {
  HardwareProfile hp;
  hp.max_sm_mhz = 1980;
  hp.clock_power.limit_w = 700;
  hp.clock_power.memory_bound_w = 500;
  hp.clock_power.gemm_w = {{200, 700}, {800, 1000}};
  hp.clock_power.attention_w = {{100, 600}};
  hp.clock_power.line_mhz = 3500;
  hp.clock_power.line_mhz_per_w = -2;
  return hp;
}

}  // namespace

TEST(PowerModel, AMixDrawsItsKernelsPowerWeightedByTheirTime) {
  const HardwareProfile hp = made_up();
  // Memory-bound kernels alone: their power.
  EXPECT_DOUBLE_EQ(mix_power_w(hp, {0, 0, 0, 0, 1.0}, Family::llama), 500);
  // GEMMs alone at 500 TFLOP/s (1 s, 5e14 FLOP), halfway between the pairs: 850 W.
  EXPECT_DOUBLE_EQ(mix_power_w(hp, {1.0, 5e14, 0, 0, 0}, Family::llama), 850);
  // Rates outside the pairs take the nearest pair's power.
  EXPECT_DOUBLE_EQ(mix_power_w(hp, {1.0, 1e14, 0, 0, 0}, Family::llama), 700);
  EXPECT_DOUBLE_EQ(mix_power_w(hp, {1.0, 9e14, 0, 0, 0}, Family::llama), 1000);
  // 2 s of those GEMMs, 1 s of attention, 1 s of memory-bound kernels: (2 x 850 + 600 + 500) / 4.
  EXPECT_DOUBLE_EQ(mix_power_w(hp, {2.0, 1e15, 1.0, 5e13, 1.0}, Family::llama), 700);
  // An empty mix, or a profile without a power model: no estimate.
  EXPECT_EQ(mix_power_w(hp, {}, Family::llama), 0);
  EXPECT_EQ(mix_power_w(HardwareProfile{}, {1.0, 5e14, 0, 0, 0}, Family::llama), 0);
}

TEST(PowerModel, OnlyAMixAboveTheLimitHoldsTheClockDown) {
  const HardwareProfile hp = made_up();
  // 700 W, at the limit: the highest clock.
  EXPECT_EQ(held_clock_mhz(hp, {2.0, 1e15, 1.0, 5e13, 1.0}, Family::llama), 1980);
  // 850 W: the line, 3,500 - 2 x 850 = 1,800 MHz.
  EXPECT_DOUBLE_EQ(held_clock_mhz(hp, {1.0, 5e14, 0, 0, 0}, Family::llama), 1800);
  // 705 W (210 TFLOP/s: 700 + 300 x 10 / 600), just above the limit: the line's 2,090 MHz is
  // more than the part runs, so the highest clock.
  EXPECT_EQ(held_clock_mhz(hp, {1.0, 2.1e14, 0, 0, 0}, Family::llama), 1980);
  // Without a power model every mix runs at the highest clock.
  HardwareProfile none;
  none.max_sm_mhz = 1980;
  EXPECT_EQ(held_clock_mhz(none, {1.0, 8e14, 0, 0, 0}, Family::llama), 1980);
}

TEST(PowerModel, AGptStepsMemoryBoundKernelsDrawTheirOwnPowerWhereMeasured) {
  HardwareProfile hp = made_up();
  // Without a GPT-style figure both families' memory-bound kernels draw the one 500 W.
  EXPECT_DOUBLE_EQ(mix_power_w(hp, {0, 0, 0, 0, 1.0}, Family::gpt), 500);
  hp.clock_power.memory_bound_w_gpt = 420;
  EXPECT_DOUBLE_EQ(mix_power_w(hp, {0, 0, 0, 0, 1.0}, Family::gpt), 420);
  EXPECT_DOUBLE_EQ(mix_power_w(hp, {0, 0, 0, 0, 1.0}, Family::llama), 500);
  // 2 s of GEMMs at 850 W, 1 s of attention at 600 W, 1 s of GPT element-wise kernels at 420 W:
  // (1,700 + 600 + 420) / 4 = 680 W, under the limit (the Llama mix's 700 W sits at it).
  EXPECT_DOUBLE_EQ(mix_power_w(hp, {2.0, 1e15, 1.0, 5e13, 1.0}, Family::gpt), 680);
  // GEMMs at 850 W for 3 s and the GPT kernels for 1 s: (2,550 + 420) / 4 = 742.5 W, over the
  // limit: 3,500 - 2 x 742.5 = 2,015 MHz on the line, more than the part runs; with 6 s of GEMMs,
  // (5,100 + 420) / 7 = 788.57 W: 3,500 - 1,577.14 = 1,922.86 MHz.
  EXPECT_EQ(held_clock_mhz(hp, {3.0, 1.5e15, 0, 0, 1.0}, Family::gpt), 1980);
  EXPECT_NEAR(held_clock_mhz(hp, {6.0, 3e15, 0, 0, 1.0}, Family::gpt), 3500 - 2 * 5520.0 / 7, 1e-9);
}

#pragma once
// The SM clock a step holds under the GPU's power limit, from the time it spends in each kind of
// kernel. Each kind draws its own power at the part's highest clock: memory-bound kernels one power
// for all, GEMMs and attention by their rate (the profile's `clock.power_model`,
// read off the part's kernel-mix sweeps). A step's power at that clock is
// estimated as the time-weighted mean of its kernels'; where that is above the power limit the part
// slows until it is not, and the clock it holds follows the line the sweeps' capped mixes draw
// against the same estimate. On the recorded steps that held the highest clock the estimate runs
// 29-204 W above the power measured (Validation.ThePowerEstimateOfAStepAtTheHighestClockRunsHigh),
// though no kernel of theirs is as short as the launch interval: a step's kernels draw less than the
// sweeps' sustained loads of the same kinds (read inside GPT steps, their element-wise kernels
// draw 335-441 W against the one memory-bound power of 529 W, and their GEMMs up to 134 W less:
// Validation.EachKernelClassDrawsWhatRepeatingItInTheStepAdds), so a step estimated just above the
// limit is predicted below the clock it holds.
#include "hardware_profile.h"

namespace trainsim {

// What a step (or one GPU's share of one) spends on each kind of kernel at the highest clock.
struct KernelMix {
  double gemm_s = 0, gemm_flops = 0;
  double attention_s = 0, attention_flops = 0;
  double memory_bound_s = 0;
};

// The power the mix would draw at the part's highest clock, W: the time-weighted mean of its
// kernels', each GEMM and attention at the power the profile gives their mean rate (interpolated
// between its pairs, held at the ends). 0 for a profile without a power model or an empty mix.
double mix_power_w(const HardwareProfile& hw, const KernelMix& mix);

// The median SM clock the mix holds, MHz: the part's highest clock where its power estimate is
// within the limit (and for a profile without a power model), else the profile's line at that
// estimate, at most the highest clock.
double held_clock_mhz(const HardwareProfile& hw, const KernelMix& mix);

}  // namespace trainsim

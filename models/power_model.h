#pragma once
// The SM clock a step holds under the GPU's power limit, from the time it spends in each kind of
// kernel. Each kind draws its own power at the part's highest clock: memory-bound kernels the power
// of the model family's element-wise kernels, GEMMs and attention by their rate (the profile's `clock.power_model`,
// read off the part's kernel-mix sweeps). A step's power at that clock is
// estimated as the time-weighted mean of its kernels'; where that is above the power limit the part
// slows until it is not, and the clock it holds follows the line the sweeps' capped mixes draw
// against the same estimate. On the recorded steps that held the highest clock the estimate runs
// high, on every step priced with the Llama-style element-wise power and at the median of those
// priced with GPT's own (Validation.ThePowerEstimateOfAStepAtTheHighestClockRunsHigh), though no kernel of theirs is
// as short as the launch interval: a step's kernels draw less than the sweeps' sustained loads of
// the same kinds. Most of that was GPT's element-wise kernels, which draw far less than the
// Llama-style ones (read inside GPT steps: 335-441 W on an H100 against 529 W; swept alone,
// 369-484 W on five H100s and 361-474 W on two H200s, against 497-512 W for Llama-style kernels at
// one shape), so a profile may give a GPT layer's its own power
// (Validation.TheRestOfAGptStepDrawsWhatGptStyleKernelsDrawAlone); the GEMMs in a step still draw
// up to 134 W less than swept alone (Validation.EachKernelClassDrawsWhatRepeatingItInTheStepAdds),
// so a step estimated just above the limit is predicted below the clock it holds.
#include "hardware_profile.h"
#include "model_config.h"

namespace trainsim {

// What a step (or one GPU's share of one) spends on each kind of kernel at the highest clock.
struct KernelMix {
  double gemm_s = 0, gemm_flops = 0;
  double attention_s = 0, attention_flops = 0;
  double memory_bound_s = 0;
};

// The power the mix would draw at the part's highest clock, W: the time-weighted mean of its
// kernels', each GEMM and attention at the power the profile gives their mean rate (interpolated
// between its pairs, held at the ends), the memory-bound kernels at the power of the family's
// element-wise kernels (a GPT model's where the profile measured them, else the Llama-style
// kernels' it was read off). 0 for a profile without a power model or an empty mix.
double mix_power_w(const HardwareProfile& hw, const KernelMix& mix, Family family);

// The power the profile gives a family's memory-bound kernels at the highest clock, W.
double memory_bound_power_w(const HardwareProfile& hw, Family family);

// The median SM clock the mix holds, MHz: the part's highest clock where its power estimate is
// within the limit (and for a profile without a power model), else the profile's line at that
// estimate, at most the highest clock.
double held_clock_mhz(const HardwareProfile& hw, const KernelMix& mix, Family family);

}  // namespace trainsim

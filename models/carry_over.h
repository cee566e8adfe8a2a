#pragma once
// The rule that gives a part nobody could measure here the efficiency tables of a calibrated one.

#include <string>

#include "hardware_profile.h"

namespace trainsim {

// Bytes of the probability matrices (batch x heads x seq x seq) that the measured, unfused attention
// (kernels/attention.cu) moves through device memory in one forward or backward pass.
double attention_score_bytes(const HardwareProfile::AttentionPoint& p, bool backward);

// A rate measured on the base part at `base_rate` (bytes/s or FLOP/s, whichever the caller keeps),
// of which the fraction `memory_share` of the time was spent moving bytes at the base's measured
// device-memory rate, carried to the target: that part at `bandwidth_ratio` (target / base
// datasheet bandwidth), the rest at `core_ratio`.
double carried_rate(double base_rate, double memory_share, double bandwidth_ratio, double core_ratio);

// Fills every table `hp` lacks from `base` by the rule (models/carry_over.cpp). `datasheet_bw` and
// `base_datasheet_bw` are the two parts' vendor memory bandwidths; errors name `where`.
void carry_over(HardwareProfile& hp, const HardwareProfile& base, double datasheet_bw, double base_datasheet_bw,
                const std::string& where);

}  // namespace trainsim

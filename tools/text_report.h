#pragma once
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "evaluation.h"
#include "what_if.h"

namespace trainsim {

std::string format_bytes(double bytes);     // "12.3 GiB"
std::string format_seconds(double s);       // "812 ms", "3.41 s", "16.2 min", "12.5 days"; "never" if infinite
std::string format_count(double x);         // "%.0f", or "-" where infinite
std::string format_energy(double kWh);      // "812 kWh", "3.41 MWh", "1.25 GWh"; "-" if infinite
std::string format_power(double kW);        // "81.6 kW", "1.31 MW"
std::string format_nodes(int n);            // "1 node", "8 nodes"
// The scenario's fabric: "one switch", "fat-tree (non-blocking)", "rail-optimized, 2:1 to the
// spine, 32 nodes to a group of rail switches".
std::string describe_fabric(const Scenario& s);
// Its network: "8 x 200 Gb/s NICs a node, " and the fabric.
std::string describe_network(const Scenario& s);
// Where `nodes` (more than one) sit under one leaf or rail group: "the 8 nodes fit under one group
// of rail switches: their uplinks to the spine carry none of this step's traffic"; else empty (one
// node sends nothing over the network: nothing to say of its fabric).
std::string one_leaf_note(const Scenario& s, int nodes);
// The stage with the highest memory peak against the device: "stage 0 needs 86.8 GiB of 79.6 GiB".
std::string memory_need(const MemoryResult& m);
// One line on the scenario's stragglers for `ev` (slowest GPU, and the step without them where simulated).
std::string straggler_summary(const Scenario& s, const Evaluation& ev);
// Why `more` (on more nodes: the same layout, or each size's best) gives fewer tokens/s than `fewer`: "2 nodes give 65700
// tokens/s, fewer than 267620 on 1 node; DP communication exposed 3.49 s of a 3.99 s step (was
// 4.0 ms)", naming the category whose exposed time grew the most.
std::string why_slower(const Evaluation& fewer, const Evaluation& more);
// Why symmetric mode does not apply, as the reports say it: "<why>, so one GPU per stage cannot
// stand for the rest".
std::string every_gpu_reason(const char* why);

// A line saying that the hardware profile was not measured on its part (derived from datasheets and a
// calibrated part, or datasheet figures alone), so its times are estimates; empty for a measured one.
std::string profile_note(const HardwareProfile& hp);
// A note for a table: the rows (each named by its label, "#3" or "6 nodes") whose step was
// simulated on every GPU, or on one GPU per tensor-parallel group, because one GPU per stage could
// not stand for the rest, by reason; empty when there are none.
std::string every_gpu_note(const std::vector<std::pair<std::string, const Evaluation*>>& rows);
// A terminal summary of one evaluated layout: step time and its exposed breakdown, rates, memory.
void print_evaluation(std::ostream& os, const Scenario& s, const Evaluation& ev);
// `planner what-if`: the step with each part of the hardware faster and slower, and which sets it.
void print_what_if(std::ostream& os, const Scenario& s, const WhatIf& w);
// `planner what-if --search`: the best layout of the space with each part faster and slower.
void print_what_if_search(std::ostream& os, const Scenario& s, const WhatIfSearch& w);

}  // namespace trainsim

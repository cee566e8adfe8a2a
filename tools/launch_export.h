#pragma once
// Turns a layout into what people paste into launch scripts: Megatron-LM arguments, a DeepSpeed
// config, and a torchrun / Slurm command line, with the batch arithmetic spelled out.
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "scenario.h"

namespace trainsim {

struct LaunchExport {
  std::string batch_arithmetic;    // "1536 sequences = 16 DP x 1 micro-batch x 96 accumulation steps"
  std::string megatron_args;       // one argument per line, backslash-continued
  std::string deepspeed_config;    // JSON text
  std::string launch_command;      // Slurm + torchrun
  std::vector<std::string> notes;  // what a framework cannot express
};

// `reliability`, where the scenario has failure rates: the layout's checkpoint interval, exported
// as Megatron-LM's --save-interval.
LaunchExport export_launch(const Scenario& s, const Layout& l, int nodes, const ReliabilityResult* reliability = nullptr);

}  // namespace trainsim

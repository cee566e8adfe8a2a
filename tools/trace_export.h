#pragma once
#include <string>
#include <vector>

#include "layout.h"
#include "step_builder.h"

namespace trainsim {

// Writes a step's timeline as Chrome / Perfetto trace-event JSON (open in ui.perfetto.dev or
// chrome://tracing): one process per GPU, one thread per stream, and above them a process with one
// track, the step's critical path. Writes to a temporary file and renames it, so a failure leaves
// no partial file.
void write_chrome_trace(const sim::StepResult& r, const std::string& path);

// One line on what the trace holds: its slices and GPUs, and where its critical path runs (the
// stages holding most of it) and how much of it is contention.
std::string describe_trace(const sim::StepResult& r, const Layout& l, const std::string& path);

// The GPUs a list such as "0-7,512,1016-1023" names, sorted and without repeats, each below `gpus`
// (the layout's GPU count). Throws InputError naming --trace-gpus for anything else.
std::vector<int> parse_trace_gpus(const std::string& list, int gpus);

// Throws InputError if a GPU of `wanted` was not simulated in `r` (symmetric mode simulates one GPU
// per pipeline stage), naming the ones that were.
void check_traced_gpus(const sim::StepResult& r, const std::vector<int>& wanted);

}  // namespace trainsim

#pragma once
#include <string>

#include "step_builder.h"

namespace trainsim {

// Writes a step's timeline as Chrome / Perfetto trace-event JSON (open in ui.perfetto.dev or
// chrome://tracing): one process per GPU, one thread per stream. Writes to a temporary file and
// renames it, so a failure leaves no partial file.
void write_chrome_trace(const sim::StepResult& r, const std::string& path);

}  // namespace trainsim

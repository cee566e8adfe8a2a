#include "trace_export.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "input_error.h"

namespace trainsim {

void write_chrome_trace(const sim::StepResult& r, const std::string& path) {
  using nlohmann::json;
  static const char* streams[] = {"compute", "dp/zero comm", "pp send/recv"};
  json events = json::array();
  std::map<int, bool> gpus;
  for (const auto& e : r.timeline) {
    gpus[e.gpu] = true;
    events.push_back({{"name", e.name}, {"cat", sim::category_name(e.category)}, {"ph", "X"},
                      {"ts", e.start_s * 1e6}, {"dur", (e.end_s - e.start_s) * 1e6}, {"pid", e.gpu}, {"tid", e.stream}});
  }
  for (const auto& [g, _] : gpus) {
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", g}, {"args", {{"name", "GPU " + std::to_string(g)}}}});
    for (int t = 0; t < 3; ++t)
      events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", g}, {"tid", t}, {"args", {{"name", streams[t]}}}});
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    if (!out) throw InputError("--trace " + path, "cannot write the trace file");
    out << json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump();
    if (!out) {
      std::remove(tmp.c_str());
      throw InputError("--trace " + path, "failed while writing the trace file");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw InputError("--trace " + path, "cannot move the trace into place: " + ec.message());
  }
}

}  // namespace trainsim

#include "trace_export.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "critical_path.h"
#include "input_error.h"

namespace trainsim {

namespace {

// Appends `v` in the shortest form that reads back as the same double (a JSON number).
void append_number(std::string& out, double v) {
  if (!std::isfinite(v)) throw std::logic_error("a trace event's time is not finite");
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

void append_string(std::string& out, const std::string& s) {
  out += '"';
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", u);
      out += esc;
    } else {
      out += c;
    }
  }
  out += '"';
}

}  // namespace

void write_chrome_trace(const sim::StepResult& r, const std::string& path) {
  static const char* streams[] = {"compute", "dp/zero comm", "pp send/recv"};
  const std::string tmp = path + ".tmp";
  auto fail = [&](const std::string& why) {
    std::remove(tmp.c_str());
    throw InputError("--trace " + path, why);
  };
  std::ofstream out(tmp, std::ios::binary);
  if (!out) throw InputError("--trace " + path, "cannot write the trace file");
  // Events are written as they are formatted, a buffer at a time: a full-mode step of a thousand
  // GPUs has millions, which as one JSON document in memory would take gigabytes.
  std::string buf;
  constexpr std::size_t kFlushAt = 1 << 20;
  auto flush = [&] {
    out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
    buf.clear();
  };
  std::set<int> gpus;
  bool first = true;
  auto next = [&] {
    buf += first ? "\n" : ",\n";
    first = false;
  };
  buf += "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
  // The critical path goes on a process of its own, above the GPUs: one track, each slice named
  // for its task and the GPU it ran on.
  int path_pid = 0;
  for (const auto& e : r.timeline) path_pid = std::max(path_pid, e.gpu + 1);
  for (const auto& e : r.critical_path) path_pid = std::max(path_pid, e.gpu + 1);
  auto slice = [&](const sim::TimelineEntry& e, int pid, int tid, const std::string& name) {
    next();
    buf += '{';
    // Where a task took more than its time alone (by more than a thousandth), both, so that a
    // click on it says how much of it was contention.
    const double took = e.end_s - e.start_s;
    if (took - e.uncontended_s > 1e-3 * took) {
      buf += "\"args\":{\"contention_us\":";
      append_number(buf, (took - e.uncontended_s) * 1e6);
      buf += ",\"uncontended_us\":";
      append_number(buf, e.uncontended_s * 1e6);
      buf += "},";
    }
    buf += "\"cat\":";
    append_string(buf, sim::category_name(e.category));
    buf += ",\"dur\":";
    append_number(buf, (e.end_s - e.start_s) * 1e6);
    buf += ",\"name\":";
    append_string(buf, name);
    buf += ",\"ph\":\"X\",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(tid) + ",\"ts\":";
    append_number(buf, e.start_s * 1e6);
    buf += '}';
    if (buf.size() >= kFlushAt) flush();
  };
  try {
    for (const auto& e : r.timeline) {
      gpus.insert(e.gpu);
      slice(e, e.gpu, e.stream, e.name);
    }
    for (const auto& e : r.critical_path) slice(e, path_pid, 0, e.name + " (GPU " + std::to_string(e.gpu) + ")");
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  for (const int g : gpus) {
    next();
    buf += "{\"args\":{\"name\":\"GPU " + std::to_string(g) + "\"},\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" +
           std::to_string(g) + "}";
    for (int t = 0; t < 3; ++t) {
      next();
      buf += "{\"args\":{\"name\":\"" + std::string(streams[t]) + "\"},\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" +
             std::to_string(g) + ",\"tid\":" + std::to_string(t) + "}";
    }
  }
  if (!r.critical_path.empty()) {
    const std::string pid = std::to_string(path_pid);
    next();
    buf += "{\"args\":{\"name\":\"critical path\"},\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" + pid + "}";
    next();
    buf += "{\"args\":{\"sort_index\":-1},\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":" + pid + "}";
    next();
    buf += "{\"args\":{\"name\":\"what the step waited on\"},\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" + pid +
           ",\"tid\":0}";
  }
  buf += "\n]}\n";
  flush();
  out.close();
  if (!out) fail("failed while writing the trace file");
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) fail("cannot move the trace into place: " + ec.message());
}

std::string describe_trace(const sim::StepResult& r, const Layout& l, const std::string& path) {
  std::set<int> gpus;
  for (const auto& e : r.timeline) gpus.insert(e.gpu);
  std::ostringstream o;
  o << "trace " << path << ": " << r.timeline.size() << " slices of " << gpus.size() << (gpus.size() == 1 ? " GPU" : " GPUs");
  const std::string path_summary = critical_path_summary(r, l);
  if (!path_summary.empty()) o << "; its critical path, " << path_summary;
  return o.str();
}

std::vector<int> parse_trace_gpus(const std::string& list, int gpus) {
  const std::string opt = "--trace-gpus";
  auto number = [&](const std::string& item, const char* b, const char* e) {
    int v = -1;
    const auto r = std::from_chars(b, e, v);
    if (b == e || r.ec != std::errc() || r.ptr != e || v < 0)
      throw InputError(opt, "\"" + item + "\" is not a GPU number or a range of them such as 0-7");
    if (v >= gpus)
      throw InputError(opt, "GPU " + std::to_string(v) + " is past the layout's " + std::to_string(gpus) + " GPUs (0-" +
                                std::to_string(gpus - 1) + ")");
    return v;
  };
  std::vector<int> out;
  std::size_t at = 0;
  while (true) {
    const std::size_t comma = list.find(',', at);
    const std::string item = list.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    const char* b = item.data();
    const char* e = b + item.size();
    const std::size_t dash = item.find('-');
    if (dash == std::string::npos) {
      out.push_back(number(item, b, e));
    } else {
      const int lo = number(item, b, b + dash), hi = number(item, b + dash + 1, e);
      if (lo > hi) throw InputError(opt, "\"" + item + "\" runs backwards; write the smaller GPU first");
      for (int g = lo; g <= hi; ++g) out.push_back(g);
    }
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void check_traced_gpus(const sim::StepResult& r, const std::vector<int>& wanted) {
  const std::vector<int>& ran = r.timeline_simulated_gpus;
  for (const int g : wanted) {
    if (std::binary_search(ran.begin(), ran.end(), g)) continue;
    std::string which;
    which = ran.size() == 1 ? "GPU " : "GPUs ";
    for (std::size_t i = 0; i < ran.size() && i < 16; ++i) which += (i ? ", " : "") + std::to_string(ran[i]);
    if (ran.size() > 16) which += ", ... (" + std::to_string(ran.size()) + " in all)";
    throw InputError("--trace-gpus", "GPU " + std::to_string(g) + " was not simulated: symmetric mode ran " + which +
                                         ", each standing for the others of its pipeline stage (or tensor-parallel group); pick "
                                         "among those, or simulate every GPU with --mode full");
  }
}

}  // namespace trainsim

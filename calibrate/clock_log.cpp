#include "clock_log.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <limits>
#include <sstream>

#include "input_error.h"

namespace trainsim::calib {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

// "1980 MHz" or "691.23 W" (the unit as given), or "[N/A]": NaN. False if it is neither.
bool parse_value(const std::string& field, const char* unit, double& out) {
  const std::string f = trim(field);
  if (f == "[N/A]" || f == "N/A") {
    out = kNaN;
    return true;
  }
  std::istringstream in(f);
  std::string u;
  if (!(in >> out >> u) || u != unit) return false;
  std::string rest;
  return !(in >> rest);
}

// "2026/12/02 20:09:18.038", local time (the fraction optional).
bool parse_timestamp(const std::string& field, double& out) {
  std::tm tm{};
  int used = 0;
  const std::string f = trim(field);
  if (std::sscanf(f.c_str(), "%d/%d/%d %d:%d:%d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &used) != 6)
    return false;
  double fraction = 0;
  const std::string rest = f.substr(static_cast<std::size_t>(used));
  if (!rest.empty()) {
    if (rest[0] != '.' || rest.size() < 2 || rest.find_first_not_of("0123456789", 1) != std::string::npos) return false;
    fraction = std::stod("0" + rest);
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  tm.tm_isdst = -1;
  const std::time_t t = std::mktime(&tm);
  if (t == static_cast<std::time_t>(-1)) return false;
  out = static_cast<double>(t) + fraction;
  return true;
}

double median_of(std::vector<double> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return std::isnan(x); }), v.end());
  if (v.empty()) return kNaN;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double mean_of(const std::vector<double>& v) {
  double sum = 0;
  int n = 0;
  for (double x : v)
    if (!std::isnan(x)) {
      sum += x;
      ++n;
    }
  return n ? sum / n : kNaN;
}

}  // namespace

std::vector<ClockSample> read_clock_log(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path, "cannot open file");
  std::stringstream text;
  text << in.rdbuf();
  std::string all = text.str();
  // A log still being written may end in part of a line: that part is not read.
  all.erase(all.find_last_of('\n') == std::string::npos ? 0 : all.find_last_of('\n') + 1);
  std::istringstream lines(all);
  std::vector<ClockSample> out;
  // Where each quantity is: the three columns in order unless a header says otherwise.
  struct Columns {
    int count = 3, time = 0, clock = 1, power = 2, instant = -1, capped = -1;
  } col;
  const std::string expected = "\"timestamp, clocks.sm, power.draw\" (then optionally power.draw.instant, "
                               "clocks_event_reasons.sw_power_cap or other columns) as nvidia-smi --format=csv writes them";
  auto split = [](const std::string& line) {
    std::vector<std::string> fields;
    std::stringstream ss(line);
    for (std::string f; std::getline(ss, f, ',');) fields.push_back(trim(f));
    return fields;
  };
  std::string line;
  for (int n = 1; std::getline(lines, line); ++n) {
    if (trim(line).empty()) continue;
    const std::string where = path + ":" + std::to_string(n);
    if (trim(line).rfind("timestamp", 0) == 0) {
      const std::vector<std::string> names = split(line);
      Columns c;
      c.count = static_cast<int>(names.size());
      c.clock = c.power = -1;
      for (int i = 0; i < c.count; ++i) {
        const std::string name = names[i].substr(0, names[i].find(" ["));
        if (name == "clocks.current.sm" || name == "clocks.sm") c.clock = i;
        else if (name == "power.draw") c.power = i;
        else if (name == "power.draw.instant") c.instant = i;
        else if (name == "clocks_event_reasons.sw_power_cap" || name == "clocks_throttle_reasons.sw_power_cap") c.capped = i;
      }
      if (c.clock < 0 || c.power < 0) throw InputError(where, "the header lacks clocks.sm or power.draw; expected " + expected);
      col = c;
      continue;
    }
    const std::vector<std::string> fields = split(line);
    ClockSample s;
    bool ok = static_cast<int>(fields.size()) == col.count && parse_timestamp(fields[col.time], s.wall_s) &&
              parse_value(fields[col.clock], "MHz", s.sm_mhz) && parse_value(fields[col.power], "W", s.power_w) &&
              (col.instant < 0 || parse_value(fields[col.instant], "W", s.power_instant_w));
    if (ok && col.capped >= 0) {
      const std::string& f = fields[col.capped];
      if (f == "Active") s.power_capped = 1;
      else if (f == "Not Active") s.power_capped = 0;
      else ok = f == "[N/A]" || f == "N/A";
    }
    if (!ok) throw InputError(where, "expected " + expected + ", got \"" + line + "\"");
    out.push_back(s);
  }
  return out;
}

ClockStats clock_stats(const std::vector<ClockSample>& log, double begin_s, double end_s) {
  std::vector<double> mhz, w, instant;
  int told = 0, capped = 0;
  for (const ClockSample& s : log)
    if (s.wall_s >= begin_s && s.wall_s <= end_s) {
      mhz.push_back(s.sm_mhz);
      w.push_back(s.power_w);
      instant.push_back(s.power_instant_w);
      if (!std::isnan(s.power_capped)) {
        ++told;
        capped += s.power_capped > 0.5;
      }
    }
  return {static_cast<int>(mhz.size()), median_of(mhz), median_of(w), told ? static_cast<double>(capped) / told : kNaN,
          mean_of(instant)};
}

}  // namespace trainsim::calib

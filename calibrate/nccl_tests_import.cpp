#include "nccl_tests_import.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "input_error.h"
#include "json_fields.h"

namespace trainsim::calib {

std::string collective_from_program(const std::string& program) {
  std::string base = program.substr(program.find_last_of('/') + 1);
  if (const auto p = base.find("_perf"); p != std::string::npos) base = base.substr(0, p);
  if (base == "alltoall") return "all_to_all";
  if (base == "sendrecv") return "send_recv";
  return base;  // all_reduce, all_gather, reduce_scatter, broadcast, reduce, ...
}

namespace {

// nccl-tests prints busbw = algbw x its factor for the collective and rank count (all-reduce
// 2(n-1)/n; all-gather, reduce-scatter and all-to-all (n-1)/n). Where that factor depends on n, a
// row's two columns say how many ranks ran: a log whose rank lines were cut or repeated would
// otherwise be read with the wrong n, and every bus bandwidth derived from it would be off. Rows
// under 10 GB/s are skipped: printed to two decimals, a ratio from 10 GB/s and up is good to 0.1%,
// and 0.3% still tells 12 ranks from 13.
void check_rank_count(const std::string& collective, int n, const LinkPoint& p, const std::string& where) {
  if (busbw_factor(collective, 2) == busbw_factor(collective, 3) || p.algbw_GBps < 10 || p.busbw_GBps <= 0) return;
  const double ratio = p.busbw_GBps / p.algbw_GBps, expected = busbw_factor(collective, n);
  if (std::abs(ratio / expected - 1) <= 0.003) return;
  // The n whose factor is nearest the printed ratio.
  int implied = 2;
  for (int m = 2; m <= 1 << 16; ++m)
    if (std::abs(busbw_factor(collective, m) - ratio) < std::abs(busbw_factor(collective, implied) - ratio)) implied = m;
  char buf[256];
  std::snprintf(buf, sizeof buf, "busbw / algbw = %.4f says %d ranks ran, but the log was read as %d (its '# Rank' or '# nThread' lines)",
                ratio, implied, n);
  throw InputError(where, buf);
}

// A row as nccl-tests prints it: a size in bytes from 0 (whole), a positive time, bandwidths from 0
// and a count of wrong elements from 0, all finite. A row that is not is refused rather than
// dropped from the fit or read as a rate.
void check_point(const LinkPoint& p, double wrong, const std::string& where) {
  auto bad = [&](const char* what, double v) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "expected %s, found %g", what, v);
    throw InputError(where, buf);
  };
  if (!std::isfinite(p.bytes) || p.bytes < 0 || p.bytes != std::floor(p.bytes)) bad("a size of whole bytes from 0", p.bytes);
  if (!std::isfinite(p.time_us) || !(p.time_us > 0)) bad("a positive time in microseconds", p.time_us);
  if (!std::isfinite(p.algbw_GBps) || p.algbw_GBps < 0) bad("an algorithm bandwidth from 0", p.algbw_GBps);
  if (!std::isfinite(p.busbw_GBps) || p.busbw_GBps < 0) bad("a bus bandwidth from 0", p.busbw_GBps);
  // Below 2^53 a whole count is exact in a double and converts to a long.
  if (!std::isfinite(wrong) || wrong < 0 || wrong != std::floor(wrong) || wrong >= 0x1p53) bad("a count of wrong elements from 0", wrong);
}

}  // namespace

std::vector<LinkTable> parse_nccl_tests_text(const std::string& text, const std::string& file) {
  std::vector<LinkTable> out;
  std::istringstream in(text);
  std::string line;
  int lineno = 0;
  std::string collective;
  int ranks = 0, threads = 1, gpus_per_thread = 1;
  bool header_ranks = false;
  LinkTable* cur = nullptr;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line[0] == '#') {
      // Header lines: "# Collective test starting: all_reduce_perf", "# nThread 1 nGpus 8 ...",
      // and one "#  Rank  3 Group  0 Pid ..." line per rank.
      std::istringstream h(line.substr(1));
      std::vector<std::string> w;
      for (std::string tok; h >> tok;) w.push_back(tok);
      if (w.size() >= 4 && w[0] == "Collective" && w[1] == "test" && w[2] == "starting:") {
        collective = collective_from_program(w[3]);
        ranks = 0;
        header_ranks = false;
        cur = nullptr;
      } else if (w.size() >= 4 && w[0] == "nThread" && w[2] == "nGpus") {
        threads = std::atoi(w[1].c_str());
        gpus_per_thread = std::atoi(w[3].c_str());
      } else if (w.size() >= 5 && w[0] == "Rank" && w[2] == "Group" && w[4] == "Pid") {
        ++ranks;
        header_ranks = true;
      }
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    // A result row: size count type redop root time algbw busbw #wrong [in-place columns...]
    std::istringstream row(line);
    std::vector<std::string> f;
    for (std::string tok; row >> tok;) f.push_back(tok);
    if (f.size() < 9) continue;
    char* end = nullptr;
    const double size = std::strtod(f[0].c_str(), &end);
    if (*end != '\0') continue;  // not a result row (nccl debug output and the like)
    auto num = [&](std::size_t i) {
      char* e = nullptr;
      const double v = std::strtod(f[i].c_str(), &e);
      if (*e != '\0')
        throw InputError(file + ":" + std::to_string(lineno), "expected a number in column " + std::to_string(i + 1) + ", found \"" + f[i] + "\"");
      return v;
    };
    if (collective.empty())
      throw InputError(file + ":" + std::to_string(lineno), "result row before any '# Collective test starting:' line");
    const int n = header_ranks ? ranks : threads * gpus_per_thread;
    if (!cur) {
      out.push_back(LinkTable{collective, n, {}, file});
      cur = &out.back();
    }
    LinkPoint p;
    p.bytes = size;
    p.time_us = num(5);
    p.algbw_GBps = num(6);
    p.busbw_GBps = num(7);
    const double wrong = f[8] == "N/A" ? 0 : num(8);
    check_point(p, wrong, file + ":" + std::to_string(lineno));
    p.wrong = static_cast<long>(wrong);
    check_rank_count(collective, n, p, file + ":" + std::to_string(lineno));
    cur->points.push_back(p);
  }
  if (out.empty()) throw InputError(file, "no nccl-tests result rows found");
  return out;
}

std::vector<LinkTable> parse_nccl_tests_json(const std::string& text, const std::string& file) {
  using nlohmann::json;
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    throw InputError(file, "not valid JSON: " + json_error_text(e));
  }
  if (!doc.is_object() || !doc.contains("results"))
    throw InputError(file, "expected an nccl-tests -J document with a \"results\" list");
  std::string collective;
  if (doc.contains("args") && doc["args"].is_array() && !doc["args"].empty() && doc["args"][0].is_string())
    collective = collective_from_program(doc["args"][0].get<std::string>());
  if (collective.empty()) throw InputError(file + ": args[0]", "cannot tell which collective this is");
  int n = 0;
  if (doc.contains("config")) {
    const json& c = doc["config"];
    if (c.contains("devices") && c["devices"].is_array() && c["devices"].size() > 1) n = static_cast<int>(c["devices"].size());
    else if (c.contains("nthreads") && c["nthreads"].is_number_integer() && c.contains("ngpus") && c["ngpus"].is_number_integer())
      n = c["nthreads"].get<int>() * c["ngpus"].get<int>();
  }
  if (n <= 0) throw InputError(file + ": config", "cannot tell how many ranks ran");
  LinkTable t{collective, n, {}, file};
  const json& rs = doc["results"];
  if (!rs.is_array()) throw InputError(file + ": results", "expected a list");
  for (std::size_t i = 0; i < rs.size(); ++i) {
    const std::string where = file + ": results[" + std::to_string(i) + "]";
    const json& r = rs[i];
    if (!r.is_object() || !r.contains("size") || !r["size"].is_number() || !r.contains("out_of_place") || !r["out_of_place"].is_object())
      throw InputError(where, "expected a numeric \"size\" and an \"out_of_place\" object");
    const json& o = r["out_of_place"];
    LinkPoint p;
    p.bytes = r["size"].get<double>();
    const char* tkey = o.contains("time") ? "time" : "cpu_time";
    if (!o.contains(tkey) || !o[tkey].is_number()) throw InputError(where + ".out_of_place", "expected a numeric \"time\"");
    p.time_us = o[tkey].get<double>();
    for (const char* k : {"alg_bw", "bus_bw", "nwrong"})
      if (o.contains(k) && !o[k].is_number()) throw InputError(where + ".out_of_place." + k, "expected a number");
    p.algbw_GBps = o.value("alg_bw", 0.0);
    p.busbw_GBps = o.value("bus_bw", 0.0);
    const double wrong = o.contains("nwrong") ? o["nwrong"].get<double>() : 0;
    check_point(p, wrong, where);
    p.wrong = static_cast<long>(wrong);
    check_rank_count(collective, n, p, where);
    t.points.push_back(p);
  }
  if (t.points.empty()) throw InputError(file, "the results list is empty");
  return {t};
}

std::vector<LinkTable> import_nccl_tests_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path, "cannot open file");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') return parse_nccl_tests_json(text, path);
  return parse_nccl_tests_text(text, path);
}

}  // namespace trainsim::calib

#include "layout.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "input_error.h"

namespace trainsim {

Recompute parse_recompute(const std::string& s, const std::string& where) {
  if (s == "none") return Recompute::none;
  if (s == "selective") return Recompute::selective;
  if (s == "full") return Recompute::full;
  throw InputError(where, "expected one of \"none\", \"selective\", \"full\", found \"" + s + "\"");
}

Schedule parse_schedule(const std::string& s, const std::string& where) {
  if (s == "gpipe") return Schedule::gpipe;
  if (s == "1f1b") return Schedule::one_f_one_b;
  if (s == "interleaved") return Schedule::interleaved;
  throw InputError(where, "expected one of \"gpipe\", \"1f1b\", \"interleaved\", found \"" + s + "\"");
}

Compression parse_compression(const std::string& s, const std::string& where) {
  Compression c;
  if (s == "none") return c;
  if (s == "fp16") { c.kind = Compression::Kind::fp16; return c; }
  if (s == "int8") { c.kind = Compression::Kind::int8; return c; }
  auto tail = [&](const char* prefix) -> std::string {
    const std::string p(prefix);
    return s.rfind(p, 0) == 0 ? s.substr(p.size()) : std::string();
  };
  if (std::string f = tail("topk:"); !f.empty()) {
    char* end = nullptr;
    const double v = std::strtod(f.c_str(), &end);
    if (*end != '\0' || !(v > 0.0 && v <= 1.0))
      throw InputError(where, "topk fraction must be a number in (0, 1], found \"" + f + "\"");
    c.kind = Compression::Kind::topk;
    c.topk_fraction = v;
    return c;
  }
  if (std::string r = tail("powersgd:"); !r.empty()) {
    char* end = nullptr;
    const long v = std::strtol(r.c_str(), &end, 10);
    if (*end != '\0' || v < 1 || v > 1024)
      throw InputError(where, "powersgd rank must be an integer in [1, 1024], found \"" + r + "\"");
    c.kind = Compression::Kind::powersgd;
    c.powersgd_rank = static_cast<int>(v);
    return c;
  }
  throw InputError(where, "expected \"none\", \"fp16\", \"int8\", \"topk:<fraction>\" or "
                          "\"powersgd:<rank>\", found \"" + s + "\"");
}

const char* to_string(Recompute r) {
  switch (r) {
    case Recompute::none: return "none";
    case Recompute::selective: return "selective";
    case Recompute::full: return "full";
  }
  return "?";
}

const char* to_string(Schedule s) {
  switch (s) {
    case Schedule::gpipe: return "gpipe";
    case Schedule::one_f_one_b: return "1f1b";
    case Schedule::interleaved: return "interleaved";
  }
  return "?";
}

std::string to_string(const Compression& c) {
  char buf[64];
  switch (c.kind) {
    case Compression::Kind::none: return "none";
    case Compression::Kind::fp16: return "fp16";
    case Compression::Kind::int8: return "int8";
    case Compression::Kind::topk: std::snprintf(buf, sizeof buf, "topk:%g", c.topk_fraction); return buf;
    case Compression::Kind::powersgd: return "powersgd:" + std::to_string(c.powersgd_rank);
  }
  return "?";
}

std::string describe(const Layout& l) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "tp=%d,pp=%d,dp=%d,vpp=%d,mb=%d%s,recompute=%s,zero=%d,bucket=%gMB,%s,%s",
                l.tp, l.pp, l.dp, l.vpp, l.micro_batch, l.sequence_parallel ? ",sp" : "",
                to_string(l.recompute), l.zero, l.bucket_MB, to_string(l.compression).c_str(),
                to_string(l.schedule));
  return buf;
}

std::string describe_short(const Layout& l) {
  char buf[160];
  int n = std::snprintf(buf, sizeof buf, "tp%d pp%d dp%d", l.tp, l.pp, l.dp);
  if (l.schedule == Schedule::interleaved) n += std::snprintf(buf + n, sizeof buf - n, " v%d", l.vpp);
  n += std::snprintf(buf + n, sizeof buf - n, " mb%d%s %s z%d %gMB", l.micro_batch, l.sequence_parallel ? " sp" : "",
                     to_string(l.recompute), l.zero, l.bucket_MB);
  if (l.compression.kind != Compression::Kind::none) n += std::snprintf(buf + n, sizeof buf - n, " %s", to_string(l.compression).c_str());
  if (l.schedule == Schedule::gpipe) std::snprintf(buf + n, sizeof buf - n, " gpipe");
  return buf;
}

}  // namespace trainsim

#include "hardware_profile.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "carry_over.h"
#include "input_error.h"
#include "json_fields.h"
#include "memory_kernels.h"

#ifndef TRAINSIM_PROFILE_DIR
#define TRAINSIM_PROFILE_DIR "models/hardware"
#endif

namespace trainsim {

using nlohmann::json;

double HardwareProfile::peak(const std::string& dtype) const {
  auto it = peak_tflops.find(dtype);
  return it == peak_tflops.end() ? 0.0 : it->second;
}

std::string default_profile_dir() {
  if (const char* env = std::getenv("TRAINSIM_PROFILES")) return env;
  return TRAINSIM_PROFILE_DIR;
}

namespace {

Provenance read_provenance(JsonFields& parent, const std::string& key, bool required) {
  Provenance p;
  if (!parent.has(key)) {
    if (required) throw InputError(parent.path(key), "required key is missing (where the numbers come from)");
    return p;
  }
  JsonFields f = parent.object(key);
  p.source = f.string("source");
  if (p.source != "measured" && p.source != "imported" && p.source != "datasheet" && p.source != "derived")
    throw InputError(f.path("source"), "expected \"measured\", \"imported\", \"datasheet\" or \"derived\", found \"" +
                                           p.source + "\"");
  p.device = f.string("device", "");
  p.device_count = f.integer("device_count", 0, 0, 1 << 20);
  p.driver = f.string("driver", "");
  p.cuda = f.string("cuda", "");
  p.nccl = f.string("nccl", "");
  p.date = f.string("date", "");
  p.command = f.string("command", "");
  if (const json* ids = f.find("device_uuids")) {
    if (!ids->is_array()) throw InputError(f.path("device_uuids"), "expected an array of GPU UUIDs, found " + json_excerpt(*ids));
    for (std::size_t i = 0; i < ids->size(); ++i)
      p.device_uuids.push_back(json_string((*ids)[i], f.path("device_uuids") + "[" + std::to_string(i) + "]"));
  }
  p.reference = f.string("reference", "");
  // Where a table was measured across ranks (calibrate --across-nodes).
  p.ranks = f.integer("ranks", 0, 0, 1 << 24);
  p.nodes = f.integer("nodes", 0, 0, 1 << 24);
  p.ranks_per_node = f.integer("ranks_per_node", 0, 0, 1 << 16);
  p.rank_per_node = f.boolean("rank_per_node", false);
  p.network = f.string("network", "");
  if (const json* nics = f.find("nics")) {
    if (!nics->is_array()) throw InputError(f.path("nics"), "expected an array of NIC names, found " + json_excerpt(*nics));
    for (std::size_t i = 0; i < nics->size(); ++i) p.nics.push_back(json_string((*nics)[i], f.path("nics") + "[" + std::to_string(i) + "]"));
  }
  // A merged profile (calibrate merge): the rule and every run it merged, each a measured run.
  p.rule = f.string("rule", "");
  if (const json* runs = f.find("merged_from")) {
    if (!runs->is_array() || runs->empty())
      throw InputError(f.path("merged_from"), "expected an array of the merged runs' provenance, found " + json_excerpt(*runs));
    for (std::size_t i = 0; i < runs->size(); ++i) {
      const json& r = (*runs)[i];
      if (!r.is_object() || r.value("source", "") != "measured")
        throw InputError(f.path("merged_from") + "[" + std::to_string(i) + "]", "expected a measured run's provenance, found " + json_excerpt(r));
    }
    p.merged_runs = static_cast<int>(runs->size());
  }
  f.finish();
  if (p.source == "measured" && (p.device.empty() || p.date.empty() || p.command.empty()))
    throw InputError(f.path(), "a measured table must record device, date and command");
  if (p.source != "measured" && p.reference.empty())
    throw InputError(f.path("reference"), "a " + p.source + " table must cite its source or rule in \"reference\"");
  return p;
}

std::map<std::string, double> read_rates(JsonFields& parent, const std::string& key) {
  std::map<std::string, double> out;
  if (!parent.has(key)) return out;
  JsonFields f = parent.object(key);
  for (const char* d : {"bf16", "fp16", "fp8", "tf32", "fp32"})
    if (f.has(d)) out[d] = f.positive(d, 1e6);  // every rate divides work: 0 is no rate, not a fast one
  f.finish();
  return out;
}

// What a table's column may hold: a shape (a positive integer: GEMM dimensions, heads, sequence),
// a size in bytes, a rate (positive: every rate divides work), a fraction of peak, or a flag.
struct Column {
  double min, max;
  bool integer = false;
};
constexpr Column kShape{1, 1e9, true};
constexpr Column kBytes{1, 1e15};
constexpr Column kRate{1e-3, 1e9};  // TFLOP/s or GB/s
constexpr Column kFraction{1e-9, 1.0};

// A table of rows given as arrays, one value a column, each checked against its column's range.
std::vector<std::vector<double>> read_rows(const json& arr, const std::string& path, const std::vector<Column>& columns) {
  if (!arr.is_array()) throw InputError(path, "expected an array of rows, found " + json_excerpt(arr));
  std::vector<std::vector<double>> rows;
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const std::string p = path + "[" + std::to_string(i) + "]";
    if (!arr[i].is_array() || arr[i].size() != columns.size())
      throw InputError(p, "expected a row of " + std::to_string(columns.size()) + " numbers, found " + json_excerpt(arr[i]));
    std::vector<double> row;
    for (std::size_t j = 0; j < columns.size(); ++j) {
      const Column& c = columns[j];
      const std::string at = p + "[" + std::to_string(j) + "]";
      row.push_back(c.integer ? json_integer(arr[i][j], at, static_cast<int>(c.min), static_cast<int>(c.max))
                              : json_number(arr[i][j], at, c.min, c.max));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

void read_gpu(JsonFields& top, HardwareProfile& hp, bool derived) {
  JsonFields g = top.object("gpu");
  hp.memory_bytes = g.number("memory_bytes", std::nullopt, 1.0, 1e15);
  hp.datasheet_memory_bytes = g.positive("datasheet_memory_bytes", 1e15);
  if (hp.datasheet_memory_bytes > 0 && hp.datasheet_memory_bytes < hp.memory_bytes)
    throw InputError(g.path("datasheet_memory_bytes"), "is below gpu.memory_bytes: the vendor's figure includes what CUDA can allocate");
  hp.peak_tflops = read_rates(g, "peak_tflops");
  if (!hp.peak_tflops.count("bf16"))
    throw InputError(g.path("peak_tflops.bf16"), "required key is missing (the vendor's dense bf16 rate)");
  hp.measured_tflops = read_rates(g, "measured_tflops");
  hp.memory_bandwidth_GBps = g.number("memory_bandwidth_GBps", derived ? std::optional<double>(0.0) : std::nullopt, 0.0, 1e6);
  hp.datasheet_memory_bandwidth_GBps = g.number("datasheet_memory_bandwidth_GBps", 0.0, 0.0, 1e6);
  hp.kernel_launch_us = g.number("kernel_launch_us", derived ? std::optional<double>(0.0) : std::nullopt, 0.0, 1e4);
  if (g.has("gemm_tflops")) {
    JsonFields t = g.object("gemm_tflops");
    const json& cols = t.required("columns");
    if (cols != json::array({"m", "n", "k", "tflops"}))
      throw InputError(t.path("columns"), "expected [\"m\", \"n\", \"k\", \"tflops\"], found " + json_excerpt(cols));
    for (const char* d : {"bf16", "fp16", "fp8", "tf32", kGemmAccumulateFp32}) {
      const json* rows = t.find(d);
      if (!rows) continue;
      for (const auto& r : read_rows(*rows, t.path(d), {kShape, kShape, kShape, kRate})) hp.gemm[d].push_back({r[0], r[1], r[2], r[3]});
    }
    t.finish();
  }
  if (g.has("attention")) {
    JsonFields a = g.object("attention");
    hp.attention_fwd_fraction = a.number("forward_fraction_of_peak", std::nullopt, 0.01, 1.0);
    hp.attention_bwd_fraction = a.number("backward_fraction_of_peak", std::nullopt, 0.01, 1.0);
    if (a.has("table")) {
      JsonFields t = a.object("table");
      // Either the shape alone (gpt-style attention, one K/V head per query head, with dropout) or
      // with its K/V grouping and whether it applies dropout.
      const json& cols = t.required("columns");
      const json plain = json::array({"batch_heads", "seq", "head_dim", "forward_fraction", "backward_fraction"});
      const json grouped = json::array({"batch_heads", "seq", "head_dim", "kv_group", "dropout", "forward_fraction", "backward_fraction"});
      if (cols != plain && cols != grouped)
        throw InputError(t.path("columns"), "expected " + plain.dump() + " or " + grouped.dump() + ", found " + json_excerpt(cols));
      if (cols == plain) {
        for (const auto& r : read_rows(t.required("rows"), t.path("rows"), {kShape, kShape, kShape, kFraction, kFraction})) hp.attention.push_back({r[0], r[1], r[2], r[3], r[4]});
      } else {
        const auto rows = read_rows(t.required("rows"), t.path("rows"),
                                     {kShape, kShape, kShape, kShape, Column{0, 1, true}, kFraction, kFraction});
        for (const auto& r : rows) hp.attention.push_back({r[0], r[1], r[2], r[5], r[6], r[3], r[4] != 0});
      }
      t.finish();
    }
    // A table measured apart from the rest of the profile (calibrate attention-table) says where.
    read_provenance(a, "provenance", false);
    a.finish();
  }
  if (g.has("memory_bound")) {
    JsonFields m = g.object("memory_bound");
    const json& cols = m.required("columns");
    if (cols != json::array({"bytes", "GBps"}))
      throw InputError(m.path("columns"), "expected [\"bytes\", \"GBps\"], found " + json_excerpt(cols));
    for (const auto& r : read_rows(m.required("points"), m.path("points"), {kBytes, kRate})) hp.memory_bound.push_back({r[0], r[1]});
    m.finish();
  }
  if (g.has("memory_kernels")) {
    JsonFields mk = g.object("memory_kernels");
    const json& obj = g.required("memory_kernels");
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      if (it.key() == "provenance") continue;  // a table measured apart (calibrate kernel-table) says where
      if (!is_memory_kernel(it.key())) {
        std::string msg = "no step prices a kernel named \"" + it.key() + "\"";
        const std::string near = closest_match(it.key(), memory_kernel_names());
        if (!near.empty()) msg += " (did you mean \"" + near + "\"?)";
        throw InputError(mk.path(it.key()), msg);
      }
      // [bytes, GBps, hidden] (hidden 0: any); profiles written before the hidden size was
      // recorded have [bytes, GBps].
      const json& rows = *mk.find(it.key());
      const std::size_t cols = rows.is_array() && !rows.empty() && rows[0].is_array() && rows[0].size() == 2 ? 2 : 3;
      for (const auto& r : read_rows(rows, mk.path(it.key()), cols == 2 ? std::vector<Column>{kBytes, kRate}
                                                                     : std::vector<Column>{kBytes, kRate, Column{0, 1e9, true}}))
        hp.memory_kernels[it.key()].push_back({r[0], r[1], cols == 3 ? r[2] : 0.0});
      auto& v = hp.memory_kernels[it.key()];
      std::sort(v.begin(), v.end(), [](const BandwidthPoint& a, const BandwidthPoint& b) { return a.bytes < b.bytes; });
    }
    read_provenance(mk, "provenance", false);
    mk.finish();
  }
  hp.compute_provenance = read_provenance(g, "provenance", false);
  g.finish();
}

// A {"columns": [...], "rows": [[...], ...]} table whose columns must be exactly `columns`: its rows,
// which live in `t`'s document (a pointer, not a reference: the column list is often a temporary).
const json* table_rows(JsonFields& t, const std::vector<std::string>& columns, bool allow_empty) {
  const json& cols = t.required("columns");
  if (cols != json(columns)) throw InputError(t.path("columns"), "expected " + json(columns).dump() + ", found " + json_excerpt(cols));
  const json& rows = t.required("rows");
  if (!rows.is_array() || (!allow_empty && rows.empty()))
    throw InputError(t.path("rows"), std::string(allow_empty ? "expected an array" : "expected a non-empty array") + ", found " + json_excerpt(rows));
  return &rows;
}

std::vector<CollectiveFit> read_collective_fits(JsonFields& in, const std::string& key = "collectives") {
  std::vector<CollectiveFit> out;
  if (const json* cs = in.find(key)) {
    if (!cs->is_array()) throw InputError(in.path(key), "expected an array, found " + json_excerpt(*cs));
    for (std::size_t i = 0; i < cs->size(); ++i) {
      JsonFields c((*cs)[i], in.path(key) + "[" + std::to_string(i) + "]");
      CollectiveFit fit;
      fit.collective = c.string("collective");
      if (fit.collective != "all_reduce" && fit.collective != "all_gather" && fit.collective != "reduce_scatter" &&
          fit.collective != "all_to_all" && fit.collective != "send_recv")
        throw InputError(c.path("collective"), "expected \"all_reduce\", \"all_gather\", \"reduce_scatter\", \"all_to_all\" or "
                                               "\"send_recv\", found \"" + fit.collective + "\"");
      fit.gpus = c.integer("gpus", std::nullopt, 2, 1 << 20);
      fit.alpha_us = c.number("alpha_us", std::nullopt, 0.0, 1e7);
      fit.busbw_GBps = c.number("busbw_GBps", std::nullopt, 1e-6, 1e6);
      fit.r2 = c.number("r2", 0.0, -1e9, 1.0);
      fit.max_rel_error = c.number("max_rel_error", 0.0, 0.0, 1e6);
      if (c.has("segments")) {
        JsonFields sg = c.object("segments");
        const json& rows = *table_rows(sg, {"min_bytes", "max_bytes", "alpha_us", "busbw_GBps", "max_rel_error"}, false);
        for (std::size_t r = 0; r < rows.size(); ++r) {
          const std::string at = sg.path("rows") + "[" + std::to_string(r) + "]";
          if (!rows[r].is_array() || rows[r].size() != 5) throw InputError(at, "expected 5 numbers, found " + json_excerpt(rows[r]));
          CollectiveFit::Segment x{json_number(rows[r][0], at + "[0]", 0.0, 1e15), json_number(rows[r][1], at + "[1]", 0.0, 1e15),
                                   json_number(rows[r][2], at + "[2]", 0.0, 1e7), json_number(rows[r][3], at + "[3]", 1e-6, 1e6),
                                   json_number(rows[r][4], at + "[4]", 0.0, 1e6)};
          if (x.max_bytes < x.min_bytes) throw InputError(at, "max_bytes is below min_bytes");
          if (!fit.segments.empty() && x.min_bytes < fit.segments.back().max_bytes)
            throw InputError(at, "segments must follow each other by size");
          fit.segments.push_back(x);
        }
        sg.finish();
      }
      fit.provenance = read_provenance(c, "provenance", false);
      c.finish();
      out.push_back(fit);
    }
  }
  return out;
}

void read_links(JsonFields& top, HardwareProfile& hp) {
  if (top.has("host_link")) {
    JsonFields h = top.object("host_link");
    hp.h2d_GBps = h.number("h2d_GBps", std::nullopt, 1e-3, 1e5);
    hp.d2h_GBps = h.number("d2h_GBps", std::nullopt, 1e-3, 1e5);
    read_provenance(h, "provenance", false);
    h.finish();
  }
  JsonFields in = top.object("intra_node");
  hp.intra_link = in.string("link");
  hp.gpus_per_node = in.integer("gpus_per_node", std::nullopt, 1, 1024);
  hp.intra_link_GBps = in.number("link_GBps", std::nullopt, 0.001, 1e5);
  hp.intra_busbw_GBps = in.number("busbw_GBps", std::nullopt, 0.001, 1e5);
  hp.intra_latency_us = in.number("latency_us", std::nullopt, 0.0, 1e5);
  hp.intra_collectives = read_collective_fits(in);
  hp.intra_nvls_collectives = read_collective_fits(in, "nvls_collectives");
  if (in.has("peer_copies")) {
    JsonFields pc = in.object("peer_copies");
    const json& rows = *table_rows(pc, {"src", "dst", "link", "GBps", "peer_access"}, true);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const std::string at = pc.path("rows") + "[" + std::to_string(i) + "]";
      const json& r = rows[i];
      if (!r.is_array() || r.size() != 5 || !r[4].is_boolean())
        throw InputError(at, "expected [src, dst, link, GBps, peer_access], found " + json_excerpt(r));
      hp.peer_copies.push_back({json_integer(r[0], at + "[0]", 0, 1 << 16), json_integer(r[1], at + "[1]", 0, 1 << 16),
                                json_string(r[2], at + "[2]"), json_number(r[3], at + "[3]", 1e-6, 1e6), r[4].get<bool>()});
    }
    read_provenance(pc, "provenance", false);
    pc.finish();
  }
  hp.intra_provenance = read_provenance(in, "provenance", true);
  in.finish();

  JsonFields net = top.object("inter_node");
  hp.nics_per_node = net.integer("nics_per_node", std::nullopt, 1, 1024);
  hp.nic_Gbps = net.number("nic_Gbps", std::nullopt, 0.1, 1e5);
  hp.nic_efficiency = net.number("efficiency", std::nullopt, 1e-5, 1.0);
  hp.inter_latency_us = net.number("latency_us", std::nullopt, 0.0, 1e5);
  hp.inter_collectives = read_collective_fits(net);
  hp.inter_provenance = read_provenance(net, "provenance", true);
  net.finish();

  if (top.has("compression")) {
    JsonFields c = top.object("compression");
    hp.int8_quantize_GBps = c.number("int8_quantize_GBps", std::nullopt, 0.001, 1e6);
    hp.topk_select_GBps = c.number("topk_select_GBps", std::nullopt, 0.001, 1e6);
    read_provenance(c, "provenance", false);
    c.finish();
  }
  if (top.has("runtime_memory")) {
    JsonFields r = top.object("runtime_memory");
    hp.context_bytes = r.number("context_bytes", std::nullopt, 1.0, 1e12);
    hp.nccl_first_communicator_bytes = r.number("nccl_first_communicator_bytes", std::nullopt, 0.0, 1e12);
    hp.nccl_further_communicator_bytes = r.number("nccl_further_communicator_bytes", std::nullopt, 0.0, 1e12);
    hp.runtime_memory_provenance = read_provenance(r, "provenance", true);
    r.finish();
  }
  if (top.has("power")) {
    JsonFields pw = top.object("power");
    hp.node_max_kW = pw.number("node_max_kW", std::nullopt, 0.001, 1e5);
    hp.power_provenance = read_provenance(pw, "provenance", true);
    pw.finish();
  }
  if (top.has("clock")) {
    JsonFields c = top.object("clock");
    hp.max_sm_mhz = c.number("max_sm_mhz", std::nullopt, 100.0, 10000.0);
    hp.elementwise_clock_sensitivity = c.number("elementwise_sensitivity", std::nullopt, 0.0, 4.0);
    hp.clock_provenance = read_provenance(c, "provenance", true);
    if (c.has("power_model")) {
      JsonFields pm = c.object("power_model");
      auto& m = hp.clock_power;
      m.limit_w = pm.number("limit_w", std::nullopt, 1.0, 1e5);
      m.memory_bound_w = pm.number("memory_bound_w", std::nullopt, 1.0, 1e5);
      // Optional: a GPT-style layer's element-wise kernels, read off their own sweeps.
      if (pm.has("memory_bound_w_by_family")) {
        JsonFields fam = pm.object("memory_bound_w_by_family");
        m.memory_bound_w_gpt = fam.number("gpt", std::nullopt, 1.0, 1e5);
        m.memory_bound_gpt_provenance = read_provenance(fam, "provenance", true);
        fam.finish();
      }
      // (TFLOP/s, W) pairs, rates strictly ascending.
      auto table = [&pm](const std::string& key) {
        std::vector<std::pair<double, double>> t;
        const nlohmann::json& a = pm.required(key);
        const std::string path = pm.path(key);
        if (!a.is_array() || a.empty())
          throw InputError(path, "expected a non-empty array of [TFLOP/s, W] pairs, got " + json_excerpt(a));
        for (std::size_t i = 0; i < a.size(); ++i) {
          const std::string at = path + "[" + std::to_string(i) + "]";
          if (!a[i].is_array() || a[i].size() != 2) throw InputError(at, "expected a [TFLOP/s, W] pair, got " + json_excerpt(a[i]));
          const double rate = json_number(a[i][0], at + "[0]", 1e-3, 1e6), w = json_number(a[i][1], at + "[1]", 1.0, 1e5);
          if (!t.empty() && !(rate > t.back().first)) throw InputError(at + "[0]", "rates must rise from one pair to the next");
          t.emplace_back(rate, w);
        }
        return t;
      };
      m.gemm_w = table("gemm_w");
      m.attention_w = table("attention_w");
      const nlohmann::json& line = pm.required("clock_line_mhz");
      const std::string lp = pm.path("clock_line_mhz");
      if (!line.is_array() || line.size() != 2) throw InputError(lp, "expected [MHz at 0 W, MHz per W], got " + json_excerpt(line));
      m.line_mhz = json_number(line[0], lp + "[0]", 0.0, 1e5);
      m.line_mhz_per_w = json_number(line[1], lp + "[1]", -1e3, 0.0);
      if (!(m.line_mhz_per_w < 0)) throw InputError(lp + "[1]", "a capped mix's clock must fall as its power rises (a negative slope)");
      m.provenance = read_provenance(pm, "provenance", true);
      pm.finish();
    }
    c.finish();
  }
  if (top.has("interference")) {
    JsonFields c = top.object("interference");
    hp.comm_compute_interference = c.number("gemm_slowdown_with_comm", std::nullopt, 0.0, 10.0);
    if (c.has("gemm_slowdown_with_p2p")) hp.p2p_compute_interference = c.number("gemm_slowdown_with_p2p", std::nullopt, 0.0, 10.0);
    read_provenance(c, "provenance", false);
    c.finish();
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path, "cannot open hardware profile");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

HardwareProfile parse_impl(const std::string& text, const std::string& file, const std::string& dir, int depth,
                           double* datasheet_bw_out) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    throw InputError(file, "not valid JSON: " + json_error_text(e));
  }
  HardwareProfile hp;
  JsonFields top(doc, "");
  try {
    const int version = top.integer("schema_version", std::nullopt, 0, 1000);
    if (version != 1)
      throw InputError("schema_version", "this build reads hardware profile schema 1, found " + std::to_string(version));
    hp.name = top.string("name");
    hp.description = top.string("description", "");
    hp.provenance = read_provenance(top, "provenance", true);
    const std::string base_name = top.string("derive_from", "");
    const bool derived = !base_name.empty();
    read_gpu(top, hp, derived);
    const double datasheet_bw = hp.datasheet_memory_bandwidth_GBps;
    if (datasheet_bw_out) *datasheet_bw_out = datasheet_bw;
    read_links(top, hp);
    // The raw calibration record is kept in the file for re-checking; the model does not read it.
    top.find("measurements");
    top.finish();
    if (derived) {
      if (depth > 2) throw InputError("derive_from", "profiles derive from each other too deeply");
      double base_bw = 0;
      const std::string base_file = dir + "/" + base_name + ".json";
      HardwareProfile base;
      try {
        base = parse_impl(read_file(base_file), base_file, dir, depth + 1, &base_bw);
      } catch (const InputError& e) {
        // The base is looked up beside this file: a datasheet folder's copy of a part has no tables.
        throw InputError("derive_from", "\"" + base_name + "\", resolved beside this profile as " + base_file +
                                            ", cannot be derived from: " + e.what());
      }
      carry_over(hp, base, datasheet_bw, base_bw, "derive_from");
    }
    if (hp.gemm.empty() && hp.measured_tflops.empty())
      throw InputError("gpu.gemm_tflops", "no GEMM table and nothing to derive it from (add derive_from)");
    if (hp.memory_bandwidth_GBps <= 0) throw InputError("gpu.memory_bandwidth_GBps", "must be positive");
  } catch (const InputError& e) {
    throw InputError(file, e.what());
  }
  return hp;
}

}  // namespace

HardwareProfile parse_hardware_profile(const std::string& json_text, const std::string& file,
                                       const std::string& profile_dir) {
  return parse_impl(json_text, file, profile_dir, 0, nullptr);
}

HardwareProfile load_hardware_profile(const std::string& name_or_path, const std::string& profile_dir) {
  std::string path = name_or_path;
  if (name_or_path.find('/') == std::string::npos && name_or_path.find(".json") == std::string::npos)
    path = profile_dir + "/" + name_or_path + ".json";
  std::error_code missing;  // a name no file can have (too long, say) is missing too
  if (!std::filesystem::exists(path, missing)) {
    std::string msg = "no hardware profile \"" + name_or_path + "\" (looked for " + path + ")";
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(profile_dir, ec))
      if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
    const std::string near = closest_match(name_or_path, names);
    if (!near.empty()) msg += "; did you mean \"" + near + "\"?";
    throw InputError("hardware", msg);
  }
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  return parse_hardware_profile(read_file(path), path, dir);
}

}  // namespace trainsim

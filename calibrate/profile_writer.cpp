#include "profile_writer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string_view>
#include <nlohmann/json.hpp>

#include "alpha_beta_fit.h"
#include "attention_table.h"
#include "collective_sample.h"
#include "hardware_profile.h"
#include "input_error.h"
#include "json_fields.h"
#include "kernel_table.h"

namespace trainsim::calib {

using nlohmann::json;

namespace {

double best_bandwidth(const gpu::Measurements& m, const std::string& kernel, double min_bytes) {
  double best = 0;
  for (const auto& b : m.bandwidth)
    if (b.kernel == kernel && b.bytes >= min_bytes) best = std::max(best, b.GBps);
  return best;
}

std::string fmt(const char* f, double a, double b = 0, double c = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, f, a, b, c);
  return buf;
}

}  // namespace

std::vector<LinkTable> tables_from_measurements(const std::vector<gpu::CollectiveSample>& samples) {
  std::map<std::pair<std::string, int>, LinkTable> by;
  for (const auto& c : samples) {
    if (c.gpus < 2) continue;
    LinkTable& t = by[{c.collective, c.gpus}];
    t.collective = c.collective;
    t.gpus = c.gpus;
    t.source = "measured";
    t.points.push_back({c.bytes, c.time_us, c.algbw_GBps, c.busbw_GBps, c.wrong});
  }
  std::vector<LinkTable> out;
  for (auto& [k, t] : by) out.push_back(std::move(t));
  return out;
}

json collective_fits_json(const std::vector<LinkTable>& tables, const json& provenance) {
  json arr = json::array();
  for (const auto& t : tables) {
    // Fitted over the sizes training moves (1 MiB and up).
    const AlphaBetaFit f = fit_alpha_beta(t, 1 << 20);
    // The simulator uses the piecewise fit: every measured size within 5%.
    json rows = json::array();
    for (const auto& sg : fit_piecewise_alpha_beta(t, 1 << 20, 0.05))
      rows.push_back({sg.min_bytes, sg.max_bytes, sg.fit.alpha_us, sg.fit.busbw_GBps, sg.fit.max_rel_error});
    arr.push_back({{"collective", t.collective}, {"gpus", t.gpus}, {"alpha_us", f.alpha_us},
                   {"busbw_GBps", f.busbw_GBps}, {"r2", f.r2}, {"max_rel_error", f.max_rel_error},
                   {"segments", {{"columns", {"min_bytes", "max_bytes", "alpha_us", "busbw_GBps", "max_rel_error"}}, {"rows", rows}}},
                   {"provenance", provenance}});
  }
  return arr;
}

void set_intra_collectives(json& in, const std::vector<LinkTable>& tables, const json& provenance) {
  in["collectives"] = collective_fits_json(tables, provenance);
  // The ring rate and per-step latency the simulator uses for unmeasured group sizes: the
  // all-reduce over the most GPUs measured.
  int most = 0;
  for (const auto& t : tables)
    if (t.collective == "all_reduce" && t.gpus > most) {
      most = t.gpus;
      const AlphaBetaFit f = fit_alpha_beta(t, 1 << 20);
      in["busbw_GBps"] = f.busbw_GBps;
      in["latency_us"] = f.alpha_us / (2.0 * (t.gpus - 1));
    }
}

int refit_collectives(json& profile) {
  if (!profile.contains("measurements") || !profile["measurements"].contains("collectives")) return 0;
  const json& all = profile["measurements"]["collectives"];
  if (!all.is_array()) throw InputError("measurements.collectives", "expected an array, found " + json_excerpt(all));
  std::vector<gpu::CollectiveSample> measured;
  for (std::size_t i = 0; i < all.size(); ++i)
    measured.push_back(read_collective_sample(all[i], "measurements.collectives[" + std::to_string(i) + "]"));
  std::vector<LinkTable> tables;
  for (auto& t : tables_from_measurements(measured)) {
    // Each table fits on its own first, so that one measured at too few sizes is named.
    try {
      collective_fits_json({t}, json::object());
    } catch (const std::invalid_argument& e) {
      throw InputError("measurements.collectives", t.collective + " over " + std::to_string(t.gpus) + " GPUs: " + e.what());
    }
    tables.push_back(std::move(t));
  }
  if (!tables.empty()) set_intra_collectives(profile["intra_node"], tables, profile["intra_node"].at("provenance"));
  int n = static_cast<int>(tables.size());
  // Across nodes: the sweep with one rank per node (the rail, or every rank when each was its own node).
  if (profile["measurements"].contains("across_nodes") &&
      profile["measurements"]["across_nodes"].value("provenance", json::object()).value("nodes", 0) > 1) {
    const json& a = profile["measurements"]["across_nodes"];
    const char* key = a.contains("rail") && !a["rail"].empty() ? "rail" : "world";
    const std::string list = std::string("measurements.across_nodes.") + key;
    if (!a.contains(key)) throw InputError(list, "required field is missing");
    const json& src = a[key];
    if (!src.is_array()) throw InputError(list, "expected an array, found " + json_excerpt(src));
    std::vector<gpu::CollectiveSample> samples;
    for (std::size_t i = 0; i < src.size(); ++i)
      samples.push_back(read_collective_sample(src[i], list + "[" + std::to_string(i) + "]"));
    const auto inter = tables_from_measurements(samples);
    profile["inter_node"]["collectives"] = collective_fits_json(inter, profile["inter_node"].at("provenance"));
    n += static_cast<int>(inter.size());
  }
  return n;
}

json carry_unmeasured(const json& base, const json& origin) {
  if (!base.contains("derive_from")) return base;
  json out = base;
  const std::string from = origin.value("name", base["derive_from"].get<std::string>());
  auto derived = [&](const json& measured) {
    json p = measured.value("provenance", json::object());
    p["source"] = "derived";
    p["reference"] = from;
    p["rule"] = "carried over from " + from + ", where it was measured: calibration on one GPU cannot measure it";
    return p;
  };
  if (!out.contains("interference") && origin.contains("interference")) {
    out["interference"] = origin["interference"];
    out["interference"]["provenance"] = derived(origin["interference"]);
  }
  if (!out.contains("runtime_memory") && origin.contains("runtime_memory")) {
    out["runtime_memory"] = origin["runtime_memory"];
    out["runtime_memory"]["provenance"] = derived(origin["runtime_memory"]);
  }
  return out;
}

json make_profile(const gpu::Measurements& m, const json& base, const std::string& name, const std::string& command,
                  const std::string& date, const GpuLinks& links) {
  json prov = {{"source", "measured"}, {"device", m.device.name}, {"device_count", m.device.count},
               {"driver", m.device.driver}, {"cuda", m.device.cuda_runtime}, {"nccl", m.device.nccl},
               {"date", date}, {"command", command}};
  if (!m.device.uuids.empty()) prov["device_uuids"] = m.device.uuids;
  json p = base;
  p["schema_version"] = 1;
  p["name"] = name;
  p["provenance"] = prov;
  p.erase("derive_from");
  json& g = p["gpu"];
  // The vendor's figure stays beside CUDA's total: a datasheet base's memory_bytes (a profile
  // measured before keeps its datasheet_memory_bytes).
  if (!g.contains("datasheet_memory_bytes") && base.value("provenance", json::object()).value("source", "") != "measured" &&
      g.contains("memory_bytes"))
    g["datasheet_memory_bytes"] = g["memory_bytes"];
  g["memory_bytes"] = m.device.memory_bytes;
  json measured = json::object();
  std::map<std::string, double> best;
  static_assert(std::string_view(gpu::kBf16AccumulateFp32) == std::string_view(kGemmAccumulateFp32));
  // Each dtype's ceiling (the accumulating weight-gradient table is a table, not a dtype).
  for (const auto& s : m.gemm)
    if (s.dtype != gpu::kBf16AccumulateFp32) best[s.dtype] = std::max(best[s.dtype], s.tflops);
  for (const auto& [d, v] : best) measured[d] = v;
  g["measured_tflops"] = measured;
  g["memory_bandwidth_GBps"] = std::max(best_bandwidth(m, "copy", 256e6), best_bandwidth(m, "memcpy_d2d", 256e6));
  g["kernel_launch_us"] = m.launch_overhead_us;
  json gemm = {{"columns", {"m", "n", "k", "tflops"}}};
  for (const auto& s : m.gemm) gemm[s.dtype].push_back({s.m, s.n, s.k, s.tflops});
  g["gemm_tflops"] = gemm;
  const double peak = base.at("gpu").at("peak_tflops").at("bf16").get<double>();
  if (!m.attention.empty()) g["attention"] = attention_json(m.attention, peak);
  json pts = json::array();
  for (const auto& b : m.bandwidth)
    if (b.kernel == "add") pts.push_back({b.bytes, b.GBps});
  g["memory_bound"] = {{"columns", {"bytes", "GBps"}}, {"points", pts}};
  const json mk = memory_kernels_json(m.kernels);
  if (!mk.empty()) g["memory_kernels"] = mk;
  g["provenance"] = prov;
  const double h2d = best_bandwidth(m, "h2d", 0), d2h = best_bandwidth(m, "d2h", 0);
  if (h2d > 0) p["host_link"] = {{"h2d_GBps", h2d}, {"d2h_GBps", d2h}, {"provenance", prov}};
  const auto tables = tables_from_measurements(m.collectives);
  if (!tables.empty()) {
    set_intra_collectives(p["intra_node"], tables, prov);
    p["intra_node"]["provenance"] = prov;
  }
  // Peer copies between every GPU pair with the link found between them.
  json peers = json::array();
  for (const auto& b : m.bandwidth)
    if (b.kernel == "p2p" || b.kernel == "p2p_staged") {
      const auto it = links.find({std::min(b.src, b.dst), std::max(b.src, b.dst)});
      peers.push_back({b.src, b.dst, it == links.end() ? "unknown" : describe_link(it->second), b.GBps, b.kernel == "p2p"});
    }
  if (!peers.empty())
    p["intra_node"]["peer_copies"] = {{"columns", {"src", "dst", "link", "GBps", "peer_access"}}, {"rows", peers}, {"provenance", prov}};
  double q = 0, tk = 0;
  for (const auto& c : m.compression) {
    if (c.kernel == "int8_quantize") q = c.GBps;
    if (c.kernel == "topk_select") tk = c.GBps;
  }
  if (q > 0) p["compression"] = {{"int8_quantize_GBps", q}, {"topk_select_GBps", tk}, {"provenance", prov}};
  if (m.interference_slowdown >= 0) {
    p["interference"] = {{"gemm_slowdown_with_comm", std::max(0.0, m.interference_slowdown)}, {"provenance", prov}};
    if (m.p2p_interference_slowdown >= 0) p["interference"]["gemm_slowdown_with_p2p"] = std::max(0.0, m.p2p_interference_slowdown);
  }
  // Runtime memory: the context as this run measured it; the communicators' figures need two GPUs,
  // and a one-GPU run keeps the base profile's (saying so), or writes no section without them.
  if (m.context_bytes > 0) {
    json rt = {{"context_bytes", m.context_bytes}, {"provenance", prov}};
    const json* old = base.contains("runtime_memory") ? &base["runtime_memory"] : nullptr;
    if (m.nccl_comm_gpus >= 2) {
      rt["nccl_first_communicator_bytes"] = m.nccl_first_comm_bytes;
      rt["nccl_further_communicator_bytes"] = m.nccl_further_comm_bytes;
      rt["provenance"]["rule"] = "communicators over " + std::to_string(m.nccl_comm_gpus) +
                                 " GPUs, after all-reduces of 4 KiB to 64 MiB; per device, median";
    } else if (old && old->contains("nccl_first_communicator_bytes")) {
      rt["nccl_first_communicator_bytes"] = (*old)["nccl_first_communicator_bytes"];
      rt["nccl_further_communicator_bytes"] = (*old)["nccl_further_communicator_bytes"];
      const json op = old->value("provenance", json::object());
      // A base whose own run had one GPU did not measure its communicators either: its rule says
      // where they came from, and that clause is carried on rather than naming the base's run.
      const std::string old_rule = op.value("rule", std::string());
      const std::size_t clause = old_rule.find("NCCL communicators");
      if (op.value("device_count", 0) < 2 && clause != std::string::npos)
        rt["provenance"]["rule"] = "context measured here (one GPU); " + old_rule.substr(clause);
      else
        rt["provenance"]["rule"] = "context measured here (one GPU); NCCL communicators kept from " +
                                 (op.value("source", std::string()) == "derived" ? op.value("reference", std::string("the base profile"))
                                                                                  : std::string("the base profile")) +
                                 ", measured " +
                                 op.value("date", std::string("earlier")) + " on " + std::to_string(op.value("device_count", 0)) +
                                 " x " + op.value("device", std::string("?")) + " (" + op.value("command", std::string("?")) + ")";
    } else {
      rt = nullptr;
    }
    if (!rt.is_null()) p["runtime_memory"] = rt;
  }
  // The raw record, so the fit can be re-checked without the GPU.
  json raw;
  raw["context_bytes"] = m.context_bytes;
  raw["nccl_first_comm_bytes"] = m.nccl_first_comm_bytes;
  raw["nccl_further_comm_bytes"] = m.nccl_further_comm_bytes;
  raw["nccl_comm_gpus"] = m.nccl_comm_gpus;
  raw["gemm_check_rel_error"] = m.gemm_check_rel_error;
  raw["launch_overhead_us"] = m.launch_overhead_us;
  raw["topology"] = m.device.topology;
  raw["notes"] = m.notes;
  for (const auto& b : m.bandwidth)
    raw["bandwidth"].push_back({{"kernel", b.kernel}, {"bytes", b.bytes}, {"time_us", b.time_us}, {"GBps", b.GBps}, {"src", b.src}, {"dst", b.dst}});
  if (!m.attention.empty()) raw["attention"] = attention_samples_json(m.attention);
  for (const auto& c : m.collectives)
    raw["collectives"].push_back({{"collective", c.collective}, {"gpus", c.gpus}, {"bytes", c.bytes}, {"time_us", c.time_us},
                                  {"algbw_GBps", c.algbw_GBps}, {"busbw_GBps", c.busbw_GBps}, {"wrong", c.wrong}});
  if (!m.kernels.empty()) raw["step_kernels"] = kernel_samples_json(m.kernels);
  for (const auto& c : m.compression)
    raw["compression"].push_back({{"kernel", c.kernel}, {"bytes", c.bytes}, {"time_us", c.time_us}, {"GBps", c.GBps}, {"rel_error", c.rel_error}});
  // What this run could not measure (multi-GPU collectives and peer copies with one GPU visible,
  // the cross-node sweep) stays from the base profile's record, as its fitted parts do.
  if (base.contains("measurements") && base["measurements"].is_object()) {
    const json& old = base["measurements"];
    const bool multi = std::any_of(m.collectives.begin(), m.collectives.end(), [](const auto& c) { return c.gpus >= 2; });
    if (!multi && old.contains("collectives")) {
      json kept = json::array();
      for (const auto& c : old["collectives"])
        if (c.value("gpus", 0) >= 2) kept.push_back(c);
      if (!kept.empty()) {
        raw["collectives"] = kept;
        raw["notes"].push_back("multi-GPU collectives: the base profile's record, measured " +
                               old.value("date", base.value("provenance", json::object()).value("date", std::string("earlier"))));
      }
    }
    const bool peers = std::any_of(m.bandwidth.begin(), m.bandwidth.end(), [](const auto& b) { return b.src >= 0; });
    if (!peers && old.contains("bandwidth"))
      for (const auto& b : old["bandwidth"])
        if (b.value("src", -1) >= 0) raw["bandwidth"].push_back(b);
    if (old.contains("across_nodes")) raw["across_nodes"] = old["across_nodes"];
  }
  p["measurements"] = raw;
  return p;
}

std::vector<HealthIssue> health_check(const gpu::Measurements& m, const json& base, double tol) {
  std::vector<HealthIssue> out;
  auto expect = [&](const std::string& what, double got, double want) {
    if (want > 0 && got < (1.0 - tol) * want)
      out.push_back({what + fmt(": measured %.1f, %.0f%% under the expected %.1f", got, 100.0 * (1 - got / want), want)});
  };
  const json& g = base.value("gpu", json::object());
  if (g.contains("measured_tflops") && g["measured_tflops"].contains("bf16")) {
    double best = 0;
    for (const auto& s : m.gemm)
      if (s.dtype == "bf16") best = std::max(best, s.tflops);
    expect("bf16 GEMM TFLOP/s", best, g["measured_tflops"]["bf16"].get<double>());
  }
  const std::string basis = base.value("provenance", json::object()).value("source", "") == "measured" ? " (reference measurement)" : " (datasheet)";
  if (g.contains("memory_bandwidth_GBps"))
    expect("device copy GB/s" + basis, std::max(best_bandwidth(m, "copy", 256e6), best_bandwidth(m, "memcpy_d2d", 256e6)),
           g["memory_bandwidth_GBps"].get<double>());
  if (base.contains("host_link")) expect("host-to-device GB/s" + basis, best_bandwidth(m, "h2d", 0), base["host_link"].value("h2d_GBps", 0.0));
  for (const auto& c : m.collectives)
    if (c.wrong != 0)
      out.push_back({c.collective + " over " + std::to_string(c.gpus) + " GPUs at " + fmt("%.0f", c.bytes) +
                     " bytes: " + std::to_string(c.wrong) + " wrong elements"});
  if (m.gemm_check_rel_error > 1e-2) out.push_back({fmt("bf16 GEMM check: relative error %.2e exceeds 1e-2", m.gemm_check_rel_error)});
  return out;
}

}  // namespace trainsim::calib

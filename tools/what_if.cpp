#include "what_if.h"

#include <cmath>
#include <cstdio>
#include <functional>
#include <iterator>

#include "input_error.h"
#include "layout_search.h"
#include "text_report.h"
#include "worker_pool.h"

namespace trainsim {

const char* part_name(HardwarePart p) {
  switch (p) {
    case HardwarePart::compute: return "compute";
    case HardwarePart::memory: return "memory";
    case HardwarePart::nvlink: return "nvlink";
    case HardwarePart::network: return "network";
    case HardwarePart::latency: return "latency";
    case HardwarePart::storage: return "storage";
    case HardwarePart::loaders: return "loaders";
  }
  return "?";
}

const char* part_description(HardwarePart p) {
  switch (p) {
    case HardwarePart::compute: return "GPU compute (GEMM, attention)";
    case HardwarePart::memory: return "HBM bandwidth";
    case HardwarePart::nvlink: return "NVLink inside a node";
    case HardwarePart::network: return "network bandwidth (NICs)";
    case HardwarePart::latency: return "communication latency";
    case HardwarePart::storage: return "dataset storage (read rate)";
    case HardwarePart::loaders: return "data loader workers";
  }
  return "?";
}

namespace {

void scale_fits(std::vector<CollectiveFit>& fits, double busbw, double alpha) {
  for (CollectiveFit& f : fits) {
    f.busbw_GBps *= busbw;
    f.alpha_us *= alpha;
    for (CollectiveFit::Segment& sg : f.segments) {
      sg.busbw_GBps *= busbw;
      sg.alpha_us *= alpha;
    }
  }
}

}  // namespace

Scenario with_part_scaled(const Scenario& s, HardwarePart p, double factor) {
  Scenario out = s;
  HardwareProfile& hw = out.hardware;
  NetworkSpec& net = out.cluster.network;
  // The profile's collectives measured across nodes apply only while the scenario keeps the
  // profile's network (network_for): a part that changes it changes the profile's figure with it.
  const bool profiled_network = net.nic_Gbps == hw.nic_Gbps && net.efficiency == hw.nic_efficiency &&
                                net.latency_us == hw.inter_latency_us;
  switch (p) {
    case HardwarePart::compute:
      // Attention runs at a measured fraction of the peak, GEMMs at measured rates: both scale.
      for (auto& [dtype, tflops] : hw.peak_tflops) tflops *= factor;
      for (auto& [dtype, tflops] : hw.measured_tflops) tflops *= factor;
      for (auto& [dtype, table] : hw.gemm)
        for (GemmPoint& g : table) g.tflops *= factor;
      break;
    case HardwarePart::memory:
      hw.memory_bandwidth_GBps *= factor;
      hw.datasheet_memory_bandwidth_GBps *= factor;
      for (BandwidthPoint& b : hw.memory_bound) b.GBps *= factor;
      for (auto& [kernel, points] : hw.memory_kernels)
        for (BandwidthPoint& b : points) b.GBps *= factor;
      hw.int8_quantize_GBps *= factor;
      hw.topk_select_GBps *= factor;
      break;
    case HardwarePart::nvlink:
      hw.intra_link_GBps *= factor;
      hw.intra_busbw_GBps *= factor;
      for (PeerCopy& c : hw.peer_copies) c.GBps *= factor;
      scale_fits(hw.intra_collectives, factor, 1.0);
      scale_fits(hw.intra_nvls_collectives, factor, 1.0);
      break;
    case HardwarePart::network:
      net.nic_Gbps *= factor;
      if (profiled_network) hw.nic_Gbps = net.nic_Gbps;
      scale_fits(hw.inter_collectives, factor, 1.0);
      break;
    case HardwarePart::latency:
      hw.intra_latency_us /= factor;
      net.latency_us /= factor;
      if (profiled_network) hw.inter_latency_us = net.latency_us;
      scale_fits(hw.intra_collectives, 1.0, 1.0 / factor);
      scale_fits(hw.intra_nvls_collectives, 1.0, 1.0 / factor);
      scale_fits(hw.inter_collectives, 1.0, 1.0 / factor);
      break;
    case HardwarePart::storage:
      out.data.storage_GBps *= factor;
      break;
    case HardwarePart::loaders:
      out.data.loader_tokens_per_s_per_node *= factor;
      break;
  }
  return out;
}

std::vector<HardwarePart> parts_of(const Scenario& s) {
  std::vector<HardwarePart> parts(std::begin(kHardwareParts), std::end(kHardwareParts));
  if (s.data.given && s.data.storage_GBps > 0) parts.push_back(HardwarePart::storage);
  if (s.data.given && s.data.loader_tokens_per_s_per_node > 0) parts.push_back(HardwarePart::loaders);
  return parts;
}

std::vector<std::pair<SettingRow, Scenario>> nccl_alternatives(const Scenario& s) {
  std::vector<std::pair<SettingRow, Scenario>> out;
  const NetworkSpec& net = s.cluster.network;
  auto add = [&](const std::string& setting, const std::string& description, const std::function<void(NetworkSpec&)>& change) {
    Scenario alt = s;
    change(alt.cluster.network);
    out.push_back({SettingRow{setting, description, {}}, std::move(alt)});
  };
  if (!net.nvls) {
    const std::pair<const char*, const char*> algorithms[] = {{"auto", "all-reduce as NCCL's tuner picks (NCCL_ALGO unset)"},
                                                              {"ring", "all-reduce on rings (NCCL_ALGO=allreduce:ring)"},
                                                              {"tree", "all-reduce on trees (NCCL_ALGO=allreduce:tree)"}};
    for (const auto& [a, description] : algorithms)
      if (net.allreduce_algorithm != a)
        add(std::string("allreduce_algorithm=") + a, description, [a = std::string(a)](NetworkSpec& n) { n.allreduce_algorithm = a; });
  }
  if (!s.hardware.intra_nvls_collectives.empty() && net.allreduce_algorithm == "auto") {
    if (net.nvls) add("nvls=false", "NVLink SHARP off (NCCL_NVLS_ENABLE=0)", [](NetworkSpec& n) { n.nvls = false; });
    else add("nvls=true", "NVLink SHARP on (NCCL_NVLS_ENABLE=1)", [](NetworkSpec& n) { n.nvls = true; });
  }
  return out;
}

std::vector<std::pair<SettingRow, Scenario>> fabric_alternatives(const Scenario& s, int nodes) {
  std::vector<std::pair<SettingRow, Scenario>> out;
  const NetworkSpec& net = s.cluster.network;
  if (net.fabric == "single-switch" || under_one_leaf(s, nodes)) return out;
  for (double ratio : {1.0, 2.0, 4.0}) {
    if (ratio == net.oversubscription) continue;
    char setting[48], description[96];
    std::snprintf(setting, sizeof setting, "oversubscription=%g", ratio);
    if (ratio == 1.0) std::snprintf(description, sizeof description, "uplinks to the spine not oversubscribed (1:1)");
    else std::snprintf(description, sizeof description, "uplinks to the spine oversubscribed %g:1", ratio);
    Scenario alt = s;
    alt.cluster.network.oversubscription = ratio;
    out.push_back({SettingRow{setting, description, {}}, std::move(alt)});
  }
  return out;
}

namespace {

// A part made more than kMaxFactor times faster or slower answers no planning question, and far
// enough (1e308) its times overflow.
constexpr double kMaxFactor = 100;
void check_factor(double factor, const std::string& where) {
  if (factor > 1 && factor <= kMaxFactor) return;
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "the factor must be a number above 1 and at most %g (each part is made that many times faster, then slower), found %g",
                kMaxFactor, factor);
  throw InputError(where, buf);
}

}  // namespace

bool under_one_leaf(const Scenario& s, int nodes) {
  return s.cluster.network.fabric != "single-switch" && nodes <= network_for(s, nodes).shape.nodes_per_leaf();
}

WhatIf what_if(const Scenario& s, const Layout& l, int nodes, double factor, const std::string& where, FabricRows fabric,
               int threads) {
  check_factor(factor, where);
  WhatIf w;
  w.factor = factor;
  // Every step below is one scenario's evaluation, independent of the others: they run on the
  // pool, each into its own slot, and are read in order afterwards.
  const std::vector<HardwarePart> parts = parts_of(s);
  auto nccl = nccl_alternatives(s);
  auto fabrics = fabric.price ? fabric_alternatives(s, nodes) : std::vector<std::pair<SettingRow, Scenario>>{};
  std::vector<Scenario> scaled;
  for (HardwarePart p : parts) {
    scaled.push_back(with_part_scaled(s, p, factor));
    scaled.push_back(with_part_scaled(s, p, 1.0 / factor));
  }
  const std::size_t n_scaled = scaled.size(), n_nccl = nccl.size();
  std::vector<Evaluation> scaled_evals(n_scaled);
  std::vector<const char*> left_out(fabrics.size(), nullptr);
  EvalOptions eo;
  EvalOptions fabric_eo = eo;
  fabric_eo.every_gpu_if_needed = nodes * s.cluster.gpus_per_node <= fabric.every_gpu_up_to;
  WorkerPool::shared().run_each(threads, 1 + n_scaled + n_nccl + fabrics.size(), [&](std::size_t i) {
    if (i == 0) {
      w.base = evaluate(s, l, nodes, eo);
    } else if (--i < n_scaled) {
      scaled_evals[i] = evaluate(scaled[i], l, nodes, eo);
    } else if ((i -= n_scaled) < n_nccl) {
      nccl[i].first.eval = evaluate(nccl[i].second, l, nodes, eo);
    } else {
      i -= n_nccl;
      try {
        fabrics[i].first.eval = evaluate(fabrics[i].second, l, nodes, fabric_eo);
      } catch (const sim::NeedsEveryGpu& e) {
        left_out[i] = e.why;
      }
    }
  });
  double best_gain = -1, worst_loss = -1;
  for (std::size_t k = 0; k < parts.size(); ++k) {
    WhatIfRow row{parts[k], std::move(scaled_evals[2 * k]), std::move(scaled_evals[2 * k + 1])};
    const double gain = w.base.step.step_time_s - row.faster.step.step_time_s;
    const double loss = row.slower.step.step_time_s - w.base.step.step_time_s;
    if (gain > best_gain) best_gain = gain, w.sets_the_step = parts[k];
    if (loss > worst_loss) worst_loss = loss, w.most_sensitive_to_slowdown = parts[k];
    w.rows.push_back(std::move(row));
  }
  for (auto& [row, alt] : nccl) w.settings.push_back(std::move(row));
  for (std::size_t k = 0; k < fabrics.size(); ++k) {
    if (left_out[k]) {
      w.fabric_left_out.push_back(fabrics[k].first.description);
      w.fabric_left_out_because = left_out[k];
    } else {
      w.fabric.push_back(std::move(fabrics[k].first));
    }
  }
  return w;
}

WhatIfSearch what_if_search(const Scenario& s, int nodes, double factor, int threads, const std::string& where) {
  check_factor(factor, where);
  Scenario at = s;
  at.search.nodes = {nodes};
  const std::vector<Candidate> cands = enumerate_layouts(at);
  if (cands.empty())
    throw InputError(s.file + ": search", "no layout in the search space satisfies the constraints at " + format_nodes(nodes));
  SearchOptions so;
  so.threads = threads;
  so.keep = 1;  // the best layout is all each search below reads
  // The space's layouts and their memory do not depend on the hardware's speeds: every search
  // below ranks the same layouts.
  auto best = [&](const Scenario& sc, std::size_t* fit) {
    SearchResult r = search_layouts(sc, cands, so);
    if (fit) *fit = r.evaluated - r.pruned_oom;
    if (r.ranked.empty())
      throw InputError(s.file + ": search", "every layout of the search space at " + format_nodes(nodes) + " is out of memory");
    return std::move(r.ranked.front());
  };
  WhatIfSearch w;
  w.nodes = nodes;
  w.layouts = cands.size();
  const Evaluation base = best(at, &w.fit);
  w.kept = what_if(at, base.layout, nodes, factor, where, FabricRows{false}, threads);  // the parts alone: the fabric is not searched
  for (HardwarePart p : parts_of(at))
    w.rows.push_back({p, best(with_part_scaled(at, p, factor), nullptr), best(with_part_scaled(at, p, 1.0 / factor), nullptr)});
  return w;
}

}  // namespace trainsim

#include "across_nodes.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "alpha_beta_fit.h"
#include "input_error.h"
#include "json_fields.h"
#include "measurements.h"
#include "nccl_bench.h"
#include "nccl_transport.h"
#include "profile_writer.h"

namespace trainsim::calib {

namespace {

using nlohmann::json;

struct World {
  int rank = 0, size = 1;
  int local_rank = 0, local_size = 1;
  int nodes = 1;
  std::string host;
};

World discover() {
  World w;
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w.size);
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w.rank, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &w.local_rank);
  MPI_Comm_size(local, &w.local_size);
  MPI_Comm_free(&local);
  const int leader = w.local_rank == 0 ? 1 : 0;
  MPI_Allreduce(&leader, &w.nodes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  char name[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  MPI_Get_processor_name(name, &len);
  w.host.assign(name, len);
  return w;
}

// NCCL writes its INFO log to a file per rank; the transport check reads it after init. The logs
// go to $TRAINSIM_NCCL_LOG_DIR and are kept when it is set, else to a temporary file.
std::string debug_log_path(int rank) {
  const char* dir = std::getenv("TRAINSIM_NCCL_LOG_DIR");
  const std::filesystem::path base = dir && *dir ? std::filesystem::path(dir) : std::filesystem::temp_directory_path();
  return (base / ("trainsim-nccl-" + std::to_string(::getpid()) + "-rank" + std::to_string(rank) + ".log")).string();
}
bool keep_logs() {
  const char* dir = std::getenv("TRAINSIM_NCCL_LOG_DIR");
  return dir && *dir;
}

// One sweep over `comm`'s ranks (all of them call it), reduced to rank 0 of `comm`: slowest time,
// summed wrong counts. Right after NCCL's init, each rank reads the transport NCCL chose from its
// log; across nodes a socket fall-back on any rank stops every rank before the sweep (`stopped`).
std::vector<gpu::CollectiveSample> sweep(MPI_Comm comm, int device, double max_bytes, bool quick, const World& w,
                                         bool allow_socket, const std::string& log_path, NcclTransport& transport,
                                         bool& stopped) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  gpu::NcclId id{};
  if (rank == 0) id = gpu::new_nccl_id();
  MPI_Bcast(id.bytes, sizeof id.bytes, MPI_CHAR, 0, comm);
  stopped = false;
  auto check = [&]() {
    std::ifstream log(log_path);
    transport = parse_nccl_debug_log(log);
    const int socket = transport.network == "Socket" ? 1 : 0;
    int any = 0;
    MPI_Allreduce(&socket, &any, 1, MPI_INT, MPI_MAX, comm);
    if (!any || allow_socket || w.nodes < 2) return true;
    if (auto err = socket_fallback_error(transport, w.nodes, "rank " + std::to_string(w.rank) + " (" + w.host + ")"))
      std::cerr << "error: " << *err << "\n";
    stopped = true;
    return false;
  };
  auto samples = gpu::bench_collectives_rank(id, size, rank, device, max_bytes, quick, check);
  if (stopped) return {};
  std::vector<double> t(samples.size()), tmax(samples.size());
  std::vector<long> wr(samples.size()), wsum(samples.size());
  for (std::size_t i = 0; i < samples.size(); ++i) t[i] = samples[i].time_us, wr[i] = samples[i].wrong;
  MPI_Reduce(t.data(), tmax.data(), static_cast<int>(t.size()), MPI_DOUBLE, MPI_MAX, 0, comm);
  MPI_Reduce(wr.data(), wsum.data(), static_cast<int>(wr.size()), MPI_LONG, MPI_SUM, 0, comm);
  if (rank == 0)
    for (std::size_t i = 0; i < samples.size(); ++i) {
      auto& s = samples[i];
      s.time_us = tmax[i];
      s.wrong = wsum[i];
      s.algbw_GBps = s.bytes / (s.time_us * 1e3);
      const double n = s.gpus;
      s.busbw_GBps = s.algbw_GBps * (s.collective == "all_reduce" ? 2.0 * (n - 1) / n : s.collective == "send_recv" ? 1.0 : (n - 1) / n);
    }
  return samples;
}

json samples_json(const std::vector<gpu::CollectiveSample>& v, const std::string& scope) {
  json a = json::array();
  for (const auto& c : v)
    a.push_back({{"scope", scope}, {"collective", c.collective}, {"gpus", c.gpus}, {"bytes", c.bytes}, {"time_us", c.time_us},
                 {"algbw_GBps", c.algbw_GBps}, {"busbw_GBps", c.busbw_GBps}, {"wrong", c.wrong}});
  return a;
}

}  // namespace

int calibrate_across_nodes(int* argc, char*** argv, const AcrossNodesOptions& opt) {
  MPI_Init(argc, argv);
  World w = discover();
  const int device = w.local_rank;
  if (opt.rank_per_node) {
    w.nodes = w.size;
    w.local_size = 1;
  }
  int code = 0;
  // Input errors are found on rank 0 before any GPU work, and every rank stops with the same code.
  json base;
  if (w.rank == 0) {
    try {
      std::ifstream in(opt.base);
      if (!in) throw InputError("--base " + opt.base, "cannot open file");
      try {
        base = json::parse(in);
      } catch (const json::parse_error& e) {
        throw InputError("--base " + opt.base, "not valid JSON: " + json_error_text(e));
      }
      if (!base.contains("inter_node") || !base["inter_node"].is_object())
        throw InputError("--base " + opt.base, "has no inter_node section to calibrate");
      const auto dir = std::filesystem::path(opt.out).parent_path();
      if (!dir.empty() && !std::filesystem::is_directory(dir)) throw InputError("--out " + opt.out, "directory does not exist");
    } catch (const InputError& e) {
      std::cerr << "error: " << e.what() << "\n";
      code = 2;
    }
  }
  MPI_Bcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (code != 0) {
    MPI_Finalize();
    return code;
  }

  const std::string log_path = debug_log_path(w.rank);
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "INIT,NET", 1);
  setenv("NCCL_DEBUG_FILE", log_path.c_str(), 1);
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  const double max_bytes = opt.quick ? 256.0 * (1 << 20) : 4.0 * (1ull << 30);


  // Every rank, then one rank per node (the ranks of local index 0: one rail).
  NcclTransport transport;
  bool stopped = false;
  const auto world = sweep(MPI_COMM_WORLD, device, max_bytes, opt.quick, w, opt.allow_socket, log_path, transport, stopped);
  if (stopped) {
    if (!keep_logs()) std::filesystem::remove(log_path);
    MPI_Finalize();
    return 3;
  }
  std::vector<std::string> issues;
  std::vector<gpu::CollectiveSample> rail;
  MPI_Comm rail_comm;
  MPI_Comm_split(MPI_COMM_WORLD, w.local_rank == 0 ? 0 : MPI_UNDEFINED, w.rank, &rail_comm);
  if (w.nodes > 1 && !opt.rank_per_node && rail_comm != MPI_COMM_NULL) {
    NcclTransport t2;
    bool s2 = false;
    rail = sweep(rail_comm, device, max_bytes, opt.quick, w, true, log_path, t2, s2);
  }
  if (rail_comm != MPI_COMM_NULL) MPI_Comm_free(&rail_comm);
  if (!keep_logs()) std::filesystem::remove(log_path);
  // Every rank's card, by UUID, in rank order (each once: ranks may share a GPU).
  std::vector<std::string> cards;
  {
    const std::vector<std::string> local = gpu::describe_devices().uuids;
    char mine[64] = {};
    if (device < static_cast<int>(local.size())) std::snprintf(mine, sizeof mine, "%s", local[device].c_str());
    std::vector<char> all(sizeof mine * static_cast<std::size_t>(w.size));
    MPI_Gather(mine, sizeof mine, MPI_CHAR, all.data(), sizeof mine, MPI_CHAR, 0, MPI_COMM_WORLD);
    for (int r = 0; r < w.size && w.rank == 0; ++r) {
      const std::string u(all.data() + r * sizeof mine);
      if (!u.empty() && std::find(cards.begin(), cards.end(), u) == cards.end()) cards.push_back(u);
    }
  }

  if (w.rank == 0) {
    const json& net = base["inter_node"];
    const int gpn = base.value("intra_node", json::object()).value("gpus_per_node", 8);
    // Per-GPU share of the node's NICs at the datasheet rate and the base profile's efficiency.
    const double share_GBps = net.value("nics_per_node", 1) * net.value("nic_Gbps", 0.0) / 8.0 / std::max(1, std::min(gpn, w.local_size));
    const double expected = share_GBps * net.value("efficiency", 1.0);
    for (const std::vector<gpu::CollectiveSample>* v : {&world, static_cast<const std::vector<gpu::CollectiveSample>*>(&rail)})
      for (const auto& s : *v)
        if (s.wrong != 0)
          issues.push_back(s.collective + " over " + std::to_string(s.gpus) + " ranks at " + std::to_string(static_cast<long>(s.bytes)) +
                           " bytes: " + std::to_string(s.wrong) + " wrong elements");
    json p = base;
    p["name"] = opt.name;
    if (opt.rank_per_node)
      p["description"] = base.value("description", std::string()) +
                         " Its inter_node link was measured on one host with every rank counted as its own node: NCCL's "
                         "network transport between GPUs whose peer-to-peer and shared-memory paths were switched off.";
    const gpu::DeviceInfo dev = gpu::describe_devices();
    json prov = {{"source", "measured"}, {"device", dev.name}, {"device_count", dev.count}, {"driver", dev.driver},
                 {"cuda", dev.cuda_runtime}, {"nccl", dev.nccl}, {"command", opt.command}, {"date", opt.date}, {"ranks", w.size},
                 {"nodes", w.nodes}, {"ranks_per_node", w.local_size}, {"network", transport.network}, {"nics", transport.nics},
                 {"rank_per_node", opt.rank_per_node}, {"device_uuids", cards}};
    json& raw = p["measurements"];
    if (!raw.is_object()) raw = json::object();
    raw["across_nodes"] = {{"provenance", prov}, {"world", samples_json(world, "world")}, {"rail", samples_json(rail, "rail")}};
    if (w.nodes > 1) {
      const auto li = link_rate_issues(rail.empty() ? world : rail, expected, 0.15, 64e6, "inter-node (" + transport.network + ")");
      issues.insert(issues.end(), li.begin(), li.end());
      // The rail all-reduce (one GPU per node) sets the per-GPU network rate and latency the
      // simulator uses: efficiency against the datasheet share, latency per ring step.
      LinkTable t{"all_reduce", w.nodes, {}, "calibrate --across-nodes"};
      for (const auto& s : rail.empty() ? world : rail)
        if (s.collective == "all_reduce") t.points.push_back({s.bytes, s.time_us, s.algbw_GBps, s.busbw_GBps, s.wrong});
      try {
        const AlphaBetaFit f = fit_alpha_beta(t, 1 << 20);
        json& n = p["inter_node"];
        n["efficiency"] = std::min(1.0, f.busbw_GBps / (net.value("nic_Gbps", 0.0) / 8.0));
        n["latency_us"] = f.alpha_us / std::max(1, 2 * (w.nodes - 1));
        n["provenance"] = prov;
        // Every collective of the one-rank-per-node sweep, as measured curves for groups with one
        // member per node.
        n["collectives"] = collective_fits_json(tables_from_measurements(rail.empty() ? world : rail), prov);
        std::printf("inter-node all-reduce over %d nodes: busbw %.1f GB/s, alpha %.1f us (r2 %.4f)\n", w.nodes, f.busbw_GBps,
                    f.alpha_us, f.r2);
      } catch (const std::invalid_argument& e) {
        // Too few large messages to fit (a very short sweep): inter_node keeps the base values.
        issues.push_back(std::string("inter-node all-reduce fit: ") + e.what() + "; inter_node keeps the base profile's values");
      }
    } else {
      std::printf("calibrate --across-nodes: all %d ranks are on one node (%s); the inter-node path was not measured and "
                  "inter_node keeps the base profile's values\n", w.size, w.host.c_str());
    }
    for (const auto& i : issues) std::cerr << "health: " << i << "\n";
    const std::string tmp = opt.out + ".tmp";
    bool written = false;
    {
      std::ofstream out(tmp);
      out << p.dump(1) << "\n";
      written = static_cast<bool>(out);
    }
    std::error_code ec;
    if (written) std::filesystem::rename(tmp, opt.out, ec);
    if (!written || ec) {
      std::filesystem::remove(tmp, ec);
      std::cerr << "error: --out " << opt.out << ": failed while writing the profile\n";
      code = 2;
    } else {
      std::printf("calibrate: wrote %s (%d ranks on %d nodes, NCCL network %s, %zu health issues)\n", opt.out.c_str(), w.size,
                  w.nodes, transport.network.empty() ? "not logged" : transport.network.c_str(), issues.size());
      code = issues.empty() ? 0 : 3;
    }
  }
  MPI_Bcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return code;
}

}  // namespace trainsim::calib

#include "nccl_transport.h"

#include <algorithm>
#include <cstdio>
#include <map>

namespace trainsim::calib {

NcclTransport parse_nccl_debug_log(std::istream& log) {
  NcclTransport t;
  std::map<std::string, std::vector<std::string>> nics_by_module;
  std::string line;
  while (std::getline(log, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find("NCCL INFO") == std::string::npos) continue;
    // "NCCL INFO Using network IB" (a plugin's name may contain spaces: "AWS Libfabric").
    if (const auto p = line.find("NCCL INFO Using network "); p != std::string::npos) {
      t.network = line.substr(p + 24);
      while (!t.network.empty() && t.network.back() == ' ') t.network.pop_back();
      continue;
    }
    // "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.0.0.1<0>"
    // "NET/Socket : Using [0]eth0:10.0.0.1<0>"
    const auto net_pos = line.find("NET/");
    const auto using_pos = line.find(" : Using [");
    if (net_pos == std::string::npos || using_pos == std::string::npos || using_pos < net_pos) continue;
    const std::string module = line.substr(net_pos + 4, using_pos - net_pos - 4);
    auto& nics = nics_by_module[module];
    // The device list ends at "; OOB"; entries are "[index]name" (NCCL 2.28 also logs "[RO]" flags).
    const std::size_t end = std::min(line.size(), line.find(';', using_pos));
    for (std::size_t p = line.find('[', using_pos); p != std::string::npos && p < end; p = line.find('[', p)) {
      const std::size_t close = line.find(']', p);
      if (close == std::string::npos || close >= end) break;
      std::size_t e = close + 1;
      while (e < end && line[e] != ' ') ++e;
      const std::string index = line.substr(p + 1, close - p - 1);
      const std::string nic = line.substr(close + 1, e - close - 1);
      const bool numbered = !index.empty() && index.find_first_not_of("0123456789") == std::string::npos;
      if (numbered && !nic.empty() && std::find(nics.begin(), nics.end(), nic) == nics.end()) nics.push_back(nic);
      p = e;
    }
  }
  if (auto it = nics_by_module.find(t.network); it != nics_by_module.end()) t.nics = it->second;
  return t;
}

std::optional<std::string> socket_fallback_error(const NcclTransport& t, int nodes, const std::string& where) {
  if (nodes < 2 || t.network != "Socket") return std::nullopt;
  std::string nics;
  for (const auto& n : t.nics) nics += (nics.empty() ? "" : ", ") + n;
  return "NCCL fell back to TCP sockets (NET/Socket" + (nics.empty() ? std::string() : " over " + nics) + ") on " +
         where + ": inter-node numbers would measure TCP, not InfiniBand/RoCE. Check that the IB/RoCE devices "
         "are up (ibv_devinfo), that NCCL_IB_DISABLE is not set and NCCL_IB_HCA names them, or pass "
         "--allow-socket to measure the socket path on purpose.";
}

std::vector<std::string> link_rate_issues(const std::vector<gpu::CollectiveSample>& samples, double expected_busbw_GBps,
                                          double tol, double min_bytes, const std::string& link) {
  std::vector<std::string> out;
  if (!(expected_busbw_GBps > 0)) return out;
  // Best bus bandwidth per collective and group size over the large messages.
  std::map<std::pair<std::string, int>, double> best;
  for (const auto& s : samples)
    if (s.bytes >= min_bytes && s.collective != "send_recv") {
      double& b = best[{s.collective, s.gpus}];
      b = std::max(b, s.busbw_GBps);
    }
  for (const auto& [key, bw] : best)
    if (bw < (1.0 - tol) * expected_busbw_GBps) {
      char buf[256];
      std::snprintf(buf, sizeof buf, "%s over %d GPUs on %s: bus bandwidth %.1f GB/s, %.0f%% under the expected %.1f GB/s",
                    key.first.c_str(), key.second, link.c_str(), bw, 100.0 * (1.0 - bw / expected_busbw_GBps),
                    expected_busbw_GBps);
      out.push_back(buf);
    }
  return out;
}

}  // namespace trainsim::calib

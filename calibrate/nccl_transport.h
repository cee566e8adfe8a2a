#pragma once
// What NCCL says about its inter-node transport, read from its debug log (NCCL_DEBUG=INFO with
// NCCL_DEBUG_SUBSYS=INIT,NET), and the checks calibrate makes on it and on measured link rates.
#include <istream>
#include <optional>
#include <string>
#include <vector>

#include "measurements.h"

namespace trainsim::calib {

struct NcclTransport {
  std::string network;            // NCCL's network module: "IB", "Socket", a plugin's name; "" if not logged
  std::vector<std::string> nics;  // devices the module reported using, e.g. "mlx5_0:1/IB" or "eth0:10.0.0.1<0>"
};

// Reads "NCCL INFO Using network X" and the "NET/X : Using [i]dev ..." lines.
NcclTransport parse_nccl_debug_log(std::istream& log);

// Across nodes, a fall-back to TCP sockets makes every inter-node number meaningless for an IB or
// RoCE cluster: the message to stop with, or nothing when the transport is fine (or one node).
std::optional<std::string> socket_fallback_error(const NcclTransport& t, int nodes, const std::string& where);

// Collectives whose bus bandwidth at large messages (at least `min_bytes`) stays more than `tol`
// under `expected_busbw_GBps`: one line each, naming the collective, group size and rates.
std::vector<std::string> link_rate_issues(const std::vector<gpu::CollectiveSample>& samples, double expected_busbw_GBps,
                                          double tol, double min_bytes, const std::string& link);

}  // namespace trainsim::calib

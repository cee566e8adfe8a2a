#pragma once
// `calibrate --across-nodes`, launched under mpirun with one rank per GPU: the NCCL collectives over
// every rank (the inter-node path when the ranks span nodes) and over one rank per node (one rail),
// with the transport check, written into a copy of a measured single-node profile.
#include <string>

namespace trainsim::calib {

struct AcrossNodesOptions {
  std::string base, out, name, command, date;
  bool quick = false;
  bool allow_socket = false;
  // Count every rank as its own node: for measuring a network path forced on one host (NCCL's
  // peer-to-peer and shared-memory transports disabled), which then calibrates inter_node.
  bool rank_per_node = false;
};

// Returns the process exit code: 0, 2 for bad input, 3 for a failed health check (socket
// fall-back across nodes, wrong results, a link class more than 15% under its expected rate).
int calibrate_across_nodes(int* argc, char*** argv, const AcrossNodesOptions& opt);

}  // namespace trainsim::calib

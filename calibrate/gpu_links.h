#pragma once
// The link type between each pair of GPUs, read from `nvidia-smi topo -m`'s matrix: NV<k> is k
// bonded NVLinks, PIX/PXB/PHB/NODE/SYS a PCIe path (one switch, several, the host bridge, within a
// NUMA node, across sockets).
#include <map>
#include <string>
#include <utility>

namespace trainsim::calib {

using GpuLinks = std::map<std::pair<int, int>, std::string>;  // (a, b) with a < b -> "NV18", "SYS", ...

// Parses the matrix; pairs it does not show are absent. Never throws on odd text.
GpuLinks parse_topo_matrix(const std::string& text);

// Runs `nvidia-smi topo -m` and parses it; empty when nvidia-smi is missing or prints no matrix.
GpuLinks read_gpu_links();

// "NVLink x18" for NV18, "PCIe (SYS)" for SYS, the code itself otherwise.
std::string describe_link(const std::string& code);

}  // namespace trainsim::calib

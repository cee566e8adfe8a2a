#pragma once
// The physical cluster as a graph (Boost.Graph): GPUs, one NVSwitch per node, NICs, leaf (or rail)
// switches and a spine. Every edge is one direction of a link with its capacity; routes are
// shortest paths by hop count that never pass through a third GPU.
//
// A GPU's only neighbours are its node's NVSwitch and its rail's NIC, so a route inside a node is
// GPU -> NVSwitch -> GPU and one across nodes is GPU -> NIC -> ... -> NIC -> GPU. Where the NICs
// and switches form a tree (every fabric built here: one spine vertex), the middle part is the
// tree's one path between the two NICs, found through their lowest common ancestor: a route costs
// a few steps and no memory, so the full mode's routes stay linear in the GPU count (a table of
// every pair took 4.8 GB at 8,192 GPUs). Otherwise each route is searched breadth-first.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine.h"

namespace trainsim::sim {

enum class Fabric { single_switch, fat_tree, rail_optimized };
Fabric parse_fabric(const std::string& s);
const char* to_string(Fabric f);

struct ClusterShape {
  int nodes = 1;
  int gpus_per_node = 8;
  int nics_per_node = 8;
  double nvlink_Bps = 0;  // achievable per GPU port, per direction
  double nic_Bps = 0;     // achievable per NIC, per direction
  Fabric fabric = Fabric::fat_tree;
  double oversubscription = 1.0;
  // The NIC ports of a leaf switch (fat-tree) or of a rail switch (rail-optimized) that face the
  // nodes: by default half of a 64-port switch (NVIDIA Quantum-2 QM9700: 64 x 400 Gb/s), the other
  // half up to the spine.
  int nics_per_leaf = 32;
  // Each NIC's rate as a fraction of nic_Bps (NIC n of node k at k * nics_per_node + n), for a
  // degraded link; empty: every NIC at nic_Bps.
  std::vector<double> nic_speed;

  int gpus() const { return nodes * gpus_per_node; }
  int node_of(int gpu) const { return gpu / gpus_per_node; }
  // The NIC a GPU uses across nodes: GPUs are spread evenly over the node's NICs (rails).
  int rail_of(int gpu) const { return (gpu % gpus_per_node) * nics_per_node / gpus_per_node; }
  // The NIC a GPU's traffic across nodes leaves by, numbered as nic_speed is.
  int nic_of(int gpu) const { return node_of(gpu) * nics_per_node + rail_of(gpu); }
  double nic_speed_of(int nic) const { return nic_speed.empty() ? 1.0 : nic_speed[nic]; }
  // The nodes under one leaf switch, or under one group of rail switches: a fat-tree leaf takes
  // every NIC of its nodes; a rail switch takes one NIC (its rail's) of each node, so a group of
  // rail switches, one per NIC index, spans as many nodes as one switch has ports (a DGX SuperPOD
  // scalable unit: 32 nodes under 8 rail switches of 32 node ports).
  int nodes_per_leaf() const {
    return std::max(1, fabric == Fabric::rail_optimized ? nics_per_leaf : nics_per_leaf / nics_per_node);
  }
  // Whether traffic between leaf switches (fat-tree leaves, rail-optimized rail switches) shares
  // uplinks with less capacity than the leaves have down: more than one leaf, oversubscribed.
  bool leaf_uplinks_bind() const { return fabric != Fabric::single_switch && oversubscription > 1.0 && nodes > nodes_per_leaf(); }
  // What one GPU gets of its node's network when every GPU sends at once: its rail's NIC, shared
  // with the GPUs on the same rail (a GPU uses its rail's NIC only, so with fewer GPUs than NICs
  // some NICs stay idle).
  double nic_share_Bps() const { return nic_Bps * nics_per_node / std::max(gpus_per_node, nics_per_node); }
  // What one GPU gets of its leaf's uplinks when every GPU of the leaf sends across them at once: a
  // fat-tree leaf's uplinks serve every NIC of its nodes, so with more NICs than GPUs a GPU's share
  // exceeds its one NIC's over the ratio; a rail switch's serve one rail, shared by its GPUs.
  double leaf_uplink_share_Bps() const {
    const double down = fabric == Fabric::fat_tree ? nic_Bps * nics_per_node / gpus_per_node : nic_share_Bps();
    return down / oversubscription;
  }
};

class Topology {
 public:
  explicit Topology(const ClusterShape& shape);
  ~Topology();
  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;

  // Adds one engine link per directed edge; must be called once before route().
  void install(Engine& engine);
  // Engine links crossed from GPU `src` to GPU `dst` (empty when src == dst), valid until the next
  // call.
  std::span<const LinkId> route(int src, int dst);
  // The same route found by a breadth-first search of the whole graph (what route() does where the
  // network is not a tree).
  std::span<const LinkId> route_by_search(int src, int dst);
  // Whether route() finds routes across nodes through the NIC and switch tree.
  bool routes_by_tree() const { return !parent_.empty(); }
  const ClusterShape& shape() const { return shape_; }
  std::size_t vertex_count() const;
  std::size_t edge_count() const;

 private:
  struct Graph;
  void build_tree();
  ClusterShape shape_;
  std::unique_ptr<Graph> g_;
  std::vector<LinkId> edge_link_;  // by edge index; the two directions of a link are 2k and 2k + 1
  // Each GPU's edge to its NVSwitch and to its NIC (the reverse edges are index ^ 1).
  std::vector<std::int32_t> gpu_nvswitch_edge_, gpu_nic_edge_;
  // The NIC and switch tree rooted at the first switch: each vertex's parent, depth, and the edge
  // from it up to its parent (its parent's edge down to it is that index ^ 1); empty when the NICs
  // and switches do not form one tree.
  std::vector<std::int32_t> parent_, depth_, up_edge_;
  std::vector<LinkId> path_, down_;  // route()'s result and scratch
};

}  // namespace trainsim::sim

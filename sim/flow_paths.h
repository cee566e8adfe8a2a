#pragma once
// Where a step's flows run: the engine links a flow between two GPUs crosses, for the full
// cluster (every GPU simulated) or for one representative GPU per pipeline stage.
#include <array>
#include <map>
#include <utility>
#include <vector>

#include "engine.h"
#include "topology.h"

namespace trainsim::sim {

// Maps a flow between GPUs to the engine links it crosses.
class PathProvider {
 public:
  virtual ~PathProvider() = default;
  virtual bool simulated(int gpu) const = 0;
  // `group_nodes_per_leaf`: for ring collectives, how many of the group's nodes share a leaf (0 for
  // point-to-point transfers).
  virtual void path(int src, int dst, int group_nodes_per_leaf, std::vector<LinkId>& out) = 0;
};

// Every GPU, on the cluster's routed topology. On a rail-optimized fabric a flow between nodes
// stays on the receiver's rail.
class FullPaths : public PathProvider {
 public:
  FullPaths(Engine& e, const ClusterShape& s) : shape_(s), topo_(s) { topo_.install(e); }
  bool simulated(int) const override { return true; }
  void path(int src, int dst, int, std::vector<LinkId>& out) override;

 private:
  ClusterShape shape_;
  Topology topo_;
};

// One representative GPU per pipeline stage, or per TP group of every replica. Every GPU it stands
// for does the same work at the same time, so each representative gets the per-GPU share of what
// it shares: its own NVLink port, 1/G of its node's NIC capacity (G GPUs per node, all active;
// representatives on one NIC share one link of their shares together, so an idle group's share
// goes to the others), and over an oversubscribed fabric the per-GPU
// share of its leaf's links to the spine, up for the traffic that leaves the leaf and down for
// what enters it; where several stages lie within one leaf, their representatives share those
// links, each loading them for one GPU of its stage. With degraded NICs each representative's NIC
// share runs at `nic_speed` (by position in `reps`): the slowest NIC among those of its stage's
// GPUs, in every replica or in one (StepInput::speed_replica). `ring_nic_speed`, where given, caps
// the flows that stand for a collective's edges across nodes: a ring runs at its slowest hop, which
// may lie in another replica than the representative's own (a tree across NICs of different speeds
// is not simulated this way: Builder::cached_plan). On a rail-optimized fabric an edge between
// representatives on different rails is handed over NVLink to the representative on the
// receiver's rail, whose NIC sends it, as FullPaths routes it.
class SymmetricPaths : public PathProvider {
 public:
  SymmetricPaths(Engine& e, const ClusterShape& s, const std::vector<int>& reps, const std::vector<double>& nic_speed,
                 const std::vector<double>& ring_nic_speed = {});
  bool simulated(int gpu) const override { return gpu < static_cast<int>(is_rep_.size()) && is_rep_[gpu]; }
  void path(int src, int dst, int group_nodes_per_leaf, std::vector<LinkId>& out) override;

 private:
  struct Links {
    LinkId nvl_out = 0, nvl_in = 0, nic_out = 0, nic_in = 0;
    // The collective's slowest hop (where ring_nic_speed is given; else -1).
    LinkId ring_cap = -1;
  };
  Engine& e_;
  ClusterShape s_;
  double nic_share_ = 0;
  // The link between a leaf and the spine, up (`up_`) or down (`down_`), by leaf, rail and the L of
  // the rings on it (1: the link itself; else a fractional link of it). Its capacity is the per-GPU
  // share of the leaf's uplinks times the representatives on the leaf (on a rail-optimized fabric,
  // those on the rail: each rail switch has uplinks of its own).
  LinkId spine_link(std::map<std::array<int, 3>, LinkId>& links, int leaf, int rail, int L);
  int leaf_of(int gpu) const { return s_.node_of(gpu) / s_.nodes_per_leaf(); }
  int rail_key(int gpu) const { return s_.fabric == Fabric::rail_optimized ? s_.rail_of(gpu) : 0; }
  std::map<int, Links> links_;
  std::vector<char> is_rep_;
  std::map<std::pair<int, int>, int> reps_in_leaf_;  // by leaf and rail_key
  std::map<std::array<int, 3>, LinkId> up_, down_;
};

}  // namespace trainsim::sim

#include "flow_paths.h"

#include <algorithm>
#include <stdexcept>

namespace trainsim::sim {

void FullPaths::path(int src, int dst, int, std::vector<LinkId>& out) {
  const ClusterShape& s = shape_;
  if (s.fabric == Fabric::rail_optimized && s.node_of(src) != s.node_of(dst) && s.rail_of(src) != s.rail_of(dst)) {
    // Traffic between nodes stays on one rail: the sender hands its data over NVLink to the GPU
    // of its node on the receiver's rail, whose NIC sends it (NCCL keeps a ring's channel on one
    // NIC of every node, NCCL_CROSS_NIC's default, and sends through another GPU's NIC by PXN).
    const int relay = s.node_of(src) * s.gpus_per_node + dst % s.gpus_per_node;
    const auto& hand_over = topo_.route(src, relay);
    out.assign(hand_over.begin(), hand_over.end());
    const auto& across = topo_.route(relay, dst);
    out.insert(out.end(), across.begin(), across.end());
    return;
  }
  const auto& r = topo_.route(src, dst);
  out.assign(r.begin(), r.end());
}

SymmetricPaths::SymmetricPaths(Engine& e, const ClusterShape& s, const std::vector<int>& reps, const std::vector<double>& nic_speed,
                               const std::vector<double>& ring_nic_speed)
    : e_(e), s_(s) {
  nic_share_ = s.nic_share_Bps();
  is_rep_.assign(s.gpus(), 0);
  for (int g : reps) is_rep_[g] = 1;
  if (s.leaf_uplinks_bind())
    for (int g : reps) ++reps_in_leaf_[{leaf_of(g), rail_key(g)}];
  // Representatives that send through one NIC (one per TP group, groups smaller than the GPUs
  // sharing a NIC) share its links: each stands for its group's GPUs, so the NIC's capacity is
  // their per-GPU shares together, and a group gets more of it while the others are idle.
  std::map<int, int> reps_on_nic;
  for (int g : reps) ++reps_on_nic[s.nic_of(g)];
  std::map<int, std::pair<LinkId, LinkId>> nic_links;
  for (std::size_t i = 0; i < reps.size(); ++i) {
    Links l;
    l.nvl_out = e.add_link(s.nvlink_Bps);
    l.nvl_in = e.add_link(s.nvlink_Bps);
    const int nic = s.nic_of(reps[i]);
    auto shared = nic_links.find(nic);
    if (shared == nic_links.end()) {
      const double capacity = nic_share_ * reps_on_nic[nic] * nic_speed[i];
      shared = nic_links.emplace(nic, std::make_pair(e.add_link(capacity), e.add_link(capacity))).first;
    }
    l.nic_out = shared->second.first;
    l.nic_in = shared->second.second;
    // Every representative gets one, so that the links' order does not depend on the speeds (routed
    // plans are kept across steps by the layout and the cluster's shape).
    if (!ring_nic_speed.empty()) l.ring_cap = e.add_link(nic_share_ * std::min(ring_nic_speed[i], nic_speed[i]));
    links_[reps[i]] = l;
  }
}

void SymmetricPaths::path(int src, int dst, int group_nodes_per_leaf, std::vector<LinkId>& out) {
  out.clear();
  // A ring neighbour that is not simulated behaves like the source itself.
  const int to = simulated(dst) ? dst : src;
  Links& a = links_.at(src);
  Links& b = links_.at(to);
  if (s_.node_of(src) == s_.node_of(dst)) {
    out = {a.nvl_out, b.nvl_in};
    return;
  }
  // Between representatives on different rails of a rail-optimized fabric the sender hands its data
  // over NVLink to the GPU of its node on the receiver's rail, whose NIC sends it (as FullPaths):
  // with one representative per TP group, that GPU is another group's representative.
  int sender = src;
  if (s_.fabric == Fabric::rail_optimized && to == dst && s_.rail_of(src) != s_.rail_of(dst)) {
    sender = s_.node_of(src) * s_.gpus_per_node + dst % s_.gpus_per_node;
    auto relay = links_.find(sender);
    if (relay == links_.end()) throw std::logic_error("no representative on the receiver's rail to send through");
    out = {a.nvl_out, relay->second.nvl_in, relay->second.nic_out, b.nic_in};
  } else {
    out = {a.nic_out, b.nic_in};
  }
  if (to != dst && a.ring_cap >= 0) out.push_back(a.ring_cap);
  if (!s_.leaf_uplinks_bind()) return;
  // A flow to a simulated GPU crosses the leaves where it does (a pipeline transfer, a ring or tree
  // edge between representatives); one to a GPU that is not simulated stands for its ring's edges.
  const int per_leaf = s_.nodes_per_leaf();
  const bool own_edge = group_nodes_per_leaf == 0 || to == dst;
  const bool p2p_crosses = own_edge && s_.node_of(src) / per_leaf != s_.node_of(dst) / per_leaf;
  const bool ring_crosses = !own_edge;
  if (!p2p_crosses && !ring_crosses) return;
  // Up the sender's leaf and down the receiver's, each the per-GPU share of its leaf's uplink (every
  // GPU of a leaf does the same); a ring with L of its nodes in a leaf sends 1/L of its
  // node-crossing traffic between leaves, so its flow loads them as 1/L of a flow.
  const int L = ring_crosses ? group_nodes_per_leaf : 1;
  out.push_back(spine_link(up_, leaf_of(sender), rail_key(sender), L));
  out.push_back(spine_link(down_, leaf_of(to), rail_key(to), L));
}

LinkId SymmetricPaths::spine_link(std::map<std::array<int, 3>, LinkId>& links, int leaf, int rail, int L) {
  auto it = links.find({leaf, rail, L});
  if (it != links.end()) return it->second;
  LinkId base;
  auto whole = links.find({leaf, rail, 1});
  if (whole != links.end()) {
    base = whole->second;
  } else {
    // A stage of whole leaves has its representative alone on its leaf; stages within a leaf share
    // it, each representative standing for as many GPUs as the others.
    const double share = reps_in_leaf_.at({leaf, rail}) * s_.leaf_uplink_share_Bps();
    base = links.emplace(std::array<int, 3>{leaf, rail, 1}, e_.add_link(share)).first->second;
  }
  return links.emplace(std::array<int, 3>{leaf, rail, L}, e_.add_fractional_link(base, L)).first->second;
}

}  // namespace trainsim::sim

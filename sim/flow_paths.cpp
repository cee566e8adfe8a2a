#include "flow_paths.h"

namespace trainsim::sim {

void FullPaths::path(int src, int dst, int, std::vector<LinkId>& out) {
  const auto& r = topo_.route(src, dst);
  out.assign(r.begin(), r.end());
}

SymmetricPaths::SymmetricPaths(Engine& e, const ClusterShape& s, const std::vector<int>& reps, const std::vector<double>& nic_speed)
    : e_(e), s_(s) {
  nic_share_ = s.nic_share_Bps();
  is_rep_.assign(s.gpus(), 0);
  for (int g : reps) is_rep_[g] = 1;
  for (std::size_t i = 0; i < reps.size(); ++i) {
    Links l;
    l.nvl_out = e.add_link(s.nvlink_Bps);
    l.nvl_in = e.add_link(s.nvlink_Bps);
    l.nic_out = e.add_link(nic_share_ * nic_speed[i]);
    l.nic_in = e.add_link(nic_share_ * nic_speed[i]);
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
  out = {a.nic_out, b.nic_in};
  const int per_leaf = s_.nodes_per_leaf();
  if (s_.oversubscription > 1.0 && s_.nodes > per_leaf) {
    const bool p2p_crosses = group_nodes_per_leaf == 0 && s_.node_of(src) / per_leaf != s_.node_of(dst) / per_leaf;
    const bool ring_crosses = group_nodes_per_leaf > 0;
    if (p2p_crosses || ring_crosses) {
      // A ring with L of its nodes in a leaf sends 1/L of its node-crossing traffic up the leaf.
      const int L = ring_crosses ? group_nodes_per_leaf : 1;
      auto key = std::make_pair(src, L);
      auto it = uplink_.find(key);
      if (it == uplink_.end()) it = uplink_.emplace(key, e_.add_link(nic_share_ * L / s_.oversubscription)).first;
      out.push_back(it->second);
    }
  }
}

}  // namespace trainsim::sim

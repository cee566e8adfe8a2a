#include "topology.h"

#include <boost/graph/adjacency_list.hpp>
#include <algorithm>
#include <stdexcept>

namespace trainsim::sim {

Fabric parse_fabric(const std::string& s) {
  if (s == "single-switch") return Fabric::single_switch;
  if (s == "fat-tree") return Fabric::fat_tree;
  if (s == "rail-optimized") return Fabric::rail_optimized;
  throw std::invalid_argument("unknown fabric " + s);
}

const char* to_string(Fabric f) {
  switch (f) {
    case Fabric::single_switch: return "single-switch";
    case Fabric::fat_tree: return "fat-tree";
    case Fabric::rail_optimized: return "rail-optimized";
  }
  return "?";
}

struct EdgeProps {
  double capacity_Bps = 0;
  int index = 0;
};
using BoostGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, boost::no_property, EdgeProps>;

struct Topology::Graph {
  BoostGraph g;
  int edges = 0;
  // Returns the index of the edge a -> b; b -> a is the next one.
  int link(int a, int b, double cap) {
    boost::add_edge(a, b, EdgeProps{cap, edges++}, g);
    boost::add_edge(b, a, EdgeProps{cap, edges++}, g);
    return edges - 2;
  }
};

Topology::Topology(const ClusterShape& s) : shape_(s), g_(std::make_unique<Graph>()) {
  if (s.nodes < 1 || s.gpus_per_node < 1 || s.nics_per_node < 1 || !(s.nvlink_Bps > 0) || !(s.nic_Bps > 0))
    throw std::invalid_argument("cluster shape needs positive counts and bandwidths");
  if (!s.nic_speed.empty()) {
    if (static_cast<int>(s.nic_speed.size()) != s.nodes * s.nics_per_node) throw std::invalid_argument("nic_speed needs one speed per NIC");
    for (double x : s.nic_speed)
      if (!(x > 0)) throw std::invalid_argument("NIC speeds must be positive");
  }
  // Vertex numbering: GPUs, then one NVSwitch per node, then NICs, then switches.
  const int gpus = s.gpus();
  const int nvswitch0 = gpus;
  const int nic0 = nvswitch0 + s.nodes;
  const int nics = s.nodes * s.nics_per_node;
  const int sw0 = nic0 + nics;
  const int per_leaf = s.nodes_per_leaf();
  const int leaf_groups = (s.nodes + per_leaf - 1) / per_leaf;
  BoostGraph& g = g_->g;
  for (int v = 0; v < sw0; ++v) boost::add_vertex(g);
  gpu_nvswitch_edge_.resize(gpus);
  gpu_nic_edge_.resize(gpus);
  for (int gpu = 0; gpu < gpus; ++gpu) {
    const int node = s.node_of(gpu);
    gpu_nvswitch_edge_[gpu] = g_->link(gpu, nvswitch0 + node, s.nvlink_Bps);
    // GPU to its rail NIC through the PCIe switch. Assumed never to bind (4x the NIC rate): each GPU's
    // path carries only its own traffic, at most its NIC's, and symmetric mode has no such link.
    gpu_nic_edge_[gpu] = g_->link(gpu, nic0 + node * s.nics_per_node + s.rail_of(gpu), s.nic_Bps * 4);
  }
  if (s.nodes == 1) return;
  auto add_switch = [&]() { return static_cast<int>(boost::add_vertex(g)); };
  switch (s.fabric) {
    case Fabric::single_switch: {
      const int sw = add_switch();
      for (int n = 0; n < nics; ++n) g_->link(nic0 + n, sw, s.nic_Bps * s.nic_speed_of(n));
      break;
    }
    case Fabric::fat_tree: {
      // Leaves hold nodes_per_leaf nodes; each leaf's uplink capacity is its down capacity over the
      // oversubscription ratio. One spine vertex aggregates the core.
      const int spine = add_switch();
      std::vector<int> leaf(leaf_groups);
      for (int l = 0; l < leaf_groups; ++l) {
        leaf[l] = add_switch();
        const int nodes_here = std::min(per_leaf, s.nodes - l * per_leaf);
        g_->link(leaf[l], spine, nodes_here * s.nics_per_node * s.nic_Bps / s.oversubscription);
      }
      for (int n = 0; n < nics; ++n) g_->link(nic0 + n, leaf[(n / s.nics_per_node) / per_leaf], s.nic_Bps * s.nic_speed_of(n));
      break;
    }
    case Fabric::rail_optimized: {
      // One rail switch per NIC index per group of nodes; rails meet at the spine.
      const int spine = add_switch();
      for (int l = 0; l < leaf_groups; ++l) {
        const int nodes_here = std::min(per_leaf, s.nodes - l * per_leaf);
        for (int r = 0; r < s.nics_per_node; ++r) {
          const int rail = add_switch();
          g_->link(rail, spine, nodes_here * s.nic_Bps / s.oversubscription);
          for (int k = 0; k < nodes_here; ++k) {
            const int n = (l * per_leaf + k) * s.nics_per_node + r;
            g_->link(nic0 + n, rail, s.nic_Bps * s.nic_speed_of(n));
          }
        }
      }
      break;
    }
  }
  build_tree();
}

void Topology::build_tree() {
  // The NICs and switches (every vertex from the first NIC on) form a tree if they are connected
  // with one link fewer than their count; a breadth-first search from the first switch then gives
  // each its parent.
  const BoostGraph& g = g_->g;
  const int first = shape_.gpus() + shape_.nodes;  // the first NIC
  const int nv = static_cast<int>(boost::num_vertices(g)), n = nv - first;
  long links = 0;
  for (int v = first; v < nv; ++v) {
    auto [oi, oe] = boost::out_edges(v, g);
    for (; oi != oe; ++oi) links += static_cast<int>(boost::target(*oi, g)) >= first;
  }
  links /= 2;
  if (links != n - 1) return;
  std::vector<std::int32_t> parent(n, -1), depth(n, -1), up(n, -1);
  const int root = first + shape_.nodes * shape_.nics_per_node;  // the first switch
  std::vector<int> queue{root};
  depth[root - first] = 0;
  for (std::size_t qi = 0; qi < queue.size(); ++qi) {
    const int v = queue[qi];
    auto [oi, oe] = boost::out_edges(v, g);
    for (; oi != oe; ++oi) {
      const int w = static_cast<int>(boost::target(*oi, g));
      if (w < first || depth[w - first] >= 0) continue;
      depth[w - first] = depth[v - first] + 1;
      parent[w - first] = v;
      up[w - first] = g[*oi].index ^ 1;  // w -> v
      queue.push_back(w);
    }
  }
  if (static_cast<int>(queue.size()) != n) return;  // not connected
  parent_ = std::move(parent);
  depth_ = std::move(depth);
  up_edge_ = std::move(up);
}

Topology::~Topology() = default;

std::size_t Topology::vertex_count() const { return boost::num_vertices(g_->g); }
std::size_t Topology::edge_count() const { return boost::num_edges(g_->g); }

void Topology::install(Engine& engine) {
  edge_link_.assign(g_->edges, -1);
  auto [ei, ee] = boost::edges(g_->g);
  std::vector<std::pair<int, double>> by_index;
  for (; ei != ee; ++ei) by_index.emplace_back(g_->g[*ei].index, g_->g[*ei].capacity_Bps);
  std::sort(by_index.begin(), by_index.end());
  for (auto [idx, cap] : by_index) edge_link_[idx] = engine.add_link(cap);
}

std::span<const LinkId> Topology::route(int src, int dst) {
  if (edge_link_.empty()) throw std::logic_error("Topology::install must run before route");
  if (src < 0 || dst < 0 || src >= shape_.gpus() || dst >= shape_.gpus()) throw std::out_of_range("route between unknown GPUs");
  path_.clear();
  if (src == dst) return path_;
  if (shape_.node_of(src) == shape_.node_of(dst)) {
    path_ = {edge_link_[gpu_nvswitch_edge_[src]], edge_link_[gpu_nvswitch_edge_[dst] ^ 1]};
    return path_;
  }
  if (parent_.empty()) return route_by_search(src, dst);
  // Up from each GPU's NIC to their lowest common ancestor. The destination's side is walked from
  // its end, so its edges (each parent's edge down) are kept apart and appended reversed.
  const int first = shape_.gpus() + shape_.nodes;
  int a = first + shape_.nic_of(src), b = first + shape_.nic_of(dst);
  path_.push_back(edge_link_[gpu_nic_edge_[src]]);
  down_.clear();
  down_.push_back(edge_link_[gpu_nic_edge_[dst] ^ 1]);
  while (a != b) {
    if (depth_[a - first] >= depth_[b - first]) {
      path_.push_back(edge_link_[up_edge_[a - first]]);
      a = parent_[a - first];
    } else {
      down_.push_back(edge_link_[up_edge_[b - first] ^ 1]);
      b = parent_[b - first];
    }
  }
  path_.insert(path_.end(), down_.rbegin(), down_.rend());
  return path_;
}

std::span<const LinkId> Topology::route_by_search(int src, int dst) {
  if (edge_link_.empty()) throw std::logic_error("Topology::install must run before route");
  if (src < 0 || dst < 0 || src >= shape_.gpus() || dst >= shape_.gpus()) throw std::out_of_range("route between unknown GPUs");
  path_.clear();
  if (src == dst) return path_;
  // Breadth-first search from src, recording the edge that reached every vertex, until it reaches
  // dst. GPUs other than the source are not transit points: routes never pass through a third GPU.
  const BoostGraph& g = g_->g;
  const std::size_t nv = boost::num_vertices(g);
  std::vector<int> via_edge(nv, -1), parent(nv, -1);
  std::vector<char> seen(nv, 0);
  std::vector<int> queue{src};
  seen[src] = 1;
  for (std::size_t qi = 0; qi < queue.size() && !seen[dst]; ++qi) {
    const int v = queue[qi];
    if (v != src && v < shape_.gpus()) continue;
    auto [oi, oe] = boost::out_edges(v, g);
    for (; oi != oe; ++oi) {
      const int w = static_cast<int>(boost::target(*oi, g));
      if (seen[w]) continue;
      seen[w] = 1;
      parent[w] = v;
      via_edge[w] = g[*oi].index;
      queue.push_back(w);
    }
  }
  if (!seen[dst]) throw std::logic_error("topology is disconnected");
  for (int v = dst; v != src; v = parent[v]) path_.push_back(edge_link_[via_edge[v]]);
  std::reverse(path_.begin(), path_.end());
  return path_;
}

}  // namespace trainsim::sim

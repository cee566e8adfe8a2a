#include "topology.h"

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/breadth_first_search.hpp>
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
  void link(int a, int b, double cap) {
    boost::add_edge(a, b, EdgeProps{cap, edges++}, g);
    boost::add_edge(b, a, EdgeProps{cap, edges++}, g);
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
  for (int gpu = 0; gpu < gpus; ++gpu) {
    const int node = s.node_of(gpu);
    g_->link(gpu, nvswitch0 + node, s.nvlink_Bps);
    // GPU to its rail NIC through the PCIe switch. Assumed never to bind (4x the NIC rate): each GPU's
    // path carries only its own traffic, at most its NIC's, and symmetric mode has no such link.
    g_->link(gpu, nic0 + node * s.nics_per_node + s.rail_of(gpu), s.nic_Bps * 4);
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
  routes_.assign(shape_.gpus(), {});
}

const std::vector<LinkId>& Topology::route(int src, int dst) {
  if (routes_.empty()) throw std::logic_error("Topology::install must run before route");
  auto& table = routes_.at(src);
  if (table.empty()) {
    // Breadth-first search from src records the edge that reached every vertex. GPUs other than the
    // source are not transit points: routes never pass through a third GPU.
    const BoostGraph& g = g_->g;
    const std::size_t nv = boost::num_vertices(g);
    std::vector<int> via_edge(nv, -1), parent(nv, -1);
    std::vector<char> seen(nv, 0);
    std::vector<int> queue{src};
    seen[src] = 1;
    for (std::size_t qi = 0; qi < queue.size(); ++qi) {
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
    table.resize(shape_.gpus());
    for (int d = 0; d < shape_.gpus(); ++d) {
      if (d == src) continue;
      std::vector<LinkId> path;
      for (int v = d; v != src; v = parent[v]) {
        if (parent[v] < 0) throw std::logic_error("topology is disconnected");
        path.push_back(edge_link_[via_edge[v]]);
      }
      std::reverse(path.begin(), path.end());
      table[d] = std::move(path);
    }
  }
  return table.at(dst);
}

}  // namespace trainsim::sim

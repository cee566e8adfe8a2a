#include "collective.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

namespace trainsim::sim {

const char* to_string(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::all_reduce: return "all_reduce";
    case CollectiveKind::all_gather: return "all_gather";
    case CollectiveKind::reduce_scatter: return "reduce_scatter";
    case CollectiveKind::all_to_all: return "all_to_all";
    case CollectiveKind::send_recv: return "send_recv";
  }
  return "?";
}

const char* to_string(Algorithm a) {
  switch (a) {
    case Algorithm::automatic: return "auto";
    case Algorithm::ring: return "ring";
    case Algorithm::tree: return "tree";
    case Algorithm::hierarchical: return "hierarchical";
    case Algorithm::direct: return "direct";
  }
  return "?";
}

CollectiveKind parse_collective_kind(const std::string& s) {
  for (CollectiveKind k : {CollectiveKind::all_reduce, CollectiveKind::all_gather, CollectiveKind::reduce_scatter,
                           CollectiveKind::all_to_all, CollectiveKind::send_recv})
    if (s == to_string(k)) return k;
  throw std::invalid_argument("unknown collective \"" + s + "\"");
}

Algorithm parse_algorithm(const std::string& s) {
  for (Algorithm a : {Algorithm::automatic, Algorithm::ring, Algorithm::tree, Algorithm::hierarchical, Algorithm::direct})
    if (s == to_string(a)) return a;
  throw std::invalid_argument("unknown collective algorithm " + s);
}

double busbw_factor(CollectiveKind k, int n) {
  const double d = n;
  switch (k) {
    case CollectiveKind::all_reduce: return 2.0 * (d - 1) / d;
    case CollectiveKind::all_gather:
    case CollectiveKind::reduce_scatter:
    case CollectiveKind::all_to_all: return (d - 1) / d;
    case CollectiveKind::send_recv: return 1.0;
  }
  return 1.0;
}

namespace {

bool spans_nodes(const std::vector<int>& g, const PlacementInfo& w) {
  for (int x : g)
    if (w.node_of(x) != w.node_of(g.front())) return true;
  return false;
}

// Members per node (the channel count NCCL's rings use across nodes).
int members_per_node(const std::vector<int>& g, const PlacementInfo& w) {
  std::vector<int> nodes;
  nodes.reserve(g.size());
  for (int x : g) nodes.push_back(w.node_of(x));
  std::sort(nodes.begin(), nodes.end());
  int best = 0;
  for (std::size_t i = 0; i < nodes.size();) {
    std::size_t j = i;
    while (j < nodes.size() && nodes[j] == nodes[i]) ++j;
    best = std::max(best, static_cast<int>(j - i));
    i = j;
  }
  return best;
}

// Nodes the group's members sit on.
int node_count(const std::vector<int>& g, const PlacementInfo& w) {
  std::vector<int> nodes;
  nodes.reserve(g.size());
  for (int x : g) nodes.push_back(w.node_of(x));
  std::sort(nodes.begin(), nodes.end());
  return static_cast<int>(std::unique(nodes.begin(), nodes.end()) - nodes.begin());
}

// Ring over the group with `steps` algorithm steps, each edge carrying `edge_bytes` in total.
// Latency as NCCL's tuner counts it (src/graph/tuning.cc, ring): a ring over N nodes crosses the
// network in N - 1 of every n - 1 steps (2 (N - 1) of an all-reduce's 2 (n - 1)), which pay the
// network's per-step latency; the other steps stay inside a node and pay NVLink's. With one member
// per node every step crosses; inside one node none does.
Phase ring_phase(const std::vector<int>& g, double edge_bytes, int steps, const PlacementInfo& w) {
  Phase p;
  const int n = static_cast<int>(g.size());
  const bool cross = spans_nodes(g, w);
  const int inter_steps = cross ? steps / (n - 1) * (node_count(g, w) - 1) : 0;
  p.latency_s = (steps - inter_steps) * w.intra_alpha_s + inter_steps * w.inter_alpha_s;
  if (!cross) {
    for (int i = 0; i < n; ++i) p.flows.push_back({g[i], g[(i + 1) % n], edge_bytes});
    return p;
  }
  // Group the members by node (keeping ring order), then build k channels; channel c rotates the
  // order inside every node by c so that a different member leaves the node in each channel.
  std::vector<std::vector<int>> by_node;
  for (int x : g) {
    if (by_node.empty() || w.node_of(by_node.back().front()) != w.node_of(x)) by_node.push_back({});
    by_node.back().push_back(x);
  }
  const int k = members_per_node(g, w);
  for (int c = 0; c < k; ++c) {
    std::vector<int> order;
    for (const auto& seg : by_node) {
      const int m = static_cast<int>(seg.size());
      for (int i = 0; i < m; ++i) order.push_back(seg[(i + c) % m]);
    }
    for (int i = 0; i < n; ++i) p.flows.push_back({order[i], order[(i + 1) % n], edge_bytes / k});
  }
  return p;
}

CollectivePlan ring(CollectiveKind kind, double S, const std::vector<int>& g, const PlacementInfo& w) {
  const int n = static_cast<int>(g.size());
  CollectivePlan plan;
  plan.algorithm = Algorithm::ring;
  const double per_edge = S * busbw_factor(kind, n);
  const int steps = kind == CollectiveKind::all_reduce ? 2 * (n - 1) : n - 1;
  plan.phases.push_back(ring_phase(g, per_edge, steps, w));
  return plan;
}

// Tree all-reduce as NCCL builds it, with latency as its tuner counts it (src/graph/tuning.cc:
// 2 ((n/N - 1) alpha inside + log2 N alpha across) for n ranks on N nodes). Inside each node the
// members form a chain; the reduction flows along it towards its head and the broadcast back,
// pipelined, so both directions of every chain edge carry the channel's bytes concurrently. Across
// nodes the heads join two binary trees over the nodes (NCCL's double binary tree), each carrying
// half of them: tree A in heap order, tree B its mirror, so that a node inner in one is a leaf in
// the other and no node sends more than about twice the bytes. As for rings, there is one channel
// per member in a node, each with its share of the buffer and the chain rotated by one, so that a
// different member (and NIC) heads each.
//
// Node 0 (the group's first member's, the one a symmetric-mode step simulates) sits where the most
// bytes cross: at the root of tree A on up to 3 nodes, else at position 1, inner in A with two
// children from 5 nodes on and a leaf in B.
CollectivePlan tree(double S, const std::vector<int>& g, const PlacementInfo& w) {
  const int n = static_cast<int>(g.size());
  CollectivePlan plan;
  plan.algorithm = Algorithm::tree;
  Phase p;
  auto depth = [](int members) { return static_cast<int>(std::ceil(std::log2(static_cast<double>(members)))); };
  std::vector<std::vector<int>> by_node;
  for (int x : g) {
    if (by_node.empty() || w.node_of(by_node.back().front()) != w.node_of(x)) by_node.push_back({});
    by_node.back().push_back(x);
  }
  const int N = static_cast<int>(by_node.size());
  const int k = members_per_node(g, w);
  p.latency_s = N > 1 ? 2.0 * ((k - 1) * w.intra_alpha_s + depth(N) * w.inter_alpha_s) : 2.0 * (n - 1) * w.intra_alpha_s;
  // The node at each position of tree A (B's position q holds A's N - 1 - q).
  std::vector<int> at(N);
  for (int q = 0; q < N; ++q) at[q] = q;
  if (N >= 4) std::swap(at[0], at[1]);
  std::vector<int> head(N);
  for (int c = 0; c < k; ++c) {
    const double share = S / k;
    for (int j = 0; j < N; ++j) {
      const auto& seg = by_node[j];
      const int m = static_cast<int>(seg.size());
      head[j] = seg[c % m];
      for (int i = 0; i + 1 < m; ++i) {
        const int a = seg[(i + c) % m], b = seg[(i + 1 + c) % m];
        p.flows.push_back({a, b, share});
        p.flows.push_back({b, a, share});
      }
    }
    for (int t = 0; t < 2 && N > 1; ++t)
      for (int q = 1; q < N; ++q) {
        const int child = t == 0 ? at[q] : at[N - 1 - q], parent = t == 0 ? at[(q - 1) / 2] : at[N - 1 - (q - 1) / 2];
        p.flows.push_back({head[child], head[parent], share / 2});
        p.flows.push_back({head[parent], head[child], share / 2});
      }
  }
  plan.phases.push_back(p);
  return plan;
}

CollectivePlan direct(CollectiveKind kind, double S, const std::vector<int>& g, const PlacementInfo& w) {
  CollectivePlan plan;
  plan.algorithm = Algorithm::direct;
  Phase p;
  const int n = static_cast<int>(g.size());
  p.latency_s = spans_nodes(g, w) ? w.inter_alpha_s : w.intra_alpha_s;
  if (kind == CollectiveKind::send_recv) {
    p.flows.push_back({g.front(), g.back(), S});
  } else {
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        if (i != j) p.flows.push_back({g[i], g[j], S / n});
  }
  plan.phases.push_back(p);
  return plan;
}

// Hierarchical all-reduce: reduce-scatter inside each node, all-reduce of the 1/k shard across
// nodes among the GPUs of the same local index (one rail each), all-gather inside each node.
CollectivePlan hierarchical(double S, const std::vector<int>& g, const PlacementInfo& w) {
  std::map<int, std::vector<int>> by_node;
  for (int x : g) by_node[w.node_of(x)].push_back(x);
  const int k = static_cast<int>(by_node.begin()->second.size());
  for (const auto& [node, members] : by_node)
    if (static_cast<int>(members.size()) != k) return ring(CollectiveKind::all_reduce, S, g, w);
  CollectivePlan plan;
  plan.algorithm = Algorithm::hierarchical;
  Phase rs, ar, ag;
  for (const auto& [node, members] : by_node) {
    if (k > 1) {
      Phase a = ring_phase(members, S * busbw_factor(CollectiveKind::reduce_scatter, k), k - 1, w);
      rs.latency_s = a.latency_s;
      rs.flows.insert(rs.flows.end(), a.flows.begin(), a.flows.end());
    }
  }
  const int nodes = static_cast<int>(by_node.size());
  for (int local = 0; local < k; ++local) {
    std::vector<int> rail;
    for (const auto& [node, members] : by_node) rail.push_back(members[local]);
    Phase a = ring_phase(rail, (S / k) * busbw_factor(CollectiveKind::all_reduce, nodes), 2 * (nodes - 1), w);
    ar.latency_s = a.latency_s;
    ar.flows.insert(ar.flows.end(), a.flows.begin(), a.flows.end());
  }
  ag = rs;
  if (k > 1) plan.phases.push_back(rs);
  plan.phases.push_back(ar);
  if (k > 1) plan.phases.push_back(ag);
  return plan;
}

}  // namespace

double idle_time_s(const CollectivePlan& plan, const PlacementInfo& w) {
  double t = 0;
  std::vector<std::pair<int, double>> intra, inter;
  for (const auto& p : plan.phases) {
    // Per-GPU outgoing bytes by link class; the slower class bounds the phase.
    intra.clear();
    inter.clear();
    for (const auto& f : p.flows) (w.node_of(f.src) == w.node_of(f.dst) ? intra : inter).push_back({f.src, f.bytes});
    double worst = 0;
    for (auto* v : {&intra, &inter}) {
      std::sort(v->begin(), v->end());
      const double Bps = v == &intra ? w.intra_Bps : w.inter_Bps;
      for (std::size_t i = 0; i < v->size();) {
        double b = 0;
        std::size_t j = i;
        for (; j < v->size() && (*v)[j].first == (*v)[i].first; ++j) b += (*v)[j].second;
        worst = std::max(worst, b / Bps);
        i = j;
      }
    }
    t += p.latency_s + worst;
  }
  return t;
}

bool tuner_picks_tree(double bytes, int n, double ring_latency_s, double ring_per_byte_s, double tree_latency_s) {
  if (n < 2) return false;
  const double tree_per_byte_s = ring_per_byte_s * n / (0.92 * (n - 1));
  return tree_latency_s + bytes * tree_per_byte_s < ring_latency_s + bytes * ring_per_byte_s;
}

CollectivePlan plan_collective(CollectiveKind kind, Algorithm algo, double bytes, const std::vector<int>& group,
                               const PlacementInfo& w) {
  if (group.size() < 2 && kind != CollectiveKind::send_recv) return CollectivePlan{Algorithm::direct, {}};
  if (kind == CollectiveKind::send_recv || kind == CollectiveKind::all_to_all) return direct(kind, bytes, group, w);
  if (kind != CollectiveKind::all_reduce) return ring(kind, bytes, group, w);
  switch (algo) {
    case Algorithm::ring: return ring(kind, bytes, group, w);
    case Algorithm::tree: return tree(bytes, group, w);
    case Algorithm::hierarchical: return hierarchical(bytes, group, w);
    case Algorithm::direct: return ring(kind, bytes, group, w);
    case Algorithm::automatic: {
      CollectivePlan r = ring(kind, bytes, group, w);
      if (!spans_nodes(group, w)) return r;
      CollectivePlan t = tree(bytes, group, w);
      const double ring_latency = r.phases.at(0).latency_s;
      const double ring_per_byte = bytes > 0 ? (idle_time_s(r, w) - ring_latency) / bytes : 0.0;
      return tuner_picks_tree(bytes, static_cast<int>(group.size()), ring_latency, ring_per_byte, t.phases.at(0).latency_s) ? t : r;
    }
  }
  return ring(kind, bytes, group, w);
}

}  // namespace trainsim::sim

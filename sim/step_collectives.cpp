#include "step_graph.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace trainsim::sim::detail {

const Builder::CachedPlan& Builder::cached_plan(const std::vector<int>& group, CollectiveKind kind, Algorithm algo,
                                                double bytes) {
  // NCCL's tree sends a different number of its edges up each leaf's uplinks than a ring does
  // (SymmetricPaths gives the ring's share), and its slowest edge paces every member: where those
  // uplinks bind, one GPU per stage cannot stand for the rest. A tree of two ranks is one edge each
  // way, as a ring of two; a tree whose members are all simulated has each edge on its own links.
  // Nor where its members' NICs run at different speeds: a ring's members all carry the same load,
  // so its slowest NIC paces it alike from any member (SymmetricPaths caps it there), but a tree's
  // inner nodes carry three edges and its leaves one, so what a slow NIC costs depends on where it
  // sits in the tree.
  auto tree_fits = [&]() {
    if (in_.mode != SimMode::symmetric || group.size() <= 2 || sim_members(group).size() == group.size()) return;
    if (in_.net.shape.leaf_uplinks_bind() && group_nodes_per_leaf(group) > 0)
      throw SymmetricMisfit{"NCCL's tree all-reduce crosses the leaf switches of the oversubscribed fabric"};
    if (spans_nodes(group) && !stage_nics_at_one_speed(rank_coordinates(L_, group.front()).stage))
      throw SymmetricMisfit{"NCCL's tree all-reduce crosses NICs of different speeds"};
  };
  if (algo != Algorithm::automatic || kind != CollectiveKind::all_reduce || group.size() < 2) {
    if (algo == Algorithm::tree && kind == CollectiveKind::all_reduce) tree_fits();
    return unit_plan(group, kind, algo);
  }
  const CachedPlan& ring = unit_plan(group, kind, Algorithm::ring);
  if (!spans_nodes(group)) return ring;
  const CachedPlan& tree = unit_plan(group, kind, Algorithm::tree);
  const bool pick_tree =
      tuner_picks_tree(bytes, static_cast<int>(group.size()), ring.idle_latency_s, ring.idle_per_byte_s, tree.idle_latency_s);
  if (pick_tree) tree_fits();
  return pick_tree ? tree : ring;
}

bool Builder::stage_nics_at_one_speed(int stage) const {
  const ClusterShape& sh = in_.net.shape;
  if (sh.nic_speed.empty()) return true;
  const double first = sh.nic_speed_of(sh.nic_of(gpu_of(0, 0, stage)));
  for (int d = 0; d < L_.dp; ++d)
    for (int t = 0; t < L_.tp; ++t)
      if (sh.nic_speed_of(sh.nic_of(gpu_of(t, d, stage))) != first) return false;
  return true;
}

bool Builder::spans_nodes(const std::vector<int>& group) const {
  // Groups are increasing arithmetic progressions of GPU ids: they span nodes when their ends do.
  return place_.node_of(group.front()) != place_.node_of(group.back());
}

bool Builder::one_per_node(const std::vector<int>& group) const {
  for (std::size_t i = 1; i < group.size(); ++i)
    if (place_.node_of(group[i]) == place_.node_of(group[i - 1])) return false;
  return group.size() > 1;
}

const Builder::CachedPlan& Builder::unit_plan(const std::vector<int>& group, CollectiveKind kind, Algorithm algo) {
  // Identical collectives (same kind and group) recur every micro-batch and bucket: plan and route once.
  // Groups here are arithmetic progressions of GPU ids (TP contiguous, DP and PP strided): the first
  // member, the stride and the size name one.
  const int stride = group.size() > 1 ? group[1] - group[0] : 0;
  const PlanKey key{static_cast<int>(kind), static_cast<int>(algo), group.front(), stride, static_cast<int>(group.size())};
  auto it = plan_cache_.find(key);
  if (it != plan_cache_.end()) return it->second;
  if (refilling_) throw RefillMiss{};  // routing would add links to a graph already built
  for (std::size_t i = 1; i < group.size(); ++i)
    if (group[i] - group[i - 1] != stride) throw std::logic_error("collective group is not evenly strided");
  const PlanShapeCache::Key skey{{key[0], key[1], key[2], key[3], key[4], place_.gpus_per_node, in_.net.shape.nodes_per_leaf()},
                                  {place_.intra_alpha_s, place_.inter_alpha_s, place_.intra_Bps, place_.inter_Bps}};
  auto shape = shapes_->shapes.find(skey);
  if (shape == shapes_->shapes.end()) {
    PlanShapeCache::Shape ps;
    ps.plan = plan_collective(kind, algo, 1.0, group, place_);
    for (const Phase& ph : ps.plan.phases) {
      ps.idle_latency_s += ph.latency_s;
      std::vector<std::int32_t> order(ph.flows.size());
      for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int32_t>(i);
      std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) { return ph.flows[a].src < ph.flows[b].src; });
      ps.by_source.push_back(std::move(order));
    }
    ps.idle_per_byte_s = idle_time_s(ps.plan, place_) - ps.idle_latency_s;
    ps.leaf_share = group_nodes_per_leaf(group);
    shape = shapes_->shapes.emplace(skey, std::move(ps)).first;
  }
  const PlanShapeCache::Shape& sh = shape->second;
  const CollectivePlan& plan = sh.plan;
  CachedPlan c;
  if (place_.node_of(group.front()) == place_.node_of(group.back())) c.measured_in = 1;
  else if (one_per_node(group)) c.measured_in = 2;
  c.kind = kind;
  c.group_size = static_cast<int>(group.size());
  c.idle_latency_s = sh.idle_latency_s;
  c.idle_per_byte_s = sh.idle_per_byte_s;
  c.members = sim_members(group);
  const int leaf_share = sh.leaf_share;
  std::vector<std::int32_t>& mine = plan_flows_scratch_;
  for (std::size_t pi = 0; pi < plan.phases.size(); ++pi) {
    const Phase& ph = plan.phases[pi];
    CachedPhase cp;
    cp.latency_s = ph.latency_s;
    cp.flow_begin = static_cast<std::int32_t>(c.flows.size());
    flow_dst_.clear();  // the destination of each of this phase's flows
    // The flows leaving the simulated members, in the plan's order.
    const std::vector<std::int32_t>& by_src = sh.by_source[pi];
    mine.clear();
    for (int g : c.members) {
      auto lo = std::lower_bound(by_src.begin(), by_src.end(), g, [&](std::int32_t i, int v) { return ph.flows[i].src < v; });
      for (; lo != by_src.end() && ph.flows[*lo].src == g; ++lo) mine.push_back(*lo);
    }
    std::sort(mine.begin(), mine.end());
    for (std::int32_t fi : mine) {
      const FlowSpec& f = ph.flows[fi];
      if (!c.members.empty() && f.src == c.members.front()) c.sent_by_first += f.bytes;
      paths_->path(f.src, f.dst, place_.node_of(f.src) != place_.node_of(f.dst) ? leaf_share : 0, scratch_);
      // Flows between the same two GPUs over the same links are one flow (two tree edges between
      // the same nodes). Flows to different GPUs stay apart even where symmetric mode gives them
      // the same links: max-min shares a link per flow, so merging them would hand whatever else
      // crosses those links (a pipeline transfer) a larger share than full mode gives it.
      bool merged = false;
      for (std::int32_t i = cp.flow_begin; i < static_cast<std::int32_t>(c.flows.size()) && !merged; ++i) {
        CachedFlow& x = c.flows[i];
        if (flow_dst_[i - cp.flow_begin] == f.dst && x.path_end - x.path_begin == static_cast<std::int32_t>(scratch_.size()) &&
            std::equal(scratch_.begin(), scratch_.end(), c.paths.begin() + x.path_begin)) {
          x.bytes += f.bytes;
          merged = true;
        }
      }
      if (merged) continue;
      flow_dst_.push_back(f.dst);
      CachedFlow cf{f.bytes, static_cast<std::int32_t>(c.paths.size()), 0};
      c.paths.insert(c.paths.end(), scratch_.begin(), scratch_.end());
      cf.path_end = static_cast<std::int32_t>(c.paths.size());
      c.flows.push_back(cf);
    }
    cp.flow_end = static_cast<std::int32_t>(c.flows.size());
    c.phases.push_back(cp);
  }
  return plan_cache_.emplace(key, std::move(c)).first->second;
}

TaskId Builder::collective(const std::vector<int>& group, CollectiveKind kind, Algorithm algo, double bytes, int count,
                           double extra_latency_s, int cat, bool on_compute_queue, const std::vector<TaskId>& triggers,
                           const std::string& name, double* sent_by_first) {
  calls_scratch_.assign(1, Calls{bytes / std::max(1, count), std::max(1, count)});
  return collective(group, kind, algo, calls_scratch_, extra_latency_s, cat, on_compute_queue, triggers, name, sent_by_first);
}

TaskId Builder::collective(const std::vector<int>& group, CollectiveKind kind, Algorithm algo, const std::vector<Calls>& calls,
                           double extra_latency_s, int cat, bool on_compute_queue, const std::vector<TaskId>& triggers,
                           const std::string& name, double* sent_by_first) {
  double bytes = 0;
  for (const Calls& c : calls) bytes += c.bytes * c.count;
  const CachedPlan& plan = cached_plan(group, kind, algo, bytes);
  const std::vector<int>& members = plan.members;
  if (sent_by_first) *sent_by_first += plan.sent_by_first * bytes;
  // Latency multiplier (calls x measured latency factor) and rescaled bytes, summed over the calls.
  double latency_factor = 0, scaled_bytes = 0;
  for (const Calls& c : calls) {
    const PlanScale k = plan_scale(plan, c.bytes * c.count, c.count);
    latency_factor += k.latency * c.count;
    scaled_bytes += c.bytes * c.count * k.bytes;
  }
  TaskId prev = -1;
  const std::size_t nphases = std::max<std::size_t>(1, plan.phases.size());
  for (std::size_t pi = 0; pi < nphases; ++pi) {
    TaskSpec spec;
    spec.category = static_cast<std::int16_t>(cat);
    spec.lane = members.front();
    spec.label = label(name);
    const CachedPhase* ph = pi < plan.phases.size() ? &plan.phases[pi] : nullptr;
    // The calls share one task: their latencies add up, and so do their bytes.
    spec.duration_s = (ph ? ph->latency_s * latency_factor : 0.0) + (pi == 0 ? extra_latency_s : 0.0);
    const TaskId t = e_.add_task(spec);
    lane_stream_.push_back(on_compute_queue ? 0 : 1);
    if (ph)
      for (std::int32_t f = ph->flow_begin; f < ph->flow_end; ++f) {
        const CachedFlow& cf = plan.flows[f];
        e_.add_flow(t, cf.bytes * scaled_bytes, plan.paths.data() + cf.path_begin, cf.path_end - cf.path_begin);
      }
    // Communication kernels beside the compute queue slow its GEMMs down.
    if (!on_compute_queue) interfere(t, members);
    if (prev >= 0) {
      e_.add_dependency(prev, t);
    } else {
      for (TaskId tr : triggers)
        if (tr >= 0) e_.add_dependency(tr, t);
      for (int g : members) {
        RankQueues& q = q_[g];
        const TaskId tail = on_compute_queue ? q.compute : q.comm;
        if (tail >= 0) e_.add_dependency(tail, t);
      }
    }
    prev = t;
  }
  for (int g : members) {
    RankQueues& q = q_[g];
    (on_compute_queue ? q.compute : q.comm) = prev;
    if (g == 0) {
      if (on_compute_queue) gpu0_tasks_.push_back({prev, 0, {0, 0}, {0, 0}}), ws_.gpu0_slot.push_back(-1);
      else gpu0_comm_.push_back(prev);
    }
  }
  return prev;
}

void Builder::tp_all(const CommTotals& t, const std::string& name) {
  if (L_.tp == 1 || t.empty()) return;
  static const CollectiveKind kinds[3] = {CollectiveKind::all_reduce, CollectiveKind::all_gather, CollectiveKind::reduce_scatter};
  for (int gpu : tp_leaders_)
    for (int k = 0; k < 3; ++k) {
      if (t.count[k] == 0) continue;
      double sent = 0;
      collective(tp_group_of(gpu), kinds[k], algorithm_for(kinds[k]), t.bytes[k], t.count[k], 0.0, kTpComm, true, {}, "TP " + name,
                 gpu == 0 ? &sent : nullptr);
      if (gpu == 0) tp_bytes_gpu0_ += sent;
    }
}

// Gradient synchronisation of one bucket: all-reduce (ZeRO-0) or reduce-scatter (ZeRO 1-3), with
// the chosen compression's bytes and kernel cost.
void Builder::grad_collective(int gpu, const std::vector<Calls>& buckets, int bucket_index) {
  if (L_.dp == 1 || buckets.empty()) return;
  const std::vector<int>& group = dp_group_of(gpu);
  const int n = L_.dp;
  const Compression& c = L_.compression;
  const CollectiveKind kind = c.kind == Compression::Kind::topk ? CollectiveKind::all_gather
                              : (L_.zero == 0 || c.kind == Compression::Kind::powersgd) ? CollectiveKind::all_reduce
                                                                                        : CollectiveKind::reduce_scatter;
  // What each bucket puts on the wire, and the compression kernels it runs first.
  std::vector<Calls>& wire = grad_calls_scratch_;
  wire.clear();
  double kernel_s = 0;
  int count = 0;
  for (const Calls& b : buckets) {
    if (b.bytes <= 0) continue;
    double w = b.bytes, k = 0;
    switch (c.kind) {
      case Compression::Kind::none: break;
      case Compression::Kind::fp16: w = b.bytes / 2; k = cost_.compression_time_s(c, b.bytes); break;
      case Compression::Kind::int8: w = b.bytes / 4; k = cost_.compression_time_s(c, b.bytes); break;
      case Compression::Kind::topk:
        // Values (fp32) and int32 indices of the kept fraction, gathered from every rank.
        w = n * c.topk_fraction * b.bytes * 2.0;
        k = cost_.compression_time_s(c, b.bytes) + cost_.memory_time_s(n * c.topk_fraction * b.bytes * 2.0);
        break;
      case Compression::Kind::powersgd: {
        const double side = std::sqrt(b.bytes / 4.0);
        w = 2.0 * side * c.powersgd_rank * 4.0;
        k = cost_.compression_time_s(c, b.bytes);
        break;
      }
    }
    wire.push_back({w, b.count});
    kernel_s += k * b.count;
    count += b.count;
  }
  if (wire.empty()) return;
  double sent = 0;
  std::string name;
  if (in_.record_timeline) {
    name.append("DP ").append(to_string(kind)).append(" bucket ").append(std::to_string(bucket_index));
    if (count > 1) name.append("-").append(std::to_string(bucket_index + count - 1));
  }
  collective(group, kind, algorithm_for(kind), wire, kernel_s, kDpComm, false, compute_tails(gpu), name, gpu == 0 ? &sent : nullptr);
  if (gpu == 0) dp_bytes_gpu0_ += sent;
}

const std::vector<TaskId>& Builder::compute_tails(int gpu) {
  tails_scratch_.clear();
  for (int g : dp_sim_members_[sim_index_[gpu]]) tails_scratch_.push_back(q_[g].compute);
  return tails_scratch_;
}

const std::vector<int>& Builder::sim_members(const std::vector<int>& group) {
  // Groups are arithmetic progressions of GPU ids: the first member, the stride and the size name one.
  const std::array<int, 3> key{group.front(), group.size() > 1 ? group[1] - group[0] : 0, static_cast<int>(group.size())};
  auto& cache = ws_.sim_members;
  for (std::size_t i = 0; i < ws_.sim_members_used; ++i)
    if (cache[i].first == key) return cache[i].second;
  if (ws_.sim_members_used == cache.size()) cache.emplace_back();
  auto& [k, v] = cache[ws_.sim_members_used++];
  k = key;
  v.clear();
  for (int g : group)
    if (is_sim_[g]) v.push_back(g);
  return v;
}

}  // namespace trainsim::sim::detail

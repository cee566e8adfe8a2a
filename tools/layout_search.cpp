#include "layout_search.h"

#include "cost_model.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>

#include "layout_rules.h"
#include "text_report.h"
#include "worker_pool.h"

namespace trainsim {

namespace {

template <class T>
std::vector<T> or_default(const std::vector<T>& v, std::vector<T> d) {
  return v.empty() ? d : v;
}

}  // namespace

std::vector<Candidate> enumerate_layouts(const Scenario& s) {
  const SearchSpace& sp = s.search;
  const int G = s.cluster.gpus_per_node;
  std::vector<int> tp_default;
  for (int t = 1; t <= G; t *= 2) tp_default.push_back(t);
  const auto nodes_list = or_default(sp.nodes, s.cluster.nodes);
  const auto tps = or_default(sp.tp, tp_default);
  const auto mbs = or_default(sp.micro_batch, {1, 2, 4});
  const auto recs = or_default(sp.recompute, {Recompute::none, Recompute::selective, Recompute::full});
  const auto zeros = or_default(sp.zero, {0, 1});
  const auto buckets = or_default(sp.bucket_MB, {25.0});
  const auto comps = or_default(sp.compression, {Compression{}});
  const auto vpps = or_default(sp.vpp, {1});
  std::vector<Candidate> out;
  for (int nodes : nodes_list) {
    const int gpus = nodes * G;
    std::vector<int> pps = sp.pp;
    if (pps.empty()) {
      // "auto" (and the default): every power of two up to the layer count that divides the GPUs.
      for (int p = 1; p <= s.model.layers && p <= gpus; p *= 2) pps.push_back(p);
    }
    for (int tp : tps)
      for (int pp : pps) {
        if (gpus % (tp * pp) != 0) continue;
        const int dp = gpus / (tp * pp);
        std::vector<bool> sps = sp.sequence_parallel.empty() ? std::vector<bool>{tp > 1} : sp.sequence_parallel;
        for (int vpp : vpps) {
          std::vector<Schedule> scheds = sp.schedule;
          if (scheds.empty()) scheds = {vpp > 1 ? Schedule::interleaved : Schedule::one_f_one_b};
          for (Schedule sch : scheds)
            for (int mb : mbs)
              for (bool seq : sps)
                for (Recompute r : recs)
                  for (int z : zeros)
                    for (double bucket : buckets)
                      for (const Compression& c : comps) {
                        if (dp == 1 && (z > 0 || c.kind != Compression::Kind::none || bucket != buckets.front())) continue;
                        Layout l;
                        l.tp = tp; l.pp = pp; l.dp = dp; l.vpp = vpp; l.micro_batch = mb; l.sequence_parallel = seq;
                        l.recompute = r; l.zero = z; l.bucket_MB = bucket; l.compression = c; l.schedule = sch;
                        if (!layout_violation(s.model, l, s.training.global_batch, gpus, G, sp.allow_tp_across_nodes).empty())
                          continue;
                        out.push_back({l, nodes});
                      }
        }
      }
  }
  return out;
}

double objective_value(const Scenario& s, const Evaluation& ev) {
  // Failures and checkpoints (the scenario's `reliability`) cost time to train and money, not step
  // throughput: both count the training's wall-clock time, goodput included.
  if (s.search.objective == "cost") {
    // Cost per token: GPU-seconds per token (price is a constant factor).
    return -static_cast<double>(ev.gpus) / (ev.tokens_per_s * goodput(ev));
  }
  if (s.search.objective == "time_to_train") return ev.tokens_per_s * goodput(ev);  // for a fixed token count
  return ev.tokens_per_s;
}

std::vector<const Evaluation*> best_per_size(const std::vector<Evaluation>& ranked) {
  std::vector<const Evaluation*> best;
  for (const Evaluation& ev : ranked) {
    bool seen = false;
    for (const Evaluation* b : best) seen |= b->nodes == ev.nodes;
    if (!seen) best.push_back(&ev);
  }
  std::sort(best.begin(), best.end(), [](const Evaluation* a, const Evaluation* b) { return a->nodes < b->nodes; });
  return best;
}

void rank_evaluations(const Scenario& s, std::vector<Evaluation>& evs) {
  std::stable_sort(evs.begin(), evs.end(), [&](const Evaluation& a, const Evaluation& b) {
    const double va = objective_value(s, a), vb = objective_value(s, b);
    if (va != vb) return va > vb;
    if (a.nodes != b.nodes) return a.nodes < b.nodes;
    return describe(a.layout) < describe(b.layout);
  });
}

std::string oom_phrase(const Evaluation& ev) {
  const auto& st = ev.memory.per_stage[ev.memory.peak_stage];
  return "OOM on stage " + std::to_string(ev.memory.peak_stage) + " by " +
         format_bytes(st.peak_bytes - ev.memory.device_bytes);
}

std::string why_lost(const Scenario& s, const Evaluation& w, const Evaluation& l) {
  (void)s;
  char buf[160];
  const double slower = w.tokens_per_s / l.tokens_per_s - 1.0;
  if (slower < 0.005) {
    std::snprintf(buf, sizeof buf, "ties (%.1f%% slower)", 100.0 * slower);
    return buf;
  }
  // The category whose exposed share of the step grew the most against the winner.
  int worst = -1;
  double worst_gap = 0;
  for (int c = 0; c < sim::kCategories; ++c) {
    const double gap = l.step.breakdown_s[c] / l.step.step_time_s - w.step.breakdown_s[c] / w.step.step_time_s;
    if (gap > worst_gap) { worst_gap = gap; worst = c; }
  }
  if (worst < 0 || worst == sim::kCompute) {
    // The same compute per step (ZeRO stage, buckets and compression change none of it): the GEMMs
    // ran slower, under the communication beside them.
    const Layout &a = w.layout, &b = l.layout;
    const bool same_work = w.nodes == l.nodes && a.tp == b.tp && a.pp == b.pp && a.vpp == b.vpp && a.micro_batch == b.micro_batch &&
                           a.sequence_parallel == b.sequence_parallel && a.recompute == b.recompute;
    if (worst == sim::kCompute && same_work)
      std::snprintf(buf, sizeof buf, "compute slowed by communication beside it, %.0f%% slower per token", 100.0 * slower);
    else
      std::snprintf(buf, sizeof buf, "compute %.0f%% slower per token", 100.0 * slower);
    return buf;
  }
  static const char* phrase[sim::kCategories] = {"compute", "recompute", "TP comm exposed", "PP send/recv exposed",
                                                 "DP/ZeRO comm exposed", "bubble", "optimizer", "data wait"};
  std::snprintf(buf, sizeof buf, "%s %.0f%% (winner %.0f%%)", phrase[worst],
                100.0 * l.step.breakdown_s[worst] / l.step.step_time_s, 100.0 * w.step.breakdown_s[worst] / w.step.step_time_s);
  return buf;
}

SearchResult search_layouts(const Scenario& s, const std::vector<Candidate>& cands, const SearchOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  SearchResult res;
  std::vector<std::size_t> mine;
  for (std::size_t i = 0; i < cands.size(); ++i)
    if (i % opt.shards == opt.shard) mine.push_back(i);
  const std::size_t n = mine.size();
  std::vector<Evaluation> evs(n);
  int threads = opt.threads > 0 ? opt.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = std::min<int>(threads, static_cast<int>(std::max<std::size_t>(1, n)));
  // One cost model per thread for the whole search: the graphs and layer costs a thread keeps are
  // keyed by its instance, so every batch below reuses what the thread's earlier ones built.
  static std::atomic<std::uint64_t> searches{0};
  const std::uint64_t search_id = ++searches;
  auto thread_cost = [&]() -> const CostModel& {
    thread_local std::unique_ptr<CostModel> cost;
    thread_local std::uint64_t built_for = 0;
    if (built_for != search_id) {
      cost = std::make_unique<CostModel>(s.hardware, s.training.precision);
      built_for = search_id;
    }
    return *cost;
  };
  // Runs job(k) for the positions k of `items` on the pool, items of one structure together.
  std::atomic<std::size_t> done{0};
  auto run_batch = [&](const std::vector<std::size_t>& items, auto&& job) {
    if (items.empty()) return;
    // Layouts that differ only in micro-batch size and recompute simulate one task graph with other
    // numbers (sim/step_builder keeps a thread's recent graphs): a thread takes such a group whole,
    // so that all of it but the first runs on the graph the first built.
    auto shape = [&](std::size_t k) {
      const Candidate& c = cands[mine[k]];
      const Layout& l = c.layout;
      return std::make_tuple(c.nodes, l.tp, l.pp, l.dp, l.vpp, static_cast<int>(l.schedule), l.sequence_parallel, l.zero,
                             l.bucket_MB, static_cast<int>(l.compression.kind), l.compression.topk_fraction,
                             l.compression.powersgd_rank);
    };
    std::vector<std::size_t> order = items;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return shape(a) < shape(b); });
    std::vector<std::size_t> group_start;
    for (std::size_t i = 0; i < order.size(); ++i)
      if (i == 0 || shape(order[i]) != shape(order[i - 1])) group_start.push_back(i);
    group_start.push_back(order.size());
    std::atomic<std::size_t> next{0};
    auto worker = [&]() {
      while (true) {
        const std::size_t g = next.fetch_add(1);
        if (g + 1 >= group_start.size()) break;
        for (std::size_t i = group_start[g]; i < group_start[g + 1]; ++i) job(order[i]);
      }
    };
    WorkerPool::shared().run(std::min<int>(threads, static_cast<int>(group_start.size() - 1)), worker);
  };
  auto report = [&](std::size_t count) {
    const std::size_t d = done.fetch_add(count) + count;
    if (opt.progress && (d % 64 < count || d == n)) opt.progress(d, n);
  };
  // The memory model first, and for each layout that fits, the most it could score: its objective
  // with the step at sim::step_lower_bound, less the 1e-3 a steady-state reading may fall short of
  // simulating every micro-batch, and as much again. With stragglers no pipeline stage computes
  // faster than the fastest GPU, so the bound is divided by its speed. With a reliability block the
  // objectives that count it take its goodput at 1, its most (objective_value of an evaluation
  // without one).
  const bool bounded = opt.keep > 0;
  const double tokens = static_cast<double>(s.training.global_batch) * s.model.seq_len;
  std::vector<double> optimistic(n, std::numeric_limits<double>::infinity()), bound(n, 0.0);
  std::vector<std::size_t> all(n);
  for (std::size_t k = 0; k < n; ++k) all[k] = k;
  run_batch(all, [&](std::size_t k) {
    const Candidate& c = cands[mine[k]];
    evs[k] = evaluate_memory(s, c.layout, c.nodes);
    if (evs[k].memory.oom) {
      report(1);
      return;
    }
    if (!bounded) return;
    double lb = step_lower_bound(s, c.layout, thread_cost());
    if (s.stragglers.given) {
      const std::vector<double>& speeds = scenario_gpu_speeds(s, evs[k].gpus);
      lb /= *std::max_element(speeds.begin(), speeds.end());
    }
    if (!(lb > 0)) return;
    bound[k] = lb;
    Evaluation best_case = evs[k];
    best_case.tokens_per_s = tokens / (lb * (1 - 2e-3));
    optimistic[k] = objective_value(s, best_case);
  });
  // Then the layouts that fit, the most promising first, in batches of a fixed size (so that what
  // is skipped does not depend on the thread count). Before each batch, a layout is skipped when
  // even its best case ranks below both the keep-th best simulated so far and the best simulated
  // at its node count: it can be neither among the kept nor the best of its size.
  std::vector<std::size_t> fits;
  for (std::size_t k = 0; k < n; ++k)
    if (!evs[k].memory.oom) fits.push_back(k);
  std::stable_sort(fits.begin(), fits.end(), [&](std::size_t a, std::size_t b) { return optimistic[a] > optimistic[b]; });
  const std::size_t batch = bounded ? std::max<std::size_t>(opt.keep, 16) : fits.size();
  constexpr double kNone = -std::numeric_limits<double>::infinity();
  std::vector<double> best_values;  // the keep best objectives simulated so far, best first
  // The node counts of every shard's candidates, and the best simulated at each: by this shard,
  // and by any (what `share` last gave back, with the keep-th best of any).
  std::vector<int> sizes;
  for (const Candidate& c : cands) sizes.push_back(c.nodes);
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  auto size_slot = [&](int nodes) { return std::lower_bound(sizes.begin(), sizes.end(), nodes) - sizes.begin(); };
  std::vector<double> best_at_size(sizes.size(), kNone), shared_at_size(sizes.size(), kNone), shared;
  double shared_kth = kNone;
  const bool sharing = bounded && opt.share != nullptr;
  std::vector<char> skipped(n, 0);
  EvalOptions eo;
  eo.simulate_if_oom = false;
  for (std::size_t pos = 0; pos < fits.size() || sharing;) {
    std::vector<std::size_t> items;
    while (pos < fits.size() && items.size() < batch) {
      const std::size_t k = fits[pos++];
      if (bounded && optimistic[k] < std::max(best_values.size() >= opt.keep ? best_values.back() : kNone, shared_kth)) {
        const auto slot = size_slot(evs[k].nodes);
        skipped[k] = optimistic[k] < std::max(best_at_size[slot], shared_at_size[slot]);
      }
      if (skipped[k]) report(1);
      else items.push_back(k);
    }
    run_batch(items, [&](std::size_t k) {
      // One per thread: both memoise what every layout of the scenario asks again. The collective
      // plans depend only on their key (group, placement, latencies, bandwidths), so each pool
      // thread keeps its own across searches, dropped when it grows large.
      thread_local sim::PlanShapeCache plans;
      if (plans.shapes.size() > 4096) plans.shapes.clear();
      EvalOptions mine_eo = eo;
      mine_eo.cost = &thread_cost();
      mine_eo.plan_cache = &plans;
      const Candidate& c = cands[mine[k]];
      evs[k] = evaluate(s, c.layout, c.nodes, mine_eo);
      // Every layout simulated checks the bound the skipped ones were judged by.
      if (evs[k].step.step_time_s < bound[k] * (1 - 2e-3))
        throw std::logic_error("the step's lower bound (" + std::to_string(bound[k]) + " s) exceeds the simulated step (" +
                               std::to_string(evs[k].step.step_time_s) + " s) of " + describe(c.layout));
      report(1);
    });
    if (!bounded) continue;
    for (std::size_t k : items) {
      const double v = objective_value(s, evs[k]);
      best_values.insert(std::upper_bound(best_values.begin(), best_values.end(), v, std::greater<double>()), v);
      if (best_values.size() > opt.keep) best_values.pop_back();
      double& b = best_at_size[size_slot(evs[k].nodes)];
      b = std::max(b, v);
    }
    if (!sharing) continue;
    shared.assign(1, best_values.size() >= opt.keep ? best_values.back() : kNone);
    shared.insert(shared.end(), best_at_size.begin(), best_at_size.end());
    if (!opt.share(shared, pos < fits.size())) break;
    shared_kth = shared[0];
    std::copy(shared.begin() + 1, shared.end(), shared_at_size.begin());
  }
  res.evaluated = n;
  for (std::size_t k = 0; k < n; ++k) {
    if (skipped[k]) res.bound_skipped.push_back(mine[k]);
    else if (evs[k].simulated) res.ranked.push_back(std::move(evs[k]));
    else res.oom.push_back(std::move(evs[k]));
  }
  res.pruned_oom = res.oom.size();
  res.pruned_bound = res.bound_skipped.size();
  rank_evaluations(s, res.ranked);
  res.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace trainsim

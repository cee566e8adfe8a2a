// The search's per-size view: the best layout of each node count, as the full ranking has it.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include "layout_search.h"
#include "scenario.h"

using namespace trainsim;

TEST(LayoutSearch, BestPerSizeIsEachSizesTopLayout) {
  const Scenario s = load_scenario(std::string(TRAINSIM_SCENARIOS) + "/llama3-70b-8-to-64-nodes.json", TRAINSIM_PROFILES);
  SearchOptions so;
  so.threads = 2;
  const SearchResult r = search_layouts(s, enumerate_layouts(s), so);
  const std::vector<const Evaluation*> best = best_per_size(r.ranked);
  std::set<int> sizes;
  for (const Evaluation& ev : r.ranked) sizes.insert(ev.nodes);
  ASSERT_EQ(best.size(), sizes.size());
  ASSERT_GE(best.size(), 2u);
  for (std::size_t i = 0; i < best.size(); ++i) {
    if (i > 0) {
      EXPECT_LT(best[i - 1]->nodes, best[i]->nodes);
    }
    for (const Evaluation& ev : r.ranked) {
      if (ev.nodes == best[i]->nodes) {
        EXPECT_GE(objective_value(s, *best[i]), objective_value(s, ev)) << describe(ev.layout);
      }
    }
  }
  EXPECT_EQ(r.ranked.size(), r.evaluated - r.pruned_oom);
}

namespace {

bool same_layout(const Evaluation& a, const Evaluation& b) { return a.nodes == b.nodes && a.layout == b.layout; }

}  // namespace

TEST(LayoutSearch, WhyNotFirstNamesCommunicationSlowingTheSameCompute) {
  // Llama 3 8B on 8 nodes of H200 (8 x 400 Gb/s, 2:1 fat-tree), tp 2, INT8: ZeRO-2 reduce-scatters
  // every micro-batch beside the backward, where ZeRO-1 reduces once, so the same GEMMs run longer
  // under the measured comm/compute slowdown. Its step's extra time is in the compute category;
  // the phrase says why. The same loss with other compute per step (the loser at another
  // micro-batch or recompute) keeps the plain phrase, as does tp 4, which loses on TP traffic.
  const Scenario s = parse_scenario(R"({ "name": "w", "model": "llama3-8b", "training": { "global_batch": 256 }, "hardware": "h200-sxm",
      "cluster": { "nodes": 8, "gpus_per_node": 8, "network": { "nics_per_node": 8, "nic_Gbps": 400, "fabric": "fat-tree", "oversubscription": 2 } },
      "layout": { "tp": 2, "micro_batch": 1, "sequence_parallel": true, "recompute": "none", "zero": 1, "bucket_MB": 100, "compression": "int8" },
      "search": { "tp": [2, 4], "pp": [1], "micro_batch": [1], "recompute": ["none"], "zero": [1, 2], "bucket_MB": [100],
                  "compression": ["int8"], "sequence_parallel": [true] } })",
                                    "w.json", TRAINSIM_PROFILES);
  SearchOptions so;
  so.threads = 1;
  so.keep = 0;
  const SearchResult r = search_layouts(s, enumerate_layouts(s), so);
  const Evaluation* z1 = nullptr;
  const Evaluation* z2 = nullptr;
  const Evaluation* tp4 = nullptr;
  for (const Evaluation& ev : r.ranked) {
    if (ev.layout.tp == 2) (ev.layout.zero == 1 ? z1 : z2) = &ev;
    if (ev.layout.tp == 4 && ev.layout.zero == 1) tp4 = &ev;
  }
  ASSERT_TRUE(z1 && z2 && tp4);
  ASSERT_GT(z1->tokens_per_s, 1.005 * z2->tokens_per_s);
  ASSERT_GT(z2->step.breakdown_s[sim::kCompute], z1->step.breakdown_s[sim::kCompute]);
  const std::string why = why_lost(s, *z1, *z2);
  EXPECT_EQ(why.rfind("compute slowed by communication beside it, ", 0), 0u) << why;
  ASSERT_GT(z1->tokens_per_s, 1.005 * tp4->tokens_per_s);
  std::printf("[ info ] ZeRO-2: %s; tp 4: %s\n", why.c_str(), why_lost(s, *z1, *tp4).c_str());
  EXPECT_EQ(why_lost(s, *z1, *tp4).find("communication beside"), std::string::npos);
  for (int k = 0; k < 2; ++k) {
    Evaluation other = *z2;
    if (k == 0) other.layout.micro_batch = 2;
    else other.layout.recompute = Recompute::full;
    EXPECT_EQ(why_lost(s, *z1, other).rfind("compute ", 0), 0u);
    EXPECT_EQ(why_lost(s, *z1, other).find("communication beside"), std::string::npos) << k;
  }
}

TEST(LayoutSearch, TheBoundSkipsOnlyLayoutsThatCouldNotRank) {
  // A search told how many layouts its caller reads (keep) skips the layouts whose step's lower
  // bound already ranks them below those and below the best of their node count. What it returns
  // must be what simulating every layout gives: the same `keep` best, in order, with the same
  // steps to the bit, and the same best layout at each size. Every skipped layout, simulated, must
  // rank below both. Over every example scenario with a search space, for keep 1, 3 and 10, and the
  // 25 GbE one again with stragglers (a 3% spread in GPU speed and one GPU at 70%), whose steps are
  // the slowest replica's and whose bound is divided by the fastest GPU's speed, and again ranked by
  // time to train with failures and checkpoints (whose goodput the bound takes at 1).
  const std::string dir = TRAINSIM_SCENARIOS;
  const char* files[] = {"gpt3-175b-1024-gpus.json", "llama3-70b-8-to-64-nodes.json", "slow-network-25gbe.json",
                         "llama3-405b-2k-to-16k-gpus.json", "llama2-7b-one-node.json", "slow-network-25gbe.json",
                         "slow-network-25gbe.json"};
  std::size_t skipped_total = 0, skipped_with_stragglers = 0, skipped_with_failures = 0;
  for (std::size_t fi = 0; fi < std::size(files); ++fi) {
    const char* f = files[fi];
    Scenario s = load_scenario(dir + "/" + f, TRAINSIM_PROFILES);
    ASSERT_TRUE(s.has_search) << f;
    if (fi == 5) {
      s.stragglers.given = true;
      s.stragglers.speed_stdev = 0.03;
      s.stragglers.seed = 5;
      s.stragglers.gpus.push_back({1, 0.7});
    }
    if (fi == 6) {
      s.reliability.given = true;
      s.reliability.gpu_mtbf_hours = 50;  // a GPU fails every 50 hours: goodput well below 1
      s.reliability.checkpoint_GBps = 5;
      s.reliability.restart_minutes = 10;
      s.training.tokens_total = 1e11;
      s.search.objective = "time_to_train";
    }
    const std::vector<Candidate> cands = enumerate_layouts(s);
    SearchOptions every;
    every.threads = 2;
    const SearchResult all = search_layouts(s, cands, every);
    EXPECT_EQ(all.pruned_bound, 0u);
    const std::vector<const Evaluation*> all_sizes = best_per_size(all.ranked);
    for (std::size_t keep : {1u, 3u, 10u}) {
      SearchOptions so = every;
      so.keep = keep;
      const SearchResult r = search_layouts(s, cands, so);
      EXPECT_EQ(r.evaluated, all.evaluated);
      EXPECT_EQ(r.pruned_oom, all.pruned_oom);
      EXPECT_EQ(r.ranked.size() + r.pruned_bound, all.ranked.size()) << f;
      EXPECT_EQ(r.bound_skipped.size(), r.pruned_bound);
      skipped_total += r.pruned_bound;
      if (s.stragglers.given) skipped_with_stragglers += r.pruned_bound;
      if (s.reliability.given) skipped_with_failures += r.pruned_bound;
      for (std::size_t i = 0; i < std::min(keep, all.ranked.size()); ++i) {
        ASSERT_LT(i, r.ranked.size()) << f;
        EXPECT_TRUE(same_layout(r.ranked[i], all.ranked[i])) << f << " keep " << keep << " #" << i;
        EXPECT_EQ(r.ranked[i].step.step_time_s, all.ranked[i].step.step_time_s) << f;
      }
      const std::vector<const Evaluation*> sizes = best_per_size(r.ranked);
      ASSERT_EQ(sizes.size(), all_sizes.size()) << f;
      for (std::size_t i = 0; i < sizes.size(); ++i) EXPECT_TRUE(same_layout(*sizes[i], *all_sizes[i])) << f;
      const double kth = objective_value(s, all.ranked[std::min(keep, all.ranked.size()) - 1]);
      for (std::size_t idx : r.bound_skipped) {
        const Evaluation* ev = nullptr;
        for (const Evaluation& e : all.ranked)
          if (e.nodes == cands[idx].nodes && e.layout == cands[idx].layout) ev = &e;
        ASSERT_NE(ev, nullptr) << f;
        EXPECT_LT(objective_value(s, *ev), kth) << f << " " << describe(ev->layout);
        for (const Evaluation* b : all_sizes)
          if (b->nodes == ev->nodes) {
            EXPECT_LT(objective_value(s, *ev), objective_value(s, *b)) << f;
          }
      }
    }
  }
  EXPECT_GT(skipped_total, 0u);
  EXPECT_GT(skipped_with_stragglers, 0u);
  EXPECT_GT(skipped_with_failures, 0u);
}

TEST(LayoutSearch, WhatTheBoundSkipsDoesNotDependOnTheThreads) {
  // The layouts are taken in batches of a fixed size, and the bound is compared only between
  // batches, so one thread and three skip the same layouts and return the same ranking.
  const Scenario s = load_scenario(std::string(TRAINSIM_SCENARIOS) + "/gpt3-175b-1024-gpus.json", TRAINSIM_PROFILES);
  const std::vector<Candidate> cands = enumerate_layouts(s);
  SearchOptions one;
  one.keep = 10;
  one.threads = 1;
  SearchOptions three = one;
  three.threads = 3;
  const SearchResult a = search_layouts(s, cands, one), b = search_layouts(s, cands, three);
  EXPECT_GT(a.pruned_bound, 0u);
  EXPECT_EQ(a.bound_skipped, b.bound_skipped);
  ASSERT_EQ(a.ranked.size(), b.ranked.size());
  for (std::size_t i = 0; i < a.ranked.size(); ++i) {
    EXPECT_TRUE(same_layout(a.ranked[i], b.ranked[i]));
    EXPECT_EQ(a.ranked[i].step.step_time_s, b.ranked[i].step.step_time_s);
  }
}

TEST(LayoutSearch, ShardsSharingTheirBestSkipMoreAndRankTheSame) {
  // Two shards of one search, as two MPI ranks run it, here two threads whose `share` is a
  // barrier taking the larger of each value. Sharing, each shard skips by what both have
  // simulated: together they skip more than shards that bound by their own results alone, and
  // still only layouts that rank below the 10 best of the whole space and below the best at their
  // size (the same skipped layouts, simulated by the search that simulates everything).
  const Scenario s = load_scenario(std::string(TRAINSIM_SCENARIOS) + "/llama3-70b-8-to-64-nodes.json", TRAINSIM_PROFILES);
  const std::vector<Candidate> cands = enumerate_layouts(s);
  SearchOptions every;
  every.threads = 1;
  const SearchResult all = search_layouts(s, cands, every);
  const std::vector<const Evaluation*> all_sizes = best_per_size(all.ranked);
  constexpr std::size_t kKeep = 10;
  ASSERT_GT(all.ranked.size(), kKeep);
  const double kth = objective_value(s, all.ranked[kKeep - 1]);

  auto run_shards = [&](bool share) {
    std::mutex m;
    std::condition_variable cv;
    std::vector<double> merged;
    int arrived = 0, generation = 0;
    bool any_more = false, result_more = false;
    SearchResult out[2];
    auto shard = [&](std::size_t i) {
      SearchOptions so;
      so.threads = 1;
      so.keep = kKeep;
      so.shard = i;
      so.shards = 2;
      if (share)
        so.share = [&](std::vector<double>& values, bool more) {
          std::unique_lock<std::mutex> lock(m);
          if (arrived == 0) merged = values, any_more = more;
          else {
            for (std::size_t k = 0; k < values.size(); ++k) merged[k] = std::max(merged[k], values[k]);
            any_more = any_more || more;
          }
          const int gen = generation;
          if (++arrived == 2) {
            arrived = 0;
            result_more = any_more;
            ++generation;
            cv.notify_all();
          } else {
            cv.wait(lock, [&] { return generation != gen; });
          }
          values = merged;
          return result_more;
        };
      out[i] = search_layouts(s, cands, so);
    };
    std::thread t0(shard, 0), t1(shard, 1);
    t0.join();
    t1.join();
    return std::pair{std::move(out[0]), std::move(out[1])};
  };
  const auto [own0, own1] = run_shards(false);
  const auto [sh0, sh1] = run_shards(true);
  const std::size_t own = own0.pruned_bound + own1.pruned_bound, shared = sh0.pruned_bound + sh1.pruned_bound;
  EXPECT_GT(shared, own);
  std::vector<Evaluation> ranked = sh0.ranked;
  ranked.insert(ranked.end(), sh1.ranked.begin(), sh1.ranked.end());
  rank_evaluations(s, ranked);
  for (std::size_t i = 0; i < kKeep; ++i) {
    EXPECT_TRUE(same_layout(ranked[i], all.ranked[i])) << "#" << i;
    EXPECT_EQ(ranked[i].step.step_time_s, all.ranked[i].step.step_time_s);
  }
  const std::vector<const Evaluation*> sizes = best_per_size(ranked);
  ASSERT_EQ(sizes.size(), all_sizes.size());
  for (std::size_t i = 0; i < sizes.size(); ++i) EXPECT_TRUE(same_layout(*sizes[i], *all_sizes[i]));
  for (const SearchResult* r : {&sh0, &sh1})
    for (std::size_t idx : r->bound_skipped) {
      const Evaluation* ev = nullptr;
      for (const Evaluation& e : all.ranked)
        if (e.nodes == cands[idx].nodes && e.layout == cands[idx].layout) ev = &e;
      ASSERT_NE(ev, nullptr);
      EXPECT_LT(objective_value(s, *ev), kth) << describe(ev->layout);
      for (const Evaluation* b : all_sizes)
        if (b->nodes == ev->nodes) {
          EXPECT_LT(objective_value(s, *ev), objective_value(s, *b));
        }
    }
}

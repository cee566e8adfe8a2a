// The search's per-size view: the best layout of each node count, as the full ranking has it.
#include <gtest/gtest.h>

#include <set>

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

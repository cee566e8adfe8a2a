// `planner compare`: each hardware option is its own search, and the picks follow from the options'
// times and prices.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "hardware_compare.h"
#include "input_error.h"
#include "layout_search.h"
#include "scenario.h"

using namespace trainsim;

namespace {

const std::string kProfiles = TRAINSIM_TEST_DATA;

// GPT 1.3B on the test part, 1e9 tokens, a small search over 2 and 4 nodes; `compare` as given;
// a deadline where `deadline_days` is positive.
Scenario scenario(const std::string& compare, double deadline_days = 0) {
  const std::string deadline = deadline_days > 0 ? R"(, "deadline_days": )" + std::to_string(deadline_days) : "";
  const std::string text = R"({ "name": "t", "model": "gpt-1.3b", "training": { "global_batch": 64, "tokens_total": 1e9)" + deadline + R"( },
      "hardware": "test-gpu", "cluster": { "nodes": [2, 4], "gpus_per_node": 8 },
      "search": { "tp": [1, 2], "pp": [1, 2], "micro_batch": [1, 2], "recompute": ["none"], "zero": [1], "nodes": [2, 4] },
      "compare": )" + compare + "}";
  return parse_scenario(text, "t.json", kProfiles);
}

}  // namespace

TEST(Compare, AnOptionsBestLayoutsAreWhatItsOwnSearchFinds) {
  const Scenario s = scenario(R"([{ "name": "a", "hardware": "test-gpu", "gpu_hour_usd": 1 }])");
  const Comparison c = compare_hardware(s, 1);
  ASSERT_EQ(c.options.size(), 1u);
  const Scenario& own = *s.compare[0].scenario;
  SearchOptions so;
  so.threads = 1;
  const SearchResult r = search_layouts(own, enumerate_layouts(own), so);
  const auto best = best_per_size(r.ranked);
  ASSERT_EQ(best.size(), 2u);
  ASSERT_EQ(c.options[0].best.size(), best.size());
  for (std::size_t i = 0; i < best.size(); ++i) {
    EXPECT_EQ(c.options[0].best[i].nodes, best[i]->nodes);
    EXPECT_EQ(describe(c.options[0].best[i].layout), describe(best[i]->layout));
    EXPECT_EQ(c.options[0].best[i].step.step_time_s, best[i]->step.step_time_s);
  }
}

TEST(Compare, TheSameHardwareAtTwiceThePriceCostsTwiceAsMuch) {
  // Same profile and sizes, prices 1 and 2 per GPU-hour: the steps and times to train are equal and
  // every cost of the second is exactly twice the first's, so the first is cheapest; tokens per
  // dollar is an hour's tokens over the hour's price of the GPUs.
  const Scenario s = scenario(R"([{ "name": "cheap", "hardware": "test-gpu", "gpu_hour_usd": 1 },
                                  { "name": "dear", "hardware": "test-gpu", "gpu_hour_usd": 2 }])");
  const Comparison c = compare_hardware(s, 1);
  ASSERT_EQ(c.options.size(), 2u);
  ASSERT_TRUE(c.priced);
  ASSERT_EQ(c.options[0].best.size(), 2u);
  ASSERT_EQ(c.options[1].best.size(), 2u);
  for (std::size_t k = 0; k < 2; ++k) {
    const Evaluation &a = c.options[0].best[k], &b = c.options[1].best[k];
    EXPECT_EQ(a.time_to_train_s, b.time_to_train_s);
    EXPECT_NEAR(b.cost_usd, 2 * a.cost_usd, 1e-9 * a.cost_usd);
    EXPECT_NEAR(a.cost_usd, a.time_to_train_s / 3600.0 * a.gpus * 1.0, 1e-9 * a.cost_usd);
    EXPECT_NEAR(tokens_per_dollar(*c.options[0].scenario, a), a.tokens_per_s * 3600.0 / a.gpus, 1e-9 * a.tokens_per_s);
  }
  EXPECT_EQ(c.cheapest.option, 0);
  // The fastest is the larger size of either (equal times: the first found).
  ASSERT_GE(c.fastest.option, 0);
  EXPECT_EQ(c.options[c.fastest.option].best[c.fastest.size].nodes, 4);
}

TEST(Compare, TheDeadlineKeepsOnlySizesThatMeetIt) {
  // A deadline between the two sizes' times to train: only 4 nodes meet it, so the cheapest within
  // it is the 4-node size even where 2 nodes cost less.
  const Scenario probe = scenario(R"([{ "hardware": "test-gpu", "gpu_hour_usd": 1 }])");
  const Comparison p = compare_hardware(probe, 1);
  ASSERT_EQ(p.options[0].best.size(), 2u);
  const double t2 = p.options[0].best[0].time_to_train_s, t4 = p.options[0].best[1].time_to_train_s;
  ASSERT_LT(t4, t2);
  const double deadline_days = (t2 + t4) / 2 / 86400.0;
  const Comparison c = compare_hardware(scenario(R"([{ "hardware": "test-gpu", "gpu_hour_usd": 1 }])", deadline_days), 1);
  ASSERT_GE(c.cheapest_in_deadline.option, 0);
  EXPECT_EQ(c.options[0].best[c.cheapest_in_deadline.size].nodes, 4);
  // With no price anywhere, GPU-hours are compared instead.
  const Comparison g = compare_hardware(scenario(R"([{ "hardware": "test-gpu" }])", deadline_days), 1);
  EXPECT_FALSE(g.priced);
  EXPECT_EQ(g.options[0].best[g.cheapest_in_deadline.size].nodes, 4);
}

TEST(Compare, SizesOverThePowerBudgetAreNotPicked) {
  // The powered test part draws 10 kW a node: 2 nodes 20 kW, 4 nodes 40 kW. A 30 kW budget leaves
  // only 2 nodes, so the fastest option is its 2-node size although 4 nodes train sooner.
  auto text = [](const std::string& budget) {
    return R"({ "name": "t", "model": "gpt-1.3b", "training": { "global_batch": 64, "tokens_total": 1e9 },
        "hardware": "test-gpu-powered", "cluster": { "nodes": [2, 4], "gpus_per_node": 8)" + budget + R"( },
        "search": { "tp": [1, 2], "pp": [1], "micro_batch": [1, 2], "recompute": ["none"], "zero": [1], "nodes": [2, 4] },
        "compare": [{ "hardware": "test-gpu-powered", "gpu_hour_usd": 1 }] })";
  };
  const Comparison free = compare_hardware(parse_scenario(text(""), "t.json", kProfiles), 1);
  ASSERT_EQ(free.options[0].best.size(), 2u);
  EXPECT_EQ(free.options[0].best[free.fastest.size].nodes, 4);
  EXPECT_DOUBLE_EQ(free.options[0].best[1].facility_kW, 40.0);
  const Comparison c = compare_hardware(parse_scenario(text(R"(, "power_budget_kW": 30)"), "t.json", kProfiles), 1);
  ASSERT_EQ(c.options[0].best.size(), 2u);
  EXPECT_FALSE(c.options[0].best[0].over_power_budget);
  EXPECT_TRUE(c.options[0].best[1].over_power_budget);
  EXPECT_EQ(c.options[0].best[c.fastest.size].nodes, 2);
  EXPECT_EQ(c.options[0].best[c.cheapest.size].nodes, 2);
  // A budget on a part that gives no node power is an input error naming the option.
  std::string bad = text(R"(, "power_budget_kW": 30)");
  bad.replace(bad.rfind("test-gpu-powered"), 16, "test-gpu");
  try {
    parse_scenario(bad, "t.json", kProfiles);
    ADD_FAILURE() << "accepted a power budget without node power";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("compare[0]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("power_budget_kW"), std::string::npos) << e.what();
  }
}

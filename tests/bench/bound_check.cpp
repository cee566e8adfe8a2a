// Checks sim::step_lower_bound against the steady-state step on many random layouts, more than the
// unit test affords: eight models from GPT 350M to Llama 3 405B, four profiles, pp 1-16 (uneven
// stages too), GPipe, 1F1B and interleaved, ZeRO 0-3, every compression. Prints how many layouts
// were compared, how many broke the bound (with the scenario), and the bound's range as a fraction
// of the step. Usage: bound_check LAYOUTS_TRIED SEED; exit status 1 if any broke it.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "cost_model.h"
#include "evaluation.h"
#include "input_error.h"
#include "scenario.h"

using namespace trainsim;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: bound_check LAYOUTS_TRIED SEED\n");
    return 2;
  }
  const int tries = std::atoi(argv[1]);
  std::mt19937 rng(static_cast<unsigned>(std::atoi(argv[2])));
  auto pick = [&](std::initializer_list<int> v) { return *(v.begin() + rng() % v.size()); };
  const char* models[] = {"gpt3-175b", "llama2-13b", "gpt-1.3b", "llama3-70b", "gpt-350m", "llama2-7b", "mt-nlg-530b", "llama3-405b"};
  const char* hardware[] = {"a100-80g-sxm", "h100-sxm", "h200-sxm", "b200-sxm"};
  const char* fabrics[] = {"", R"(, "fabric": "fat-tree", "oversubscription": 3)", R"(, "fabric": "rail-optimized")"};
  const char* compressions[] = {"none", "int8", "topk:0.01", "fp16", "powersgd:4"};
  const char* schedules[] = {"1f1b", "interleaved", "gpipe"};
  const char* recomputes[] = {"none", "selective", "full"};
  int compared = 0, broken = 0;
  double lowest = 1, highest = 0;
  for (int i = 0; i < tries; ++i) {
    const int pp = pick({1, 2, 3, 4, 5, 6, 8, 16}), nodes = pick({1, 2, 4, 8, 16});
    const std::string schedule = schedules[rng() % 3];
    const std::string text =
        std::string(R"({ "name": "r", "model": ")") + models[rng() % 8] + R"(", "training": { "global_batch": )" +
        std::to_string(pick({16, 64, 96, 256, 512})) + R"( }, "hardware": ")" + hardware[rng() % 4] + R"(", "cluster": { "nodes": )" +
        std::to_string(nodes) + R"(, "gpus_per_node": 8, "network": { "nic_Gbps": )" + std::to_string(pick({25, 100, 400})) +
        R"(, "nics_per_node": )" + std::to_string(pick({1, 2, 8})) + fabrics[rng() % 3] + " } }" + R"(, "layout": { "tp": )" +
        std::to_string(pick({1, 2, 4, 8})) + R"(, "pp": )" + std::to_string(pp) + R"(, "vpp": )" +
        std::to_string(schedule == "interleaved" ? pick({2, 3, 4}) : 1) + R"(, "micro_batch": )" + std::to_string(pick({1, 2, 4})) +
        R"(, "recompute": ")" + recomputes[rng() % 3] + R"(", "zero": )" + std::to_string(pick({0, 1, 2, 3})) +
        R"(, "sequence_parallel": )" + (rng() % 2 ? "true" : "false") + R"(, "schedule": ")" + schedule + R"(", "compression": ")" +
        compressions[rng() % 5] + R"(", "bucket_MB": )" + std::to_string(pick({5, 25, 100})) + " } }";
    Scenario s;
    Layout l;
    try {
      s = parse_scenario(text, "r", TRAINSIM_PROFILES);
      l = resolve_layout(s, s.layout, false, nodes);
    } catch (const InputError&) {
      continue;  // a combination the layout rules refuse
    }
    const CostModel cost(s.hardware, s.training.precision);
    EvalOptions read;
    read.cost = &cost;
    const double bound = step_lower_bound(s, l, cost);
    const double step = evaluate(s, l, nodes, read).step.step_time_s;
    ++compared;
    lowest = std::min(lowest, bound / step);
    highest = std::max(highest, bound / step);
    // The search allows a steady-state reading to fall short of the bound by 2e-3.
    if (bound * (1 - 2e-3) > step) {
      ++broken;
      std::printf("broken: bound %.6g s, step %.6g s: %s\n", bound, step, text.c_str());
    }
  }
  std::printf("%d layouts compared, %d broke the bound; the bound is %.3f-%.4f of the step\n", compared, broken, lowest, highest);
  return broken > 0 ? 1 : 0;
}

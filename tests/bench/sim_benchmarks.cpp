// Speed of the engine, of one simulated step, and of the layout search.
#include <benchmark/benchmark.h>

#include "cost_model.h"
#include "engine.h"
#include "evaluation.h"
#include "layout_search.h"
#include "model_presets.h"
#include "scenario.h"

using namespace trainsim;

namespace {

const std::string kProfiles = TRAINSIM_PROFILES;

// GPT-3 175B with tp 8, pp 8, micro-batch 1 and a global batch of 1,536: the interleaved
// schedule over 3 virtual stages, or 1F1B.
Scenario gpt3_scenario(int nodes, bool interleaved = true) {
  const std::string text = R"({ "name": "bench", "model": "gpt3-175b", "training": { "global_batch": 1536 },
    "hardware": "a100-80g-sxm", "cluster": { "nodes": )" + std::to_string(nodes) + R"(, "gpus_per_node": 8 },
    "layout": { "tp": 8, "pp": 8, "vpp": )" + (interleaved ? "3" : "1") + R"(, "micro_batch": 1, "sequence_parallel": true,
                "recompute": "selective", "zero": 1, "schedule": ")" + (interleaved ? "interleaved" : "1f1b") + R"(" } })";
  return parse_scenario(text, "bench", kProfiles);
}

}  // namespace

// Events per second of the bare engine: a chain-heavy DAG of 100,000 fixed-duration tasks on 64
// streams, built and run. `fresh`: a new engine each time (its vectors allocated and grown as the
// tasks come); otherwise one engine reset between runs, as the simulator keeps one per thread.
static void engine_events(benchmark::State& st, bool fresh) {
  sim::Engine kept;
  for (auto _ : st) {
    sim::Engine made;
    sim::Engine& e = fresh ? made : kept;
    e.reset();
    std::vector<sim::StreamId> streams;
    for (int i = 0; i < 64; ++i) streams.push_back(e.add_stream());
    sim::TaskId prev = -1;
    for (int i = 0; i < 100000; ++i) {
      sim::TaskSpec s;
      s.stream = streams[i % 64];
      s.duration_s = 1e-6 * (1 + i % 5);
      const sim::TaskId t = e.add_task(s);
      if (i % 7 == 0 && prev >= 0) e.add_dependency(prev, t);
      prev = t;
    }
    e.run();
    benchmark::DoNotOptimize(e.makespan());
  }
  st.SetItemsProcessed(st.iterations() * 100000);
}
static void BM_EngineEvents(benchmark::State& st) { engine_events(st, true); }
BENCHMARK(BM_EngineEvents)->Unit(benchmark::kMillisecond);
static void BM_EngineEventsReused(benchmark::State& st) { engine_events(st, false); }
BENCHMARK(BM_EngineEventsReused)->Unit(benchmark::kMillisecond);

// One symmetric-mode step: GPT-3 175B on 1,024 GPUs (tp 8, pp 8, dp 16, 96 micro-batches),
// interleaved over 3 virtual stages or 1F1B. Cold: every call builds its own cost model and
// collective plans, as a lone `planner simulate` does, so its step graph too. Warm: they are kept
// across calls, as a search thread keeps them across the layouts it evaluates; the calls cycle
// through the four layouts of the structure that differ in micro-batch size (1, 2) and recompute
// (selective, full), as a search's do, so each call runs the kept graph with numbers of its own.
static void BM_SimulateSymmetric175B(benchmark::State& st) {
  const bool interleaved = st.range(0) == 1, warm = st.range(1) == 1;
  const Scenario s = gpt3_scenario(128, interleaved);
  std::vector<Layout> layouts;
  for (int mb : {1, 2})
    for (Recompute r : {Recompute::selective, Recompute::full}) {
      Layout l = s.layout;
      l.micro_batch = mb;
      l.recompute = r;
      layouts.push_back(resolve_layout(s, l, false, 128));
      if (!warm) break;
    }
  const CostModel cost(s.hardware, s.training.precision);
  sim::PlanShapeCache plans;
  EvalOptions opt;
  if (warm) opt.cost = &cost, opt.plan_cache = &plans;
  sim::StepResult last;
  std::size_t k = 0, reused = 0, calls = 0;
  for (auto _ : st) {
    last = evaluate(s, layouts[k++ % layouts.size()], 128, opt).step;
    reused += last.graph_reused;
    ++calls;
    benchmark::DoNotOptimize(last.step_time_s);
  }
  st.counters["tasks"] = static_cast<double>(last.tasks);
  st.counters["events"] = static_cast<double>(last.events);
  st.counters["microbatches_simulated"] = last.simulated_microbatches;
  st.counters["graphs_reused"] = static_cast<double>(reused) / static_cast<double>(calls);
}
BENCHMARK(BM_SimulateSymmetric175B)
    ->ArgNames({"interleaved", "warm"})
    ->Args({1, 0})
    ->Args({0, 0})
    ->Args({1, 1})
    ->Args({0, 1})
    ->Unit(benchmark::kMicrosecond);

// The same step with every one of the 1,024 GPUs simulated on the full topology.
static void BM_SimulateFull175B(benchmark::State& st) {
  const Scenario s = gpt3_scenario(128);
  const Layout l = resolve_layout(s, s.layout, false, 128);
  EvalOptions opt;
  opt.mode = sim::SimMode::full;
  for (auto _ : st) benchmark::DoNotOptimize(evaluate(s, l, 128, opt).step.step_time_s);
}
BENCHMARK(BM_SimulateFull175B)->Unit(benchmark::kSecond)->Iterations(1);

// A search of the scenario's space on two threads: layouts evaluated per second (each is checked
// against the memory model; those that fit are simulated in symmetric mode), and how many were
// simulated. Argument `keep`: 10 searches as `planner search` does for the scenario's top 10,
// skipping the layouts whose step's lower bound rules them out of it; 0 simulates every layout
// that fits.
static void search_bench(benchmark::State& st, const std::string& text) {
  const Scenario s = parse_scenario(text, "bench", kProfiles);
  const auto cands = enumerate_layouts(s);
  SearchOptions opt;
  opt.threads = 2;
  opt.keep = static_cast<std::size_t>(st.range(0));
  std::size_t n = 0, simulated = 0;
  for (auto _ : st) {
    const auto r = search_layouts(s, cands, opt);
    n += r.evaluated;
    simulated = r.ranked.size();
    benchmark::DoNotOptimize(r.ranked.size());
  }
  st.counters["layouts"] = static_cast<double>(cands.size());
  st.counters["simulated"] = static_cast<double>(simulated);
  st.counters["layouts_per_s"] = benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsRate);
}

// MT-NLG 530B. `nodes` is the scenario's node list: 640 nodes (5,120 GPUs) admit only pp 5 of the
// pp values below; 560 and 700 nodes add pp 7 and 35, whose long pipelines (up to 120
// micro-batches) dominate the time.
static void search_530b(benchmark::State& st, const std::string& nodes) {
  search_bench(st, R"({ "name": "bench", "model": "mt-nlg-530b", "training": { "global_batch": 1920 },
    "hardware": "a100-80g-sxm", "cluster": { "nodes": 640, "gpus_per_node": 8 },
    "search": { "tp": [4, 8], "pp": [5, 7, 15, 21, 35], "vpp": [1, 3], "micro_batch": [1, 2, 4], "recompute": ["selective", "full"],
                "zero": [0, 1], "bucket_MB": [25, 100], "sequence_parallel": [true], "nodes": )" + nodes + " } }");
}
static void BM_Search530B_5120Gpus(benchmark::State& st) { search_530b(st, "[640]"); }
BENCHMARK(BM_Search530B_5120Gpus)->ArgName("keep")->Arg(10)->Unit(benchmark::kMillisecond)->UseRealTime();
static void BM_Search530B_4480To5600Gpus(benchmark::State& st) { search_530b(st, "[560, 640, 700]"); }
BENCHMARK(BM_Search530B_4480To5600Gpus)->ArgName("keep")->Arg(10)->Arg(0)->Unit(benchmark::kMillisecond)->UseRealTime();

// GPT-3 175B on 1,024 GPUs: tp 4 or 8, pp 4, 8 or 16, 1F1B or interleaved over 2 or 3 virtual
// stages, micro-batch 1 or 2, selective or full recompute, ZeRO 0 or 1, two bucket sizes.
static void BM_Search175B_1024Gpus(benchmark::State& st) {
  search_bench(st, R"({ "name": "bench", "model": "gpt3-175b", "training": { "global_batch": 1536 },
    "hardware": "a100-80g-sxm", "cluster": { "nodes": 128, "gpus_per_node": 8 },
    "search": { "tp": [4, 8], "pp": [4, 8, 16], "vpp": [1, 2, 3], "micro_batch": [1, 2], "recompute": ["selective", "full"],
                "zero": [0, 1], "bucket_MB": [25, 100], "sequence_parallel": [true] } })");
}
BENCHMARK(BM_Search175B_1024Gpus)->ArgName("keep")->Arg(10)->Arg(0)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK_MAIN();

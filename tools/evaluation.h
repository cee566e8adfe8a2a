#pragma once
// One evaluated layout: the simulated step, the memory estimate and the derived rates, as the
// result contract of SCENARIO.md describes them.
#include <string>
#include <vector>

#include "memory_model.h"
#include "scenario.h"
#include "step_builder.h"

namespace trainsim {

struct Evaluation {
  Layout layout;
  int nodes = 0;
  int gpus = 0;
  bool simulated = false;  // false when pruned before simulation (out of memory)
  sim::StepResult step;
  MemoryResult memory;
  double tokens_per_s = 0;
  double mfu = 0;
  double params = 0;
  double flops_per_token = 0;
  double time_to_train_s = 0;
  double cost_usd = 0;
  // With the profile's node power: the cluster's draw at the nodes' maximum input power times the
  // site's PUE (an upper bound: training runs below it), and the energy and its cost to train.
  double facility_kW = 0;
  double energy_kWh = 0;
  double energy_usd = 0;
  bool over_power_budget = false;  // facility_kW above the scenario's cluster.power_budget_kW
  InputPipelineResult input;        // when the scenario has a `data` block
  ReliabilityResult reliability;    // when it has a `reliability` block: time to train and cost include it
  // When it has a `stragglers` block: the step above is with them.
  struct Stragglers {
    bool given = false;
    int slowest_gpu = -1;       // the slowest GPU of the cluster
    double slowest_speed = 1;   // its speed, a fraction of the profile's
    int below_95 = 0;           // GPUs under 95% of nominal speed
    int named_here = 0;         // named slow GPUs that this cluster has
    int slow_nics_here = 0;     // named slow NICs that this cluster has
    double slowest_nic_speed = 1;
    double step_without_s = 0;  // the same step with every GPU at nominal speed (0: not simulated)
    // Symmetric mode with several replicas: the step above is the slowest replica's, each simulated
    // on its own; these are that replica, how many replicas were simulated (those no other is
    // slower than at every stage), and the upper bound with every stage at its slowest GPU and NIC
    // of any replica (0: not simulated).
    int slowest_replica = 0;
    int replicas_simulated = 0;
    double step_upper_s = 0;
  } stragglers;
  double scaling_efficiency_vs_1gpu = 0;  // filled by callers that know the single-GPU rate
};

struct EvalOptions {
  sim::SimMode mode = sim::SimMode::symmetric;
  bool record_timeline = false;
  std::vector<int> timeline_gpus;  // a recorded timeline keeps only these GPUs (sorted); empty: all
  bool simulate_if_oom = true;
  bool steady_state = true;  // symmetric mode: read long schedules off their steady state
  // A cost model of the scenario's hardware and precision to reuse (one per thread); else one is
  // built for the call.
  const CostModel* cost = nullptr;
  sim::PlanShapeCache* plan_cache = nullptr;  // collective plans to reuse (one per thread)
  // With stragglers: also simulate the step with every GPU at nominal speed, to say what they cost.
  bool straggler_baseline = false;
  // Where neither one GPU per stage nor one per TP group stands for the rest: simulate every GPU
  // (true), or throw sim::NeedsEveryGpu.
  bool every_gpu_if_needed = true;
};

// A profile's measured collectives (intra_collectives or inter_collectives), as the simulator
// rescales plans to them.
std::vector<sim::MeasuredCollective> measured_collectives(const std::vector<CollectiveFit>& fits);
sim::NetworkParams network_for(const Scenario& s, int nodes);
MemoryResult memory_for(const Scenario& s, const Layout& l);
Evaluation evaluate(const Scenario& s, const Layout& l, int nodes, const EvalOptions& opt);
// The layout's memory estimate and model figures alone (what `evaluate` works out before it
// simulates): `simulated` is false.
Evaluation evaluate_memory(const Scenario& s, const Layout& l, int nodes);
// No symmetric-mode step of the layout, every GPU at the profile's speed, takes less than this
// (sim::step_lower_bound; the scenario's data loaders only add to a step).
double step_lower_bound(const Scenario& s, const Layout& l, const CostModel& cost);
// The fraction of wall-clock time that is training: the reliability model's goodput, or 1 where the
// scenario has no `reliability` block.
double goodput(const Evaluation& ev);
// Whether `ev` trains the scenario's tokens within its deadline, fitting in memory and within the
// site's power budget (false where the scenario sets no deadline).
bool meets_deadline(const Scenario& s, const Evaluation& ev);
// The data-parallel replicas that may be the slowest under per-GPU speeds and NIC rates: those
// that no other replica is at least as slow as at every pipeline stage (its slowest GPU and NIC).
std::vector<int> slowest_replica_candidates(const Layout& l, const sim::ClusterShape& shape, const std::vector<double>& gpu_speed);
// The scenario's per-GPU speeds on `gpus` GPUs (gpu_speeds), kept per thread for the last size
// asked, since a search asks for the same size layout after layout.
const std::vector<double>& scenario_gpu_speeds(const Scenario& s, int gpus);
// Throughput of the same model on one GPU (micro-batch as given, memory ignored): the reference
// for scaling efficiency.
double single_gpu_tokens_per_s(const Scenario& s, int micro_batch);

}  // namespace trainsim

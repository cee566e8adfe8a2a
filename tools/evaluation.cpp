#include "evaluation.h"

#include <algorithm>
#include <optional>

#include "cost_model.h"
#include "step_bound.h"

namespace trainsim {

std::vector<sim::MeasuredCollective> measured_collectives(const std::vector<CollectiveFit>& fits) {
  std::vector<sim::MeasuredCollective> out;
  for (const CollectiveFit& f : fits) {
    sim::MeasuredCollective m;
    m.kind = sim::parse_collective_kind(f.collective);
    m.gpus = f.gpus;
    if (f.segments.empty()) m.segments.push_back({0, 1e300, f.alpha_us * 1e-6, f.busbw_GBps * 1e9});
    for (const auto& sg : f.segments) m.segments.push_back({sg.min_bytes, sg.max_bytes, sg.alpha_us * 1e-6, sg.busbw_GBps * 1e9});
    out.push_back(std::move(m));
  }
  return out;
}

sim::NetworkParams network_for(const Scenario& s, int nodes) {
  sim::NetworkParams n;
  const HardwareProfile& hw = s.hardware;
  n.shape.nodes = nodes;
  n.shape.gpus_per_node = s.cluster.gpus_per_node;
  n.shape.nics_per_node = s.cluster.network.nics_per_node;
  n.shape.nvlink_Bps = hw.intra_busbw_GBps * 1e9;
  n.shape.nic_Bps = s.cluster.network.nic_Gbps / 8.0 * 1e9 * s.cluster.network.efficiency;
  n.shape.fabric = sim::parse_fabric(s.cluster.network.fabric);
  n.shape.oversubscription = s.cluster.network.oversubscription;
  n.shape.nics_per_leaf = s.cluster.network.nics_per_leaf;
  n.intra_alpha_s = hw.intra_latency_us * 1e-6;
  n.inter_alpha_s = s.cluster.network.latency_us * 1e-6;
  n.allreduce_algorithm = sim::parse_algorithm(s.cluster.network.allreduce_algorithm);
  n.intra_measured = measured_collectives(hw.intra_collectives);
  if (s.cluster.network.nvls) {
    // NCCL with NVLS on: its curves go first, so that they price their kinds and sizes.
    std::vector<sim::MeasuredCollective> nvls = measured_collectives(hw.intra_nvls_collectives);
    n.intra_measured.insert(n.intra_measured.begin(), nvls.begin(), nvls.end());
  }
  // Measured across nodes on the profile's own network: only where the scenario keeps that network.
  const NetworkSpec& net = s.cluster.network;
  if (net.nic_Gbps == hw.nic_Gbps && net.efficiency == hw.nic_efficiency && net.latency_us == hw.inter_latency_us)
    n.inter_measured = measured_collectives(hw.inter_collectives);
  n.shape.nic_speed = nic_speeds(s.stragglers, nodes, n.shape.nics_per_node);
  return n;
}

MemoryResult memory_for(const Scenario& s, const Layout& l) {
  const HardwareProfile& hw = s.hardware;
  const ModelConfig model = with_padded_vocab(s.model, l.tp);
  MemoryInput mi{model, l, s.training.precision, s.training.global_batch, hw.memory_bytes,
                 {hw.context_bytes, hw.nccl_first_communicator_bytes, hw.nccl_further_communicator_bytes}};
  return estimate_memory(mi);
}

std::vector<int> slowest_replica_candidates(const Layout& l, const sim::ClusterShape& shape, const std::vector<double>& gpu_speed) {
  // Per replica and stage: its slowest GPU (the TP group waits for it) and its slowest NIC.
  const int stages = l.pp;
  std::vector<double> v(static_cast<std::size_t>(l.dp) * 2 * stages, 1e300);
  for (int g = 0; g < shape.gpus(); ++g) {
    const sim::RankCoordinates c = sim::rank_coordinates(l, g);
    double* row = &v[static_cast<std::size_t>(c.replica) * 2 * stages];
    row[c.stage] = std::min(row[c.stage], gpu_speed[g]);
    row[stages + c.stage] = std::min(row[stages + c.stage], shape.nic_speed_of(shape.nic_of(g)));
  }
  // Keep the replicas that no other is at least as slow as everywhere (ties: the lowest index).
  // Slowest first by the sum of their speeds: whatever dominates a replica comes before it, and
  // whatever dominates that is kept, so each replica is checked against the kept ones only.
  const int width = 2 * stages;
  std::vector<double> sum(l.dp, 0.0);
  std::vector<int> order(l.dp);
  for (int r = 0; r < l.dp; ++r) {
    order[r] = r;
    for (int k = 0; k < width; ++k) sum[r] += v[static_cast<std::size_t>(r) * width + k];
  }
  std::sort(order.begin(), order.end(), [&](int a, int b) { return sum[a] != sum[b] ? sum[a] < sum[b] : a < b; });
  std::vector<int> out;
  for (int r : order) {
    const double* a = &v[static_cast<std::size_t>(r) * width];
    bool dominated = false;
    for (int q : out) {
      const double* b = &v[static_cast<std::size_t>(q) * width];
      bool all = true;
      for (int k = 0; k < width && all; ++k) all = b[k] <= a[k];
      if (all) {
        dominated = true;
        break;
      }
    }
    if (!dominated) out.push_back(r);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Evaluation evaluate_memory(const Scenario& s, const Layout& l, int nodes) {
  Evaluation ev;
  ev.layout = l;
  ev.nodes = nodes;
  ev.gpus = nodes * s.cluster.gpus_per_node;
  ev.memory = memory_for(s, l);
  ev.params = static_cast<double>(count_params(s.model).total);
  ev.flops_per_token = model_flops_per_token(s.model);
  return ev;
}

namespace {

// The step of `l` on `model` (the scenario's, its vocabulary padded for the layout), before the
// network and the simulation's options.
sim::StepInput step_input(const Scenario& s, const Layout& l, const ModelConfig& model, const CostModel& cost) {
  sim::StepInput in;
  in.model = &model;
  in.layout = l;
  in.precision = s.training.precision;
  in.global_batch = s.training.global_batch;
  in.cost = &cost;
  return in;
}

}  // namespace

double step_lower_bound(const Scenario& s, const Layout& l, const CostModel& cost) {
  const ModelConfig model = with_padded_vocab(s.model, l.tp);
  return sim::step_lower_bound(step_input(s, l, model, cost));
}

Evaluation evaluate(const Scenario& s, const Layout& l, int nodes, const EvalOptions& opt) {
  Evaluation ev = evaluate_memory(s, l, nodes);
  if (ev.memory.oom && !opt.simulate_if_oom) return ev;
  std::optional<CostModel> own;
  if (!opt.cost) own.emplace(s.hardware, s.training.precision);
  const CostModel& cost = opt.cost ? *opt.cost : *own;
  // Simulated with its vocabulary as laid out over the TP ranks; the parameter count and the model
  // FLOPs (MFU) are the model's own.
  const ModelConfig model = with_padded_vocab(s.model, l.tp);
  sim::StepInput in = step_input(s, l, model, cost);
  in.net = network_for(s, nodes);
  in.mode = opt.mode;
  in.record_timeline = opt.record_timeline;
  in.timeline_gpus = opt.timeline_gpus;
  in.steady_state = opt.steady_state;
  in.plan_cache = opt.plan_cache;
  in.every_gpu_if_needed = opt.every_gpu_if_needed;
  bool stepped = false;
  if (s.stragglers.given) {
    const std::vector<double>& speeds = scenario_gpu_speeds(s, ev.gpus);
    auto& st = ev.stragglers;
    st.given = true;
    for (const auto& g : s.stragglers.gpus) st.named_here += g.gpu < ev.gpus;
    st.slowest_gpu = 0;
    st.slowest_speed = speeds[0];
    for (int g = 0; g < ev.gpus; ++g) {
      if (speeds[g] < st.slowest_speed) st.slowest_speed = speeds[g], st.slowest_gpu = g;
      if (speeds[g] < 0.95) ++st.below_95;
    }
    for (const auto& n : s.stragglers.nics)
      if (n.node < nodes) {
        ++st.slow_nics_here;
        st.slowest_nic_speed = std::min(st.slowest_nic_speed, n.speed);
      }
    if (opt.straggler_baseline) {
      sim::StepInput nominal = in;
      nominal.net.shape.nic_speed.clear();
      st.step_without_s = sim::simulate_step(nominal).step_time_s;
    }
    in.gpu_speed = &speeds;
    if (opt.mode == sim::SimMode::symmetric && l.dp > 1 && !sim::symmetric_mode_misfit(in)) {
      // Replicas wait for each other only at the gradient reduction: the step is the slowest
      // replica's pipeline, each replica simulated on its own (as if every replica were like it).
      // Symmetric mode's default, every stage at its slowest GPU of any replica, bounds it from
      // above. Only replicas that no other is slower than at every stage need simulating.
      if (opt.straggler_baseline) {
        sim::StepInput upper = in;
        upper.record_timeline = false;
        st.step_upper_s = sim::simulate_step(upper).step_time_s;
      }
      const std::vector<int> candidates = slowest_replica_candidates(l, in.net.shape, speeds);
      st.replicas_simulated = static_cast<int>(candidates.size());
      double worst = -1;
      for (int r : candidates) {
        sim::StepInput one = in;
        one.speed_replica = r;
        one.record_timeline = false;
        sim::StepResult res = sim::simulate_step(one);
        if (res.full_because || res.every_replica_because) {
          // One GPU per stage did not stand for its stage after all (a choice made while building
          // the step): every replica ran, each at its own speeds.
          st.replicas_simulated = 0;
          st.slowest_replica = 0;
          st.step_upper_s = 0;
          ev.step = std::move(res);
          break;
        }
        if (res.step_time_s > worst) {
          worst = res.step_time_s;
          st.slowest_replica = r;
          ev.step = std::move(res);
        }
      }
      if (st.replicas_simulated > 0) in.speed_replica = st.slowest_replica;
      if (in.record_timeline) ev.step = sim::simulate_step(in);
      stepped = true;
    }
  }
  if (!stepped) ev.step = sim::simulate_step(in);
  ev.simulated = true;
  const double tokens = static_cast<double>(s.training.global_batch) * s.model.seq_len;
  if (s.data.given) {
    // The loaders work while the step runs: only what they need beyond it is exposed.
    ev.input = input_pipeline_time(s.data, tokens, l.tp * l.dp, s.cluster.gpus_per_node, l.pp);
    const double wait = std::max(0.0, ev.input.per_step_s - ev.step.step_time_s);
    ev.step.step_time_s += wait;
    ev.step.breakdown_s[sim::kDataWait] += wait;
    // The stragglers' comparison steps wait for the same loaders.
    auto& st = ev.stragglers;
    if (st.step_without_s > 0) st.step_without_s = std::max(st.step_without_s, ev.input.per_step_s);
    if (st.step_upper_s > 0) st.step_upper_s = std::max(st.step_upper_s, ev.input.per_step_s);
  }
  ev.tokens_per_s = tokens / ev.step.step_time_s;
  ev.mfu = ev.tokens_per_s * ev.flops_per_token / (ev.gpus * cost.peak_flops());
  if (s.reliability.given)
    ev.reliability = reliability_for(s.reliability, ev.gpus, nodes, ev.params, ev.step.step_time_s, s.hardware.d2h_GBps);
  if (s.training.tokens_total > 0) {
    // Infinite where the job never finishes (goodput 0).
    ev.time_to_train_s = s.training.tokens_total / (ev.tokens_per_s * goodput(ev));
    ev.cost_usd = ev.time_to_train_s / 3600.0 * ev.gpus * s.cost.gpu_hour_usd;
  }
  if (s.hardware.node_max_kW > 0) {
    ev.facility_kW = nodes * s.hardware.node_max_kW * s.cost.pue;
    ev.over_power_budget = s.cluster.power_budget_kW > 0 && ev.facility_kW > s.cluster.power_budget_kW;
    if (s.training.tokens_total > 0) {
      ev.energy_kWh = ev.facility_kW * ev.time_to_train_s / 3600.0;
      ev.energy_usd = ev.energy_kWh * s.cost.energy_usd_per_kWh;
    }
  }
  return ev;
}

double goodput(const Evaluation& ev) { return ev.reliability.computed ? ev.reliability.goodput : 1.0; }

bool meets_deadline(const Scenario& s, const Evaluation& ev) {
  return s.training.deadline_days > 0 && ev.time_to_train_s <= s.training.deadline_days * 86400.0 && !ev.memory.oom &&
         !ev.over_power_budget;
}

const std::vector<double>& scenario_gpu_speeds(const Scenario& s, int gpus) {
  struct Kept {
    StragglerSpec spec;
    int gpus = -1;
    std::vector<double> speeds;
  };
  thread_local Kept kept;
  const StragglerSpec& a = kept.spec;
  const StragglerSpec& b = s.stragglers;
  const bool same_gpus = a.gpus.size() == b.gpus.size() &&
                         std::equal(a.gpus.begin(), a.gpus.end(), b.gpus.begin(),
                                    [](const auto& x, const auto& y) { return x.gpu == y.gpu && x.speed == y.speed; });
  if (kept.gpus != gpus || a.given != b.given || a.seed != b.seed || a.speed_stdev != b.speed_stdev || !same_gpus) {
    kept.speeds = gpu_speeds(b, gpus);
    kept.spec = b;
    kept.gpus = gpus;
  }
  return kept.speeds;
}

double single_gpu_tokens_per_s(const Scenario& s, int micro_batch) {
  Scenario one = s;
  one.cluster.gpus_per_node = 1;
  one.stragglers = StragglerSpec{};  // the reference is one GPU at the profile's speed
  Layout l;
  l.micro_batch = micro_batch;
  l.dp = 1;
  // One GPU runs the whole global batch as micro-batches of the given size.
  one.training.global_batch = std::max(micro_batch, (s.training.global_batch / micro_batch) * micro_batch);
  EvalOptions opt;
  const Evaluation ev = evaluate(one, l, 1, opt);
  return ev.tokens_per_s;
}

}  // namespace trainsim

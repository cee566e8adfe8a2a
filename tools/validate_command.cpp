// planner validate: run the best layouts that fit this machine for real and hold the simulator's
// predictions (step time, memory peak) against the measurements.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <tuple>
#include <ctime>
#include <nlohmann/json.hpp>

#include "evaluation.h"
#include "in_step_gemms.h"
#include "input_error.h"
#include "layout_rules.h"
#include "layer_ops.h"
#include "memory_model.h"
#include "cost_model.h"
#include "power_model.h"
#include "planner_commands.h"
#include "profile_device_match.h"
#include "result_json.h"
#include "text_report.h"

#ifdef TRAINSIM_HAVE_CUDA
#include <memory>
#include <sstream>

#include "clock_log.h"
#include "clock_monitor.h"
#include "device_out_of_memory.h"
#include "grad_comm.h"
#include "measurements.h"
#include "pipeline_schedule.h"
#include "step_runner.h"
#endif

namespace trainsim {

using nlohmann::json;

#ifdef TRAINSIM_HAVE_CUDA
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// The clock and power the GPU held over a run's timed steps, from the monitor's readings beside it.
json gpu_clock_json(const gpu::ClockMonitor& mon, const std::vector<gpu::ClockReading>& readings, const gpu::RunnerResult& rr) {
  if (!mon.available()) return {{"unavailable", mon.unavailable_reason()}};
  std::vector<calib::ClockSample> log;
  const double unknown = std::nan("");
  for (const gpu::ClockReading& r : readings) {
    calib::ClockSample s;
    s.wall_s = r.wall_s;
    s.sm_mhz = r.sm_mhz;
    s.power_w = r.power_w;
    s.power_instant_w = r.power_instant_w;
    s.power_capped = mon.reports_power_cap() ? (r.power_capped ? 1.0 : 0.0) : unknown;
    log.push_back(s);
  }
  const calib::ClockStats c = calib::clock_stats(log, rr.timed_begin_wall_s, rr.timed_end_wall_s);
  json j = {{"samples", c.samples}, {"power_limit_w", mon.power_limit_w()},
            {"timed_wall_s", {rr.timed_begin_wall_s, rr.timed_end_wall_s}}};
  if (c.samples > 0) j.update({{"sm_mhz", c.sm_mhz}, {"power_w", c.power_w}, {"power_capped_fraction", c.capped_fraction}});
  // The instantaneous power where the driver gives it: power_w, a mean over the last second, reads
  // low over a run timed for about a second or less.
  if (c.samples > 0 && !std::isnan(c.power_instant_w)) j["power_instant_w"] = c.power_instant_w;
  return j;
}

// " | 1635 MHz 693 W, power-capped" for a run's line, and "; predicted 1700 MHz" where the profile
// predicts the clock (`predicted_mhz` > 0); empty without readings.
std::string clock_text(const json& clock, double predicted_mhz = 0) {
  if (!clock.contains("sm_mhz")) return "";
  char b[120];
  const double capped = clock.value("power_capped_fraction", 0.0);
  std::snprintf(b, sizeof b, " | %.0f MHz %.0f W%s", clock["sm_mhz"].get<double>(), clock["power_w"].get<double>(),
                capped >= 0.5 ? ", power-capped" : "");
  std::string t = b;
  if (clock.contains("power_instant_w")) {
    std::snprintf(b, sizeof b, " (%.0f W instantaneous)", clock["power_instant_w"].get<double>());
    t.insert(t.find(" W") + 2, b);
  }
  if (predicted_mhz > 0) {
    std::snprintf(b, sizeof b, "; predicted %.0f MHz", predicted_mhz);
    t += b;
  }
  return t;
}

// The machine a record was measured on: its GPUs (each by UUID), driver, CUDA and NCCL.
json measured_on() {
  const gpu::DeviceInfo d = gpu::describe_devices();
  return {{"device", d.name}, {"device_count", d.count}, {"device_uuids", d.uuids},
          {"driver", d.driver}, {"cuda", d.cuda_runtime}, {"nccl", d.nccl}};
}

// The scenario reduced to one GPU of this machine, for one model.
Scenario one_gpu(const Scenario& s, const ModelConfig& m) {
  Scenario o = s;
  o.model = m;
  o.cluster.nodes = {1};
  o.cluster.gpus_per_node = 1;
  return o;
}

// The validate block with its defaults filled in.
struct ValidateSpace {
  std::vector<ModelConfig> models;
  std::vector<int> micro_batch;
  std::vector<Recompute> recompute;
  int top = 0;
};

ValidateSpace resolve_space(const Scenario& s, const PlannerOptions& opt) {
  const ValidateSpec& v = s.validate;
  ValidateSpace sp;
  sp.models = v.models.empty() ? std::vector<ModelConfig>{s.model} : v.models;
  sp.micro_batch = v.micro_batch.empty() ? std::vector<int>{1, 2, 4, 8} : v.micro_batch;
  sp.recompute = v.recompute.empty() ? std::vector<Recompute>{Recompute::none, Recompute::selective, Recompute::full} : v.recompute;
  sp.top = opt.top > 0 ? opt.top : v.top;
  return sp;
}

gpu::RunnerConfig runner_config(const ModelConfig& m, const Layout& l, int microbatches, int timed_steps) {
  gpu::RunnerConfig rc;
  rc.layers = m.layers; rc.hidden = m.hidden; rc.heads = m.heads; rc.ffn = m.ffn_hidden; rc.vocab = padded_vocab(m, l.tp); rc.seq = m.seq_len;
  rc.llama = m.family == Family::llama;
  rc.kv_heads = m.kv_heads;
  rc.tied_embeddings = m.tied_embeddings;
  rc.micro_batch = l.micro_batch;
  rc.microbatches = microbatches;
  rc.recompute = l.recompute == Recompute::none ? 0 : l.recompute == Recompute::selective ? 1 : 2;
  rc.timed_steps = timed_steps;
  rc.bucket_MB = l.bucket_MB;
  return rc;
}

void write_record(const std::string& path, const json& doc) {
  const std::string tmp = path + ".tmp";
  const std::string text = doc.dump(1) + "\n";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  const bool ok = f && std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (f && std::fclose(f) != 0) std::remove(tmp.c_str());
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw InputError("--json-out " + path, "failed while writing the record");
  }
}

std::string today() {
  const std::time_t t = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&t));
  return date;
}

std::string percent(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%+.1f%%", 100 * x);
  return b;
}

// Host collectives over an MPI group, for ranks that share a GPU.
gpu::HostCollectives host_collectives(std::shared_ptr<Sharding> g) {
  gpu::HostCollectives h{g->all_reduce_sum, g->reduce_scatter_sum, g->all_to_all, g->all_gather, nullptr, nullptr};
  h.send_recv = [g](const std::vector<gpu::P2pMessage>& sends, const std::vector<gpu::P2pMessage>& recvs) {
    std::vector<std::tuple<void*, std::size_t, int>> s, r;
    for (const auto& m : sends) s.emplace_back(m.buf, m.bytes, m.peer);
    for (const auto& m : recvs) r.emplace_back(m.buf, m.bytes, m.peer);
    g->send_recv(s, r);
  };
  h.split = [g](int color, int key, gpu::HostCollectives* out, int* rank, int* size) {
    const std::shared_ptr<Sharding> sub = g->split(color, key);
    *size = sub ? sub->size : 0;
    if (!sub) return;
    *rank = sub->rank;
    *out = host_collectives(sub);
  };
  return h;
}

// The groups of one layout, with world rank = t + tp (r + dp s) for tensor-parallel rank t,
// replica r and stage s (Megatron-LM's order: tensor-parallel ranks adjacent, stages outermost).
struct Groups {
  int tp = 1, pp = 1, dp = 1;
  int tr = 0, replica = 0, stage = 0;
  std::unique_ptr<gpu::GradComm> tp_g, dp_g, pp_g, embed_g;
  gpu::GradComm* dp_comm = nullptr;  // dp_g, or the world when it is all data parallel
};

Groups make_groups(gpu::GradComm& world, int tp, int pp) {
  Groups g;
  g.tp = tp;
  g.pp = pp;
  g.dp = world.size() / (tp * pp);
  const int w = world.rank();
  g.tr = w % tp;
  g.replica = (w / tp) % g.dp;
  g.stage = w / (tp * g.dp);
  if (tp == 1 && pp == 1) {
    g.dp_comm = &world;
    return g;
  }
  if (tp > 1) g.tp_g = world.split(g.replica + g.dp * g.stage, g.tr);
  if (g.dp > 1) g.dp_g = world.split(g.tr + tp * g.stage, g.replica);
  if (pp > 1) {
    g.pp_g = world.split(g.tr + tp * g.replica, g.stage);
    const bool ends = g.stage == 0 || g.stage == pp - 1;
    g.embed_g = world.split(ends ? g.tr + tp * g.replica : -1, g.stage);
  }
  g.dp_comm = g.dp_g.get();
  return g;
}

// The validate block's axes for layouts over several ranks, with their defaults filled in.
struct ParallelAxes {
  ValidateSpace space;
  std::vector<Compression> compression;
  std::vector<int> zero, tp, pp, vpp;
  std::vector<double> bucket_MB;
};

ParallelAxes parallel_axes(const Scenario& s, const PlannerOptions& opt) {
  const ValidateSpec& v = s.validate;
  ParallelAxes a;
  a.space = resolve_space(s, opt);
  a.compression = v.compression.empty() ? std::vector<Compression>{Compression{}} : v.compression;
  a.zero = v.zero.empty() ? std::vector<int>{0} : v.zero;
  a.bucket_MB = v.bucket_MB.empty() ? std::vector<double>{s.layout.bucket_MB} : v.bucket_MB;
  a.tp = v.tp.empty() ? std::vector<int>{1} : v.tp;
  a.pp = v.pp.empty() ? std::vector<int>{1} : v.pp;
  a.vpp = v.vpp.empty() ? std::vector<int>{1} : v.vpp;
  return a;
}

// The best `top` layouts of tp x pp over `world` ranks for the model of `sc` (the scenario scaled to
// this machine), per compression setting, ZeRO stage, bucket size and virtual stage count (the
// runner's ZeRO sums without compression; those settings only where there are replicas), fastest
// first within each.
std::vector<Evaluation> parallel_candidates(const Scenario& s, const Scenario& sc, const ParallelAxes& ax, int tp, int pp, int world,
                                            int nodes, int gpus_per_node) {
  const ModelConfig& m = sc.model;
  const int dp = world / (tp * pp);
  const std::vector<double>& buckets = ax.bucket_MB;
  std::vector<Evaluation> cands;
  for (const Compression& comp : ax.compression)
    for (int z : ax.zero)
      for (double bucket : buckets)
        for (int vpp : ax.vpp) {
          if (vpp > 1 && pp == 1) continue;
          if (z >= 1 && comp.kind != Compression::Kind::none) continue;
          if (dp == 1 && (z != 0 || comp.kind != Compression::Kind::none || bucket != buckets.front())) continue;
          std::vector<Evaluation> these;
          for (int mb : ax.space.micro_batch)
            for (Recompute r : ax.space.recompute) {
              Layout l = s.layout;
              l.tp = tp;
              l.pp = pp;
              l.vpp = vpp;
              l.schedule = vpp > 1 ? Schedule::interleaved : Schedule::one_f_one_b;
              l.sequence_parallel = false;
              l.dp = dp;
              l.zero = z;
              l.micro_batch = mb;
              l.recompute = r;
              l.compression = comp;
              l.bucket_MB = bucket;
              if (!layout_violation(m, l, s.training.global_batch, world, gpus_per_node).empty()) continue;
              EvalOptions eo;
              eo.simulate_if_oom = false;
              Evaluation ev = evaluate(sc, l, nodes, eo);
              if (ev.simulated) these.push_back(std::move(ev));
            }
          std::sort(these.begin(), these.end(), [](const Evaluation& a, const Evaluation& b) { return a.tokens_per_s > b.tokens_per_s; });
          if (static_cast<int>(these.size()) > ax.space.top) these.resize(ax.space.top);
          cands.insert(cands.end(), these.begin(), these.end());
        }
  return cands;
}

// The runner's configuration for this rank's part of layout `l`: its groups, its stage's chunks of
// layers (virtual stages stage, pp + stage, ...) and its passes in the simulator's order.
gpu::RunnerConfig rank_runner_config(const ModelConfig& m, const Layout& l, int micro, int timed_steps, const Groups& g) {
  gpu::RunnerConfig rc = runner_config(m, l, micro, timed_steps);
  const int pp = g.pp;
  rc.comm = g.dp > 1 ? g.dp_comm : nullptr;
  rc.tp_comm = g.tp_g.get();
  rc.pp_comm = g.pp_g.get();
  rc.embed_comm = g.embed_g.get();
  const int vpp = l.schedule == Schedule::interleaved ? l.vpp : 1;
  for (int ch = 0; ch < vpp; ++ch) {
    const int vs = ch * pp + g.stage;
    int first_layer = 0;
    for (int i = 0; i < vs; ++i) first_layer += layers_on_stage(m.layers, pp * vpp, i);
    rc.chunk_layers.push_back({first_layer, layers_on_stage(m.layers, pp * vpp, vs)});
  }
  if (pp > 1) {
    const auto kind = vpp > 1 ? sim::PipelineKind::interleaved : sim::PipelineKind::one_f_one_b;
    for (const auto& op : sim::pipeline_order(kind, pp, vpp, micro, g.stage)) rc.passes.push_back({op.forward, op.microbatch, op.chunk});
    rc.warmup = sim::pipeline_warmup(kind, pp, vpp, micro, g.stage);
  }
  rc.int8_compression = l.compression.kind == Compression::Kind::int8;
  if (l.compression.kind == Compression::Kind::topk) rc.topk_fraction = l.compression.topk_fraction;
  rc.zero = l.zero;
  return rc;
}

// A layout as the validate table prints it: "tp2 pp2 v2 dp1 mb1 x8 none 25MB int8 z1".
std::string layout_label(const Layout& l, int dp, int micro) {
  std::string out;
  if (l.tp > 1) out.append("tp").append(std::to_string(l.tp)).append(" ");
  if (l.pp > 1) out.append("pp").append(std::to_string(l.pp)).append(" ");
  if (l.schedule == Schedule::interleaved) out.append("v").append(std::to_string(l.vpp)).append(" ");
  char rest[80];
  std::snprintf(rest, sizeof rest, "dp%d mb%d x%d %s %gMB%s", dp, l.micro_batch, micro, to_string(l.recompute), l.bucket_MB,
                l.compression.kind == Compression::Kind::int8 ? " int8" : l.compression.kind == Compression::Kind::topk ? " topk" : "");
  out.append(rest);
  if (l.zero >= 1) out.append(" z").append(std::to_string(l.zero));
  return out;
}

// The model's time for one GPU's step by kernel class (GEMMs, attention, the rest of the kernels,
// optimizer excluded), summed over the op lists as the simulator charges them on idle links.
KernelClasses predicted_classes(const Scenario& s, const ModelConfig& m, const Layout& l, int microbatches) {
  const CostModel cost(s.hardware, s.training.precision);
  return one_gpu_kernel_classes(cost, {m, 1, false, l.recompute, l.micro_batch, s.training.precision}, m.layers, microbatches);
}

// The summary line of the runs that were predicted to fit and ran out of memory (each given as its
// predicted peak over the device's memory; `where` after "device memory"), or nothing if none did.
std::string out_of_memory_summary(const std::vector<double>& runs, const char* where) {
  if (runs.empty()) return "";
  char line[240];
  std::snprintf(line, sizeof line, "%zu run%s predicted to fit ran out of device memory%s (the smallest predicted peak among them: "
                "%.2f%% of the memory CUDA reports)\n",
                runs.size(), runs.size() == 1 ? "" : "s", where, 100 * *std::min_element(runs.begin(), runs.end()));
  return line;
}

// Under mpirun: one rank per GPU (NCCL), or several ranks sharing a GPU (communication through host
// memory with MPI: numerics only, no timing). Each layout uses every rank: tp x pp x dp of them,
// for the validate block's tensor- and pipeline-parallel degrees that divide the rank count. Rank 0
// prints and records.
int validate_parallel(const Scenario& s, const PlannerOptions& opt, std::ostream& out_all, std::ostream& progress_all) {
  const Sharding& sh = opt.sharding;
  const int world = sh.size;
  std::ostringstream sink;
  std::ostream& out = sh.rank == 0 ? out_all : sink;
  std::ostream& progress = sh.rank == 0 ? progress_all : sink;
  const int devices = gpu::cuda_device_count();
  const int device = sh.local_rank % devices;
  const bool shared = sh.local_size > devices;
  const bool rank_per_node = s.validate.rank_per_node;
  const int nodes = rank_per_node ? sh.size : std::max(1, sh.size / sh.local_size);
  const int gpus_per_node = rank_per_node ? 1 : sh.local_size;
  gpu::use_device(device);
  gpu::ClockMonitor monitor(device);  // this rank's GPU, over its runs
  if (rank_per_node) {
    // Before NCCL's first communicator: no direct GPU-to-GPU or shared-memory path, so NCCL moves
    // the gradients through its network transport, as between nodes.
    setenv("NCCL_P2P_DISABLE", "1", 1);
    setenv("NCCL_SHM_DISABLE", "1", 1);
  }
  std::unique_ptr<gpu::GradComm> comm;
  if (!shared) {
    gpu::NcclId id{};
    if (sh.rank == 0) id = gpu::new_nccl_id();
    sh.broadcast(&id, static_cast<int>(sizeof id));
    comm = gpu::make_nccl_grad_comm(id, world, sh.rank, device);
  } else {
    comm = gpu::make_host_grad_comm(sh.rank, world, host_collectives(std::make_shared<Sharding>(sh)));
  }
  progress << "validate: " << world << " ranks on " << nodes << " node(s), "
           << (shared ? std::to_string(sh.local_size) + " ranks sharing " + std::to_string(devices) +
                            " GPU(s): communication through host memory (MPI); numerics are checked, step times are "
                            "not comparable and are not counted"
                      : std::string("one GPU each, communication with NCCL") +
                            (rank_per_node ? " through its network transport (peer-to-peer and shared memory off)" : ""))
           << "; the scenario's cluster is scaled to " << nodes << " x " << gpus_per_node << " GPUs, global batch "
           << s.training.global_batch << "\n";
  // Ranks sharing a GPU share its memory: a layout is picked only where that many of its ranks fit
  // on the GPU together (the device's memory, or the profile's where that is less, divided among
  // them), for their numerics to be checked at all.
  const int ranks_per_gpu = shared ? (sh.local_size + devices - 1) / devices : 1;
  const double memory_per_rank =
      shared ? std::min(s.hardware.memory_bytes, gpu::describe_devices().memory_bytes) / ranks_per_gpu : s.hardware.memory_bytes;
  if (shared)
    progress << "validate: " << ranks_per_gpu << " ranks share a GPU: layouts are picked to fit " << format_bytes(memory_per_rank)
             << " a rank\n";
  const ValidateSpec v = s.validate;
  const ParallelAxes axes = parallel_axes(s, opt);
  const std::vector<ModelConfig>& models = axes.space.models;
  const std::vector<int>& tps = axes.tp;
  const std::vector<int>& pps = axes.pp;
  json records = json::array();
  std::vector<double> time_err, mem_err;
  std::vector<double> out_of_memory_runs;  // each run that did not fit: its predicted peak over the device's memory
  char line[480];
  std::snprintf(line, sizeof line, "%-9s %-34s %11s %11s %7s %10s %10s %7s  %s\n", "model", "layout", "predicted", "measured",
                "error", "mem pred", "mem meas", "error", "numerics");
  out << line;
  bool all_ok = true;
  for (int tp : tps)
    for (int pp : pps) {
      if (world % (tp * pp) != 0) {
        progress << "validate: tp " << tp << " x pp " << pp << " does not divide the " << world << " ranks; skipped\n";
        continue;
      }
      const int dp = world / (tp * pp);
      Groups g = make_groups(*comm, tp, pp);
      for (const auto& m : models) {
        // The runner splits whole K/V heads and MLP columns over the tensor-parallel ranks (it does
        // not replicate K/V heads when tp exceeds them).
        if (m.kv_heads % tp != 0 || m.ffn_hidden % tp != 0) {
          progress << "validate: " << m.name << ": the runner needs tp " << tp << " to divide its " << m.kv_heads
                   << " K/V heads and MLP width " << m.ffn_hidden << "; skipped\n";
          continue;
        }
        Scenario sc = s;
        sc.model = m;
        sc.cluster.nodes = {nodes};
        sc.cluster.gpus_per_node = gpus_per_node;
        sc.hardware.memory_bytes = memory_per_rank;
        const std::vector<Evaluation> cands = parallel_candidates(s, sc, axes, tp, pp, world, nodes, gpus_per_node);
        if (cands.empty())
          progress << "validate: " << m.name << ": no tp " << tp << " x pp " << pp << " layout fits this machine and the batch\n";
        std::vector<std::tuple<Compression::Kind, int, int>> referenced;
        for (const auto& ev : cands) {
          const bool int8 = ev.layout.compression.kind == Compression::Kind::int8;
          const bool topk = ev.layout.compression.kind == Compression::Kind::topk;
          const auto ref_key = std::make_tuple(ev.layout.compression.kind, ev.layout.zero, ev.layout.vpp);
          const bool reference_done = std::find(referenced.begin(), referenced.end(), ref_key) != referenced.end();
          const int micro = microbatches_per_step(ev.layout, s.training.global_batch);
          gpu::RunnerConfig rc = rank_runner_config(m, ev.layout, micro, v.timed_steps, g);
          // Whether every rank's buffers fit, agreed before the step's first collective.
          rc.agree_setup = [&sh](bool fits) {
            double failed = fits ? 0.0 : 1.0;
            sh.all_reduce_max(&failed, 1);
            return failed == 0.0;
          };
          // What every record of this run says first: the model, layout and ranks.
          auto run_record = [&] {
            json rec;
            rec["model"] = m.name;
            rec["layout"] = layout_to_json(ev.layout);
            rec["ranks"] = world;
            rec["replicas"] = dp;
            rec["nodes"] = nodes;
            rec["gpus_per_node"] = gpus_per_node;
            rec["communication"] = shared ? "host memory (MPI), GPUs shared: timing not comparable"
                                   : rank_per_node ? "NCCL network transport (peer-to-peer and shared memory off)" : "NCCL";
            rec["microbatches"] = micro;
            rec["global_batch"] = s.training.global_batch;
            return rec;
          };
          monitor.start();
          gpu::RunnerResult rr;
          // A rank that ran out: 1, what it asked for, what was free, the device's total.
          double oom[4] = {0, 0, 0, 0};
          bool out_of_memory = false;
          try {
            rr = gpu::run_gpt_training(rc);
          } catch (const gpu::DeviceOutOfMemory& e) {
            out_of_memory = true;
            oom[0] = 1, oom[1] = e.requested_bytes, oom[2] = e.free_bytes, oom[3] = e.total_bytes;
          } catch (const gpu::PeerSetupFailed&) {
            // Where the rank that failed did not run out of memory, it stops the job with its error.
            out_of_memory = true;
          }
          if (out_of_memory) {
            // The memory model said it fits and a rank's device said no: a prediction that failed,
            // recorded as one by every rank together; the runs after it go on.
            monitor.stop();
            std::vector<double> per_rank(4 * static_cast<std::size_t>(world));
            sh.all_gather(oom, per_rank.data(), sizeof oom);
            json ranks = json::array();
            int first = -1;
            for (int w = 0; w < world; ++w)
              if (per_rank[4 * w] > 0) {
                ranks.push_back(w);
                if (first < 0) first = w;
              }
            // A rank that failed otherwise ends the job with its own error before this gather.
            if (first < 0) throw std::runtime_error("validate: a rank could not set up the step and reported no out-of-memory error");
            const double* f = &per_rank[4 * static_cast<std::size_t>(first)];
            const double pmem = ev.memory.peak().arena_peak_bytes();
            const std::string lay = layout_label(ev.layout, dp, micro);
            std::snprintf(line, sizeof line, "%-9s %-34s %11s %11s %7s %10s %10s\n", m.name.c_str(), lay.c_str(),
                          format_seconds(ev.step.step_time_s).c_str(), "-", "", format_bytes(pmem).c_str(), "OUT OF MEMORY");
            out << line << std::flush;
            progress << "validate: " << m.name << " " << describe(ev.layout) << ": predicted to fit (" << format_bytes(pmem) << " of "
                     << format_bytes(sc.hardware.memory_bytes) << (shared ? " a rank" : " per GPU") << ") but " << ranks.size() << " of " << world
                     << " ranks ran out of device memory, rank " << first << " asking for " << format_bytes(f[1]) << " with "
                     << format_bytes(f[2]) << " free of " << format_bytes(f[3])
                     << (shared ? " (ranks share a GPU here: their buffers add up on it)" : "") << "\n";
            out_of_memory_runs.push_back(pmem / f[3]);
            json rec = run_record();
            rec["predicted"] = {{"step_time_s", ev.step.step_time_s}, {"peak_bytes", pmem}};
            rec["measured"] = {{"out_of_memory", true}, {"ranks_out_of_memory", ranks}, {"requested_bytes", f[1]},
                               {"free_bytes", f[2]}, {"device_total_bytes", f[3]}};
            records.push_back(rec);
            continue;
          }
          const json clock = gpu_clock_json(monitor, monitor.stop(), rr);
          // Every rank's clock and power over its timed steps (NaN where its GPU gave no readings).
          const double my_clock[2] = {clock.contains("sm_mhz") ? clock["sm_mhz"].get<double>() : std::nan(""),
                                      clock.contains("power_w") ? clock["power_w"].get<double>() : std::nan("")};
          std::vector<double> clocks(2 * static_cast<std::size_t>(world));
          sh.all_gather(my_clock, clocks.data(), sizeof my_clock);
          // Across ranks: the slowest step, the largest memory, the summed (global) loss and squared
          // gradient norm, and whether every replica holds the same parameters after the same
          // summed updates (ranks with the same stage and tensor-parallel rank).
          double mx[3] = {rr.step_ms, rr.device_used_bytes, rr.finite ? 0.0 : 1.0};
          sh.all_reduce_max(mx, 3);
          float loss[3] = {static_cast<float>(rr.first_loss), static_cast<float>(rr.last_loss), static_cast<float>(rr.first_grad_sq)};
          sh.all_reduce_sum(loss, 3);
          std::vector<double> sums(world);
          sh.all_gather(&rr.param_checksum, sums.data(), sizeof(double));
          // Every rank's device memory in use and the part of it the runner's arena holds: what
          // lies outside the arena (CUDA context, cuBLAS and NCCL buffers) by layout.
          const double mine[2] = {rr.device_used_bytes, rr.allocated_bytes};
          std::vector<double> per_rank(2 * static_cast<std::size_t>(world));
          sh.all_gather(mine, per_rank.data(), sizeof mine);
          bool agree = true;
          for (int w = 0; w < world; ++w)
            agree = agree && sums[w] == sums[w % tp + tp * g.dp * (w / (tp * g.dp))];  // replica 0 of its stage and tp rank
          // Every replica holds the whole summed gradient, or (ZeRO) its share.
          const double grad_sq = ev.layout.zero >= 1 ? loss[2] : loss[2] / dp;
          const bool finite = mx[2] == 0.0;
          // Reference: one GPU running all dp x m micro-batches; the layout's summed losses must
          // match it (same weights, micro-batches and dropout draws; fp32 sums in another order).
          // The first step's loss and summed gradient (before any update) must equal the reference's to
          // rounding. Each process autotunes its own GEMM algorithms and backward runs in bf16, so the
          // gradient norm moves by up to a few 1e-4 between runs; it is held to 1e-3, while one layer's
          // bucket missing or summed twice moves it by several percent. Later losses drift apart (Adam's
          // first updates are +-lr wherever a gradient is mostly rounding noise), so the last loss is
          // held to 1%. INT8 quantises every value twice (at most 1/254 of its block's largest value
          // each time): gradient norm to 1%, last loss to 2%. Tensor parallelism sums bf16 partial
          // products (each rounded to 8 bits of mantissa before the sum): first loss to 1e-3,
          // gradient norm to 1%, last loss to 2%.
          // ref[4]: the one-GPU run did not fit its GPU (it holds every stage and TP rank's share).
          double ref[5] = {0, 0, 0, 0, 0};
          bool ref_ok = true;
          // Top-K changes what is summed (the rest waits in the residual): there is no one-GPU
          // equivalent to hold it to, only finiteness and agreement. The one-GPU run is also the
          // baseline of the scaling efficiency, so it runs for every other layout; its numerics
          // are compared once per summing method.
          if (!topk) {
            if (sh.rank == 0) {
              try {
                const gpu::RunnerResult r1 = gpu::run_gpt_training(runner_config(m, ev.layout, micro * dp, v.timed_steps));
                ref[0] = r1.first_loss;
                ref[1] = r1.last_loss;
                ref[2] = r1.first_grad_sq;
                ref[3] = r1.step_ms * 1e-3;
              } catch (const gpu::DeviceOutOfMemory& e) {
                ref[4] = 1;
                progress << "validate: " << m.name << " " << describe(ev.layout) << ": the one-GPU reference (the whole model on one GPU) "
                         << "does not fit: " << e.what() << "; numerics and scaling not compared\n";
              }
            }
            sh.all_reduce_max(ref, 5);
            if (!reference_done && ref[4] == 0) {
              const bool loose = int8 || tp > 1;
              ref_ok = std::fabs(loss[0] / ref[0] - 1.0) < (tp > 1 ? 1e-3 : 1e-4) &&
                       std::fabs(std::sqrt(grad_sq / ref[2]) - 1.0) < (loose ? 1e-2 : 1e-3) &&
                       std::fabs(loss[1] / ref[1] - 1.0) < (loose ? 2e-2 : 1e-2);
              referenced.push_back(ref_key);
            }
          }
          // The same global batch on one GPU, predicted on the same profile.
          Scenario one = sc;
          one.cluster.nodes = {1};
          one.cluster.gpus_per_node = 1;
          Layout l1 = ev.layout;
          l1.tp = l1.pp = l1.dp = 1;
          l1.zero = 0;
          l1.compression = Compression{};
          EvalOptions eo1;
          eo1.simulate_if_oom = true;
          const double pred1 = evaluate(one, l1, 1, eo1).step.step_time_s;
          const bool ok = finite && agree && ref_ok;
          all_ok = all_ok && ok;
          const double pred = ev.step.step_time_s, meas = mx[0] * 1e-3;
          const double pmem = ev.memory.peak().arena_peak_bytes(), mmem = mx[1];
          const double te = pred / meas - 1.0, me = pmem / mmem - 1.0;
          if (ok && !shared) time_err.push_back(std::fabs(te));
          if (ok && !shared) mem_err.push_back(std::fabs(me));
          const std::string lay = layout_label(ev.layout, dp, micro);
          std::string numerics = std::string(finite ? "finite" : "NOT FINITE") + (agree ? ", replicas agree" : ", REPLICAS DIFFER");
          if (!reference_done && ref[0] != 0) {
            char b[200];
            std::snprintf(b, sizeof b, ", loss %.5f -> %.5f (%+.1e), |g| %+.1e vs one GPU %.5f -> %.5f%s", loss[0], loss[1],
                          loss[0] / ref[0] - 1.0, std::sqrt(grad_sq / ref[2]) - 1.0, ref[0], ref[1], ref_ok ? "" : " DIFFERS");
            numerics += b;
          }
          std::snprintf(line, sizeof line, "%-9s %-34s %11s %11s %7s %10s %10s %7s  %s%s\n", m.name.c_str(), lay.c_str(),
                        format_seconds(pred).c_str(), shared ? "(shared)" : format_seconds(meas).c_str(),
                        shared ? "-" : percent(te).c_str(), format_bytes(pmem).c_str(), shared ? "(shared)" : format_bytes(mmem).c_str(),
                        shared ? "-" : percent(me).c_str(), numerics.c_str(), clock_text(clock).c_str());
          out << line << std::flush;
          // Scaling efficiency against one GPU running the same global batch: t1 / (n * t_n).
          const double eff_pred = pred1 / (world * pred), eff_meas = ref[3] > 0 ? ref[3] / (world * meas) : 0;
          if (ref[3] > 0 && !shared) {
            std::snprintf(line, sizeof line, "%-9s %-34s %11s %11s %7s   scaling efficiency %.0f%% predicted, %.0f%% measured%s\n", "",
                          "  same batch on 1 GPU", format_seconds(pred1).c_str(), format_seconds(ref[3]).c_str(),
                          percent(pred1 / ref[3] - 1.0).c_str(), 100 * eff_pred, 100 * eff_meas,
                          eff_meas * world < 1.0 ? ": MORE GPUS, LESS THROUGHPUT" : "");
            out << line << std::flush;
          }
          json rec = run_record();
          rec["predicted"] = {{"step_time_s", pred}, {"peak_bytes", pmem}, {"breakdown_s", result_to_json(sc, ev)["breakdown_s"]}};
          rec["measured"] = {{"step_time_s", meas}, {"device_used_bytes", mmem}, {"buckets", rr.buckets}, {"finite", finite},
                             {"rank0_phases_s", {{"forward", rr.forward_ms * 1e-3}, {"backward", rr.backward_ms * 1e-3},
                                                 {"optimizer", rr.optimizer_ms * 1e-3}}},
                             {"replicas_agree", agree}, {"global_first_loss", loss[0]}, {"global_last_loss", loss[1]},
                             {"timed_steps", rc.timed_steps}};
          json used = json::array(), arena = json::array();
          for (int w = 0; w < world; ++w) used.push_back(per_rank[2 * w]), arena.push_back(per_rank[2 * w + 1]);
          rec["measured"]["per_rank_device_used_bytes"] = used;
          rec["measured"]["per_rank_allocated_bytes"] = arena;
          rec["measured"]["rank0_gpu_clock"] = clock;
          json mhz = json::array(), watts = json::array();
          for (int w = 0; w < world; ++w) mhz.push_back(clocks[2 * w]), watts.push_back(clocks[2 * w + 1]);
          rec["measured"]["per_rank_sm_mhz"] = mhz;
          rec["measured"]["per_rank_power_w"] = watts;
          if (ref[3] > 0 && !shared)
            rec["one_gpu"] = {{"predicted_step_time_s", pred1}, {"measured_step_time_s", ref[3]},
                              {"scaling_efficiency", {{"predicted", eff_pred}, {"measured", eff_meas}}}};
          if (!reference_done && ref[0] != 0)
            rec["reference_one_gpu"] = {{"first_loss", ref[0]}, {"last_loss", ref[1]}, {"first_grad_norm", std::sqrt(ref[2])},
                                        {"layout_first_grad_norm", std::sqrt(grad_sq)}, {"matches", ref_ok}};
          if (!shared) rec["error"] = {{"step_time", te}, {"peak_bytes", me}};
          records.push_back(rec);
        }
      }
    }
  const double mt = median(time_err), mm = median(mem_err);
  const std::size_t ran = records.size() - out_of_memory_runs.size();
  out << "\n" << ran << " runs: ";
  if (ran == 0) out << "no layout ran to compare\n";
  else if (shared) out << "step time and memory not comparable (ranks share a GPU); numerics " << (all_ok ? "checked" : "CHECK FAILED") << "\n";
  else out << "median |error| of step time " << percent(mt).substr(1) << ", of memory peak " << percent(mm).substr(1)
           << (all_ok ? "" : "; NUMERICS CHECK FAILED") << "\n";
  out << out_of_memory_summary(out_of_memory_runs, " on a rank");
  if (opt.json && sh.rank == 0) {
    json doc = {{"scenario", s.name}, {"hardware", s.hardware.name}, {"date", today()}, {"ranks", world}, {"measured_on", measured_on()},
                {"profile_provenance", {{"device", s.hardware.provenance.device}, {"date", s.hardware.provenance.date}}},
                {"median_abs_error", shared || time_err.empty() ? json(nullptr) : json{{"step_time", mt}, {"peak_bytes", mm}}}, {"runs", records}};
    write_record(opt.json_out, doc);
  }
  return all_ok ? 0 : 3;
}

}  // namespace
#endif

namespace {

// TRAINSIM_REPEAT_KERNEL_CLASS=gemm or attention, with an optional ":N" (2-8; 2 without it): a
// diagnostic of where a step's power goes. Every call of that class runs N times back to back, so
// that the step's added time and energy are the class's own, inside the step. The runs' step times
// are not their layouts' then, and their records say so.
struct RepeatedClass {
  std::string name;  // empty: nothing repeated
  int times = 1;
};
RepeatedClass repeated_kernel_class() {
  const char* env = std::getenv("TRAINSIM_REPEAT_KERNEL_CLASS");
  RepeatedClass r;
  if (!env || !*env) return r;
  const std::string v = env;
  const std::size_t colon = v.find(':');
  r.name = v.substr(0, colon);
  r.times = 2;
  if (r.name != "gemm" && r.name != "attention")
    throw InputError("TRAINSIM_REPEAT_KERNEL_CLASS", "'" + v + "': the class is gemm or attention, with an optional :N (2-8)");
  if (colon != std::string::npos) {
    const std::string n = v.substr(colon + 1);
    if (n.size() != 1 || n[0] < '2' || n[0] > '8')
      throw InputError("TRAINSIM_REPEAT_KERNEL_CLASS", "'" + v + "': the count after ':' is a whole number from 2 to 8");
    r.times = n[0] - '0';
  }
  return r;
}

}  // namespace

int run_validate(const PlannerOptions& opt, std::ostream& out, std::ostream& progress) {
  Scenario s = load_scenario(opt.scenario, opt.profile_dir);
  if (!opt.hardware.empty()) {
    // The scenario's layouts and models, predicted for the part at hand.
    try {
      s.hardware = load_hardware_profile(opt.hardware, opt.profile_dir);
    } catch (const InputError& e) {
      // "hardware: no hardware profile ..." names the scenario's key; here the option is meant.
      const std::string what = e.what();
      const std::string key = e.where() + ": ";
      throw InputError("--hardware", what.compare(0, key.size(), key) == 0 && e.where() == "hardware" ? what.substr(key.size()) : what);
    }
    s.hardware_name = opt.hardware;
  }
  const RepeatedClass repeat = repeated_kernel_class();
  if (repeat.times > 1 && opt.sharding.size > 1)
    throw InputError("TRAINSIM_REPEAT_KERNEL_CLASS", "repeats the kernels of one-GPU runs only; unset it under mpirun");
#ifndef TRAINSIM_HAVE_CUDA
  (void)s;
  (void)repeat;
  (void)out;
  progress << "error: planner validate runs training steps on a GPU; this build has no CUDA support\n";
  return 1;
#else
  if (!gpu::cuda_available()) {
    progress << "error: planner validate runs training steps on a GPU, and none is visible\n";
    return 1;
  }
  // The record is written at the end, through a temporary file: check now that it can be, before
  // minutes of GPU work.
  const std::string tmp = opt.json_out + ".tmp";
  if (opt.json) {
    std::FILE* probe = std::fopen(tmp.c_str(), "w");
    if (!probe) throw InputError("--json-out " + opt.json_out, "cannot write here");
    std::fclose(probe);
    std::remove(tmp.c_str());
  }
  if (opt.sharding.rank == 0) {
    const gpu::DeviceInfo d = gpu::describe_devices();
    const std::vector<std::string> mismatches = profile_device_mismatches(s.hardware, d.name, d.memory_bytes);
    for (const std::string& m : mismatches) progress << "validate: warning: " << m << "\n";
    if (!mismatches.empty() && opt.hardware.empty())
      progress << "validate: --hardware NAME predicts with another profile (calibrate writes one for the GPU at hand)\n";
  }
  if (opt.sharding.size > 1) return validate_parallel(s, opt, out, progress);
  const ValidateSpec v = s.validate;
  const ValidateSpace space = resolve_space(s, opt);
  const auto& [models, mbs, recs, top] = space;
  for (const std::vector<int>* degrees : {&v.tp, &v.pp})
    if (std::any_of(degrees->begin(), degrees->end(), [](int x) { return x > 1; })) {
      progress << "validate: the tensor- and pipeline-parallel degrees in validate.tp / validate.pp run under mpirun with that "
                  "many ranks (one per GPU); this single process runs one-GPU layouts only\n";
      break;
    }
  progress << "validate: this machine runs one-GPU layouts (tp = pp = dp = 1); the scenario's cluster is scaled down to "
              "one GPU, same per-GPU shapes, global batch "
           << s.training.global_batch << " as gradient accumulation\n";
  gpu::ClockMonitor monitor(0);
  if (!monitor.available()) progress << "validate: no clock or power readings: " << monitor.unavailable_reason() << "\n";
  // TRAINSIM_TIME_KERNEL_CLASSES=1: also time GEMMs and attention inside each step against the model.
  const char* tc = std::getenv("TRAINSIM_TIME_KERNEL_CLASSES");
  const bool time_classes = tc && std::string(tc) == "1";
  if (repeat.times > 1)
    progress << "validate: diagnostic: every " << (repeat.name == "gemm" ? "GEMM call" : "attention forward and backward")
             << " runs " << repeat.times << " times, so step times are not the layouts' (TRAINSIM_REPEAT_KERNEL_CLASS)\n";
  json records = json::array();
  std::vector<double> time_err, mem_err;
  std::vector<double> capped_err, uncapped_err;  // signed, by whether the power cap held the clock
  // Signed errors of the runs below the profile's clock, as priced and by the profile's clock rule.
  std::vector<double> slow_clock_err, slow_clock_rule_err;
  // |predicted - measured| SM clock, MHz: by the profile's power model, and taking the highest clock.
  std::vector<double> clock_err_mhz, flat_clock_err_mhz;
  std::vector<double> out_of_memory;             // each run that did not fit: its predicted peak over the device's memory
  char line[400];
  std::snprintf(line, sizeof line, "%-9s %-26s %11s %11s %7s %10s %10s %7s  %s\n", "model", "layout", "predicted", "measured",
                "error", "mem pred", "mem meas", "error", "loss | SM clock, power over the timed steps");
  out << line;
  for (const auto& m : models) {
    const Scenario one = one_gpu(s, m);
    // Rank the one-GPU layouts that fit by predicted throughput; run the best `top`.
    std::vector<Evaluation> cands;
    for (int mb : mbs)
      for (Recompute r : recs) {
        Layout l;
        l.micro_batch = mb;
        l.recompute = r;
        if (!layout_violation(m, l, s.training.global_batch, 1, 1).empty()) continue;
        EvalOptions eo;
        eo.simulate_if_oom = false;
        Evaluation ev = evaluate(one, l, 1, eo);
        if (ev.simulated) cands.push_back(std::move(ev));
      }
    std::sort(cands.begin(), cands.end(), [](const Evaluation& a, const Evaluation& b) { return a.tokens_per_s > b.tokens_per_s; });
    if (static_cast<int>(cands.size()) > top) cands.resize(top);
    for (const auto& ev : cands) {
      gpu::RunnerConfig rc = runner_config(m, ev.layout, microbatches_per_step(ev.layout, s.training.global_batch), v.timed_steps);
      rc.time_kernel_classes = time_classes;
      if (repeat.name == "gemm") rc.repeat_gemm = repeat.times;
      if (repeat.name == "attention") rc.repeat_attention = repeat.times;
      char lay[64];
      std::snprintf(lay, sizeof lay, "mb%d x%d %s", ev.layout.micro_batch, rc.microbatches, to_string(ev.layout.recompute));
      const auto t0 = std::chrono::steady_clock::now();
      monitor.start();
      gpu::RunnerResult rr;
      try {
        rr = gpu::run_gpt_training(rc);
      } catch (const gpu::DeviceOutOfMemory& e) {
        // The memory model said it fits and the device said no: a prediction that failed, recorded
        // as one; the runs after it go on.
        monitor.stop();
        const double pmem = ev.memory.peak().arena_peak_bytes();
        std::snprintf(line, sizeof line, "%-9s %-26s %11s %11s %7s %10s %10s\n", m.name.c_str(), lay,
                      format_seconds(ev.step.step_time_s).c_str(), "-", "", format_bytes(pmem).c_str(), "OUT OF MEMORY");
        out << line << std::flush;
        progress << "validate: " << m.name << " " << describe(ev.layout) << ": predicted to fit (" << format_bytes(pmem) << " of "
                 << format_bytes(one.hardware.memory_bytes) << ") but the device ran out of memory: " << e.what() << "\n";
        out_of_memory.push_back(pmem / e.total_bytes);
        json rec;
        rec["model"] = m.name;
        rec["layout"] = layout_to_json(ev.layout);
        rec["microbatches"] = rc.microbatches;
        rec["global_batch"] = s.training.global_batch;
        rec["predicted"] = {{"step_time_s", ev.step.step_time_s}, {"peak_bytes", pmem}};
        rec["measured"] = {{"out_of_memory", true}, {"requested_bytes", e.requested_bytes}, {"free_bytes", e.free_bytes},
                           {"device_total_bytes", e.total_bytes}};
        records.push_back(rec);
        continue;
      }
      const json clock = gpu_clock_json(monitor, monitor.stop(), rr);
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const double pred = ev.step.step_time_s, meas = rr.step_ms * 1e-3;
      const double pmem = ev.memory.peak().arena_peak_bytes(), mmem = rr.device_used_bytes;
      const double te = pred / meas - 1.0, me = pmem / mmem - 1.0;
      // The model's memory-bound kernels stretched to the clock the run held, by the profile's clock
      // rule (its element-wise kernels were timed at the part's highest clock).
      double at_clock = std::nan("");
      const KernelClasses classes = predicted_classes(one, m, ev.layout, rc.microbatches);
      if (clock.contains("sm_mhz") && one.hardware.elementwise_clock_sensitivity >= 0) {
        const double stretch = one.hardware.elementwise_clock_factor(clock["sm_mhz"].get<double>()) - 1.0;
        at_clock = pred + stretch * classes.other_s;
      }
      // The clock the profile's power model expects this step to hold, from its kernel mix.
      const double predicted_mhz =
          one.hardware.has_clock_power_model()
              ? held_clock_mhz(one.hardware, {classes.gemm_s, classes.gemm_flops, classes.attention_s, classes.attention_flops, classes.other_s},
                           m.family)
              : 0.0;
      if (predicted_mhz > 0 && clock.contains("sm_mhz")) {
        clock_err_mhz.push_back(std::fabs(predicted_mhz - clock["sm_mhz"].get<double>()));
        flat_clock_err_mhz.push_back(std::fabs(one.hardware.max_sm_mhz - clock["sm_mhz"].get<double>()));
      }
      if (!rr.finite) progress << "validate: " << m.name << " " << describe(ev.layout) << ": loss is not finite; not counted\n";
      else {
        time_err.push_back(std::fabs(te));
        mem_err.push_back(std::fabs(me));
        const double capped = clock.contains("power_capped_fraction") ? clock["power_capped_fraction"].get<double>() : std::nan("");
        if (!std::isnan(capped)) (capped >= 0.5 ? capped_err : uncapped_err).push_back(te);
        if (!std::isnan(at_clock) && clock["sm_mhz"].get<double>() < one.hardware.max_sm_mhz) {
          slow_clock_err.push_back(te);
          slow_clock_rule_err.push_back(at_clock / meas - 1.0);
        }
      }
      std::snprintf(line, sizeof line, "%-9s %-26s %11s %11s %+6.1f%% %10s %10s %+6.1f%%  %.3f -> %.3f%s%s\n", m.name.c_str(), lay,
                    format_seconds(pred).c_str(), format_seconds(meas).c_str(), 100 * te, format_bytes(pmem).c_str(),
                    format_bytes(mmem).c_str(), 100 * me, rr.first_loss, rr.last_loss, rr.finite ? "" : "  NOT FINITE",
                    clock_text(clock, predicted_mhz).c_str());
      out << line << std::flush;
      json rec;
      rec["model"] = m.name;
      rec["layout"] = layout_to_json(ev.layout);
      rec["microbatches"] = rc.microbatches;
      rec["global_batch"] = s.training.global_batch;
      rec["predicted"] = {{"step_time_s", pred}, {"peak_bytes", pmem}, {"breakdown_s", result_to_json(one, ev)["breakdown_s"]}};
      if (!std::isnan(at_clock)) rec["predicted"]["at_measured_clock_s"] = at_clock;
      if (predicted_mhz > 0) rec["predicted"]["sm_mhz"] = predicted_mhz;
      rec["measured"] = {{"step_time_s", meas}, {"step_time_min_s", rr.step_ms_min * 1e-3}, {"step_time_max_s", rr.step_ms_max * 1e-3},
                         {"optimizer_s", rr.optimizer_ms * 1e-3}, {"forward_s", rr.forward_ms * 1e-3}, {"backward_s", rr.backward_ms * 1e-3},
                         {"device_used_bytes", mmem}, {"allocated_bytes", rr.allocated_bytes},
                         {"first_loss", rr.first_loss}, {"last_loss", rr.last_loss}, {"finite", rr.finite},
                         {"timed_steps", rc.timed_steps}, {"wall_s", wall}, {"gpu_clock", clock}};
      rec["error"] = {{"step_time", te}, {"peak_bytes", me}};
      if (repeat.times > 1) rec["repeated_kernel_class"] = {{"class", repeat.name}, {"times", repeat.times}};
      if (time_classes) {
        // GEMMs and attention timed inside the step (events around each call) against the model's.
        const KernelClasses k = predicted_classes(one, m, ev.layout, rc.microbatches);
        const double other_meas = meas - rr.optimizer_ms * 1e-3 - (rr.gemm_ms + rr.attention_ms) * 1e-3;
        rec["kernel_classes"] = {{"predicted_s", {{"gemm", k.gemm_s}, {"attention", k.attention_s}, {"other", k.other_s}}},
                                 {"measured_s", {{"gemm", rr.gemm_ms * 1e-3}, {"attention", rr.attention_ms * 1e-3}, {"other", other_meas}}}};
        std::snprintf(line, sizeof line, "%-9s   GEMM %.1f vs %.1f ms (%+.1f%%), attention %.1f vs %.1f ms (%+.1f%%), other %.1f vs %.1f ms (%+.1f%%)\n", "",
                      1e3 * k.gemm_s, rr.gemm_ms, 100 * (k.gemm_s / (rr.gemm_ms * 1e-3) - 1), 1e3 * k.attention_s, rr.attention_ms,
                      100 * (k.attention_s / (rr.attention_ms * 1e-3) - 1), 1e3 * k.other_s, 1e3 * other_meas,
                      100 * (k.other_s / other_meas - 1));
        out << line << std::flush;
        // Each GEMM shape timed inside the step against the cost model's time for its m x n x k.
        const CostModel cost(one.hardware, one.training.precision);
        json shapes = json::array();
        std::vector<InStepGemm> in_step;
        for (const gpu::GemmTiming& g : rr.gemms) {
          if (g.calls_per_step <= 0) continue;
          const double per_call = g.ms_per_step * 1e-3 / g.calls_per_step, model = cost.gemm_time_s(g.m, g.n, g.k, g.fp32_out && g.accumulate);
          in_step.push_back({per_call, model, static_cast<double>(g.calls_per_step)});
          shapes.push_back({{"ta", g.ta}, {"tb", g.tb}, {"m", g.m}, {"n", g.n}, {"k", g.k}, {"fp32_out", g.fp32_out},
                            {"accumulate", g.accumulate}, {"calls_per_step", g.calls_per_step}, {"measured_s", per_call},
                            {"predicted_s", model}});
          std::snprintf(line, sizeof line, "%-9s     %c%c %6d x %6d x %6d%s  x%-4d %9.1f us vs %9.1f us in the step (%+.1f%%)\n", "",
                        g.ta ? 'T' : 'N', g.tb ? 'T' : 'N', g.m, g.n, g.k, g.fp32_out ? (g.accumulate ? " fp32+=" : " fp32  ") : "       ",
                        g.calls_per_step, 1e6 * model, 1e6 * per_call, 100 * (model / per_call - 1));
          out << line;
        }
        rec["kernel_classes"]["gemm_shapes"] = shapes;
        // Summed by each GEMM's time in the step: where calibrate's timing and the step part.
        out << std::string(9, ' ') << "     GEMMs by their time in the step, model against step: " << describe(gemms_by_length(in_step))
            << "\n";
        // The other kernels, each bracketed in the step like the GEMMs, against the model's time
        // for the ops it prices under that kernel's name; what is left of "other" is the time
        // between kernels (launch gaps, the events' own overhead).
        json kernels = json::array();
        for (const gpu::KernelTiming& kt : rr.kernels) {
          if (kt.calls_per_step <= 0) continue;
          const auto it = k.by_kernel.find(kt.name);
          const double model = it == k.by_kernel.end() ? 0.0 : it->second, meas_k = kt.ms_per_step * 1e-3;
          kernels.push_back({{"kernel", kt.name}, {"calls_per_step", kt.calls_per_step}, {"measured_s", meas_k}, {"predicted_s", model}});
          std::snprintf(line, sizeof line, "%-9s     %-26s x%-5d %9.2f ms vs %9.2f ms in the step (%+.1f%%)\n", "", kt.name.c_str(),
                        kt.calls_per_step, 1e3 * model, 1e3 * meas_k, 100 * (model / meas_k - 1));
          out << line;
        }
        const double ew_meas = rr.elementwise_ms * 1e-3;
        std::snprintf(line, sizeof line, "%-9s     other kernels %.1f vs %.1f ms (%+.1f%%); between kernels %.1f ms measured\n", "",
                      1e3 * k.other_s, 1e3 * ew_meas, 100 * (k.other_s / ew_meas - 1), 1e3 * (other_meas - ew_meas));
        out << line << std::flush;
        rec["kernel_classes"]["kernels"] = kernels;
        rec["kernel_classes"]["measured_s"]["other_kernels"] = ew_meas;
        rec["kernel_classes"]["measured_s"]["between_kernels"] = other_meas - ew_meas;
      }
      records.push_back(rec);
    }
  }
  const double mt = median(time_err), mm = median(mem_err);
  if (time_err.empty())
    std::snprintf(line, sizeof line, "\n0 runs: no layout ran to compare\n");
  else
    std::snprintf(line, sizeof line, "\n%zu runs: median |error| of step time %.1f%%, of memory peak %.1f%%\n", time_err.size(), 100 * mt,
                  100 * mm);
  out << line;
  // The model prices kernels at calibrate's unthrottled clock: the runs the power cap slowed are
  // set apart, with the sign of their errors (negative: the step took longer than predicted).
  if (!capped_err.empty()) {
    std::snprintf(line, sizeof line, "%zu runs at the power cap (%.0f W): median error of step time %+.1f%%", capped_err.size(),
                  monitor.power_limit_w(), 100 * median(capped_err));
    out << line;
    if (!uncapped_err.empty()) {
      std::snprintf(line, sizeof line, "; %zu below it: %+.1f%%", uncapped_err.size(), 100 * median(uncapped_err));
      out << line;
    }
    out << "\n";
  }
  if (!slow_clock_err.empty()) {
    std::snprintf(line, sizeof line,
                  "%zu runs below the profile's %.0f MHz: median error of step time %+.1f%% as priced, %+.1f%% with the "
                  "element-wise kernels at the clock each held (clock rule, s = %.3f)\n",
                  slow_clock_err.size(), s.hardware.max_sm_mhz, 100 * median(slow_clock_err), 100 * median(slow_clock_rule_err),
                  s.hardware.elementwise_clock_sensitivity);
    out << line;
  }
  if (!clock_err_mhz.empty()) {
    auto mean = [](const std::vector<double>& v) {
      double sum = 0;
      for (double x : v) sum += x;
      return sum / static_cast<double>(v.size());
    };
    std::snprintf(line, sizeof line,
                  "%zu runs: the SM clock predicted from each step's kernel mix %.0f MHz from the measured on the mean (the "
                  "highest clock: %.0f MHz)\n",
                  clock_err_mhz.size(), mean(clock_err_mhz), mean(flat_clock_err_mhz));
    out << line;
  }
  out << out_of_memory_summary(out_of_memory, "");
  if (opt.json) {
    json doc = {{"scenario", s.name}, {"hardware", s.hardware.name}, {"date", today()}, {"measured_on", measured_on()},
                {"profile_provenance", {{"device", s.hardware.provenance.device}, {"date", s.hardware.provenance.date}}},
                {"median_abs_error", time_err.empty() ? json(nullptr) : json{{"step_time", mt}, {"peak_bytes", mm}}}, {"runs", records}};
    write_record(opt.json_out, doc);
  }
  return 0;
#endif
}

}  // namespace trainsim

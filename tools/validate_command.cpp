// planner validate: run the best layouts that fit this machine for real and hold the simulator's
// predictions (step time, memory peak) against the measurements.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

#include "evaluation.h"
#include "input_error.h"
#include "layout_rules.h"
#include "planner_commands.h"
#include "result_json.h"
#include "text_report.h"

#ifdef TRAINSIM_HAVE_CUDA
#include "measurements.h"
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

// The scenario reduced to one GPU of this machine, for one model.
Scenario one_gpu(const Scenario& s, const ModelConfig& m) {
  Scenario o = s;
  o.model = m;
  o.cluster.nodes = {1};
  o.cluster.gpus_per_node = 1;
  return o;
}

}  // namespace
#endif

int run_validate(const PlannerOptions& opt, std::ostream& out, std::ostream& progress) {
  const Scenario s = load_scenario(opt.scenario, opt.profile_dir);
#ifndef TRAINSIM_HAVE_CUDA
  (void)s;
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
  const ValidateSpec v = s.validate;
  std::vector<ModelConfig> models = v.models.empty() ? std::vector<ModelConfig>{s.model} : v.models;
  for (const auto& m : models)
    if (m.family != Family::gpt)
      throw InputError(s.file + ": validate.models", "the step runner implements gpt-family models; " + m.name + " is " + to_string(m.family));
  const std::vector<int> mbs = v.micro_batch.empty() ? std::vector<int>{1, 2, 4, 8} : v.micro_batch;
  const std::vector<Recompute> recs = v.recompute.empty() ? std::vector<Recompute>{Recompute::none, Recompute::selective, Recompute::full}
                                                          : v.recompute;
  const int top = opt.top > 0 ? opt.top : v.top;
  progress << "validate: this machine runs one-GPU layouts (tp = pp = dp = 1); the scenario's cluster is scaled down to "
              "one GPU, same per-GPU shapes, global batch "
           << s.training.global_batch << " as gradient accumulation\n";
  json records = json::array();
  std::vector<double> time_err, mem_err;
  char line[400];
  std::snprintf(line, sizeof line, "%-9s %-26s %11s %11s %7s %10s %10s %7s  %s\n", "model", "layout", "predicted", "measured",
                "error", "mem pred", "mem meas", "error", "loss");
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
      gpu::RunnerConfig rc;
      rc.layers = m.layers; rc.hidden = m.hidden; rc.heads = m.heads; rc.ffn = m.ffn_hidden; rc.vocab = m.vocab; rc.seq = m.seq_len;
      rc.micro_batch = ev.layout.micro_batch;
      rc.microbatches = microbatches_per_step(ev.layout, s.training.global_batch);
      rc.recompute = ev.layout.recompute == Recompute::none ? 0 : ev.layout.recompute == Recompute::selective ? 1 : 2;
      rc.timed_steps = v.timed_steps;
      const auto t0 = std::chrono::steady_clock::now();
      const gpu::RunnerResult rr = gpu::run_gpt_training(rc);
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const double pred = ev.step.step_time_s, meas = rr.step_ms * 1e-3;
      const double pmem = ev.memory.peak().peak_bytes, mmem = rr.device_used_bytes;
      const double te = pred / meas - 1.0, me = pmem / mmem - 1.0;
      if (!rr.finite) progress << "validate: " << m.name << " " << describe(ev.layout) << ": loss is not finite; not counted\n";
      else { time_err.push_back(std::fabs(te)); mem_err.push_back(std::fabs(me)); }
      char lay[64];
      std::snprintf(lay, sizeof lay, "mb%d x%d %s", ev.layout.micro_batch, rc.microbatches, to_string(ev.layout.recompute));
      std::snprintf(line, sizeof line, "%-9s %-26s %11s %11s %+6.1f%% %10s %10s %+6.1f%%  %.3f -> %.3f%s\n", m.name.c_str(), lay,
                    format_seconds(pred).c_str(), format_seconds(meas).c_str(), 100 * te, format_bytes(pmem).c_str(),
                    format_bytes(mmem).c_str(), 100 * me, rr.first_loss, rr.last_loss, rr.finite ? "" : "  NOT FINITE");
      out << line << std::flush;
      json rec;
      rec["model"] = m.name;
      rec["layout"] = layout_to_json(ev.layout);
      rec["microbatches"] = rc.microbatches;
      rec["global_batch"] = s.training.global_batch;
      rec["predicted"] = {{"step_time_s", pred}, {"peak_bytes", pmem}, {"breakdown_s", result_to_json(one, ev)["breakdown_s"]}};
      rec["measured"] = {{"step_time_s", meas}, {"step_time_min_s", rr.step_ms_min * 1e-3}, {"step_time_max_s", rr.step_ms_max * 1e-3},
                         {"optimizer_s", rr.optimizer_ms * 1e-3}, {"device_used_bytes", mmem}, {"allocated_bytes", rr.allocated_bytes},
                         {"first_loss", rr.first_loss}, {"last_loss", rr.last_loss}, {"finite", rr.finite},
                         {"timed_steps", rc.timed_steps}, {"wall_s", wall}};
      rec["error"] = {{"step_time", te}, {"peak_bytes", me}};
      records.push_back(rec);
    }
  }
  const double mt = median(time_err), mm = median(mem_err);
  std::snprintf(line, sizeof line, "\n%zu runs: median |error| of step time %.1f%%, of memory peak %.1f%%\n", time_err.size(), 100 * mt, 100 * mm);
  out << line;
  if (opt.json) {
    const std::time_t t = std::time(nullptr);
    char date[32];
    std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&t));
    json doc = {{"scenario", s.name}, {"hardware", s.hardware.name}, {"date", date},
                {"profile_provenance", {{"device", s.hardware.provenance.device}, {"date", s.hardware.provenance.date}}},
                {"median_abs_error", {{"step_time", mt}, {"peak_bytes", mm}}}, {"runs", records}};
    const std::string text = doc.dump(1) + "\n";
    std::FILE* f = std::fopen(tmp.c_str(), "w");
    const bool ok = f && std::fwrite(text.data(), 1, text.size(), f) == text.size();
    if (f && std::fclose(f) != 0) std::remove(tmp.c_str());
    if (!ok || std::rename(tmp.c_str(), opt.json_out.c_str()) != 0) {
      std::remove(tmp.c_str());
      throw InputError("--json-out " + opt.json_out, "failed while writing the record");
    }
  }
  return 0;
#endif
}

}  // namespace trainsim

// calibrate: measure this machine's GPUs and links and write a hardware profile; or import
// nccl-tests logs into link tables with fitted alpha-beta models.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "alpha_beta_fit.h"
#include "attention_table.h"
#include "diagnostics.h"
#include "gemm_shapes.h"
#include "hardware_profile.h"
#include "input_error.h"
#include "json_fields.h"
#include "kernel_table.h"
#include "nccl_tests_import.h"
#include "profile_merge.h"
#include "profile_writer.h"
#include "table_run.h"

#include "measurements.h"
#ifdef TRAINSIM_HAVE_MPI
#include "across_nodes.h"
#endif

using namespace trainsim;
using nlohmann::json;

namespace {

void write_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    if (!out) throw InputError("--out " + path, "cannot write here");
    out << text;
    if (!out) {
      std::remove(tmp.c_str());
      throw InputError("--out " + path, "failed while writing");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw InputError(path, "could not replace the file: " + ec.message());
  }
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path, "cannot open file");
  try {
    return json::parse(in);
  } catch (const json::parse_error& e) {
    throw InputError(path, "not valid JSON: " + json_error_text(e));
  }
}

// The command as a shell would take it again: an argument with anything but letters, digits and
// -_./=:,+ is single-quoted.
std::string command_line(int argc, char** argv) {
  std::string command;
  for (int i = 0; i < argc; ++i) {
    if (i) command += ' ';
    const std::string a = argv[i];
    const bool plain = !a.empty() && a.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_./=:,+") == std::string::npos;
    if (plain) {
      command += a;
      continue;
    }
    command += '\'';
    for (char c : a) command += c == '\'' ? std::string("'\\''") : std::string(1, c);
    command += '\'';
  }
  return command;
}

std::string today() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&t));
  return buf;
}

// The link tables of nccl-tests logs, with their fits, and the same tables as a profile's
// collective entries (piecewise fits; provenance "imported", naming `reference`), ready for an
// intra_node or inter_node "collectives" list.
int import_logs(const std::vector<std::string>& logs, const std::string& out, double min_bytes, const std::string& reference,
                const std::string& command) {
  json tables = json::array();
  std::vector<calib::LinkTable> all;
  for (const auto& log : logs)
    for (const auto& t : calib::import_nccl_tests_file(log)) {
      all.push_back(t);
      json pts = json::array();
      long wrong = 0;
      for (const auto& p : t.points) {
        pts.push_back({p.bytes, p.time_us, p.algbw_GBps, p.busbw_GBps, p.wrong});
        wrong += p.wrong;
      }
      json entry = {{"collective", t.collective}, {"gpus", t.gpus}, {"source", t.source}, {"wrong", wrong},
                    {"columns", {"bytes", "time_us", "algbw_GBps", "busbw_GBps", "wrong"}}, {"points", pts}};
      try {
        const auto f = calib::fit_alpha_beta(t, min_bytes);
        entry["fit"] = {{"alpha_us", f.alpha_us}, {"busbw_GBps", f.busbw_GBps}, {"r2", f.r2},
                        {"max_rel_error", f.max_rel_error}, {"median_rel_error", f.median_rel_error},
                        {"min_bytes", min_bytes}, {"points", f.points}};
      } catch (const std::invalid_argument& e) {
        entry["fit"] = {{"error", e.what()}};
      }
      std::printf("%-15s %3d GPUs  %3zu sizes  wrong %ld", t.collective.c_str(), t.gpus, t.points.size(), wrong);
      if (entry["fit"].contains("busbw_GBps"))
        std::printf("  alpha %.1f us  busbw %.1f GB/s  max error %.1f%%", entry["fit"]["alpha_us"].get<double>(),
                    entry["fit"]["busbw_GBps"].get<double>(), 100 * entry["fit"]["max_rel_error"].get<double>());
      std::printf("\n");
      tables.push_back(entry);
    }
  std::string logs_named;
  for (const auto& log : logs) logs_named += (logs_named.empty() ? "" : ", ") + log;
  const json provenance = {{"source", "imported"}, {"reference", reference.empty() ? "nccl-tests logs " + logs_named : reference},
                           {"command", command}, {"date", today()}};
  json fits;
  try {
    fits = calib::collective_fits_json(all, provenance);
  } catch (const std::invalid_argument& e) {
    throw InputError(logs_named, std::string("cannot fit these logs' collectives: ") + e.what());
  }
  write_atomically(out, json{{"source", "imported"}, {"tables", tables}, {"collectives", fits}}.dump(1) + "\n");
  return 0;
}

}  // namespace

// A table measured apart from a profile's full calibration runs (attention-table, kernel-table):
// how one card's samples are timed, written to a run file, read back, merged and set into a
// profile.
template <class Sample>
struct TableKind {
  std::string name;  // the subcommand
  std::function<std::vector<Sample>()> bench;  // empty without a CUDA build
  std::function<nlohmann::json(const std::vector<Sample>&, const gpu::DeviceInfo&, const std::string&, const std::string&)> run_json;
  std::vector<Sample> (*read_run)(const nlohmann::json&, const std::string&);
  std::vector<Sample> (*merge)(const std::vector<std::vector<Sample>>&);
  void (*set)(nlohmann::json&, const std::vector<Sample>&, const std::vector<nlohmann::json>&, const std::string&, const std::string&,
              const std::string&);
  // How the merged table was measured, for its provenance, from its runs (and their files).
  std::function<std::string(const std::vector<nlohmann::json>&, const std::vector<std::string>&)> rule;
};

// --out times the table on this GPU into a run file; --into writes the runs' per-shape medians
// into a measured profile of the same part, checks that the result loads, and only then replaces
// the file.
template <class Sample>
int run_table(const TableKind<Sample>& kind, const std::string& out, const std::string& into, const std::vector<std::string>& run_files,
              int argc, char** argv) {
  const std::string& name = kind.name;
  if (out.empty() == into.empty()) throw InputError(name, "give either --out (measure) or --into (write)");
  const std::string command = command_line(argc, argv);
  if (!out.empty()) {
    if (!run_files.empty()) throw InputError(name + " --out", "measures this GPU; run files go with --into");
#ifdef TRAINSIM_HAVE_CUDA
    if (!gpu::cuda_available()) {
      std::cerr << "error: no CUDA device is visible; run " << name << " --out on the machine to be measured\n";
      return 1;
    }
    const auto samples = kind.bench();
    write_atomically(out, kind.run_json(samples, gpu::describe_devices(), command, today()).dump(1) + "\n");
    std::printf("calibrate %s: %zu samples written to %s\n", name.c_str(), samples.size(), out.c_str());
    return 0;
#else
    std::cerr << "error: " << name << " --out needs a CUDA build\n";
    return 1;
#endif
  }
  if (run_files.empty()) throw InputError(name + " --into", "needs one or more run files (" + name + " --out)");
  std::vector<json> runs;
  std::vector<std::vector<Sample>> samples;
  for (const auto& f : run_files) {
    runs.push_back(read_json(f));
    samples.push_back(kind.read_run(runs.back(), f));
  }
  calib::check_runs_distinct(runs, run_files);
  json profile = read_json(into);
  calib::check_runs_match_profile(profile, into, runs, run_files);
  kind.set(profile, kind.merge(samples), runs, kind.rule(runs, run_files), command, today());
  const std::string text = profile.dump(1) + "\n";
  parse_hardware_profile(text, into, default_profile_dir());  // what is written must load
  write_atomically(into, text);
  std::printf("calibrate %s: %zu runs' medians written into %s\n", name.c_str(), runs.size(), into.c_str());
  return 0;
}

int main(int argc, char** argv) {
  CLI::App app{"calibrate: measure GPUs and links and write a hardware profile"};
  bool quick = false;
  std::string out, base, name;
  app.add_flag("--quick", quick, "a shorter sweep (under two minutes)");
  app.add_option("--out", out, "profile to write");
  app.add_option("--base", base, "profile whose unmeasured parts (peaks, network) are kept (default: --out if it exists)");
  app.add_option("--name", name, "profile name (default: the --out file's stem)");
  std::vector<std::string> extra_shapes;
  app.add_option("--extra-shapes", extra_shapes,
                 "file of GEMM shapes to time beside the grid, one 'm n k ta tb' a line (planner gemm-shapes SCENARIO writes "
                 "a scenario's); repeat for more files");
  bool across_nodes = false, allow_socket = false;
  app.add_flag("--across-nodes", across_nodes,
               "under mpirun, one rank per GPU: measure NCCL collectives across the ranks' nodes into a copy of --base");
  app.add_flag("--allow-socket", allow_socket, "with --across-nodes: measure even if NCCL falls back to TCP sockets");
  bool rank_per_node = false;
  app.add_flag("--rank-per-node", rank_per_node,
               "with --across-nodes: count every rank as its own node, to calibrate inter_node from a network path forced on "
               "one host (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1)");
  auto* imp = app.add_subcommand("import-nccl-tests", "read nccl-tests text or -J JSON logs into link tables with fits");
  std::vector<std::string> logs;
  std::string imp_out;
  double min_bytes = 1 << 20;
  imp->add_option("logs", logs, "nccl-tests output files")->required();
  imp->add_option("--out", imp_out, "link-table JSON to write")->required();
  imp->add_option("--fit-min-bytes", min_bytes, "smallest message size used by the fit");
  std::string reference;
  imp->add_option("--reference", reference, "where the logs come from, for the collectives' provenance (default: the log files)");
  auto* refit = app.add_subcommand("refit", "refit a profile's collective models from the raw measurements it records");
  std::string refit_profile;
  refit->add_option("profile", refit_profile, "hardware profile JSON, rewritten in place")->required();
  auto* merge = app.add_subcommand("merge", "merge calibration runs of one part: each measured sample takes the median of its times");
  std::vector<std::string> merge_in;
  std::string merge_out, merge_name;
  merge->add_option("profiles", merge_in, "profiles written by calibrate (two or more; the last one's unmeasured parts are kept)")
      ->required();
  merge->add_option("--out", merge_out, "profile to write")->required();
  merge->add_option("--name", merge_name, "profile name (default: the --out file's stem)");
  std::string merge_runtime, merge_imported, merge_peaks, merge_clock;
  merge->add_option("--runtime-memory-from", merge_runtime,
                    "profile whose runtime_memory block is kept as it is (read off validation runs) instead of the runs' median context");
  merge->add_option("--imported-from", merge_imported,
                    "profile whose imported tables that calibration does not measure (intra_node.nvls_collectives) are kept");
  merge->add_option("--clock-from", merge_clock,
                    "profile whose clock block (the element-wise kernels' clock sensitivity, read off a kernel-mix record) is kept");
  merge->add_option("--peaks-from", merge_peaks,
                    "profile, usually the part's datasheet file, whose vendor peaks (gpu.peak_tflops) are written instead of the runs', "
                    "and its vendor memory figure as gpu.datasheet_memory_bytes");
  auto* conditions = app.add_subcommand(
      "gemm-conditions", "time the GEMMs of a few GPT layers with random or training-like operands, back to back or between "
                         "memory-bound kernels (a diagnostic; writes nothing)");
  calib::GemmConditionsOptions gemm_conditions;
  conditions->add_option("--shape", gemm_conditions.shapes,
                         "a GEMM to time instead of the GPT layers': m,n,k or m,n,k,ta,tb (row-major C = op(A) op(B); repeat for more)");
  conditions->add_option("--idle-ms", gemm_conditions.idle_ms,
                         "also time each GEMM alone after the GPU has been idle this many milliseconds (0: not)");
  auto* kconditions = app.add_subcommand(
      "kernel-conditions", "time the step's element-wise and row-wise kernels back to back (as calibrate records them), one call "
                           "between events, one call with its operands evicted from L2, after FMA work, right after sustained "
                           "GEMMs (the power-capped clock), and back to back on a nearly full device; the GeLU backward also in place, "
                           "as the runner calls it (a diagnostic; writes nothing)");
  auto* aconditions = app.add_subcommand(
      "attention-conditions", "time calibrate's attention shapes in its order, in the reverse order and each after the GPU has "
                              "been idle (a diagnostic; writes nothing)");
  double attention_idle_ms = gpu::kAttentionIdleMs;
  aconditions->add_option("--idle-ms", attention_idle_ms, "idle time before each shape of the last pass, milliseconds (0: no such pass)");
  auto* atable = app.add_subcommand(
      "attention-table", "time calibrate's attention shapes on this GPU into a run file (--out), or write runs' per-shape medians "
                         "into a profile's attention table (--into), replacing the table of its full calibration runs");
  std::string atable_out, atable_into;
  std::vector<std::string> atable_runs;
  atable->add_option("--out", atable_out, "the run file to write (this GPU's times)");
  atable->add_option("--into", atable_into, "the profile whose gpu.attention the runs replace (rewritten in place)");
  atable->add_option("runs", atable_runs, "with --into: run files written by --out, one per card");
  auto* ktable = app.add_subcommand(
      "kernel-table", "time calibrate's element-wise and row-wise step kernels at its shapes on this GPU into a run file (--out), "
                      "or write runs' per-shape medians into a profile's kernel table (--into), replacing the table of its full "
                      "calibration runs");
  std::string ktable_out, ktable_into;
  std::vector<std::string> ktable_runs;
  ktable->add_option("--out", ktable_out, "the run file to write (this GPU's times)");
  ktable->add_option("--into", ktable_into, "the profile whose gpu.memory_kernels the runs replace (rewritten in place)");
  ktable->add_option("runs", ktable_runs, "with --into: run files written by --out, one per card");
  std::string ktable_timing = "burst", ktable_shapes = "dense";
  struct {
    gpu::StepKernelTiming timing = gpu::StepKernelTiming::burst;
    gpu::StepKernelShapes shapes = gpu::StepKernelShapes::dense;
  } ktable_method;
  auto* ktable_timing_opt = ktable->add_option(
      "--timing", ktable_timing,
      "with --out, how each kernel is timed: burst (ten calls back to back, as a full calibrate does; the default), single (one "
      "call between events), evicted (one call after its operands are evicted from L2), after-compute, under-load (one call "
      "right after sustained GEMMs)");
  auto* ktable_shapes_opt = ktable->add_option(
      "--shapes", ktable_shapes, "with --out, the GPT-style kernels' shapes: dense (24; the default) or profile (a full calibrate's 11)");
  auto* kmix = app.add_subcommand(
      "kernel-mix", "time a Llama-style layer's element-wise kernels inside a sustained mix with bf16 GEMMs (or attention), at "
                    "set shares of their time, against one call of each alone at the full clock (a diagnostic; writes nothing)");
  calib::KernelMixOptions mix;
  kmix->add_option("--shares", mix.shares, "the GEMMs' (or attention's) shares of the mix's time, each in [0, 1)")->delimiter(',');
  auto* mix_gemm_opt = kmix->add_option("--gemm", mix.gemm, "the bf16 GEMM's m,n,k (default: Llama 2 7B's MLP up projection at 4,096 tokens)")
                           ->delimiter(',')
                           ->expected(3);
  kmix->add_option("--attention", mix.attention,
                   "instead of a GEMM, the unfused causal attention's forward and backward: batch,heads,seq,head_dim,query heads per K/V head")
      ->delimiter(',')
      ->expected(5)
      ->excludes(mix_gemm_opt);
  kmix->add_option("--layer", mix.layer,
                   "the layer whose element-wise kernels run: tokens,hidden,SwiGLU (or MLP) width (default 4096,4096,11008)")
      ->delimiter(',')
      ->expected(3);
  kmix->add_option("--layer-kind", mix.layer_kind,
                   "whose element-wise kernels: llama (RMSNorm, rotary, SwiGLU; the default) or gpt (LayerNorm, bias-dropout-"
                   "residual, bias-GeLU, the Q/K/V split with bias, as the runner's GPT layer calls them)");
  kmix->add_option("--settle", mix.settle_s, "seconds each mix runs untimed first, for the power limiter to settle");
  kmix->add_option("--timed", mix.timed_s, "seconds each mix is timed");
  kmix->add_option("--clock-log", mix.clock_log,
                   "nvidia-smi -i 0 --query-gpu=timestamp,clocks.sm,power.draw --format=csv -lms 100 log running beside this "
                   "command, read at its end: the median SM clock and power of each mix's timed seconds");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  try {
    if (*imp) return import_logs(logs, imp_out, min_bytes, reference, command_line(argc, argv));
    if (*conditions) return calib::run_gemm_conditions(gemm_conditions);
    if (*kconditions) return calib::run_kernel_conditions();
    if (*aconditions) return calib::run_attention_conditions(attention_idle_ms);
    if (*atable) {
      const TableKind<gpu::AttentionSample> kind{
          "attention-table",
#ifdef TRAINSIM_HAVE_CUDA
          [] { return gpu::bench_attention_table(false); },
#else
          nullptr,
#endif
          calib::attention_run_json, calib::attention_run_samples, calib::merge_attention_runs, calib::set_attention_table,
          [](const std::vector<json>&, const std::vector<std::string>&) {
            return "each shape timed after the GPU was idle " + std::to_string(static_cast<int>(gpu::kAttentionIdleMs)) +
                   " ms (calibrate attention-table --out), per-shape medians over these runs; replaces the table of the profile's "
                   "full calibration runs";
          }};
      return run_table(kind, atable_out, atable_into, atable_runs, argc, argv);
    }
    if (*ktable) {
      if (!ktable_out.empty()) {  // named before anything is timed
        ktable_method.timing = calib::parse_kernel_timing(ktable_timing, "kernel-table --timing");
        ktable_method.shapes = calib::parse_kernel_shapes(ktable_shapes, "kernel-table --shapes");
      } else if (!ktable_into.empty() && ktable_timing_opt->count() + ktable_shapes_opt->count() > 0) {
        throw InputError(ktable_timing_opt->count() ? "kernel-table --timing" : "kernel-table --shapes",
                         "says how --out times this GPU; --into takes how its runs were timed from them");
      }
      const auto method = ktable_method;
      const TableKind<gpu::KernelSample> kind{
          "kernel-table",
#ifdef TRAINSIM_HAVE_CUDA
          [method] { return gpu::bench_step_kernels(method.shapes, method.timing); },
#else
          nullptr,
#endif
          [method](const std::vector<gpu::KernelSample>& samples, const gpu::DeviceInfo& dev, const std::string& command,
                   const std::string& date) { return calib::kernel_run_json(samples, dev, command, date, method.timing, method.shapes); },
          calib::kernel_run_samples, calib::merge_kernel_runs, calib::set_kernel_table, calib::kernel_table_rule};
      return run_table(kind, ktable_out, ktable_into, ktable_runs, argc, argv);
    }
    if (*kmix) return calib::run_kernel_mix(mix);
    if (*merge) {
      if (merge_in.size() < 2) throw InputError("merge", "needs two or more profiles");
      std::vector<json> runs;
      for (const auto& f : merge_in) {
        runs.push_back(read_json(f));
        if (!runs.back().is_object() || !runs.back().contains("provenance"))
          throw InputError(f, "is not a profile measured by calibrate (no provenance)");
        calib::check_provenance(runs.back()["provenance"], f + ": provenance");
        if (!runs.back().contains("measurements") || runs.back()["provenance"].value("source", "") != "measured")
          throw InputError(f, "is not a profile measured by calibrate (no measurements record)");
        try {
          calib::single_gpu_measurements(runs.back());
        } catch (const InputError& e) {
          throw InputError(f, e.what());
        }
      }
      calib::check_runs_distinct(runs, merge_in);
      // The merged profile was measured when its newest run was (dates are ISO, so they sort as text).
      std::string measured;
      for (const json& r : runs) measured = std::max(measured, r["provenance"].value("date", std::string()));
      json merged;
      try {
        merged = calib::merge_profiles(runs, merge_name.empty() ? std::filesystem::path(merge_out).stem().string() : merge_name,
                                       command_line(argc, argv), measured.empty() ? today() : measured);
      } catch (const json::exception& e) {
        throw InputError("merge", "a profile lacks a calibration record: " + json_error_text(e));
      }
      if (!merge_runtime.empty()) {
        const json from = read_json(merge_runtime);
        if (!from.contains("runtime_memory") || !from["runtime_memory"].is_object())
          throw InputError(merge_runtime, "has no runtime_memory block to keep");
        merged["runtime_memory"] = from["runtime_memory"];
      }
      if (!merge_imported.empty()) {
        const json from = read_json(merge_imported);
        if (!from.contains("intra_node") || !from["intra_node"].contains("nvls_collectives"))
          throw InputError(merge_imported, "has no imported tables to keep (intra_node.nvls_collectives)");
        merged["intra_node"]["nvls_collectives"] = from["intra_node"]["nvls_collectives"];
      }
      if (!merge_clock.empty()) {
        const json from = read_json(merge_clock);
        if (!from.contains("clock") || !from["clock"].is_object()) throw InputError(merge_clock, "has no clock block to keep");
        merged["clock"] = from["clock"];
      }
      if (!merge_peaks.empty()) {
        const json from = read_json(merge_peaks);
        if (!from.contains("gpu") || !from["gpu"].is_object() || !from["gpu"].contains("peak_tflops"))
          throw InputError(merge_peaks, "has no vendor peaks to keep (gpu.peak_tflops)");
        merged["gpu"]["peak_tflops"] = from["gpu"]["peak_tflops"];
        // Its memory as the vendor gives it too (a datasheet file's memory_bytes), beside the runs'
        // CUDA total.
        const json& fg = from["gpu"];
        if (fg.contains("datasheet_memory_bytes")) merged["gpu"]["datasheet_memory_bytes"] = fg["datasheet_memory_bytes"];
        else if (!(from.contains("provenance") && from["provenance"].is_object() && from["provenance"].contains("source") &&
                   from["provenance"]["source"] == "measured") &&
                 fg.contains("memory_bytes"))
          merged["gpu"]["datasheet_memory_bytes"] = fg["memory_bytes"];
      }
      const std::string text = merged.dump(1) + "\n";
      try {
        parse_hardware_profile(text, "the merged profile", default_profile_dir());  // what is written must load
      } catch (const InputError& e) {
        throw InputError("merge", std::string(e.what()) + " (its parts that calibration does not measure are the last run's, " +
                                      merge_in.back() + "); nothing written");
      }
      write_atomically(merge_out, text);
      std::printf("calibrate merge: %zu runs, per-sample medians written to %s\n", runs.size(), merge_out.c_str());
      return 0;
    }
    if (*refit) {
      json p = read_json(refit_profile);
      int n = 0;
      try {
        n = calib::refit_collectives(p);
      } catch (const InputError& e) {
        throw InputError(refit_profile, e.what());
      } catch (const json::exception& e) {
        throw InputError(refit_profile + ": measurements", json_error_text(e));
      }
      if (n == 0) throw InputError(refit_profile, "records no multi-GPU collective measurements to refit");
      const std::string text = p.dump(1) + "\n";
      parse_hardware_profile(text, refit_profile, default_profile_dir());  // what is written must load
      write_atomically(refit_profile, text);
      std::printf("calibrate refit: %d collective tables refitted in %s\n", n, refit_profile.c_str());
      return 0;
    }
    if (out.empty()) throw InputError("--out", "required: where to write the profile");
    if (!across_nodes && (allow_socket || rank_per_node))
      throw InputError(allow_socket ? "--allow-socket" : "--rank-per-node", "only applies with --across-nodes");
    if (across_nodes && !extra_shapes.empty())
      throw InputError("--extra-shapes", "times GEMMs on this machine's GPUs; it does not apply with --across-nodes");
    // Read before anything is measured: a bad file is said at once, not after minutes of timing.
    std::vector<GemmUse> extra;
    for (const auto& path : extra_shapes) {
      std::ifstream in(path);
      if (!in) throw InputError("--extra-shapes " + path, "cannot open file");
      const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      for (const GemmUse& g : parse_gemm_shapes(text, path)) {
        if (gemm_operand_bytes(g) > kMaxGemmOperandBytes)
          throw InputError(path, "the shape " + std::to_string(g.m) + " " + std::to_string(g.n) + " " + std::to_string(g.k) +
                                     ": its operands would take over 24 GiB");
        extra.push_back(g);
      }
      if (extra.empty()) throw InputError(path, "no GEMM shapes in the file");
    }
    if (across_nodes) {
#ifdef TRAINSIM_HAVE_MPI
      if (base.empty()) throw InputError("--base", "required with --across-nodes: the measured single-node profile");
      calib::AcrossNodesOptions o;
      o.base = base;
      o.out = out;
      o.name = name.empty() ? std::filesystem::path(out).stem().string() : name;
      for (int i = 0; i < argc; ++i) o.command += (i ? " " : "") + std::string(argv[i]);
      o.date = today();
      o.quick = quick;
      o.allow_socket = allow_socket;
      o.rank_per_node = rank_per_node;
      return calib::calibrate_across_nodes(&argc, &argv, o);
#else
      std::cerr << "error: --across-nodes needs a build with CUDA, NCCL and MPI (Open MPI was not found at configure time)\n";
      return 1;
#endif
    }
#ifdef TRAINSIM_HAVE_CUDA
    if (!gpu::cuda_available()) {
      std::cerr << "error: no CUDA device is visible; run calibrate on the machine to be measured\n";
      return 1;
    }
    if (base.empty() && std::filesystem::exists(out)) base = out;
    if (base.empty()) throw InputError("--base", "needed for a new profile: the datasheet profile of this part");
    // A part measured for the first time: what its datasheet file derives from supplies what one
    // GPU cannot measure (profile_writer.h).
    json base_json = read_json(base);
    if (base_json.contains("derive_from") && base_json["derive_from"].is_string())
      base_json = calib::carry_unmeasured(base_json, read_json(default_profile_dir() + "/" + base_json["derive_from"].get<std::string>() + ".json"));
    if (name.empty()) name = std::filesystem::path(out).stem().string();
    const std::string command = command_line(argc, argv);
    gpu::CalibrationPlan plan;
    plan.quick = quick;
    if (quick) plan.max_collective_bytes = 1.0 * (1ull << 30);
    for (const auto& g : extra) plan.extra_gemms.push_back({g.m, g.n, g.k, g.ta, g.tb});
    const auto t0 = std::chrono::steady_clock::now();
    const gpu::Measurements m = gpu::run_calibration(plan);
    const calib::GpuLinks links = calib::read_gpu_links();
    for (const auto& [pair, code] : links)
      std::fprintf(stderr, "calibrate: GPU%d-GPU%d linked by %s\n", pair.first, pair.second, calib::describe_link(code).c_str());
    const json profile = calib::make_profile(m, base_json, name, command, today(), links);
    const auto issues = calib::health_check(m, base_json, 0.15);
    for (const auto& i : issues) std::cerr << "health: " << i.what << "\n";
    write_atomically(out, profile.dump(1) + "\n");
    std::printf("calibrate: wrote %s in %.0f s (%zu GEMMs, %zu bandwidth points, %zu collective points, %zu health issues)\n",
                out.c_str(), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), m.gemm.size(),
                m.bandwidth.size(), m.collectives.size(), issues.size());
    return issues.empty() ? 0 : 3;
#else
    (void)quick;
    (void)extra;
    std::cerr << "error: this build has no CUDA support (nvcc and NCCL were not found at configure time); "
                 "only 'calibrate import-nccl-tests' is available\n";
    return 1;
#endif
  } catch (const InputError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}

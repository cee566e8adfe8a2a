// planner: simulate, sweep and search training layouts for a scenario (SCENARIO.md).
#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#ifdef TRAINSIM_VALIDATE_IN
#include <unistd.h>

#include <filesystem>
#endif

#include "evaluation.h"
#include "input_error.h"
#include "planner_commands.h"
#ifdef TRAINSIM_HAVE_MPI
#include "mpi_sharding.h"
#endif

using namespace trainsim;

namespace {
int run_planner(int argc, char** argv, const Sharding& sharding);

// Counts given on the command line (nodes, candidates shown, threads) are whole and at least 1:
// 0 stands for "not given" inside, so a 0 or a negative count typed by hand is refused rather than
// read as the default.
const CLI::Range kCount(1, 1 << 20);

const char* const kLayoutHelp =
    "override layout keys, comma-separated: tp, pp, dp, vpp, micro_batch, zero, sequence_parallel, recompute, "
    "bucket_MB, compression, schedule (e.g. tp=8,pp=4,micro_batch=2)";
}

#ifdef TRAINSIM_VALIDATE_IN
// `planner validate` is built into the executable next to this one (tools/CMakeLists.txt): the
// process becomes it, arguments and environment unchanged, before MPI starts (so a rank under
// mpirun initialises MPI once, in it). The subcommand is the first argument that is not the
// top-level --profiles option or its value.
void run_validate_elsewhere(int argc, char** argv) {
  int i = 1;
  while (i < argc) {
    if (std::strcmp(argv[i], "--profiles") == 0) i += 2;  // the option, then its value
    else if (std::strncmp(argv[i], "--profiles=", 11) == 0) i += 1;
    else break;
  }
  if (i >= argc || std::strcmp(argv[i], "validate") != 0) return;
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::string exe = (ec ? std::filesystem::path(argv[0]).parent_path() : self.parent_path()) / TRAINSIM_VALIDATE_IN;
  execv(exe.c_str(), argv);
  std::fprintf(stderr, "error: planner validate runs in %s, which cannot be started: %s\n", exe.c_str(), std::strerror(errno));
  std::exit(1);
}
#endif

int main(int argc, char** argv) {
#ifdef TRAINSIM_VALIDATE_IN
  run_validate_elsewhere(argc, argv);
#endif
#ifdef TRAINSIM_HAVE_MPI
  const Sharding sharding = mpi_start(&argc, &argv);
  const int rc = run_planner(argc, argv, sharding);
  mpi_stop();
  return rc;
#else
  return run_planner(argc, argv, Sharding{});
#endif
}

namespace {

int run_planner(int argc, char** argv, const Sharding& sharding) {
  CLI::App app{"planner: a calibrated simulator and capacity planner for distributed training"};
  app.require_subcommand(1);
  PlannerOptions opt;
  opt.profile_dir = default_profile_dir();
  opt.sharding = sharding;
  app.add_option("--profiles", opt.profile_dir, "directory of hardware profiles");

  auto* sim = app.add_subcommand("simulate", "simulate the scenario's layout for one step");
  sim->add_option("scenario", opt.scenario, "scenario JSON file")->required();
  sim->add_option("--layout", opt.layout_overrides, kLayoutHelp);
  sim->add_option("--nodes", opt.nodes, "node count (default: the scenario's first)")->check(kCount);
  sim->add_option("--mode", opt.mode, "symmetric (one GPU per stage) or full (every GPU)")
      ->check(CLI::IsMember({"symmetric", "full"}));
  sim->add_flag("--json", opt.json, "print the result as JSON");
  auto* trace = sim->add_option("--trace", opt.trace, "write a Chrome/Perfetto trace of the step");
  auto* trace_gpus = sim->add_option("--trace-gpus", opt.trace_gpus,
                  "keep only these GPUs' tasks in the trace, e.g. 0-7,512 (default: every GPU simulated)")
      ->needs(trace);

  auto* sweep = app.add_subcommand("sweep", "simulate the layout (dp derived) over node counts");
  sweep->add_option("scenario", opt.scenario, "scenario JSON file")->required();
  sweep->add_option("--nodes", opt.nodes_list, "comma-separated node counts")->delimiter(',')->check(kCount);
  sweep->add_option("--layout", opt.layout_overrides, kLayoutHelp);
  sweep->add_option("--threads", opt.threads, "worker threads (default: all cores)")->check(kCount);
  sweep->add_flag("--json", opt.json, "print JSON");

  auto* search = app.add_subcommand("search", "rank layouts from the scenario's search space");
  search->add_option("scenario", opt.scenario, "scenario JSON file")->required();
  search->add_option("--top", opt.top, "how many to show")->check(kCount);
  search->add_option("--threads", opt.threads, "worker threads (default: all cores)")->check(kCount);
  search->add_flag("--json", opt.json, "print JSON");

  auto* cmp = app.add_subcommand("compare", "the best layout at each size on each hardware option of the scenario's compare block");
  cmp->add_option("scenario", opt.scenario, "scenario JSON file")->required();
  cmp->add_option("--threads", opt.threads, "worker threads (default: all cores)")->check(kCount);
  cmp->add_flag("--json", opt.json, "print JSON");

  auto* rep = app.add_subcommand("report", "one self-contained HTML page for a design meeting");
  rep->add_option("scenario", opt.scenario, "scenario JSON file")->required();
  rep->add_option("-o,--output", opt.output, "HTML file to write")->required();
  rep->add_option("--top", opt.top, "candidates to show")->check(kCount);

  auto* exp = app.add_subcommand("export", "Megatron-LM arguments, DeepSpeed config and a Slurm/torchrun command for the layout");
  exp->add_option("scenario", opt.scenario, "scenario JSON file")->required();
  exp->add_option("--layout", opt.layout_overrides, kLayoutHelp);
  exp->add_option("--nodes", opt.nodes, "node count (default: the scenario's first)")->check(kCount);
  exp->add_flag("--json", opt.json, "print JSON");

  auto* wif = app.add_subcommand("what-if", "the layout's step with each part of the hardware faster and slower: which one sets it");
  wif->add_option("scenario", opt.scenario, "scenario JSON file")->required();
  wif->add_option("--layout", opt.layout_overrides, kLayoutHelp);
  wif->add_option("--nodes", opt.nodes, "node count (default: the scenario's first)")->check(kCount);
  wif->add_option("--factor", opt.factor, "how many times faster, then slower, each part is made (above 1, at most 100; default 2)");
  wif->add_flag("--search", opt.search, "search the scenario's space again with each part changed, instead of keeping one layout");
  wif->add_option("--threads", opt.threads, "worker threads (default: all cores)")->check(kCount);
  wif->add_flag("--json", opt.json, "print JSON");

  auto* val = app.add_subcommand("validate", "run the best layouts that fit this machine for real; predicted vs measured");
  val->add_option("scenario", opt.scenario, "scenario JSON file")->required();
  val->add_option("--top", opt.top, "layouts per model")->check(kCount);
  val->add_option("--json-out", opt.json_out, "write the record (predicted, measured, errors) to this JSON file");
  val->add_option("--hardware", opt.hardware,
                  "predict with this hardware profile instead of the scenario's (the profile of the GPU at hand)");

  auto* shapes = app.add_subcommand("gemm-shapes", "the GEMM shapes the scenario's layouts run, for calibrate --extra-shapes");
  shapes->add_option("scenario", opt.scenario, "scenario JSON file")->required();

  try {
    app.parse(argc, argv);
    opt.trace_gpus_given = trace_gpus->count() > 0;
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  try {
    if (*sim) return run_simulate(opt, std::cout);
    if (*sweep) return run_sweep(opt, std::cout);
    if (*search) return run_search(opt, std::cout, std::cerr);
    if (*cmp) return run_compare(opt, std::cout);
    if (*exp) return run_export(opt, std::cout, std::cerr);
    if (*wif) return run_what_if(opt, std::cout);
    if (*rep) return run_report(opt);
    if (*shapes) return run_gemm_shapes(opt, std::cout);
    if (*val) {
#ifdef TRAINSIM_VALIDATE_IN
      throw std::logic_error("validate was not handed to " TRAINSIM_VALIDATE_IN);  // main() does, before parsing
#else
      opt.json = !opt.json_out.empty();
      return run_validate(opt, std::cout, std::cerr);
#endif
    }
  } catch (const InputError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "internal error: " << e.what() << "\n";
    return 1;
  }
  return 1;
}

}  // namespace

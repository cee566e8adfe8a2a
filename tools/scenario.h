#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hardware_profile.h"
#include "input_pipeline.h"
#include "layout.h"
#include "model_config.h"
#include "precision.h"
#include "reliability.h"
#include "stragglers.h"

namespace trainsim {

struct TrainingSpec {
  int global_batch = 0;  // sequences per optimizer step
  Precision precision = Precision::bf16;
  std::string optimizer = "adam";
  double tokens_total = 0;  // 0: not given
  double deadline_days = 0; // 0: none
};

struct NetworkSpec {
  int nics_per_node = 0;
  double nic_Gbps = 0;
  std::string fabric = "fat-tree";  // single-switch | fat-tree | rail-optimized
  double oversubscription = 1.0;
  // NIC ports of a leaf switch (fat-tree) or of a rail switch (rail-optimized) facing the nodes.
  int nics_per_leaf = 32;
  bool nics_per_leaf_given = false;
  double latency_us = 0;
  double efficiency = 0;
  // Every all-reduce's algorithm: "auto" (by size, as NCCL's tuner picks), "ring" or "tree" (as
  // NCCL_ALGO="allreduce:ring" or "allreduce:tree" forces it; export's job script sets that).
  std::string allreduce_algorithm = "auto";
  // NCCL's NVLink SHARP (NCCL_NVLS_ENABLE=1): all-reduces inside a node take the profile's
  // intra_node.nvls_collectives where it has them for the group's size. Off by default, as
  // calibration measures and export's job script runs.
  bool nvls = false;
};

struct ClusterSpec {
  std::vector<int> nodes;  // one count, or several for a sweep
  int gpus_per_node = 0;
  NetworkSpec network;
  // The site's power for the cluster (0: none given): sizes that would draw more at the nodes'
  // maximum power, times the PUE, are marked and not picked.
  double power_budget_kW = 0;
};

// Each layout key as a list of values; empty means "the default range" (filled in by the search).
struct SearchSpace {
  std::vector<int> tp, pp, vpp, micro_batch, zero;
  bool pp_auto = false;
  std::vector<bool> sequence_parallel;
  std::vector<Recompute> recompute;
  std::vector<double> bucket_MB;
  std::vector<Compression> compression;
  std::vector<Schedule> schedule;
  std::vector<int> nodes;
  std::string objective = "tokens_per_s";  // tokens_per_s | time_to_train | cost
  int top = 10;
  bool allow_tp_across_nodes = false;
};

// What `planner validate` runs for real on the GPUs at hand: for each model, the best layouts that
// fit this machine.
struct ValidateSpec {
  std::vector<ModelConfig> models;  // empty: the scenario's model
  std::vector<int> micro_batch;     // empty: 1, 2, 4, 8
  std::vector<Recompute> recompute; // empty: none, selective, full
  std::vector<Compression> compression;  // data-parallel runs only; empty: none
  std::vector<int> zero;                 // data-parallel runs only; empty: 0
  std::vector<double> bucket_MB;         // data-parallel runs only; empty: the layout's
  // Under mpirun: the tensor- and pipeline-parallel degrees to run, each pair that divides the
  // rank count, the rest of the ranks data parallel. Empty: 1.
  std::vector<int> tp, pp;
  // Chunks per pipeline stage: 1 runs 1F1B, more the interleaved schedule (where pp > 1). Empty: 1.
  std::vector<int> vpp;
  // Data-parallel runs only: every rank is its own node. NCCL's peer-to-peer and shared-memory
  // transports are switched off, so gradients cross the network transport (TCP sockets on one
  // host), and the simulator joins the GPUs by the profile's inter-node link.
  bool rank_per_node = false;
  int top = 3;
  int timed_steps = 5;
};

struct CostSpec {
  double gpu_hour_usd = 0;
  double budget_usd = 0;
  // Energy: price per kWh drawn from the grid (0: not priced) and the site's power usage
  // effectiveness (facility power over IT power; 1: the IT load alone).
  double energy_usd_per_kWh = 0;
  double pue = 1.0;
};

struct Scenario;

// One option of a scenario's `compare` block: the scenario as it would be on other hardware (its
// own profile, and the entry's nodes, GPUs per node, network and price where it gives them).
struct Alternative {
  std::string name;  // the entry's "name", or its hardware's
  std::shared_ptr<const Scenario> scenario;
};

struct Scenario {
  std::string file;
  std::string name;
  std::string description;
  ModelConfig model;
  TrainingSpec training;
  std::string hardware_name;
  HardwareProfile hardware;
  ClusterSpec cluster;
  bool has_layout = false;
  Layout layout;
  bool layout_dp_given = false;
  bool has_search = false;
  SearchSpace search;
  bool has_validate = false;
  ValidateSpec validate;
  CostSpec cost;
  ReliabilitySpec reliability;
  DataSpec data;
  StragglerSpec stragglers;
  std::vector<Alternative> compare;  // the `compare` block's entries, in order (empty: none)
};

// Parses and validates a scenario (SCENARIO.md v1). Throws InputError naming the JSON path.
Scenario parse_scenario(const std::string& json_text, const std::string& file, const std::string& profile_dir);
Scenario load_scenario(const std::string& path, const std::string& profile_dir);

// Applies "tp=8,pp=4,micro_batch=2,..." overrides to a layout; throws InputError naming the flag.
Layout apply_layout_overrides(Layout base, const std::string& overrides, bool* dp_given);
// The layout for `gpus` GPUs: dp derived when the scenario left it out; validated against the model.
Layout resolve_layout(const Scenario& s, Layout l, bool dp_given, int nodes);

}  // namespace trainsim

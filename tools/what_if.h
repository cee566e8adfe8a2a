#pragma once
// `planner what-if`: what each part of the hardware is worth to one layout's step. The step is
// simulated again with one part at a time made `factor` times faster, then `factor` times slower,
// everything else as profiled: the part whose speed moves the step most is the one that sets it
// (the shortest stave of the barrel). Each part scales every profile figure that describes it, so
// that measured tables stay consistent with the rates the simulator derives from them. Where the
// scenario's `data` block limits the input pipeline, its storage and its loader workers are parts
// too: a step that waits for data is set by them, not by the GPUs or the links. The step is also
// simulated, on the hardware as profiled, under each NCCL setting the scenario does not use.
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "evaluation.h"

namespace trainsim {

enum class HardwarePart {
  compute,  // GEMM and attention rates (the measured tables, the measured and datasheet peaks;
            // attention is priced as a fraction of the peak, so it moves with compute here even
            // where the measured kernels are memory-bound)
  memory,   // HBM bandwidth (memory-bound kernels, optimizer, compression kernels, GEMM roofline)
  nvlink,   // bandwidth inside a node (ring bus bandwidth and the measured collectives' busbw)
  network,  // NIC bandwidth across nodes (line rate and the measured across-node collectives)
  latency,  // per-step latency of collectives and transfers, inside and across nodes
  storage,  // the dataset storage's aggregate read rate (the scenario's data.storage_GBps)
  loaders,  // the data loader workers' tokens per second a node (data.loader_tokens_per_s_per_node)
};
inline constexpr HardwarePart kHardwareParts[] = {HardwarePart::compute, HardwarePart::memory, HardwarePart::nvlink,
                                                  HardwarePart::network, HardwarePart::latency};
// The parts of the scenario's machine: every part of the hardware, then the input pipeline's
// storage and loaders where its data block gives them a rate (none: unlimited, not a part).
std::vector<HardwarePart> parts_of(const Scenario& s);
const char* part_name(HardwarePart p);         // "compute", ...
const char* part_description(HardwarePart p);  // "GPU compute (GEMM, attention)", ...

// The scenario with part `p` `factor` times faster (> 0; below 1 slower): its rates multiplied
// by `factor`, or its latencies divided by it.
Scenario with_part_scaled(const Scenario& s, HardwarePart p, double factor);

struct WhatIfRow {
  HardwarePart part;
  Evaluation faster, slower;  // the layout with the part `factor` times faster, and slower
};
// The same hardware with a setting of the scenario's network other than its own: an NCCL setting,
// or the fabric's oversubscription.
struct SettingRow {
  std::string setting;      // as the scenario would write it: "allreduce_algorithm=tree", "nvls=true"
  std::string description;  // "all-reduce on trees (NCCL_ALGO=allreduce:tree)"
  Evaluation eval;
};
// The scenario with each NCCL setting it does not use: the all-reduce algorithm (auto, ring, tree,
// as NCCL_ALGO sets it) and, where the profile has NVLS curves, NVLink SHARP on or off. A forced
// algorithm leaves NVLS out, so a scenario with NVLS on is offered NVLS off only.
std::vector<std::pair<SettingRow, Scenario>> nccl_alternatives(const Scenario& s);
// The scenario with the leaf (or rail) switches' uplinks to the spine oversubscribed 1:1, 2:1 and
// 4:1, but for its own ratio: what buying fewer spine switches costs. None on a single switch, nor
// where `nodes` fit under one leaf (or one group of rail switches), whose uplinks carry nothing.
std::vector<std::pair<SettingRow, Scenario>> fabric_alternatives(const Scenario& s, int nodes);
// Whether `nodes` nodes of the scenario sit under one leaf switch (or one group of rail switches)
// of a fabric that has leaves: then no traffic of theirs crosses its uplinks.
bool under_one_leaf(const Scenario& s, int nodes);

struct WhatIf {
  double factor = 2;
  Evaluation base;
  std::vector<WhatIfRow> rows;  // in parts_of order
  std::vector<SettingRow> settings;  // the layout under nccl_alternatives, in their order
  std::vector<SettingRow> fabric;    // the layout under fabric_alternatives, in their order
  // The fabric alternatives left out (FabricRows::every_gpu_up_to) because neither one GPU per stage
  // nor one per TP group could stand for the rest there (their descriptions), and why (one GPU per
  // stage could not: sim::StepResult::full_because).
  std::vector<std::string> fabric_left_out;
  const char* fabric_left_out_because = nullptr;
  // The part whose speed-up shortens the step most (ties: the first), and the one whose slow-down
  // lengthens it most.
  HardwarePart sets_the_step = HardwarePart::compute;
  HardwarePart most_sensitive_to_slowdown = HardwarePart::compute;
};

// Whether `what_if` prices the fabric alternatives. An oversubscribed fabric can break symmetric
// mode's premise (pipeline stages sharing a leaf's uplinks, or a leaf left part-empty: the stages'
// GPUs no longer alike); one GPU per TP group of every replica then stands for the rest where it
// can (sim::replica_mode_misfit), and otherwise the step needs every GPU simulated, seconds at
// thousands of GPUs: above `every_gpu_up_to` GPUs such rows are left out and named
// (WhatIf::fabric_left_out).
struct FabricRows {
  bool price = true;
  int every_gpu_up_to = std::numeric_limits<int>::max();
};

// `l` on `nodes` nodes of the scenario, as profiled and with each part scaled. `factor` must be
// above 1 (InputError otherwise, naming `where`). The steps run on `threads` threads of the shared
// worker pool (0: one a core); the result does not depend on how many.
WhatIf what_if(const Scenario& s, const Layout& l, int nodes, double factor, const std::string& where,
               FabricRows fabric = {}, int threads = 0);

// The same question asked of the scenario's search space rather than of one layout: a faster (or
// slower) part can favour another layout, so the space is searched again with each part scaled
// and the best layout then is set against the best as profiled, and against that winner kept.
struct WhatIfSearchRow {
  HardwarePart part;
  Evaluation faster, slower;  // the best layout of the space with the part scaled
};
struct WhatIfSearch {
  int nodes = 0;
  std::size_t layouts = 0, fit = 0;  // valid layouts of the space at `nodes`, and those that fit in memory
  WhatIf kept;                       // the best layout as profiled (kept.base) with each part scaled
  std::vector<WhatIfSearchRow> rows;  // in parts_of order
};
// Throws InputError (naming `where`) for a factor not above 1, and (naming the scenario's search
// block) when the space has no valid layout at `nodes` or none fits in memory.
WhatIfSearch what_if_search(const Scenario& s, int nodes, double factor, int threads, const std::string& where);

}  // namespace trainsim

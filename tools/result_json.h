#pragma once
#include <nlohmann/json_fwd.hpp>

#include "evaluation.h"
#include "what_if.h"

namespace trainsim {

// The result contract of SCENARIO.md for one evaluated layout.
nlohmann::json result_to_json(const Scenario& s, const Evaluation& ev);
nlohmann::json layout_to_json(const Layout& l);
// The hardware and network a result was simulated on, as the scenario gives them (with the profile's
// defaults filled in): `hardware`, `gpus_per_node` and `network` (NICs, fabric, oversubscription,
// the nodes under a leaf or group of rail switches, NCCL's settings, and the network in words).
nlohmann::json cluster_to_json(const Scenario& s);
// `planner what-if --json`: the layout's result as profiled, then each part's step made faster and slower.
nlohmann::json what_if_to_json(const Scenario& s, const WhatIf& w);
nlohmann::json what_if_search_to_json(const Scenario& s, const WhatIfSearch& w);

}  // namespace trainsim

#pragma once
#include <nlohmann/json_fwd.hpp>

#include "evaluation.h"

namespace trainsim {

// The result contract of SCENARIO.md for one evaluated layout.
nlohmann::json result_to_json(const Scenario& s, const Evaluation& ev);
nlohmann::json layout_to_json(const Layout& l);

}  // namespace trainsim

#pragma once
// One self-contained HTML page for a design meeting: the scenario, the top candidates, a step-time
// breakdown chart, memory per stage against device memory, the scaling curve and a timeline of one
// step of the winner, all as inline SVG (no scripts, no network).
#include <string>

#include "scenario.h"

namespace trainsim {

// Builds the page (runs the search when the scenario has one, the sweep over its node counts, and a
// traced simulation of the best layout).
std::string render_report(const Scenario& s, int top);

}  // namespace trainsim

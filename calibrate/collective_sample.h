#pragma once
// One collective measurement as a profile's raw record keeps it (measurements.collectives, and the
// across-nodes sweep's world and rail lists): read strictly wherever calibrate reads one back
// (merge, refit), so a broken record is named instead of fitted.
#include <nlohmann/json.hpp>
#include <string>

#include "measurements.h"

namespace trainsim::calib {

// `c` must hold collective (all_reduce, all_gather, reduce_scatter, all_to_all or send_recv), gpus
// (a whole number from 1), bytes and time_us (positive), algbw_GBps and busbw_GBps (from 0: a lone
// GPU's bus bandwidth is 0) and wrong (a whole number from 0); throws InputError naming `at` and
// the field otherwise.
gpu::CollectiveSample read_collective_sample(const nlohmann::json& c, const std::string& at);

}  // namespace trainsim::calib

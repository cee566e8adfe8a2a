// The simulator against the collectives calibrate measured on this project's H200s.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "collective.h"
#include "engine.h"
#include "evaluation.h"
#include "hardware_profile.h"
#include "measured_collective.h"
#include "topology.h"

using namespace trainsim;
using namespace trainsim::sim;

namespace {

const std::string kProfiles = TRAINSIM_PROFILES;

// Runs a plan on an idle node, one engine task per phase with its flows routed over the topology,
// latencies and bytes rescaled by `k`.
double run_scaled(const CollectivePlan& plan, const ClusterShape& shape, const PlanScale& k) {
  Engine e;
  Topology topo(shape);
  topo.install(e);
  TaskId prev = -1;
  for (const auto& ph : plan.phases) {
    TaskSpec s;
    s.duration_s = ph.latency_s * k.latency;
    const TaskId t = e.add_task(s);
    for (const auto& f : ph.flows) {
      const auto& path = topo.route(f.src, f.dst);
      e.add_flow(t, f.bytes * k.bytes, path.data(), static_cast<int>(path.size()));
    }
    if (prev >= 0) e.add_dependency(prev, t);
    prev = t;
  }
  e.run();
  return e.makespan();
}

}  // namespace

TEST(MeasuredCollectives, PiecewiseSegmentTime) {
  // Two segments of an all-reduce over 2 GPUs (bus factor 2(n-1)/n = 1): below 4 MiB 20 us +
  // S / 100 GB/s, above it 50 us + S / 300 GB/s. At 1 MiB: 20e-6 + 1048576 / 1e11 = 30.48576 us;
  // at 64 MiB: 50e-6 + 67108864 / 3e11 = 273.69621 us; below the first segment the first holds.
  MeasuredCollective m{CollectiveKind::all_reduce, 2, {{1 << 20, 4 << 20, 20e-6, 100e9}, {4 << 20, 1 << 30, 50e-6, 300e9}}};
  EXPECT_NEAR(measured_time_s(m, 1 << 20), 30.48576e-6, 1e-12);
  EXPECT_NEAR(measured_time_s(m, 64 << 20), 273.696213e-6, 1e-11);
  EXPECT_NEAR(measured_time_s(m, 1024), 20e-6 + 1024 / 100e9, 1e-12);
  // Between segments the measured times are interpolated: segments ending at 2 MiB (20 us +
  // S / 100 GB/s: 40.97152 us) and starting at 8 MiB (50 us + S / 300 GB/s: 77.96202667 us); at
  // 5 MiB, half way, (40.97152 + 77.96202667) / 2 = 59.46677333 us.
  MeasuredCollective gap{CollectiveKind::all_reduce, 2, {{1 << 20, 2 << 20, 20e-6, 100e9}, {8 << 20, 1 << 30, 50e-6, 300e9}}};
  EXPECT_NEAR(measured_time_s(gap, 5 << 20), 59.46677333e-6, 1e-12);
  // A plan taking 10 us + S * 1e-11 s/B on idle links is scaled to the segment: latency x2,
  // bytes by (1 / 100e9) / 1e-11 = 1.
  const PlanScale k = measured_scale(m, 1 << 20, 10e-6, 1e-11);
  EXPECT_NEAR(k.latency, 2.0, 1e-12);
  EXPECT_NEAR(k.bytes, 1.0, 1e-12);
}

TEST(MeasuredCollectives, SimulatorReproducesEveryMeasuredCollective) {
  // Every collective calibrate measured over the two NVLink-joined H200s (models/hardware/
  // h200-sxm.json, raw record under measurements.collectives), from 1 MiB up: the simulator plans
  // it on one node as it plans a training step's collectives (ring, or direct for send/recv and
  // all-to-all), rescales the plan to the profile's piecewise alpha-beta fit and runs it through
  // the engine on idle links. Each time must be within 5% of the measurement, the tolerance the
  // fit was built to.
  const HardwareProfile hp = load_hardware_profile("h200-sxm", kProfiles);
  const auto measured = measured_collectives(hp.intra_collectives);
  ASSERT_FALSE(measured.empty());
  std::ifstream in(kProfiles + "/h200-sxm.json");
  const nlohmann::json raw = nlohmann::json::parse(in)["measurements"]["collectives"];
  ClusterShape shape;
  shape.nodes = 1;
  shape.gpus_per_node = 2;
  shape.nics_per_node = 1;
  shape.nvlink_Bps = hp.intra_busbw_GBps * 1e9;
  shape.nic_Bps = 50e9;
  PlacementInfo where;
  where.gpus_per_node = 2;
  where.intra_alpha_s = hp.intra_latency_us * 1e-6;
  where.intra_Bps = shape.nvlink_Bps;
  std::vector<double> errors;
  for (const auto& r : raw) {
    if (r["gpus"].get<int>() != 2 || r["bytes"].get<double>() < (1 << 20)) continue;
    const CollectiveKind kind = parse_collective_kind(r["collective"].get<std::string>());
    const double S = r["bytes"].get<double>(), t_meas = r["time_us"].get<double>() * 1e-6;
    const MeasuredCollective* m = find_measured(measured, kind, 2);
    ASSERT_NE(m, nullptr) << to_string(kind);
    const CollectivePlan plan = plan_collective(kind, Algorithm::ring, S, {0, 1}, where);
    double lat = 0;
    for (const auto& ph : plan.phases) lat += ph.latency_s;
    const PlanScale k = measured_scale(*m, S, lat, (idle_time_s(plan, where) - lat) / S);
    const double t = run_scaled(plan, shape, k);
    errors.push_back(std::fabs(t / t_meas - 1.0));
    EXPECT_LT(errors.back(), 0.05) << to_string(kind) << " at " << S << " bytes: simulated " << t * 1e6 << " us, measured "
                                   << t_meas * 1e6 << " us";
  }
  ASSERT_GE(errors.size(), 50u);
  std::sort(errors.begin(), errors.end());
  std::printf("[ info ] %zu measured collectives (2 x H200, NVLink, >= 1 MiB): median |error| %.2f%%, max %.2f%%\n",
              errors.size(), 100 * errors[errors.size() / 2], 100 * errors.back());
}

// Collectives on the topology against alpha-beta closed forms and a published measurement, and
// nccl-tests' bus-bandwidth factors.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>

#include "collective.h"
#include "engine.h"
#include "hardware_profile.h"
#include "topology.h"

using namespace trainsim::sim;

namespace {

// Runs a plan on an idle cluster: one task per phase, flows routed over the topology.
double run_plan(const CollectivePlan& plan, const ClusterShape& shape) {
  Engine e;
  Topology topo(shape);
  topo.install(e);
  TaskId prev = -1;
  for (const auto& ph : plan.phases) {
    TaskSpec s;
    s.duration_s = ph.latency_s;
    const TaskId t = e.add_task(s);
    for (const auto& f : ph.flows) {
      const auto& path = topo.route(f.src, f.dst);
      e.add_flow(t, f.bytes, path.data(), static_cast<int>(path.size()));
    }
    if (prev >= 0) e.add_dependency(prev, t);
    prev = t;
  }
  e.run();
  return e.makespan();
}

ClusterShape node(int nodes, int gpus, double nvl, double nic) {
  ClusterShape s;
  s.nodes = nodes;
  s.gpus_per_node = gpus;
  s.nics_per_node = gpus;
  s.nvlink_Bps = nvl;
  s.nic_Bps = nic;
  s.fabric = Fabric::fat_tree;
  return s;
}

PlacementInfo place(const ClusterShape& s, double a_in, double a_out) {
  PlacementInfo p;
  p.gpus_per_node = s.gpus_per_node;
  p.intra_alpha_s = a_in;
  p.inter_alpha_s = a_out;
  p.intra_Bps = s.nvlink_Bps;
  p.inter_Bps = s.nic_Bps * s.nics_per_node / s.gpus_per_node;
  return p;
}

std::vector<int> iota(int n, int from = 0) {
  std::vector<int> v(n);
  std::iota(v.begin(), v.end(), from);
  return v;
}

}  // namespace

TEST(Collective, RingAllReduceClosedForm) {
  // Idle ring of n = 8 GPUs at B = 100 GB/s per port, alpha = 5 us per step, S = 1 GiB:
  // t = 2(n-1)/n * S / B + 2(n-1) alpha = 1.75 * 1073741824 / 1e11 + 14 * 5e-6
  //   = 0.018790482 + 0.00007 = 0.018860482 s.
  const ClusterShape s = node(1, 8, 100e9, 50e9);
  const double S = 1073741824.0;
  const CollectivePlan p = plan_collective(CollectiveKind::all_reduce, Algorithm::ring, S, iota(8), place(s, 5e-6, 10e-6));
  EXPECT_NEAR(run_plan(p, s), 2.0 * 7 / 8 * S / 100e9 + 14 * 5e-6, 1e-9);
}

TEST(Collective, AllGatherAndReduceScatterClosedForm) {
  // (n-1)/n * S / B + (n-1) alpha with n = 4, B = 50 GB/s, alpha = 2 us, S = 256 MiB.
  const ClusterShape s = node(1, 4, 50e9, 50e9);
  const double S = 268435456.0;
  for (auto k : {CollectiveKind::all_gather, CollectiveKind::reduce_scatter}) {
    const auto p = plan_collective(k, Algorithm::ring, S, iota(4), place(s, 2e-6, 2e-6));
    EXPECT_NEAR(run_plan(p, s), 0.75 * S / 50e9 + 3 * 2e-6, 1e-9);
  }
}

TEST(Collective, RingAcrossNodesUsesEveryNic) {
  // 2 nodes x 8 GPUs, one NIC per GPU at 25 GB/s, NVLink 200 GB/s. A ring over all 16 GPUs runs
  // 8 channels; each node-crossing edge of a channel carries 1/8 of 2(n-1)/n S over its own NIC, so
  // the NICs are the bottleneck at 8 x 25 GB/s per node: t = 2 * 15/16 * S / (8 * 25e9) (no alpha).
  const ClusterShape s = node(2, 8, 200e9, 25e9);
  const double S = 1e9;
  const auto p = plan_collective(CollectiveKind::all_reduce, Algorithm::ring, S, iota(16), place(s, 0, 0));
  EXPECT_NEAR(run_plan(p, s), 2.0 * 15 / 16 * S / (8 * 25e9), 1e-9);
}

TEST(Collective, RingLatencyAcrossNodesChargesTheNetworkOnlyForStepsThatCrossIt) {
  // NCCL's tuner (src/graph/tuning.cc, ring): of a ring's steps over N nodes, 2 (N - 1) of an
  // all-reduce's 2 (n - 1) (N - 1 of an all-gather's or reduce-scatter's n - 1) cross the network
  // and pay its per-step latency; the rest pay NVLink's. alpha inside 2 us, across 10 us.
  // All-reduce over 2 nodes x 8 (n = 16): 28 x 2 + 2 x 10 = 76 us on top of the NIC-bound
  // 2 x 15/16 x S / (8 x 25 GB/s) of RingAcrossNodesUsesEveryNic.
  const ClusterShape s = node(2, 8, 200e9, 25e9);
  const double S = 1e9;
  const PlacementInfo w = place(s, 2e-6, 10e-6);
  const auto ar = plan_collective(CollectiveKind::all_reduce, Algorithm::ring, S, iota(16), w);
  EXPECT_NEAR(run_plan(ar, s), 2.0 * 15 / 16 * S / (8 * 25e9) + 76e-6, 1e-9);
  // All-gather over 4 nodes x 2 (GPUs 0-1, 8-9, 16-17, 24-25; n = 8): 7 steps, 3 across:
  // 4 x 2 + 3 x 10 = 38 us.
  const ClusterShape s4 = node(4, 8, 200e9, 25e9);
  const auto ag = plan_collective(CollectiveKind::all_gather, Algorithm::ring, S, {0, 1, 8, 9, 16, 17, 24, 25}, place(s4, 2e-6, 10e-6));
  double latency = 0;
  for (const auto& ph : ag.phases) latency += ph.latency_s;
  EXPECT_NEAR(latency, 38e-6, 1e-12);
  // One member per node: every step crosses, 2 (n - 1) alpha across as before (n = 4: 60 us).
  const auto one = plan_collective(CollectiveKind::all_reduce, Algorithm::ring, S, {0, 8, 16, 24}, place(s4, 2e-6, 10e-6));
  EXPECT_NEAR(one.phases.at(0).latency_s, 60e-6, 1e-12);
}

TEST(Collective, TreeLatencyAcrossNodesCountsHopsInsideAndAcross) {
  // NCCL's tuner (src/graph/tuning.cc, tree all-reduce): 2 ((k - 1) alpha_in + log2 N alpha_out)
  // for N nodes of k members. 4 nodes x 8, alpha inside 2 us, across 10 us: 2 (7 x 2 + 2 x 10) =
  // 68 us; one member per node on 16 nodes: 2 x 4 x 10 = 80 us; inside one node of 8 (N = 1, a
  // chain): 2 x 7 x 2 = 28 us.
  const ClusterShape s = node(16, 8, 200e9, 25e9);
  const PlacementInfo w = place(s, 2e-6, 10e-6);
  EXPECT_NEAR(plan_collective(CollectiveKind::all_reduce, Algorithm::tree, 1e6, iota(32), w).phases.at(0).latency_s, 68e-6, 1e-12);
  std::vector<int> rail;
  for (int i = 0; i < 16; ++i) rail.push_back(8 * i);
  EXPECT_NEAR(plan_collective(CollectiveKind::all_reduce, Algorithm::tree, 1e6, rail, w).phases.at(0).latency_s, 80e-6, 1e-12);
  EXPECT_NEAR(plan_collective(CollectiveKind::all_reduce, Algorithm::tree, 1e6, iota(8), w).phases.at(0).latency_s, 28e-6, 1e-12);
}

TEST(Collective, TreeInsideANodeIsAChainPerChannel) {
  // NCCL's tree inside one node is a chain: the reduction runs along it and the broadcast back,
  // pipelined, so each GPU sends its channel's share to each neighbour. With one channel per GPU,
  // each carrying S/8 and its chain rotated by one, every GPU is an end of two chains and in the
  // middle of six: it sends (2 x 1 + 6 x 2) S/8 = 1.75 S, a ring's 2(n-1)/n S. Through an NVSwitch
  // with B per GPU and direction, both take 1.75 S/B on idle links.
  const ClusterShape s = node(1, 8, 100e9, 25e9);
  const double S = 1e9;
  const auto chain = plan_collective(CollectiveKind::all_reduce, Algorithm::tree, S, iota(8), place(s, 0, 0));
  EXPECT_EQ(chain.phases.at(0).flows.size(), 8u * 7u * 2u);
  EXPECT_NEAR(run_plan(chain, s), 1.75 * S / 100e9, 1e-9);
  const auto ring = plan_collective(CollectiveKind::all_reduce, Algorithm::ring, S, iota(8), place(s, 0, 0));
  EXPECT_NEAR(run_plan(ring, s), 1.75 * S / 100e9, 1e-9);
}

TEST(Collective, TreeAcrossNodesIsADoubleBinaryTree) {
  // One GPU per node on 8 nodes behind a 25 GB/s NIC: two binary trees over the nodes, each with
  // S/2 both ways on every edge. A node inner in one tree (parent and two children: 3 x S/2) is a
  // leaf in the other (S/2): 2 S through its NIC, so t = 2 S/B on idle links, where one tree alone
  // would send 3 S through an inner node's NIC. Node 0, the one a symmetric-mode step simulates,
  // is such a node; none sends more.
  const ClusterShape s = node(8, 8, 200e9, 25e9);
  const double S = 1e9;
  std::vector<int> rail;
  for (int i = 0; i < 8; ++i) rail.push_back(8 * i);
  const auto t = plan_collective(CollectiveKind::all_reduce, Algorithm::tree, S, rail, place(s, 0, 0));
  std::map<int, double> sent;
  for (const auto& f : t.phases.at(0).flows) sent[f.src] += f.bytes;
  double most = 0;
  for (const auto& [gpu, bytes] : sent) most = std::max(most, bytes);
  EXPECT_NEAR(most, 2 * S, 1e-6 * S);
  EXPECT_NEAR(sent[0], 2 * S, 1e-6 * S);
  EXPECT_NEAR(run_plan(t, s), 2 * S / 25e9, 1e-9);
}

TEST(Collective, OneGpuPerNodeUsesOneNic) {
  // A DP group with one GPU per node (TP = 8 inside): ring over 4 nodes through one 25 GB/s NIC:
  // t = 2 * 3/4 * S / 25e9.
  const ClusterShape s = node(4, 8, 200e9, 25e9);
  const double S = 1e9;
  const auto p = plan_collective(CollectiveKind::all_reduce, Algorithm::ring, S, {0, 8, 16, 24}, place(s, 0, 0));
  EXPECT_NEAR(run_plan(p, s), 1.5 * S / 25e9, 1e-9);
}

TEST(Collective, ASlowNicPacesTheRing) {
  // The same ring over 4 nodes with node 2's NIC (the one GPU 16 uses) at half its rate: every ring
  // step waits for the transfers in and out of that NIC, so t = 2 * 3/4 * S / (25e9 / 2), twice
  // as long. A slow NIC that the ring does not use (node 2's second NIC) changes nothing.
  ClusterShape s = node(4, 8, 200e9, 25e9);
  const double S = 1e9;
  const auto p = plan_collective(CollectiveKind::all_reduce, Algorithm::ring, S, {0, 8, 16, 24}, place(s, 0, 0));
  s.nic_speed.assign(4 * 8, 1.0);
  s.nic_speed[s.nic_of(16)] = 0.5;
  EXPECT_NEAR(run_plan(p, s), 1.5 * S / 12.5e9, 1e-9);
  s.nic_speed.assign(4 * 8, 1.0);
  s.nic_speed[s.nic_of(17)] = 0.5;
  EXPECT_NEAR(run_plan(p, s), 1.5 * S / 25e9, 1e-9);
}

TEST(Collective, ConcurrentRingsShareTheNic) {
  // Same ring as above but every node has a single NIC shared by 8 concurrent DP groups:
  // each group gets 1/8 of the NIC, 8x slower.
  ClusterShape s = node(4, 8, 200e9, 25e9);
  s.nics_per_node = 1;
  Engine e;
  Topology topo(s);
  topo.install(e);
  for (int g = 0; g < 8; ++g) {
    const auto p = plan_collective(CollectiveKind::all_reduce, Algorithm::ring, 1e9, {g, 8 + g, 16 + g, 24 + g}, place(s, 0, 0));
    const TaskId t = e.add_task(TaskSpec{});
    for (const auto& f : p.phases[0].flows) {
      const auto& path = topo.route(f.src, f.dst);
      e.add_flow(t, f.bytes, path.data(), static_cast<int>(path.size()));
    }
  }
  e.run();
  EXPECT_NEAR(e.makespan(), 8 * 1.5 * 1e9 / 25e9, 1e-6);
}

TEST(Collective, HierarchicalMatchesRingOnBalancedGroups) {
  // Reduce-scatter inside (7/8 S over NVLink), all-reduce of S/8 across 2 nodes per rail
  // (2 * 1/2 * S/8 over one NIC), all-gather inside: with NVLink 200 and NIC 25 GB/s,
  // t = 2 * 7/8 * S / 200e9 + (S/8) / 25e9.
  const ClusterShape s = node(2, 8, 200e9, 25e9);
  const double S = 1e9;
  const auto p = plan_collective(CollectiveKind::all_reduce, Algorithm::hierarchical, S, iota(16), place(s, 0, 0));
  ASSERT_EQ(p.phases.size(), 3u);
  EXPECT_NEAR(run_plan(p, s), 2 * 0.875 * S / 200e9 + (S / 8) / 25e9, 1e-9);
}

TEST(Collective, B200RingAcrossFourNodesMatchesAPublishedMeasurement) {
  // Four 8-GPU nodes of the b200-sxm profile, 8 x 400 Gb/s NICs each (50 GB/s x 0.96 per NIC). A
  // ring all-reduce over the 32 GPUs runs 8 channels, one per rail; each channel crosses the node
  // boundary over its own NIC, so the NICs bound it: t = 2 (31/32) S / (8 x 48 GB/s) plus the
  // plan's step latencies (2 x 31 ring steps), a bus bandwidth just under 384 GB/s at 16 GiB.
  // Published: 381.8 GB/s at 16 GiB on four AWS P6-B200 nodes (8 x 400 Gb/s EFA each; shared/reference
  // id b200-aws-p6-1node-vs-4node-allreduce-torchbench-mlengineering).
  const trainsim::HardwareProfile hp = trainsim::load_hardware_profile("b200-sxm", TRAINSIM_PROFILES);
  ClusterShape s = node(4, hp.gpus_per_node, hp.intra_busbw_GBps * 1e9, hp.nic_Gbps / 8.0 * 1e9 * hp.nic_efficiency);
  ASSERT_EQ(hp.nics_per_node, s.nics_per_node);
  const double S = 16.0 * (1ull << 30);
  const auto p = plan_collective(CollectiveKind::all_reduce, Algorithm::ring, S, iota(32),
                                 place(s, hp.intra_latency_us * 1e-6, hp.inter_latency_us * 1e-6));
  double latency = 0;
  for (const auto& ph : p.phases) latency += ph.latency_s;
  const double t = run_plan(p, s);
  EXPECT_NEAR(t, 2.0 * 31 / 32 * S / (8 * 48e9) + latency, 1e-9 * t);
  const double busbw_GBps = 2.0 * 31 / 32 * S / t / 1e9;
  EXPECT_NEAR(busbw_GBps, 381.8, 381.8 * 0.03);
}

TEST(Collective, AutoPicksTreeForSmallMessagesAcrossNodes) {
  // Across 16 nodes the ring pays 2 * 15 steps of network latency, the tree 2 * log2(16).
  ClusterShape s = node(16, 1, 200e9, 25e9);
  s.nics_per_node = 1;
  std::vector<int> g = iota(16);
  const PlacementInfo w = place(s, 1e-6, 10e-6);
  EXPECT_EQ(plan_collective(CollectiveKind::all_reduce, Algorithm::automatic, 1024, g, w).algorithm, Algorithm::tree);
  EXPECT_EQ(plan_collective(CollectiveKind::all_reduce, Algorithm::automatic, 1e9, g, w).algorithm, Algorithm::ring);
}

TEST(Collective, BusBandwidthFactors) {
  // nccl-tests doc/PERFORMANCE.md: all-reduce 2(n-1)/n, all-gather and reduce-scatter (n-1)/n.
  EXPECT_DOUBLE_EQ(busbw_factor(CollectiveKind::all_reduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(busbw_factor(CollectiveKind::all_gather, 8), 0.875);
  EXPECT_DOUBLE_EQ(busbw_factor(CollectiveKind::reduce_scatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(busbw_factor(CollectiveKind::send_recv, 2), 1.0);
}

TEST(Topology, RoutesStayOffOtherGpusAndCrossTheFabric) {
  ClusterShape s = node(4, 8, 200e9, 25e9);
  s.nics_per_leaf = 16;  // 2 nodes per leaf
  Topology t(s);
  Engine e;
  t.install(e);
  EXPECT_EQ(t.route(0, 1).size(), 2u);   // GPU -> NVSwitch -> GPU
  EXPECT_EQ(t.route(0, 8).size(), 4u);   // GPU -> NIC -> leaf -> NIC -> GPU
  EXPECT_EQ(t.route(0, 16).size(), 6u);  // ... leaf -> spine -> leaf ...
  EXPECT_TRUE(t.route(3, 3).empty());
}

TEST(Topology, ARailSwitchTakesOneNicOfEachOfItsNodes) {
  // nics_per_leaf NIC ports a switch: a fat-tree leaf takes every NIC of its nodes (32 ports, 8
  // NICs a node: 4 nodes), a rail switch one NIC of each node (32 nodes, as in a DGX SuperPOD
  // scalable unit: 8 rail switches of 32 node ports). Between nodes under one switch a route is
  // GPU -> NIC -> switch -> NIC -> GPU; otherwise it adds the spine.
  for (Fabric f : {Fabric::fat_tree, Fabric::rail_optimized}) {
    ClusterShape s = node(40, 8, 200e9, 25e9);
    s.fabric = f;
    s.oversubscription = 2.0;
    const int per_leaf = f == Fabric::fat_tree ? 4 : 32;
    EXPECT_EQ(s.nodes_per_leaf(), per_leaf);
    EXPECT_TRUE(s.leaf_uplinks_bind());
    Topology t(s);
    Engine e;
    t.install(e);
    EXPECT_EQ(t.route(0, 8 * (per_leaf - 1)).size(), 4u) << to_string(f);
    EXPECT_EQ(t.route(0, 8 * per_leaf).size(), 6u) << to_string(f);
  }
  ClusterShape s = node(32, 8, 200e9, 25e9);
  s.fabric = Fabric::rail_optimized;
  s.oversubscription = 2.0;
  EXPECT_FALSE(s.leaf_uplinks_bind());  // 32 nodes under one group of rail switches
  s.nics_per_leaf = 16;
  EXPECT_TRUE(s.leaf_uplinks_bind());
}

// route() takes the NIC and switch tree's one path between two NICs; a breadth-first search of the
// whole graph (GPUs other than the source not transit) is the definition it must match, link for
// link, for every pair of GPUs: every fabric, one leaf or several, fewer NICs than GPUs.
TEST(Topology, TreeRoutesAreTheBreadthFirstSearchsRoutes) {
  int shapes = 0;
  for (Fabric f : {Fabric::single_switch, Fabric::fat_tree, Fabric::rail_optimized})
    for (int nodes : {1, 2, 5, 9})
      for (auto [gpus, nics] : {std::pair{1, 1}, std::pair{4, 1}, std::pair{8, 2}, std::pair{8, 8}})
        for (int per_leaf : {2, 8, 64}) {
          ClusterShape s = node(nodes, gpus, 200e9, 25e9);
          s.nics_per_node = nics;
          s.fabric = f;
          s.nics_per_leaf = per_leaf;
          s.oversubscription = 2.0;
          Topology t(s);
          Engine e;
          t.install(e);
          EXPECT_EQ(t.routes_by_tree(), nodes > 1);
          ++shapes;
          for (int a = 0; a < s.gpus(); ++a)
            for (int b = 0; b < s.gpus(); ++b) {
              const auto r = t.route(a, b);
              const std::vector<LinkId> fast(r.begin(), r.end());
              const auto q = t.route_by_search(a, b);
              ASSERT_EQ(fast, std::vector<LinkId>(q.begin(), q.end()))
                  << to_string(f) << " nodes " << nodes << " gpus " << gpus << " nics " << nics << " per leaf " << per_leaf
                  << ": " << a << " -> " << b;
            }
        }
  EXPECT_EQ(shapes, 144);
}

// The generic engine: dependencies, streams, max-min sharing of links.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "engine.h"

using namespace trainsim::sim;

TEST(Engine, DependenciesAndStreams) {
  Engine e;
  const StreamId s = e.add_stream();
  TaskSpec a{s, 1.0}, b{s, 2.0}, c{-1, 0.5};
  const TaskId ta = e.add_task(a), tb = e.add_task(b), tc = e.add_task(c);
  e.add_dependency(ta, tc);
  e.run();
  // a then b on one stream; c waits for a only.
  EXPECT_DOUBLE_EQ(e.finish(ta), 1.0);
  EXPECT_DOUBLE_EQ(e.start(tb), 1.0);
  EXPECT_DOUBLE_EQ(e.finish(tb), 3.0);
  EXPECT_DOUBLE_EQ(e.start(tc), 1.0);
  EXPECT_DOUBLE_EQ(e.finish(tc), 1.5);
  EXPECT_EQ(e.binding_predecessor(tc), ta);
  EXPECT_DOUBLE_EQ(e.makespan(), 3.0);
}

TEST(Engine, TwoFlowsOnOneLinkEachGetHalf) {
  // Link of 100 B/s; two flows of 100 B start together: each gets 50 B/s, both end at t = 2.
  Engine e;
  const LinkId l = e.add_link(100.0);
  const TaskId a = e.add_task(TaskSpec{});
  e.add_flow(a, 100.0, &l, 1);
  const TaskId b = e.add_task(TaskSpec{});
  e.add_flow(b, 100.0, &l, 1);
  e.run();
  EXPECT_NEAR(e.finish(a), 2.0, 1e-9);
  EXPECT_NEAR(e.finish(b), 2.0, 1e-9);
}

TEST(Engine, FlowSpeedsUpWhenTheOtherFinishes) {
  // Flows of 50 B and 150 B share 100 B/s: both at 50 B/s until t = 1 (first done), then the
  // second has 100 B left alone at 100 B/s: done at t = 2.
  Engine e;
  const LinkId l = e.add_link(100.0);
  const TaskId a = e.add_task(TaskSpec{});
  e.add_flow(a, 50.0, &l, 1);
  const TaskId b = e.add_task(TaskSpec{});
  e.add_flow(b, 150.0, &l, 1);
  e.run();
  EXPECT_NEAR(e.finish(a), 1.0, 1e-9);
  EXPECT_NEAR(e.finish(b), 2.0, 1e-9);
}

TEST(Engine, AFlowOnAFractionalLinkLoadsItsBaseAtThatFraction) {
  // Link of 100 B/s. Flow A crosses it as 1 of 4 (a fractional link, k = 4), flow B whole. Max-min
  // with A counted as a quarter of a flow: both at r with r/4 + r = 100, r = 80 B/s. B's 80 B end
  // at t = 1; A's other 80 B then run alone at 4 x 100 = 400 B/s: A ends at t = 1.2. Alone from the
  // start, A's 160 B take 160 / 400 = 0.4 s.
  for (bool with_b : {true, false}) {
    Engine e;
    const LinkId l = e.add_link(100.0);
    const LinkId quarter = e.add_fractional_link(l, 4);
    EXPECT_NE(quarter, l);
    EXPECT_EQ(e.add_fractional_link(l, 1), l);
    EXPECT_THROW(e.add_fractional_link(quarter, 2), std::invalid_argument);
    EXPECT_THROW(e.add_fractional_link(l, 0), std::invalid_argument);
    const TaskId a = e.add_task(TaskSpec{});
    e.add_flow(a, 160.0, &quarter, 1);
    TaskId b = -1;
    if (with_b) {
      b = e.add_task(TaskSpec{});
      e.add_flow(b, 80.0, &l, 1);
    }
    e.run();
    if (with_b) {
      EXPECT_NEAR(e.finish(b), 1.0, 1e-9);
      EXPECT_NEAR(e.finish(a), 1.2, 1e-9);
    } else {
      EXPECT_NEAR(e.finish(a), 0.4, 1e-9);
    }
  }
}

TEST(Engine, MaxMinFairnessAcrossTwoLinks) {
  // Link X 100 B/s carries flows 1 and 2; link Y 30 B/s carries flow 2 only. Max-min: flow 2 is
  // held to 30 by Y, flow 1 takes the remaining 70 on X.
  Engine e;
  const LinkId x = e.add_link(100.0), y = e.add_link(30.0);
  const TaskId t1 = e.add_task(TaskSpec{});
  e.add_flow(t1, 70.0, &x, 1);
  const LinkId both[2] = {x, y};
  const TaskId t2 = e.add_task(TaskSpec{});
  e.add_flow(t2, 30.0, both, 2);
  e.run();
  EXPECT_NEAR(e.finish(t1), 1.0, 1e-9);
  EXPECT_NEAR(e.finish(t2), 1.0, 1e-9);
}

// Many flows over many links, all starting at once: each ends when the max-min fair rates, worked
// out again at every ending, have delivered its bytes. The reference below is progressive filling
// written plainly (raise every unfrozen flow's rate together; the first link to fill freezes its
// flows). With 48 links the engine picks its bottlenecks from a heap (more than it scans), so this
// checks that path against the definition; 6 links check the scan.
TEST(Engine, ManyFlowsOverManyLinksEndAsMaxMinSharingHasThem) {
  std::uint64_t seed = 12345;
  auto next = [&seed] {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(seed >> 11) / 9007199254740992.0;  // [0, 1)
  };
  for (int links : {6, 48})
    for (int trial = 0; trial < 4; ++trial) {
      const int flows = links * 3 / 2;
      std::vector<double> cap(links);
      for (double& c : cap) c = 10.0 + 90.0 * next();
      std::vector<std::vector<int>> path(flows);
      std::vector<double> bytes(flows);
      for (int f = 0; f < flows; ++f) {
        const int len = 1 + static_cast<int>(next() * 4);
        while (static_cast<int>(path[f].size()) < len) {
          const int l = static_cast<int>(next() * links);
          if (std::find(path[f].begin(), path[f].end(), l) == path[f].end()) path[f].push_back(l);
        }
        bytes[f] = 50.0 + 950.0 * next();
      }
      // Reference: ends by progressive filling, event by event.
      std::vector<double> left = bytes, end(flows, -1.0);
      double now = 0;
      for (int done = 0; done < flows;) {
        std::vector<double> rate(flows, 0.0), room = cap;
        std::vector<char> frozen(flows, 0);
        for (int f = 0; f < flows; ++f) frozen[f] = end[f] >= 0;
        while (true) {
          double step = std::numeric_limits<double>::infinity();
          for (int l = 0; l < links; ++l) {
            int n = 0;
            for (int f = 0; f < flows; ++f)
              if (!frozen[f] && std::find(path[f].begin(), path[f].end(), l) != path[f].end()) ++n;
            if (n > 0) step = std::min(step, room[l] / n);
          }
          if (step == std::numeric_limits<double>::infinity()) break;
          for (int f = 0; f < flows; ++f)
            if (!frozen[f]) rate[f] += step;
          for (int l = 0; l < links; ++l)
            for (int f = 0; f < flows; ++f)
              if (!frozen[f] && std::find(path[f].begin(), path[f].end(), l) != path[f].end()) room[l] -= step;
          for (int l = 0; l < links; ++l)
            if (room[l] <= 1e-9 * cap[l])
              for (int f = 0; f < flows; ++f)
                if (std::find(path[f].begin(), path[f].end(), l) != path[f].end()) frozen[f] = 1;
        }
        double dt = std::numeric_limits<double>::infinity();
        for (int f = 0; f < flows; ++f)
          if (end[f] < 0) dt = std::min(dt, left[f] / rate[f]);
        now += dt;
        for (int f = 0; f < flows; ++f) {
          if (end[f] >= 0) continue;
          left[f] -= rate[f] * dt;
          if (left[f] <= 1e-9 * bytes[f]) end[f] = now, ++done;
        }
      }
      Engine e;
      std::vector<LinkId> id(links);
      for (int l = 0; l < links; ++l) id[l] = e.add_link(cap[l]);
      std::vector<TaskId> task(flows);
      for (int f = 0; f < flows; ++f) {
        task[f] = e.add_task(TaskSpec{});
        std::vector<LinkId> p;
        for (int l : path[f]) p.push_back(id[l]);
        e.add_flow(task[f], bytes[f], p.data(), static_cast<int>(p.size()));
      }
      e.run();
      for (int f = 0; f < flows; ++f)
        EXPECT_NEAR(e.finish(task[f]), end[f], 1e-9 * end[f]) << links << " links, trial " << trial << ", flow " << f;
    }
}

TEST(Engine, LatencyThenFlow) {
  // A task with 0.5 s of fixed latency and a 100 B flow on a 100 B/s link ends at 1.5 s.
  Engine e;
  const LinkId l = e.add_link(100.0);
  TaskSpec s;
  s.duration_s = 0.5;
  const TaskId t = e.add_task(s);
  e.add_flow(t, 100.0, &l, 1);
  e.run();
  EXPECT_NEAR(e.finish(t), 1.5, 1e-9);
}

TEST(Engine, CycleIsReported) {
  Engine e;
  const TaskId a = e.add_task(TaskSpec{}), b = e.add_task(TaskSpec{});
  e.add_dependency(a, b);
  e.add_dependency(b, a);
  EXPECT_THROW(e.run(), std::logic_error);
}

TEST(Engine, ADurationOrAFlowsBytesThatIsNegativeOrNotANumberIsRefused) {
  Engine e;
  const LinkId l = e.add_link(100.0);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(e.add_task(TaskSpec{-1, nan}), std::invalid_argument);
  EXPECT_THROW(e.add_task(TaskSpec{-1, -1.0}), std::invalid_argument);
  const TaskId t = e.add_task(TaskSpec{-1, 1.0});
  EXPECT_THROW(e.add_flow(t, nan, &l, 1), std::invalid_argument);
  EXPECT_THROW(e.add_flow(t, -5.0, &l, 1), std::invalid_argument);
  e.add_flow(t, 100.0, &l, 1);
  EXPECT_THROW(e.respec(t, nan, 0, 0), std::invalid_argument);
  EXPECT_THROW(e.respec(t, 1, -1, 0), std::invalid_argument);
  EXPECT_THROW(e.set_flow_bytes(t, 0, nan), std::invalid_argument);
  e.run();
  EXPECT_DOUBLE_EQ(e.finish(t), 2.0);  // 1 s of latency, then 100 B at 100 B/s: nothing refused was kept
  // A graph that has run takes no more dependencies.
  const TaskId u = e.add_task(TaskSpec{-1, 1.0});
  EXPECT_THROW(e.add_dependency(t, u), std::logic_error);
  // Nor is it run again with a task added since.
  EXPECT_THROW(e.run(), std::logic_error);
}

TEST(Engine, InterferenceSlowsAProcessorWhileItsInterfererRuns) {
  // 10 s of compute on a processor; an interfering task of 4 s (slowdown 1: half speed) starts at 0.
  // During 0-4 the compute does 2 s of work, then the remaining 8 s at full speed: done at 12.
  Engine e;
  const ProcessorId p = e.add_processor();
  TaskSpec c;
  c.duration_s = 10.0;
  c.processor = p;
  const TaskId compute = e.add_task(c);
  const TaskId comm = e.add_task(TaskSpec{-1, 4.0});
  e.add_interference(comm, p, 1.0);
  e.run();
  EXPECT_NEAR(e.finish(comm), 4.0, 1e-12);
  EXPECT_NEAR(e.finish(compute), 12.0, 1e-9);
}

TEST(Engine, UnslowedTimeFollowsTheWorkAndTheProcessorsSlowdownLeavesItAlone) {
  // 4 s of work on p, then 2 s unslowed, then 100 B over a 100 B/s link. An interferer of 10 s
  // (slowdown 1: half speed) starts at 0: the work takes 0-8, the unslowed time 8-10 though the
  // interferer still runs, the flow 10-11. With a sequence (the flow timed as a tail) or without
  // (the general path), the same. Without a processor the unslowed time is latency: 4 + 2 + 1.
  // respec moves a task between the two.
  for (std::int32_t sequence : {0, -1})
    for (bool on_processor : {true, false}) {
      Engine e;
      const ProcessorId p = e.add_processor();
      const LinkId link = e.add_link(100.0);
      TaskSpec c;
      c.duration_s = 4.0;
      c.unslowed_s = 2.0;
      c.processor = on_processor ? p : -1;
      c.sequence = sequence;
      const TaskId t = e.add_task(c);
      e.add_flow(t, 100.0, &link, 1);
      const TaskId comm = e.add_task(TaskSpec{-1, 10.0});
      e.add_interference(comm, p, 1.0);
      e.run();
      EXPECT_NEAR(e.finish(t), on_processor ? 11.0 : 7.0, 1e-12) << sequence << " " << on_processor;
      // No work on the processor: the 2 s unslowed time is not stretched either, the flow 2-3.
      // Work again: as above.
      e.respec(t, 0.0, 2.0, 0);
      e.run();
      EXPECT_NEAR(e.finish(t), 3.0, 1e-12) << sequence << " " << on_processor;
      e.respec(t, 4.0, 2.0, 0);
      e.run();
      EXPECT_NEAR(e.finish(t), on_processor ? 11.0 : 7.0, 1e-12) << sequence << " " << on_processor;
    }
}

TEST(Engine, InterferenceThatStartsLaterAndOverlappingInterferersTakeTheLargest) {
  // Compute of 10 s from 0. Interferer A (slowdown 0.25) runs 2-6 after a 2 s task; B (slowdown
  // 1.0) runs 3-5. Work done: 0-2 at 1 (2), 2-3 at 0.8 (0.8), 3-5 at 0.5 (1.0), 5-6 at 0.8 (0.8):
  // 4.6 s of work by t = 6, the other 5.4 s at full speed: done at 11.4.
  Engine e;
  const ProcessorId p = e.add_processor();
  TaskSpec c;
  c.duration_s = 10.0;
  c.processor = p;
  const TaskId compute = e.add_task(c);
  const TaskId wait2 = e.add_task(TaskSpec{-1, 2.0});
  const TaskId wait3 = e.add_task(TaskSpec{-1, 3.0});
  const TaskId a = e.add_task(TaskSpec{-1, 4.0});
  e.add_interference(a, p, 0.25);
  const TaskId b = e.add_task(TaskSpec{-1, 2.0});
  e.add_interference(b, p, 1.0);
  e.add_dependency(wait2, a);
  e.add_dependency(wait3, b);
  e.run();
  EXPECT_NEAR(e.finish(a), 6.0, 1e-12);
  EXPECT_NEAR(e.finish(b), 5.0, 1e-12);
  EXPECT_NEAR(e.finish(compute), 11.4, 1e-9);
  EXPECT_THROW(e.add_interference(a, 7, 0.1), std::invalid_argument);
  EXPECT_THROW(e.add_interference(b, p, 0.1), std::logic_error);  // b is the last task, but the graph has run
}

TEST(Engine, ATaskLikeAnotherCarriesItsFlowsAndInterference) {
  // Task a: 1 s of latency, then 100 B over a 100 B/s link, slowing processor p by 1 (half speed)
  // while it runs. b is made like a and starts with it: the two flows share the link (50 B/s each)
  // from t = 1 to t = 3. A third task like a runs after both, alone: 3 + 1 + 1 = 5. Compute of 4 s
  // on p runs at half speed while any of them runs: 1.5 s of work by t = 3, 1 s more by t = 5,
  // the last 1.5 s at full speed: done at 6.5.
  Engine e;
  const LinkId l = e.add_link(100.0);
  const ProcessorId p = e.add_processor();
  TaskSpec c;
  c.duration_s = 4.0;
  c.processor = p;
  const TaskId compute = e.add_task(c);
  TaskSpec x;
  x.duration_s = 1.0;
  const TaskId a = e.add_task(x);
  e.add_flow(a, 100.0, &l, 1);
  e.add_interference(a, p, 1.0);
  const TaskId b = e.add_task(x, a);
  const TaskId after = e.add_task(x, a);
  e.add_dependency(a, after);
  e.add_dependency(b, after);
  e.run();
  EXPECT_NEAR(e.finish(a), 3.0, 1e-9);
  EXPECT_NEAR(e.finish(b), 3.0, 1e-9);
  EXPECT_NEAR(e.finish(after), 5.0, 1e-9);
  EXPECT_NEAR(e.finish(compute), 6.5, 1e-9);
}

namespace {
// A chain of three tasks (one sequence when `sequence` >= 0), each 1 s of work on processor p and
// then 200 B over link `own` of 100 B/s, and a communication task (1 s of latency, then a flow)
// that slows p by 1 (half speed) while it runs. Unshared: it starts after the first task and sends
// 100 B over another link. Shared: it starts at 0 and sends 300 B over `own`. Returns the finish of
// every task, the chain's first.
std::vector<double> chain_with_interferer(std::int32_t sequence, bool shared) {
  Engine e;
  const LinkId own = e.add_link(100.0), other = e.add_link(100.0);
  const ProcessorId p = e.add_processor();
  std::vector<TaskId> chain;
  for (int i = 0; i < 3; ++i) {
    TaskSpec s;
    s.duration_s = 1.0;
    s.processor = p;
    s.sequence = sequence;
    const TaskId t = i == 0 ? e.add_task(s) : e.add_task(s, chain.front());
    if (i == 0) e.add_flow(t, 200.0, &own, 1);
    if (i > 0) e.add_dependency(chain.back(), t);
    chain.push_back(t);
  }
  TaskSpec x;
  x.duration_s = 1.0;
  const TaskId comm = e.add_task(x);
  e.add_flow(comm, shared ? 300.0 : 100.0, shared ? &own : &other, 1);
  e.add_interference(comm, p, 1.0);
  if (!shared) e.add_dependency(chain.front(), comm);
  e.run();
  std::vector<double> out;
  for (TaskId t : chain) out.push_back(e.finish(t));
  out.push_back(e.finish(comm));
  return out;
}
// The chain with a sequence and without one: both must give `expect`.
void expect_chain_finishes(bool shared, const std::vector<double>& expect, double tolerance) {
  for (std::int32_t sequence : {0, -1}) {
    const std::vector<double> got = chain_with_interferer(sequence, shared);
    ASSERT_EQ(got.size(), expect.size());
    for (std::size_t i = 0; i < expect.size(); ++i) EXPECT_NEAR(got[i], expect[i], tolerance) << sequence << " " << i;
  }
}
}  // namespace

TEST(Engine, FlowsOnLinksOfOneSequenceAreTimedAsATailAfterTheFixedWork) {
  // Task 0: work 0-1, flow 1-3. The interferer: latency 3-4, its flow on the other link 4-5, so p
  // runs at half speed over 3-5. Task 1: its 1 s of work takes 3-5 at half speed, flow 5-7. Task 2:
  // work 7-8, flow 8-10. A sequence's flows are never shared, so its tails must give exactly the
  // times of the general flow machinery.
  expect_chain_finishes(false, {3.0, 7.0, 10.0, 5.0}, 1e-12);
}

TEST(Engine, ALinkSharedWithAnotherTaskGivesTheSequenceNoTail) {
  // The interferer now starts at 0 and its 300 B cross the chain's link. p at half speed over its
  // whole run: task 0's 1 s of work takes 0-2. The interferer's flow runs alone 1-2 (100 B), then
  // shares the link with task 0's from 2 (50 B/s each): both have 200 B left, both end at 6. Task
  // 1: work 6-7, flow 7-9; task 2: work 9-10, flow 10-12. With a sequence or without, the same.
  expect_chain_finishes(true, {6.0, 9.0, 12.0, 6.0}, 1e-9);
}

TEST(Engine, TasksOfOneSequenceThatOverlapAreReported) {
  Engine e;
  TaskSpec s;
  s.duration_s = 1.0;
  s.sequence = 0;
  e.add_task(s);
  e.add_task(s);  // no dependency on the first: both would run at 0
  EXPECT_THROW(e.run(), std::logic_error);
  EXPECT_TRUE(e.completion_order().empty());
  // Two that overlap once the first has run: the completion order holds it alone.
  Engine g;
  const TaskId first = g.add_task(s);
  const TaskId second = g.add_task(s), third = g.add_task(s);
  g.add_dependency(first, second);
  g.add_dependency(first, third);
  EXPECT_THROW(g.run(), std::logic_error);
  EXPECT_EQ(g.completion_order(), std::vector<TaskId>{first});
  // Tasks of no sequence may overlap; a sequence below -1 is no sequence and no number of one.
  Engine f;
  s.sequence = -1;
  const TaskId a = f.add_task(s), b = f.add_task(s);
  f.run();
  EXPECT_EQ(f.finish(a), 1.0);
  EXPECT_EQ(f.finish(b), 1.0);
  s.sequence = -2;
  EXPECT_THROW(f.add_task(s), std::invalid_argument);
}

namespace {
// Link of 100 B/s. R: 1 s of latency, then 100 B; it starts on an idle link, so its end is booked
// at 2 s. S: 100 B with no latency, released at `join_s` (after a task of that length). Returns the
// finishes of R and S, and the order the engine completed the three tasks in.
struct Booked {
  double r = 0, s = 0;
  std::vector<TaskId> order;
  TaskId wait = -1, joiner = -1;
};
Booked booked_flow_joined_at(double join_s) {
  Engine e;
  const LinkId l = e.add_link(100.0);
  TaskSpec r;
  r.duration_s = 1.0;
  const TaskId tr = e.add_task(r);
  e.add_flow(tr, 100.0, &l, 1);
  Booked out;
  out.wait = e.add_task(TaskSpec{-1, join_s});
  out.joiner = e.add_task(TaskSpec{});
  e.add_flow(out.joiner, 100.0, &l, 1);
  e.add_dependency(out.wait, out.joiner);
  e.run();
  out.r = e.finish(tr);
  out.s = e.finish(out.joiner);
  out.order = e.completion_order();
  return out;
}
}  // namespace

TEST(Engine, ALoneFlowTimedAtItsStartGivesWayWhenAnotherFlowJoinsItsLink) {
  // S joins at 1.5 s: R has 50 B left and the two share 50 B/s: R ends at 1.5 + 50 / 50 = 2.5, S
  // then has 50 B left alone at 100 B/s: 3.0.
  const Booked b = booked_flow_joined_at(1.5);
  EXPECT_NEAR(b.r, 2.5, 1e-12);
  EXPECT_NEAR(b.s, 3.0, 1e-12);
}

TEST(Engine, AFlowJoiningDuringTheBookedTasksLatencyRunsAloneUntilThatLatencyEnds) {
  // S joins at 0.5 s, during R's latency: S runs alone 0.5-1 (50 B); R's flow starts at 1 and they
  // share: S's last 50 B end at 2, R then has 50 B left alone: 2.5. The same as if R's flow had
  // never been booked.
  const Booked b = booked_flow_joined_at(0.5);
  EXPECT_NEAR(b.s, 2.0, 1e-12);
  EXPECT_NEAR(b.r, 2.5, 1e-12);
  // The engine finishes a task only after those it waits for: its completion order says so.
  ASSERT_EQ(b.order.size(), 3u);
  EXPECT_LT(std::find(b.order.begin(), b.order.end(), b.wait) - b.order.begin(),
            std::find(b.order.begin(), b.order.end(), b.joiner) - b.order.begin());
}

// The generic engine: dependencies, streams, max-min sharing of links.
#include <gtest/gtest.h>

#include <stdexcept>

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

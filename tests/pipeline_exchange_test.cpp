// The pipeline messages the step runner posts (kernels/pipeline_exchange.h), checked on the CPU
// for every schedule the simulator orders: each stage posts its exchanges in order and an exchange
// completes only once every message in it has met its counterpart in an exchange the peer has
// posted (rendezvous, as NCCL's point-to-point does for messages larger than its buffers). All
// stages must finish, and each message must be what the receiving pass expects.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "pipeline_exchange.h"
#include "pipeline_schedule.h"

using namespace trainsim;

namespace {

struct Op {
  bool send;
  gpu::PipeMessage msg;
  int group;        // index of its exchange on its stage
  int match = -1;   // index of the counterpart op on the peer stage
  bool done = false;
};

// Runs the exchanges of every stage; returns "" if all complete with matching messages, else why not.
std::string run_exchanges(sim::PipelineKind kind, int pp, int vpp, int m) {
  std::vector<std::vector<Op>> ops(pp);
  std::vector<int> groups(pp);
  for (int s = 0; s < pp; ++s) {
    std::vector<gpu::PipePass> passes;
    for (const auto& op : sim::pipeline_order(kind, pp, vpp, m, s)) passes.push_back({op.forward, op.microbatch, op.chunk});
    const auto ex = gpu::pipeline_exchanges(passes, pp, vpp, s, sim::pipeline_warmup(kind, pp, vpp, m, s));
    groups[s] = static_cast<int>(ex.size());
    for (int g = 0; g < groups[s]; ++g) {
      for (const auto& msg : ex[g].send) ops[s].push_back({true, msg, g});
      for (const auto& msg : ex[g].recv) ops[s].push_back({false, msg, g});
    }
  }
  // The k-th send from a to b meets the k-th receive on b from a.
  std::map<std::pair<int, int>, std::vector<int>> sends, recvs;  // (from, to) -> op indices on the owner
  for (int s = 0; s < pp; ++s)
    for (int i = 0; i < static_cast<int>(ops[s].size()); ++i) {
      const Op& o = ops[s][i];
      (o.send ? sends[{s, o.msg.peer}] : recvs[{o.msg.peer, s}]).push_back(i);
    }
  for (const auto& [ch, list] : sends) {
    const auto& r = recvs[ch];
    if (r.size() != list.size())
      return std::to_string(list.size()) + " sends but " + std::to_string(r.size()) + " receives from stage " + std::to_string(ch.first) +
             " to " + std::to_string(ch.second);
    for (std::size_t k = 0; k < list.size(); ++k) {
      Op& a = ops[ch.first][list[k]];
      Op& b = ops[ch.second][r[k]];
      if (a.msg.gradient != b.msg.gradient || a.msg.microbatch != b.msg.microbatch || a.msg.to_vstage != b.msg.to_vstage)
        return "message " + std::to_string(k) + " from stage " + std::to_string(ch.first) + " is not what stage " +
               std::to_string(ch.second) + " expects";
      a.match = r[k];
      b.match = list[k];
    }
  }
  for (const auto& [ch, list] : recvs)
    if (!sends.count(ch) && !list.empty()) return "a receive on stage " + std::to_string(ch.second) + " that nobody sends";
  std::vector<int> pos(pp, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < pp; ++s) {
      if (pos[s] == groups[s]) continue;
      bool all = true;
      for (Op& o : ops[s]) {
        if (o.group != pos[s] || o.done) continue;
        Op& other = ops[o.msg.peer][o.match];
        if (other.group == pos[o.msg.peer]) o.done = other.done = true;
        else all = false;
      }
      if (all) {
        ++pos[s];
        progress = true;
      }
    }
  }
  for (int s = 0; s < pp; ++s)
    if (pos[s] != groups[s]) return "stage " + std::to_string(s) + " waits forever at exchange " + std::to_string(pos[s]);
  return "";
}

}  // namespace

TEST(PipelineExchange, OneFOneBCompletesWithMatchingMessages) {
  for (int pp : {2, 3, 4, 8})
    for (int m : {1, 2, pp, 2 * pp + 1}) EXPECT_EQ(run_exchanges(sim::PipelineKind::one_f_one_b, pp, 1, m), "") << pp << " " << m;
}

TEST(PipelineExchange, InterleavedCompletesWithMatchingMessages) {
  for (int pp : {2, 3, 4, 8})
    for (int vpp : {2, 3, 4})
      for (int m : {pp, 2 * pp, 3 * pp}) EXPECT_EQ(run_exchanges(sim::PipelineKind::interleaved, pp, vpp, m), "") << pp << " " << vpp << " " << m;
}

TEST(PipelineExchange, GpipeCompletesWithMatchingMessages) {
  for (int pp : {2, 4})
    for (int m : {1, 4}) EXPECT_EQ(run_exchanges(sim::PipelineKind::gpipe, pp, 1, m), "") << pp << " " << m;
}

TEST(PipelineExchange, PostingEachSendWithOnlyTheNextReceiveDeadlocksInterleaved) {
  // The checker itself, on the grouping the runner does not use: each pass's send posted with
  // only the next pass's receive. Two-stage interleaved 1F1B with two chunks and four
  // micro-batches then leaves the stages waiting on each other.
  const int pp = 2, vpp = 2, m = 4;
  std::vector<std::vector<gpu::PipeMessage>> sends(pp), recvs(pp);
  std::vector<std::vector<int>> send_at(pp), recv_at(pp);  // exchange index of each message
  std::vector<int> groups(pp);
  for (int s = 0; s < pp; ++s) {
    const auto order = sim::pipeline_order(sim::PipelineKind::interleaved, pp, vpp, m, s);
    groups[s] = static_cast<int>(order.size()) + 1;
    for (std::size_t k = 0; k < order.size(); ++k) {
      const gpu::PipePass p{order[k].forward, order[k].microbatch, order[k].chunk};
      if (auto in = gpu::pipe_input(p, pp, vpp, s); in.peer >= 0) recvs[s].push_back(in), recv_at[s].push_back(static_cast<int>(k));
      if (auto o = gpu::pipe_output(p, pp, vpp, s); o.peer >= 0) sends[s].push_back(o), send_at[s].push_back(static_cast<int>(k) + 1);
    }
  }
  // Two stages: the k-th send of one meets the k-th receive of the other. A stage at exchange g
  // passes it once each message there has its counterpart's exchange reached by the peer.
  std::vector<int> pos(pp, 0);
  auto ready = [&](int s) {
    const int o = 1 - s;
    for (std::size_t k = 0; k < sends[s].size(); ++k)
      if (send_at[s][k] == pos[s] && recv_at[o][k] > pos[o]) return false;
    for (std::size_t k = 0; k < recvs[s].size(); ++k)
      if (recv_at[s][k] == pos[s] && send_at[o][k] > pos[o]) return false;
    return true;
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < pp; ++s)
      if (pos[s] < groups[s] && ready(s)) ++pos[s], progress = true;
  }
  EXPECT_TRUE(pos[0] < groups[0] || pos[1] < groups[1]) << "expected a deadlock";
}

#pragma once
// The point-to-point messages a pipeline stage exchanges around its passes, in the order it posts
// them. Plain C++ (no CUDA): the step runner follows it, and a unit test checks on the CPU that
// every schedule it is given completes (no two stages wait on each other) and that each message
// arrives where it is expected.
//
// Virtual stage vs = chunk * pp + stage runs its share of the layers; a forward pass of vs > 0
// receives its input from vs - 1 and, below the last virtual stage, sends its output to vs + 1; a
// backward pass below the last receives the gradient of its output from vs + 1 and, above the
// first, sends the gradient of its input to vs - 1.
//
// Exchanges are posted in Megatron-LM's groupings, so that neighbours sending to each other at the
// same time do not wait on each other. Without interleaving (one chunk per stage) exchange k is
// posted before pass k: the send of pass k - 1 with the receive of pass k. With interleaving the
// steady state's forward and backward (after `warmup` forwards, before the last `warmup`
// backwards) run as one batch between exchanges: each exchange sends what the previous batch
// produced and receives what the next one needs (posting only one pass's receive there can leave
// stages of the interleaved schedule waiting on each other). The exchange after the last pass only
// sends.
#include <vector>

namespace trainsim::gpu {

struct PipePass {
  bool forward = true;
  int microbatch = 0;
  int chunk = 0;  // this stage's chunk (virtual stage chunk * pp + stage)
};

struct PipeMessage {
  int peer = -1;          // the other stage; -1: no message
  bool gradient = false;  // the gradient of an activation (backward) or the activation (forward)
  int microbatch = 0;
  int to_vstage = 0;      // the virtual stage whose pass consumes it
};

struct PipeExchange {
  std::vector<PipeMessage> send, recv;
  int first_pass = 0, passes = 0;  // the batch that runs after it (none after the last exchange)
};

// The message pass `p` of `stage` receives before it runs, and the one it sends after.
inline PipeMessage pipe_input(const PipePass& p, int pp, int vpp, int stage) {
  const int vs = p.chunk * pp + stage, last = pp * vpp - 1;
  if (p.forward ? vs == 0 : vs == last) return {};
  const int from = p.forward ? vs - 1 : vs + 1;
  return PipeMessage{from % pp, !p.forward, p.microbatch, vs};
}
inline PipeMessage pipe_output(const PipePass& p, int pp, int vpp, int stage) {
  const int vs = p.chunk * pp + stage, last = pp * vpp - 1;
  if (p.forward ? vs == last : vs == 0) return {};
  const int to = p.forward ? vs + 1 : vs - 1;
  return PipeMessage{to % pp, !p.forward, p.microbatch, to};
}

// One exchange per batch and a last one (see above).
inline std::vector<PipeExchange> pipeline_exchanges(const std::vector<PipePass>& passes, int pp, int vpp, int stage, int warmup) {
  std::vector<PipeExchange> out;
  std::vector<PipeMessage> pending;  // the previous batch's sends
  const int n = static_cast<int>(passes.size());
  for (int k = 0; k < n;) {
    const int len = vpp > 1 && k >= warmup && k + 1 < n - warmup && passes[k].forward ? 2 : 1;
    PipeExchange e;
    e.send = std::move(pending);
    pending.clear();
    e.first_pass = k;
    e.passes = len;
    for (int i = k; i < k + len; ++i) {
      if (const PipeMessage in = pipe_input(passes[i], pp, vpp, stage); in.peer >= 0) e.recv.push_back(in);
      if (const PipeMessage o = pipe_output(passes[i], pp, vpp, stage); o.peer >= 0) pending.push_back(o);
    }
    out.push_back(std::move(e));
    k += len;
  }
  PipeExchange last;
  last.send = std::move(pending);
  last.first_pass = n;
  out.push_back(std::move(last));
  return out;
}

}  // namespace trainsim::gpu

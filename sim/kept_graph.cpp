#include "kept_graph.h"

#include <algorithm>
#include <cstring>
#include <memory>

namespace trainsim::sim::detail {

bool Builder::refill() {
  refilling_ = true;
  speed_.assign(in_.net.shape.gpus(), 1.0);  // kept graphs are of steps without GPU speeds
  // Every fused pass again from this step's chunk work, into the memo its tasks were made from;
  // the first task of each holds the flows the others share.
  const std::size_t per_gpu = static_cast<std::size_t>(vpp_) * kPassKinds;
  for (std::size_t slot = 0; slot < fused_memo_.size(); ++slot) {
    FusedPass& memo = fused_memo_[slot];
    if (!memo.set) continue;
    const int g = sim_gpus_[slot / per_gpu], chunk = static_cast<int>((slot / kPassKinds) % vpp_);
    const int kind = static_cast<int>(slot % kPassKinds);
    PassParts pp;
    pass_parts(kind, chunks_[(g / (L_.tp * L_.dp)) * vpp_ + chunk], pp);
    const TaskId like = memo.like;
    fused_values(g, pp.part, pp.n, memo);
    memo.like = like;
    if (static_cast<int>(fused_flows_.size()) != e_.flow_count(like)) return false;
    for (std::size_t f = 0; f < fused_flows_.size(); ++f) e_.set_flow_bytes(like, static_cast<int>(f), fused_flows_[f].bytes);
  }
  for (const auto& [t, slot] : ws_.fused_tasks) e_.respec(t, fused_memo_[slot].spec.duration_s, fused_memo_[slot].spec.unslowed_s, fused_memo_[slot].spec.category);
  for (BuilderWorkspace::TransferKind& k : ws_.transfer_kinds) {
    transfer_values(k);
    if (k.dst != k.src) e_.set_flow_bytes(k.like, 0, k.bytes);
  }
  for (const auto& [t, kind] : ws_.transfer_tasks) e_.respec(t, ws_.transfer_kinds[kind].latency_s, 0.0, kPpComm);
  // GPU 0's records, and its TP bytes summed in the order they were built.
  std::vector<double>& prefix = ws_.tp_prefix;
  prefix.assign(gpu0_tasks_.size() + 1, 0.0);
  for (std::size_t i = 0; i < gpu0_tasks_.size(); ++i) {
    const std::int32_t slot = ws_.gpu0_slot[i];
    prefix[i + 1] = prefix[i];
    if (slot < 0) continue;
    const TaskId id = gpu0_tasks_[i].id;
    gpu0_tasks_[i] = fused_memo_[slot].rec;
    gpu0_tasks_[i].id = id;
    prefix[i + 1] += fused_memo_[slot].tp_bytes;
  }
  tp_bytes_gpu0_ = prefix.back();
  for (std::size_t op = 0; op + 1 < ws_.cut_gpu0_count.size(); ++op) cut_bytes_[op].second = prefix[ws_.cut_gpu0_count[op]];
  for (int i = 0; i < 2; ++i) ws_.marker_bytes[i][1] = prefix[ws_.marker_gpu0_count[i]];
  refilling_ = false;
  return true;
}

BuilderWorkspace& thread_workspace() {
  thread_local BuilderWorkspace w;
  return w;
}

namespace {


void put(std::vector<std::uint64_t>& k, double x) {
  std::uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  k.push_back(b);
}
void put(std::vector<std::uint64_t>& k, std::int64_t x) { k.push_back(static_cast<std::uint64_t>(x)); }

void put_measured(std::vector<std::uint64_t>& k, const std::vector<MeasuredCollective>& v) {
  put(k, static_cast<std::int64_t>(v.size()));
  for (const MeasuredCollective& m : v) {
    put(k, static_cast<std::int64_t>(m.kind));
    put(k, static_cast<std::int64_t>(m.gpus));
    put(k, static_cast<std::int64_t>(m.segments.size()));
    for (const MeasuredSegment& g : m.segments) {
      put(k, g.min_bytes);
      put(k, g.max_bytes);
      put(k, g.alpha_s);
      put(k, g.busbw_Bps);
    }
  }
}

}  // namespace

void graph_key(const StepInput& in, int M, int P, bool cut, std::vector<std::uint64_t>& k) {
  k.clear();
  const ModelConfig& m = *in.model;
  const Layout& L = in.layout;
  const ClusterShape& sh = in.net.shape;
  for (std::int64_t x : {static_cast<std::int64_t>(in.cost->instance()), static_cast<std::int64_t>(m.family),
                         static_cast<std::int64_t>(m.layers), static_cast<std::int64_t>(m.hidden), static_cast<std::int64_t>(m.heads),
                         static_cast<std::int64_t>(m.kv_heads), static_cast<std::int64_t>(m.ffn_hidden), static_cast<std::int64_t>(m.vocab),
                         static_cast<std::int64_t>(m.seq_len), static_cast<std::int64_t>(m.tied_embeddings),
                         static_cast<std::int64_t>(m.vocab_divisible_by), static_cast<std::int64_t>(L.tp), static_cast<std::int64_t>(L.pp),
                         static_cast<std::int64_t>(L.dp), static_cast<std::int64_t>(L.vpp), static_cast<std::int64_t>(L.sequence_parallel),
                         static_cast<std::int64_t>(L.zero), static_cast<std::int64_t>(L.compression.kind),
                         static_cast<std::int64_t>(L.compression.powersgd_rank), static_cast<std::int64_t>(L.schedule),
                         static_cast<std::int64_t>(in.precision), static_cast<std::int64_t>(M), static_cast<std::int64_t>(P), static_cast<std::int64_t>(cut),
                         static_cast<std::int64_t>(in.mode), static_cast<std::int64_t>(in.every_replica), static_cast<std::int64_t>(sh.nodes), static_cast<std::int64_t>(sh.gpus_per_node),
                         static_cast<std::int64_t>(sh.nics_per_node), static_cast<std::int64_t>(sh.fabric),
                         static_cast<std::int64_t>(sh.nics_per_leaf), static_cast<std::int64_t>(in.net.allreduce_algorithm),
                         // a recompute of its own (Builder::split_recompute_) adds a task to every backward
                         static_cast<std::int64_t>(L.tp > 1 && L.recompute == Recompute::full)})
    put(k, x);
  for (double x : {L.bucket_MB, L.compression.topk_fraction, sh.nvlink_Bps, sh.nic_Bps, sh.oversubscription, in.net.intra_alpha_s,
                   in.net.inter_alpha_s})
    put(k, x);
  put(k, static_cast<std::int64_t>(sh.nic_speed.size()));
  for (double x : sh.nic_speed) put(k, x);
  put_measured(k, in.net.intra_measured);
  put_measured(k, in.net.inter_measured);
}

std::vector<std::uint64_t>& thread_key_scratch() {
  thread_local std::vector<std::uint64_t> k;
  return k;
}

BuilderWorkspace& kept_graph(const std::vector<std::uint64_t>& key, bool& found) {
  constexpr std::size_t kKept = 4;
  struct Kept {
    std::unique_ptr<BuilderWorkspace> ws;
    std::uint64_t used = 0;
  };
  thread_local std::vector<Kept> kept;
  thread_local std::uint64_t clock = 0;
  ++clock;
  for (Kept& k : kept)
    if (k.ws->key == key) {
      k.used = clock;
      found = true;
      return *k.ws;
    }
  found = false;
  Kept* slot = nullptr;
  if (kept.size() < kKept) {
    slot = &kept.emplace_back();
    slot->ws = std::make_unique<BuilderWorkspace>();
  } else {
    slot = &*std::min_element(kept.begin(), kept.end(), [](const Kept& a, const Kept& b) { return a.used < b.used; });
  }
  slot->used = clock;
  slot->ws->key.clear();
  return *slot->ws;
}

}  // namespace trainsim::sim::detail

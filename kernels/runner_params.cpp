#include "runner_params.h"

#include <algorithm>
#include <stdexcept>

namespace trainsim::gpu {

int ParamLayout::bucket_of(std::size_t off) const {
  for (int b = 0; b < static_cast<int>(bucket_ranges.size()); ++b)
    if (off >= bucket_ranges[b].first && off < bucket_ranges[b].second) return b;
  throw std::logic_error("step runner: parameter offset outside every bucket");
}

ParamLayout plan_params(const ParamShape& s) {
  if (s.zero < 0 || s.zero > 3) throw std::invalid_argument("step runner: ZeRO stage must be 0-3");
  const std::size_t h = s.hidden, hl = s.heads_width, fl = s.mlp_width, qkv_w = s.qkv_width;
  const std::size_t fc1_w = s.llama ? 2 * fl : fl;  // the first MLP projection's columns (llama: gate and up)
  const bool llama = s.llama;
  ParamLayout p;
  std::size_t& n = p.n;
  auto place = [&](std::size_t count) {
    const std::size_t o = n;
    n += count;
    return o;
  };
  p.layers.resize(s.layers);
  p.has_wte = s.first || (s.last && s.tied);
  p.wte = p.has_wte ? place(static_cast<std::size_t>(s.vocab_rows) * h) : kNoParam;
  p.wpe = s.first && !llama ? place(static_cast<std::size_t>(s.seq) * h) : kNoParam;
  for (auto& l : p.layers) {
    l = LayerParams{kNoParam, kNoParam, kNoParam, kNoParam, kNoParam, kNoParam, kNoParam, kNoParam, kNoParam, kNoParam, kNoParam, kNoParam};
    l.ln1_g = place(h);
    if (!llama) l.ln1_b = place(h);
    l.wqkv = place(h * qkv_w);
    if (!llama) l.bqkv = place(qkv_w);
    l.wo = place(hl * h);
    if (!llama) l.bo = place(h);
    l.ln2_g = place(h);
    if (!llama) l.ln2_b = place(h);
    l.w1 = place(h * fc1_w);
    if (!llama) l.b1 = place(fl);
    l.w2 = place(fl * h);
    if (!llama) l.b2 = place(h);
  }
  p.lnf_g = s.last ? place(h) : kNoParam;
  p.lnf_b = s.last && !llama ? place(h) : kNoParam;
  p.head = !s.last ? kNoParam : s.tied ? p.wte : place(static_cast<std::size_t>(s.vocab_rows) * h);
  if (p.wpe != kNoParam) p.replicated.push_back({p.wpe, static_cast<std::size_t>(s.seq) * h});
  for (const auto& l : p.layers) {
    if (llama) {
      p.replicated.push_back({l.ln1_g, h});
      p.replicated.push_back({l.ln2_g, h});
    } else {
      p.replicated.push_back({l.ln1_g, 2 * h});
      p.replicated.push_back({l.bo, 3 * h});  // bo, ln2_g, ln2_b
      p.replicated.push_back({l.b2, h});
    }
  }
  if (s.last) p.replicated.push_back({p.lnf_g, llama ? h : 2 * h});
  p.bucket_elems = std::max<std::size_t>(1, static_cast<std::size_t>(s.bucket_MB * 1e6 / 4));
  {
    std::size_t pe = n;
    for (int l = s.layers - 1; l >= 0; --l)
      if (pe - p.layers[l].ln1_g >= p.bucket_elems) {
        p.bucket_ranges.push_back({p.layers[l].ln1_g, pe});
        pe = p.layers[l].ln1_g;
      }
    if (pe > 0) p.bucket_ranges.push_back({0, pe});
  }
  const std::size_t dp = s.replicas;
  p.buckets.resize(p.bucket_ranges.size());
  p.shard = n;
  if (s.zero >= 1) {
    p.shard = 0;
    for (std::size_t b = 0; b < p.bucket_ranges.size(); ++b) {
      const auto [lo, hi] = p.bucket_ranges[b];
      RunnerBucket& B = p.buckets[b];
      B.begin = lo;
      B.len = hi - lo;
      B.sh = B.len / dp;
      B.rem = B.len - B.sh * dp;
      B.so_main = p.shard;
      if (B.sh) p.owned.push_back({lo + s.replica * B.sh, B.sh, false});
      p.shard += B.sh;
      B.so_left = p.shard;
      if (B.rem) p.owned.push_back({lo + dp * B.sh, B.rem, true});
      p.shard += B.rem;
    }
  }
  return p;
}

}  // namespace trainsim::gpu

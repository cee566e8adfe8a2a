// The step runner's parameter layout (kernels/runner_params.h): what `planner validate` allocates,
// initialises, buckets and shards, checked without a GPU.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "runner_params.h"

using namespace trainsim::gpu;

namespace {

// One rank holding every layer of a model (tp = pp = 1).
ParamShape whole(bool llama, int h, int heads_width, int ffn, int qkv_width, int vocab, int seq, int layers, bool tied) {
  ParamShape s;
  s.hidden = h, s.heads_width = heads_width, s.mlp_width = ffn, s.qkv_width = qkv_width;
  s.vocab_rows = vocab, s.seq = seq, s.layers = layers, s.llama = llama, s.tied = tied;
  return s;
}

}  // namespace

TEST(RunnerParams, OneRankHoldsThePublishedParameterCount) {
  // GPT-2 small (tied embeddings, learned positions): V h + s h + L (12 h^2 + 13 h) + 2 h with
  // f = 4h = 124,439,808, the count GPT-2's 124M is known by.
  const ParamLayout gpt = plan_params(whole(false, 768, 768, 3072, 3 * 768, 50257, 1024, 12, true));
  EXPECT_EQ(gpt.n, 124439808u);
  EXPECT_EQ(gpt.head, gpt.wte);  // the logits use the word embedding
  // Llama 2 7B (untied, no biases, RMSNorm gains): 2 V h + L (2 h + 4 h^2 + 3 h f) + h =
  // 6,738,415,616 (Meta's published count).
  const ParamLayout llama = plan_params(whole(true, 4096, 4096, 11008, 3 * 4096, 32000, 4096, 32, false));
  EXPECT_EQ(llama.n, 6738415616u);
  EXPECT_NE(llama.head, llama.wte);
  EXPECT_EQ(llama.wpe, kNoParam);
  EXPECT_EQ(llama.layers[0].bqkv, kNoParam);
}

TEST(RunnerParams, PipelineStagesHoldTheirEndsOfTheModel) {
  // A middle stage holds only its layers; the first the embeddings, the last the final norm and
  // (tied) its own copy of the word embedding for the logits.
  ParamShape s = whole(false, 64, 64, 256, 192, 509, 32, 2, true);
  s.first = false, s.last = false;
  const ParamLayout mid = plan_params(s);
  EXPECT_FALSE(mid.has_wte);
  EXPECT_EQ(mid.n, 2u * (12 * 64 * 64 + 13 * 64));
  s.last = true;
  const ParamLayout last = plan_params(s);
  EXPECT_TRUE(last.has_wte);
  EXPECT_EQ(last.head, last.wte);
  EXPECT_EQ(last.n, mid.n + 509u * 64 + 2 * 64);
}

TEST(RunnerParams, BucketsTileTheArrayInTheOrderBackwardFinishesIt) {
  // Backward finishes the last layer first and the embeddings last: the buckets run from the end
  // of the flat array to its start, contiguous, each closed at a layer boundary once it holds
  // bucket_MB of fp32 gradients (a quarter of a megabyte here: 62,500 elements; a layer is 49,984).
  ParamShape s = whole(false, 64, 64, 256, 192, 509, 32, 8, true);
  s.bucket_MB = 0.25;
  const ParamLayout p = plan_params(s);
  ASSERT_EQ(p.bucket_elems, 62500u);
  ASSERT_GE(p.bucket_ranges.size(), 3u);
  std::size_t end = p.n;
  for (std::size_t b = 0; b < p.bucket_ranges.size(); ++b) {
    EXPECT_EQ(p.bucket_ranges[b].second, end) << b;
    if (b + 1 < p.bucket_ranges.size()) {
      EXPECT_GE(p.bucket_ranges[b].second - p.bucket_ranges[b].first, p.bucket_elems) << b;
      bool at_layer = false;
      for (const auto& l : p.layers) at_layer |= l.ln1_g == p.bucket_ranges[b].first;
      EXPECT_TRUE(at_layer) << b;
    }
    end = p.bucket_ranges[b].first;
    EXPECT_EQ(p.bucket_of(p.bucket_ranges[b].first), static_cast<int>(b));
    EXPECT_EQ(p.bucket_of(p.bucket_ranges[b].second - 1), static_cast<int>(b));
  }
  EXPECT_EQ(end, 0u);
  EXPECT_THROW(p.bucket_of(p.n), std::logic_error);
}

TEST(RunnerParams, ZeroSharesPartitionEveryBucketAcrossReplicas) {
  // Every element of every bucket is owned by exactly one replica, or is a leftover held by all
  // of them; each replica's shard holds its blocks in bucket order.
  ParamShape s = whole(true, 64, 64, 172, 128, 509, 32, 4, false);
  s.bucket_MB = 0.1;
  s.zero = 1, s.replicas = 3;
  std::vector<int> owners;
  std::vector<char> leftover;
  for (int r = 0; r < s.replicas; ++r) {
    s.replica = r;
    const ParamLayout p = plan_params(s);
    if (owners.empty()) owners.assign(p.n, 0), leftover.assign(p.n, 0);
    std::size_t in_shard = 0;
    for (const OwnedBlock& o : p.owned) {
      for (std::size_t i = o.off; i < o.off + o.len; ++i) {
        if (o.leftover) leftover[i] = 1;
        else ++owners[i];
      }
      in_shard += o.len;
    }
    EXPECT_EQ(in_shard, p.shard) << r;
    for (const RunnerBucket& b : p.buckets) EXPECT_EQ(b.sh * 3 + b.rem, b.len);
  }
  for (std::size_t i = 0; i < owners.size(); ++i) ASSERT_EQ(owners[i] + leftover[i], 1) << i;
  s.zero = 4;
  EXPECT_THROW(plan_params(s), std::invalid_argument);
}

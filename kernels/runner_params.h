#pragma once
// Where the step runner keeps one rank's parameters: offsets of every tensor of its stage's
// layers, embeddings and head in one flat array (the same layout for the bf16 weights, the fp32
// master copy, the Adam moments and the gradients), the gradient buckets in the order backward
// completes them, and under ZeRO each replica's share of every bucket. Plain C++ (no CUDA), so
// that it is tested on any machine.
#include <cstddef>
#include <utility>
#include <vector>

namespace trainsim::gpu {

constexpr std::size_t kNoParam = ~std::size_t{0};  // a tensor this rank does not hold

struct LayerParams {
  std::size_t ln1_g, ln1_b, wqkv, bqkv, wo, bo, ln2_g, ln2_b, w1, b1, w2, b2;  // offsets into the flat parameter array
};

// What the layout depends on: this rank's share of the model's shapes and its place in the
// layout.
struct ParamShape {
  int hidden = 0, seq = 0;
  int heads_width = 0;  // this rank's heads times the head size
  int mlp_width = 0;    // this rank's MLP columns (the gate's and the up projection's each, llama)
  int qkv_width = 0;    // its columns of the QKV projection
  int vocab_rows = 0;   // its rows of the vocabulary
  int layers = 0;       // this stage's layers, over all its chunks
  bool llama = false, tied = true;
  bool first = true, last = true;  // first and last pipeline stage
  double bucket_MB = 25;
  int zero = 0;  // ZeRO stage (0 without replicas)
  int replicas = 1, replica = 0;
};

// A gradient bucket under ZeRO: its flat range; each replica owns `sh` elements of it, and the
// `rem` left over are held, summed and updated by every replica; where this replica's block and
// the leftover sit in its shard arrays.
struct RunnerBucket {
  std::size_t begin = 0, len = 0, sh = 0, rem = 0;
  std::size_t so_main = 0, so_left = 0;
};

// A flat range this replica updates (ZeRO), in shard order; `leftover`: held by every replica.
struct OwnedBlock {
  std::size_t off = 0, len = 0;
  bool leftover = false;
};

struct ParamLayout {
  std::vector<LayerParams> layers;  // absent tensors (gpt's biases under llama, ...): kNoParam
  std::size_t n = 0;                // elements of the flat array
  // gpt: LayerNorms with biases, biased projections, learned positions. llama: RMSNorm gains, no
  // biases, rotary positions, gate and up projections side by side. The word embedding is on stage
  // 0 and, tied, also on the last stage, which computes the logits with it; untied, the last stage
  // has its own output projection (`head`).
  std::size_t wte = kNoParam, wpe = kNoParam, lnf_g = kNoParam, lnf_b = kNoParam, head = kNoParam;
  bool has_wte = false;
  // Parameters every tensor-parallel rank holds whole (weight 1/tp in the gradient norm): ranges of
  // the flat array.
  std::vector<std::pair<std::size_t, std::size_t>> replicated;
  // Gradient buckets, in the order backward completes them: the layers from the last, closing a
  // bucket once it holds bucket_MB of fp32 gradients, then the rest with the embeddings. Each a
  // [begin, end) range; together they tile the flat array, in descending order.
  std::vector<std::pair<std::size_t, std::size_t>> bucket_ranges;
  std::size_t bucket_elems = 0;
  // ZeRO (zero >= 1): each replica owns an equal block of every bucket; the shard arrays hold the
  // owned blocks in bucket order (`shard` elements). Without ZeRO the shard is the whole array.
  std::vector<RunnerBucket> buckets;
  std::vector<OwnedBlock> owned;
  std::size_t shard = 0;

  // The bucket that holds flat offset `off`; throws std::logic_error outside every bucket.
  int bucket_of(std::size_t off) const;
};

// The layout for `s`. Throws std::invalid_argument for a ZeRO stage outside 0-3.
ParamLayout plan_params(const ParamShape& s);

}  // namespace trainsim::gpu

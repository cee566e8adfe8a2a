#include "launch_export.h"

#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>
#include <sstream>

#include "layout_rules.h"

namespace trainsim {

LaunchExport export_launch(const Scenario& s, const Layout& l, int nodes, const ReliabilityResult* reliability) {
  LaunchExport out;
  const ModelConfig& m = s.model;
  const int gb = s.training.global_batch;
  const int accum = microbatches_per_step(l, gb);
  const int G = s.cluster.gpus_per_node;
  {
    std::ostringstream a;
    a << gb << " sequences per step = " << l.dp << " data-parallel replicas x " << l.micro_batch << " micro-batch x " << accum
      << " accumulation steps; " << static_cast<long long>(gb) * m.seq_len << " tokens per step; " << nodes * G << " GPUs = "
      << l.tp << " TP x " << l.pp << " PP x " << l.dp << " DP";
    out.batch_arithmetic = a.str();
  }
  std::vector<std::string> args = {
      "--num-layers " + std::to_string(m.layers), "--hidden-size " + std::to_string(m.hidden),
      "--num-attention-heads " + std::to_string(m.heads), "--ffn-hidden-size " + std::to_string(m.ffn_hidden),
      "--seq-length " + std::to_string(m.seq_len), "--max-position-embeddings " + std::to_string(m.seq_len),
      "--tensor-model-parallel-size " + std::to_string(l.tp), "--pipeline-model-parallel-size " + std::to_string(l.pp),
      "--micro-batch-size " + std::to_string(l.micro_batch), "--global-batch-size " + std::to_string(gb)};
  if (m.vocab_divisible_by > 0) args.push_back("--make-vocab-size-divisible-by " + std::to_string(m.vocab_divisible_by));
  if (m.family == Family::llama) {
    for (const char* a : {"--swiglu", "--normalization RMSNorm", "--position-embedding-type rope", "--disable-bias-linear"}) args.push_back(a);
    if (!m.tied_embeddings) args.push_back("--untie-embeddings-and-output-weights");
    if (m.kv_heads != m.heads) {
      args.push_back("--group-query-attention");
      args.push_back("--num-query-groups " + std::to_string(m.kv_heads));
    }
  }
  if (l.schedule == Schedule::interleaved)
    args.push_back("--num-layers-per-virtual-pipeline-stage " + std::to_string(m.layers / (l.pp * l.vpp)));
  if (l.sequence_parallel) args.push_back("--sequence-parallel");
  if (l.recompute == Recompute::selective) args.push_back("--recompute-granularity selective");
  if (l.recompute == Recompute::full)
    args.push_back("--recompute-granularity full --recompute-method uniform --recompute-num-layers 1");
  if (l.zero >= 1) args.push_back("--use-distributed-optimizer");
  args.push_back("--overlap-grad-reduce");
  // Megatron sizes DDP buckets in parameters; the planner's bucket is bytes of fp32 gradients.
  args.push_back("--ddp-bucket-size " + std::to_string(static_cast<long long>(l.bucket_MB * 1e6 / 4.0)));
  switch (s.training.precision) {
    case Precision::bf16: args.push_back("--bf16"); break;
    case Precision::fp16: args.push_back("--fp16"); break;
    case Precision::fp8: args.push_back("--bf16 --fp8-format hybrid"); break;
  }
  if (s.training.tokens_total > 0)
    args.push_back("--train-samples " + std::to_string(static_cast<long long>(std::ceil(s.training.tokens_total / m.seq_len))));
  if (reliability && reliability->computed) {
    args.push_back("--save-interval " + std::to_string(static_cast<long long>(reliability->interval_steps)));
    // Megatron-LM saves asynchronously only in its distributed checkpoint format.
    if (s.reliability.async_checkpoint) args.push_back("--ckpt-format torch_dist --async-save");
    char note[280];
    std::snprintf(note, sizeof note,
                  "--save-interval: Daly's optimum for a failure every %.2f h across %d GPUs and a %.0f GB checkpoint written in "
                  "%.1f s%s (goodput %.1f%%)",
                  reliability->job_mtbf_s / 3600.0, nodes * G, reliability->checkpoint_bytes / 1e9, reliability->checkpoint_write_s,
                  s.reliability.async_checkpoint ? " in the background" : "", 100 * reliability->goodput);
    out.notes.push_back(note);
  }
  if (s.stragglers.given) {
    // The plan assumed per-GPU speeds: Megatron-LM's straggler detector logs each rank's
    // throughput, which is where a fleet's own spread comes from.
    args.push_back("--log-straggler");
    out.notes.push_back("--log-straggler: the plan assumes stragglers (the scenario's \"stragglers\" block); Megatron-LM's detector logs "
                        "each rank's throughput, to measure the fleet's spread and put it in the scenario");
  }
  {
    std::ostringstream a;
    for (std::size_t i = 0; i < args.size(); ++i) a << "  " << args[i] << (i + 1 < args.size() ? " \\\n" : "\n");
    out.megatron_args = a.str();
  }
  if (m.vocab_divisible_by == 0) {
    // Megatron-LM pads by default (--make-vocab-size-divisible-by 128); the plan did not.
    ModelConfig megatron = m;
    megatron.vocab_divisible_by = 128;
    const int padded = padded_vocab(megatron, l.tp);
    if (padded != m.vocab)
      out.notes.push_back("the plan splits the " + std::to_string(m.vocab) + "-word vocabulary unpadded; Megatron-LM pads it to " +
                          std::to_string(padded) + " (--make-vocab-size-divisible-by 128 x TP), whose output GEMMs can run faster: "
                          "set the model's vocab_divisible_by to 128 to plan for that");
  }
  if (l.zero >= 2) out.notes.push_back("Megatron-LM's distributed optimizer shards optimizer states (ZeRO-1); ZeRO-" + std::to_string(l.zero) + " needs DeepSpeed (config below) or FSDP");
  if (l.compression.kind != Compression::Kind::none)
    out.notes.push_back("Megatron-LM has no gradient compression; " + to_string(l.compression) +
                        " needs DeepSpeed's compressed communication or a DDP communication hook (convergence effects are not simulated)");

  nlohmann::json ds = {{"train_batch_size", gb}, {"train_micro_batch_size_per_gpu", l.micro_batch},
                       {"gradient_accumulation_steps", accum}, {"gradient_clipping", 1.0}};
  if (s.training.precision == Precision::fp16) ds["fp16"] = {{"enabled", true}};
  else ds["bf16"] = {{"enabled", true}};
  const long long bucket_elems = static_cast<long long>(l.bucket_MB * 1e6 / 4.0);
  ds["zero_optimization"] = {{"stage", l.zero}, {"overlap_comm", true}, {"contiguous_gradients", true},
                             {"reduce_bucket_size", bucket_elems}, {"allgather_bucket_size", bucket_elems}};
  if (l.compression.kind == Compression::Kind::fp16) ds["communication_data_type"] = "fp16";
  if (l.compression.kind == Compression::Kind::int8 && l.zero == 3) ds["zero_optimization"]["zero_quantized_gradients"] = true;
  if (l.recompute != Recompute::none)
    ds["activation_checkpointing"] = {{"partition_activations", l.sequence_parallel}, {"contiguous_memory_optimization", false}};
  if (l.tp > 1 || l.pp > 1)
    out.notes.push_back("DeepSpeed needs Megatron-DeepSpeed for TP " + std::to_string(l.tp) + " / PP " + std::to_string(l.pp) +
                        "; with PP, DeepSpeed supports ZeRO-1 only");
  out.deepspeed_config = ds.dump(2);

  std::ostringstream c;
  c << "#SBATCH --nodes=" << nodes << "\n#SBATCH --ntasks-per-node=1\n#SBATCH --gpus-per-node=" << G << "\n"
    << (s.cluster.network.nvls ? "export NCCL_NVLS_ENABLE=1  # NVLink SHARP, as the scenario plans\n"
                               : "export NCCL_NVLS_ENABLE=0  # as the profile was measured\n");
  if (s.cluster.network.allreduce_algorithm != "auto")
    c << "export NCCL_ALGO=allreduce:" << s.cluster.network.allreduce_algorithm << "  # as the scenario forces\n";
  c << "srun torchrun --nnodes=" << nodes << " --nproc-per-node=" << G
    << " --rdzv-backend=c10d --rdzv-endpoint=$(scontrol show hostnames $SLURM_NODELIST | head -1):29500 \\\n"
    << "  pretrain_gpt.py \\\n" << out.megatron_args;
  out.launch_command = c.str();
  return out;
}

}  // namespace trainsim

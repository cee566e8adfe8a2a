#pragma once
#include <map>
#include <string>
#include <vector>

namespace trainsim {

// Where a number came from: measured here, imported from someone's published measurement,
// a vendor datasheet, or derived from another part by a stated rule.
struct Provenance {
  std::string source;  // measured | imported | datasheet | derived
  std::string device;
  int device_count = 0;
  std::string driver, cuda, nccl, date, command;
  std::vector<std::string> device_uuids;  // the cards measured, as nvidia-smi names them ("GPU-...")
  std::string reference;  // citation or rule, for imported / datasheet / derived
  // Across ranks (calibrate --across-nodes): how many, on how many nodes, over which NCCL network
  // and NICs; rank_per_node when every rank was counted as its own node on one host.
  int ranks = 0, nodes = 0, ranks_per_node = 0;
  bool rank_per_node = false;
  std::string network;
  std::vector<std::string> nics;
  // calibrate merge: how the runs were combined, and how many.
  std::string rule;
  int merged_runs = 0;
};

struct GemmPoint {
  double m = 0, n = 0, k = 0;
  double tflops = 0;
};

// Achieved bandwidth of a memory-bound kernel at one working-set size.
struct BandwidthPoint {
  double bytes = 0;
  double GBps = 0;
  double width = 0;  // step kernels: the hidden size they were measured at (0: any)
};

// One collective's fitted alpha-beta model for a group size: t(S) = alpha + S * factor / busbw.
struct CollectiveFit {
  std::string collective;  // all_reduce | all_gather | reduce_scatter | all_to_all | send_recv
  int gpus = 0;
  double alpha_us = 0;
  double busbw_GBps = 0;
  double r2 = 0;
  double max_rel_error = 0;  // of the single line over the fitted sizes
  // Piecewise fit by message size (each within a stated tolerance of its points); empty for a
  // single-line entry.
  struct Segment {
    double min_bytes = 0, max_bytes = 0, alpha_us = 0, busbw_GBps = 0, max_rel_error = 0;
  };
  std::vector<Segment> segments;
  Provenance provenance;
};

// A measured copy between two GPUs of a node, with the link found between them.
struct PeerCopy {
  int src = 0, dst = 0;
  std::string link;  // "NVLink x18", "PCIe (SYS)", "unknown"
  double GBps = 0;
  bool peer_access = false;
};

// gpu.gemm_tflops's table of bf16 GEMMs accumulated into an fp32 output (beta = 1): the weight
// gradients of a mixed-precision step, which add into the fp32 gradient buffer.
inline constexpr const char* kGemmAccumulateFp32 = "bf16_accumulate_fp32";

struct HardwareProfile {
  std::string name;
  std::string description;
  Provenance provenance;

  // Compute.
  // Device memory a training process can allocate: CUDA's total where measured. A datasheet or
  // derived profile gives the vendor's figure (as nvidia-smi reports it) in its file, and a derived
  // one's is carried to CUDA's by the rule of models/carry_over.cpp.
  double memory_bytes = 0;
  // The vendor's figure, as nvidia-smi reports it (0 where the file gives none): above
  // memory_bytes by what the driver keeps for itself.
  double datasheet_memory_bytes = 0;
  std::map<std::string, double> peak_tflops;      // vendor dense figures by dtype
  std::map<std::string, double> measured_tflops;  // best rate calibration achieved
  double memory_bandwidth_GBps = 0;               // achieved device copy, read + write
  double datasheet_memory_bandwidth_GBps = 0;     // vendor figure
  double kernel_launch_us = 0;
  // Achieved rate by shape, per dtype (and kGemmAccumulateFp32 beside them, where measured).
  std::map<std::string, std::vector<GemmPoint>> gemm;
  double attention_fwd_fraction = 0;  // achieved attention forward FLOP rate / bf16 peak (median)
  double attention_bwd_fraction = 0;
  struct AttentionPoint {
    double batch_heads = 0, seq = 0, head_dim = 0, fwd_fraction = 0, bwd_fraction = 0;
    double kv_group = 1;  // query heads per K/V head
    bool dropout = true;  // dropout on the probabilities (gpt-style)
  };
  std::vector<AttentionPoint> attention;  // by shape, when measured
  std::vector<BandwidthPoint> memory_bound;  // elementwise kernels: achieved GB/s by bytes moved
  // Measured kernels of a training step, by kernel class: achieved GB/s (the model's byte count
  // for the op over its measured time) at the sizes and hidden sizes measured.
  std::map<std::string, std::vector<BandwidthPoint>> memory_kernels;
  Provenance compute_provenance;

  // Host link.
  double h2d_GBps = 0, d2h_GBps = 0;

  // Device memory a training process holds besides its tensors (0: not measured).
  double context_bytes = 0;                    // CUDA context, cuBLAS, loaded kernels
  double nccl_first_communicator_bytes = 0;    // the first NCCL communicator a rank creates
  double nccl_further_communicator_bytes = 0;  // each further one
  Provenance runtime_memory_provenance;

  // Power: a node's (the NVLink domain's) maximum input power, datasheet (0: not given).
  double node_max_kW = 0;
  Provenance power_provenance;
  // The SM clock: the highest the part runs (the one its kernels were timed at), and how the
  // step's element-wise kernels stretch below it at the power cap: 1 + s (max_sm_mhz / f - 1)
  // times their time at a median SM clock f (`clock`; s = -1 where not measured). The simulator
  // does not know the clock a step will hold; validation applies this at a run's measured clock.
  double max_sm_mhz = 0;
  double elementwise_clock_sensitivity = -1;
  Provenance clock_provenance;
  // The rule above: how many times its burst time an element-wise kernel takes at SM clock f
  // (1 where the profile has no sensitivity or f is at the maximum or above).
  double elementwise_clock_factor(double f_mhz) const {
    if (elementwise_clock_sensitivity < 0 || !(f_mhz > 0) || f_mhz >= max_sm_mhz) return 1.0;
    return 1.0 + elementwise_clock_sensitivity * (max_sm_mhz / f_mhz - 1.0);
  }
  // The clock a mix of kernels holds under the power limit (`clock.power_model`, read off the
  // part's kernel-mix sweeps; models/power_model.h uses it): each kind of kernel's power alone at
  // the highest clock, GEMMs and attention by their rate alone (TFLOP/s, ascending), the power
  // limit the sweeps ran under, and the line through their capped mixes, clock = line_mhz +
  // line_mhz_per_w x (the power the mix would draw at the highest clock), which holds only above
  // the limit (tools/power_rule.py fits it through the highest clock at the limit). memory_bound_w is the power of a Llama-style layer's element-wise kernels (the
  // sweeps' share-0 mixes); memory_bound_w_gpt, where measured, a GPT-style layer's (LayerNorm,
  // bias and GeLU, dropout: they draw less), with its own provenance. Empty where not measured.
  struct ClockPowerModel {
    double limit_w = 0, memory_bound_w = 0;
    double memory_bound_w_gpt = 0;  // 0: not measured, memory_bound_w stands for it
    Provenance memory_bound_gpt_provenance;
    std::vector<std::pair<double, double>> gemm_w, attention_w;
    double line_mhz = 0, line_mhz_per_w = 0;
    Provenance provenance;
  } clock_power;
  bool has_clock_power_model() const { return !clock_power.gemm_w.empty(); }

  // Inside a node.
  std::string intra_link;  // nvlink3 | nvlink4 | pcie4 | pcie5 ...
  int gpus_per_node = 8;
  double intra_link_GBps = 0;     // per GPU, per direction, datasheet
  double intra_busbw_GBps = 0;    // achievable ring bus bandwidth (the per-GPU port capacity the
                                  // simulator uses)
  double intra_latency_us = 0;    // per ring step
  std::vector<CollectiveFit> intra_collectives;
  // Collectives inside a node with NCCL's defaults and NVLink SHARP (NVLS) on, by kind and group
  // size (intra_node.nvls_collectives, usually imported): where a scenario turns NVLS on they take
  // the place of the entries above for their kind and size.
  std::vector<CollectiveFit> intra_nvls_collectives;
  std::vector<PeerCopy> peer_copies;
  Provenance intra_provenance;

  // Between nodes.
  int nics_per_node = 8;
  double nic_Gbps = 0;
  double nic_efficiency = 0;   // achievable fraction of line rate for NCCL traffic
  double inter_latency_us = 0; // per step across the network
  // Collectives measured with one rank per node (calibrate --across-nodes), by group size.
  std::vector<CollectiveFit> inter_collectives;
  Provenance inter_provenance;

  // Compression kernels: achieved throughput over the fp32/bf16 gradient bytes they read.
  double int8_quantize_GBps = 0;
  double topk_select_GBps = 0;
  // Fractional GEMM slowdown while a communication kernel runs beside it (0.05 = 5% slower).
  double comm_compute_interference = 0;
  // The same beside point-to-point traffic (pipeline transfers); -1 where not measured: they take
  // comm_compute_interference.
  double p2p_compute_interference = -1;
  double pipeline_transfer_interference() const {
    return p2p_compute_interference >= 0 ? p2p_compute_interference : comm_compute_interference;
  }
  // Adam update: achieved bandwidth over the bytes it moves (the memory-bound table otherwise).

  double peak(const std::string& dtype) const;
};

// Loads and validates a profile; `name_or_path` is either a name resolved in `profile_dir`
// (NAME.json) or a path to a file. Profiles may say `"derive_from": "other-name"` to carry over
// efficiency tables from a calibrated part (the rule of carry_over.h), resolved in that profile's
// folder.
HardwareProfile load_hardware_profile(const std::string& name_or_path, const std::string& profile_dir);
HardwareProfile parse_hardware_profile(const std::string& json_text, const std::string& file,
                                       const std::string& profile_dir);
// The default directory of shipped profiles (set at build time, overridable by TRAINSIM_PROFILES).
std::string default_profile_dir();

}  // namespace trainsim

#pragma once
// Failures and checkpoints over a long run. A synchronous training job stops when any of its GPUs
// or nodes fails, restarts from its last checkpoint and redoes the work since. With exponentially
// distributed failures, a checkpoint of delta seconds every tau seconds of work and a restart of R
// seconds, the expected wall-clock time per second of work is (Daly 2006)
//     T_wall / T_work = M e^(R/M) (e^((tau + delta)/M) - 1) / tau,   M = the job's MTBF,
// and the interval that minimises it is, to higher order than Young's sqrt(2 delta M),
//     tau = sqrt(2 delta M) (1 + sqrt(delta/(2M))/3 + delta/(18M)) - delta   for delta < 2M, else M.
// (J. T. Daly, "A higher order estimate of the optimum checkpoint interval for restart dumps",
// Future Generation Computer Systems 22(3), 2006.) Goodput is T_work / T_wall.
//
// An asynchronous checkpoint (Megatron-LM's async save, PyTorch DCP's async_save) stops training
// only while each GPU copies its share of the checkpoint to host memory (delta = the blocking copy);
// the write to storage, W seconds, runs in the background, and a checkpoint counts once written.
// A failure within W of a checkpoint's start rolls back to the one before, a whole interval more:
// for failures spread evenly over the interval that is W more rework per failure, so the formula
// above holds with R + W in place of R, and with tau >= W (a save starts once the last is written).

namespace trainsim {

struct ReliabilitySpec {
  bool given = false;
  double gpu_mtbf_hours = 0;   // per GPU (with its share of the host); 0: not counted
  double node_mtbf_hours = 0;  // per node, failures not tied to one GPU; 0: not counted
  double checkpoint_GBps = 0;  // aggregate storage rate, for writing and reading checkpoints
  double restart_minutes = 0;  // detection, rescheduling and start-up, before the checkpoint is read
  bool async_checkpoint = false;
};

struct ReliabilityResult {
  double job_mtbf_s = 0;
  double checkpoint_bytes = 0;
  double checkpoint_write_s = 0;     // to storage
  double checkpoint_blocking_s = 0;  // delta: training stopped (the write, or the copy to host memory)
  double restart_s = 0;              // restart plus reading the checkpoint back
  double rework_s = 0;               // R: restart_s, plus the write for an asynchronous checkpoint
  double interval_steps = 0;      // whole steps between checkpoints
  double interval_s = 0;          // tau: that many steps of work
  double goodput = 0;             // fraction of wall-clock time that is useful work (0: never done)
  bool computed = false;
};

// What a checkpoint holds: bf16 weights (2 bytes per parameter) and the fp32 master weights,
// momentum and variance (12), written once for the whole model however it is sharded.
double checkpoint_bytes(double params);
// Daly's optimum interval of work between checkpoints.
double daly_interval_s(double checkpoint_s, double mtbf_s);
// Expected wall-clock seconds per second of work at interval `interval_s`.
double daly_wall_per_work(double interval_s, double checkpoint_s, double restart_s, double mtbf_s);
// The job's figures at `gpus` GPUs on `nodes` nodes, checkpointing at whole steps of `step_s`;
// `d2h_GBps`, one GPU's copy rate to host memory, times an asynchronous checkpoint's blocking copy
// (each GPU copies an equal share, as fully parallel saving spreads it).
ReliabilityResult reliability_for(const ReliabilitySpec& spec, int gpus, int nodes, double params, double step_s,
                                  double d2h_GBps = 0);

}  // namespace trainsim

#pragma once
#include <functional>
#include <vector>

#include "measurements.h"

namespace trainsim::gpu {

// NCCL collectives in one process over the first `gpus` devices (ncclCommInitAll), from 8 B to
// `max_bytes`, each size checked against the expected sums (the `wrong` count).
std::vector<CollectiveSample> bench_collectives(int gpus, double max_bytes, bool quick);
// NCCL's unique id as plain bytes, so that host code can pass it through MPI without nccl.h.
struct NcclId {
  char bytes[128];
};
NcclId new_nccl_id();
// The same sweep as one rank of an `nranks`-rank communicator spanning processes (and nodes), on
// `device`; every rank calls it with the same id. Times are this rank's; the caller reduces them
// (maximum) and the wrong counts (sum) across ranks. `after_init` runs on every rank once the
// communicator exists (NCCL has chosen its transport); returning false stops before the sweep.
std::vector<CollectiveSample> bench_collectives_rank(const NcclId& id, int nranks, int rank, int device, double max_bytes,
                                                     bool quick, const std::function<bool()>& after_init);
// Fractional slowdown of a large bf16 GEMM on GPU 0 while an all-reduce loop runs on all GPUs.
double bench_interference(int gpus);
// The same while GPUs 0 and 1 exchange point-to-point messages both ways (NCCL send/recv), as
// pipeline stages do. -1 with fewer than two GPUs.
double bench_p2p_interference(int gpus);

}  // namespace trainsim::gpu

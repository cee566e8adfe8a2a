#pragma once
// How the step runner sums data-parallel gradient buckets across replicas: over NCCL (one process
// per GPU), or through host memory with a caller-supplied host all-reduce (MPI), for replicas that
// share a GPU and so cannot join one NCCL communicator. The host path is for checking numerics;
// its timing says nothing about a real interconnect.
#include <cstddef>
#include <functional>
#include <memory>

#include "nccl_bench.h"

namespace trainsim::gpu {

class GradComm {
 public:
  virtual ~GradComm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual bool timing_is_real() const = 0;
  // Sums `count` floats at device address `buf` across replicas, in place, on `stream` (a
  // cudaStream_t) after the work already queued there.
  virtual void all_reduce_sum(float* buf, std::size_t count, void* stream) = 0;
};

// Every rank calls it with the same id, on its own GPU (`device`).
std::unique_ptr<GradComm> make_nccl_grad_comm(const NcclId& id, int nranks, int rank, int device);
// `host_all_reduce(buf, count)` sums `count` floats at host address `buf` across replicas in place.
std::unique_ptr<GradComm> make_host_grad_comm(int rank, int size, std::function<void(float*, std::size_t)> host_all_reduce);

}  // namespace trainsim::gpu

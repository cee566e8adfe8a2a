#pragma once
// The step runner's communication within one group of ranks (data-parallel replicas, a
// tensor-parallel group, a pipeline): over NCCL (one process per GPU), or through host memory with
// caller-supplied host collectives (MPI), for ranks that share a GPU and so cannot join one NCCL
// communicator. The host path is for checking numerics; its timing says nothing about a real
// interconnect.
#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "cuda_compat.h"
#include "nccl_bench.h"

namespace trainsim::gpu {

// One point-to-point message: `bytes` at `buf` (device memory for GradComm, host memory for
// HostCollectives), to or from group rank `peer`.
struct P2pMessage {
  void* buf = nullptr;
  std::size_t bytes = 0;
  int peer = -1;
};

class GradComm {
 public:
  virtual ~GradComm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual bool timing_is_real() const = 0;
  // Sums `count` floats at device address `buf` across replicas, in place, on `stream` (a
  // cudaStream_t) after the work already queued there.
  virtual void all_reduce_sum(float* buf, std::size_t count, void* stream) = 0;
  // Sums `count` x size floats at `send` across replicas; rank r gets block r at `recv` (which may be
  // send + r * count: in place).
  virtual void reduce_scatter_sum(const float* send, float* recv, std::size_t count, void* stream) = 0;
  // Rank r's block j (`bytes` each, device memory) goes to rank j's block r.
  virtual void all_to_all(const void* send, void* recv, std::size_t bytes, void* stream) = 0;
  // Every rank's block (`bytes`) lands at recv + rank * bytes on every rank.
  virtual void all_gather(const void* send, void* recv, std::size_t bytes, void* stream) = 0;
  // Sums `count` bf16 values in place (tensor-parallel partial results).
  virtual void all_reduce_bf16_sum(void* buf, std::size_t count, void* stream) = 0;
  // Point to point, all posted together so that neighbours sending to each other do not wait on
  // each other.
  virtual void send_recv(const std::vector<P2pMessage>& sends, const std::vector<P2pMessage>& recvs, void* stream) = 0;
  // A sub-group (collective over this group): ranks with the same color, ordered by key. color < 0:
  // this rank joins none, and gets nullptr.
  virtual std::unique_ptr<GradComm> split(int color, int key) = 0;
};

// Host-side collectives for replicas that share a GPU (MPI through host memory).
struct HostCollectives {
  std::function<void(float*, std::size_t)> all_reduce_sum;
  std::function<void(const float*, float*, std::size_t)> reduce_scatter_sum;  // count per rank
  std::function<void(const void*, void*, std::size_t)> all_to_all;  // bytes per rank
  std::function<void(const void*, void*, std::size_t)> all_gather;  // bytes per rank
  // (sends, receives), in host memory, all posted together.
  std::function<void(const std::vector<P2pMessage>&, const std::vector<P2pMessage>&)> send_recv;
  // (color, key, out collectives, out rank, out size): a sub-group, as GradComm::split; size 0: none.
  std::function<void(int, int, HostCollectives*, int*, int*)> split;
};

// INT8 all-reduce of `count` floats in place: blockwise absmax quantisation, an all-to-all of the
// quantised chunks, each rank dequantises and sums its chunk in fp32 and quantises the sum, then an
// all-gather. Each rank sends 2 (n-1)/n of a quarter of the fp32 bytes, as a ring all-reduce of int8
// would, and every value is quantised twice.
class Int8AllReduce {
 public:
  void run(GradComm& comm, float* buf, std::size_t count, void* stream);
  // Allocates now what a run of up to `count` floats over `n` ranks needs (throws
  // DeviceOutOfMemory where it does not fit); run allocates it itself otherwise.
  void reserve(std::size_t count, int n);

 private:
  std::size_t cap_ = 0;
  int n_ = 0;
  DeviceBuffer q_, q_recv_, s_, s_recv_, acc_;  // int8 values, fp32 block scales, this rank's fp32 sum
};

// Every rank calls it with the same id, on its own GPU (`device`).
std::unique_ptr<GradComm> make_nccl_grad_comm(const NcclId& id, int nranks, int rank, int device);
std::unique_ptr<GradComm> make_host_grad_comm(int rank, int size, HostCollectives host);

// Top-K with error feedback for one bucket of `count` floats: each replica keeps the `fraction`
// largest of gradient + residual (the rest stays in `residual` for the next step), all replicas
// all-gather the kept values and their indices (fp32 + int32: 2 x fraction x the fp32 bytes from
// each, as the simulator charges), and the bucket becomes the sum of everyone's kept values, added
// rank by rank so that every replica sums in the same order.
class TopKAllGather {
 public:
  void run(GradComm& comm, float* buf, float* residual, std::size_t count, double fraction, void* stream);
  // As Int8AllReduce::reserve, for buckets of up to `count` floats at `fraction`.
  void reserve(std::size_t count, int n, double fraction);

 private:
  std::size_t cap_ = 0;
  int n_ = 0;
  DeviceBuffer vals_, idx_, all_vals_, all_idx_, scratch_, counter_;
};

}  // namespace trainsim::gpu

#include "grad_comm.h"

#include <cstring>
#include <vector>

#include "cuda_compat.h"

namespace trainsim::gpu {

namespace {

class NcclGradComm : public GradComm {
 public:
  NcclGradComm(const NcclId& id, int nranks, int rank, int device) : rank_(rank), size_(nranks) {
    ncclUniqueId uid;
    static_assert(sizeof(uid.internal) == sizeof(id.bytes), "ncclUniqueId size");
    std::memcpy(uid.internal, id.bytes, sizeof(id.bytes));
    TRAINSIM_CUDA(cudaSetDevice(device));
    TRAINSIM_NCCL(ncclCommInitRank(&comm_, nranks, uid, rank));
  }
  ~NcclGradComm() override { ncclCommDestroy(comm_); }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool timing_is_real() const override { return true; }
  void all_reduce_sum(float* buf, std::size_t count, void* stream) override {
    TRAINSIM_NCCL(ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm_, static_cast<cudaStream_t>(stream)));
  }

 private:
  int rank_, size_;
  ncclComm_t comm_ = nullptr;
};

class HostGradComm : public GradComm {
 public:
  HostGradComm(int rank, int size, std::function<void(float*, std::size_t)> f) : rank_(rank), size_(size), f_(std::move(f)) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool timing_is_real() const override { return false; }
  void all_reduce_sum(float* buf, std::size_t count, void* stream) override {
    auto st = static_cast<cudaStream_t>(stream);
    host_.resize(count);
    TRAINSIM_CUDA(cudaMemcpyAsync(host_.data(), buf, count * sizeof(float), cudaMemcpyDeviceToHost, st));
    TRAINSIM_CUDA(cudaStreamSynchronize(st));
    f_(host_.data(), count);
    TRAINSIM_CUDA(cudaMemcpyAsync(buf, host_.data(), count * sizeof(float), cudaMemcpyHostToDevice, st));
    TRAINSIM_CUDA(cudaStreamSynchronize(st));
  }

 private:
  int rank_, size_;
  std::function<void(float*, std::size_t)> f_;
  std::vector<float> host_;
};

}  // namespace

std::unique_ptr<GradComm> make_nccl_grad_comm(const NcclId& id, int nranks, int rank, int device) {
  return std::make_unique<NcclGradComm>(id, nranks, rank, device);
}

std::unique_ptr<GradComm> make_host_grad_comm(int rank, int size, std::function<void(float*, std::size_t)> f) {
  return std::make_unique<HostGradComm>(rank, size, std::move(f));
}

}  // namespace trainsim::gpu

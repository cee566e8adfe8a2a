#include "grad_comm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "compression.h"
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
  void reduce_scatter_sum(const float* send, float* recv, std::size_t count, void* stream) override {
    TRAINSIM_NCCL(ncclReduceScatter(send, recv, count, ncclFloat, ncclSum, comm_, static_cast<cudaStream_t>(stream)));
  }
  void all_to_all(const void* send, void* recv, std::size_t bytes, void* stream) override {
    auto st = static_cast<cudaStream_t>(stream);
    TRAINSIM_NCCL(ncclGroupStart());
    for (int j = 0; j < size_; ++j) {
      TRAINSIM_NCCL(ncclSend(static_cast<const char*>(send) + j * bytes, bytes, ncclInt8, j, comm_, st));
      TRAINSIM_NCCL(ncclRecv(static_cast<char*>(recv) + j * bytes, bytes, ncclInt8, j, comm_, st));
    }
    TRAINSIM_NCCL(ncclGroupEnd());
  }
  void all_gather(const void* send, void* recv, std::size_t bytes, void* stream) override {
    TRAINSIM_NCCL(ncclAllGather(send, recv, bytes, ncclInt8, comm_, static_cast<cudaStream_t>(stream)));
  }

 private:
  int rank_, size_;
  ncclComm_t comm_ = nullptr;
};

class HostGradComm : public GradComm {
 public:
  HostGradComm(int rank, int size, HostCollectives h) : rank_(rank), size_(size), h_(std::move(h)) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool timing_is_real() const override { return false; }
  void all_reduce_sum(float* buf, std::size_t count, void* stream) override {
    auto st = static_cast<cudaStream_t>(stream);
    host_.resize(count);
    TRAINSIM_CUDA(cudaMemcpyAsync(host_.data(), buf, count * sizeof(float), cudaMemcpyDeviceToHost, st));
    TRAINSIM_CUDA(cudaStreamSynchronize(st));
    h_.all_reduce_sum(host_.data(), count);
    TRAINSIM_CUDA(cudaMemcpyAsync(buf, host_.data(), count * sizeof(float), cudaMemcpyHostToDevice, st));
    TRAINSIM_CUDA(cudaStreamSynchronize(st));
  }
  void reduce_scatter_sum(const float* send, float* recv, std::size_t count, void* stream) override {
    auto st = static_cast<cudaStream_t>(stream);
    host_.resize(count * size_);
    TRAINSIM_CUDA(cudaMemcpyAsync(host_.data(), send, count * size_ * sizeof(float), cudaMemcpyDeviceToHost, st));
    TRAINSIM_CUDA(cudaStreamSynchronize(st));
    std::vector<float> mine(count);
    h_.reduce_scatter_sum(host_.data(), mine.data(), count);
    TRAINSIM_CUDA(cudaMemcpyAsync(recv, mine.data(), count * sizeof(float), cudaMemcpyHostToDevice, st));
    TRAINSIM_CUDA(cudaStreamSynchronize(st));
  }
  void all_to_all(const void* send, void* recv, std::size_t bytes, void* stream) override {
    exchange(send, recv, bytes * size_, bytes * size_, stream, h_.all_to_all, bytes);
  }
  void all_gather(const void* send, void* recv, std::size_t bytes, void* stream) override {
    exchange(send, recv, bytes, bytes * size_, stream, h_.all_gather, bytes);
  }

 private:
  void exchange(const void* send, void* recv, std::size_t in_bytes, std::size_t out_bytes, void* stream,
                const std::function<void(const void*, void*, std::size_t)>& f, std::size_t per_rank) {
    auto st = static_cast<cudaStream_t>(stream);
    in_.resize(in_bytes);
    out_.resize(out_bytes);
    TRAINSIM_CUDA(cudaMemcpyAsync(in_.data(), send, in_bytes, cudaMemcpyDeviceToHost, st));
    TRAINSIM_CUDA(cudaStreamSynchronize(st));
    f(in_.data(), out_.data(), per_rank);
    TRAINSIM_CUDA(cudaMemcpyAsync(recv, out_.data(), out_bytes, cudaMemcpyHostToDevice, st));
    TRAINSIM_CUDA(cudaStreamSynchronize(st));
  }
  int rank_, size_;
  HostCollectives h_;
  std::vector<float> host_;
  std::vector<char> in_, out_;
};

}  // namespace

std::unique_ptr<GradComm> make_nccl_grad_comm(const NcclId& id, int nranks, int rank, int device) {
  return std::make_unique<NcclGradComm>(id, nranks, rank, device);
}

std::unique_ptr<GradComm> make_host_grad_comm(int rank, int size, HostCollectives h) {
  return std::make_unique<HostGradComm>(rank, size, std::move(h));
}

Int8AllReduce::~Int8AllReduce() { release(); }

void Int8AllReduce::release() {
  for (void* p : {static_cast<void*>(q_), static_cast<void*>(q_recv_), static_cast<void*>(s_), static_cast<void*>(s_recv_),
                  static_cast<void*>(acc_)})
    if (p) cudaFree(p);
  q_ = q_recv_ = nullptr;
  s_ = s_recv_ = acc_ = nullptr;
  cap_ = 0;
}

void Int8AllReduce::reserve(std::size_t padded, int n) {
  if (padded <= cap_ && n == n_) return;
  release();
  cap_ = padded;
  n_ = n;
  const std::size_t blocks = padded / kQuantBlock;
  TRAINSIM_CUDA(cudaMalloc(&q_, padded));
  TRAINSIM_CUDA(cudaMalloc(&q_recv_, padded));
  TRAINSIM_CUDA(cudaMalloc(&s_, blocks * sizeof(float)));
  TRAINSIM_CUDA(cudaMalloc(&s_recv_, blocks * sizeof(float)));
  TRAINSIM_CUDA(cudaMalloc(&acc_, padded / n * sizeof(float)));
}

void Int8AllReduce::run(GradComm& comm, float* buf, std::size_t count, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  const int n = comm.size();
  // Chunks of whole quantisation blocks, one per rank; the padding quantises to zero.
  const std::size_t unit = static_cast<std::size_t>(kQuantBlock) * n;
  const std::size_t padded = (count + unit - 1) / unit * unit, chunk = padded / n, cblocks = chunk / kQuantBlock;
  reserve(padded, n);
  TRAINSIM_CUDA(cudaMemsetAsync(acc_, 0, chunk * sizeof(float), st));
  int8_quantize(buf, q_, s_, count, st);
  if (padded > count) {
    // The padding past `count`, which the quantiser does not write: values 0, scales 0.
    const std::size_t b0 = (count + kQuantBlock - 1) / kQuantBlock;
    TRAINSIM_CUDA(cudaMemsetAsync(q_ + count, 0, padded - count, st));
    TRAINSIM_CUDA(cudaMemsetAsync(s_ + b0, 0, (padded / kQuantBlock - b0) * sizeof(float), st));
  }
  comm.all_to_all(q_, q_recv_, chunk, st);
  comm.all_to_all(s_, s_recv_, cblocks * sizeof(float), st);
  for (int j = 0; j < n; ++j) int8_dequantize_add(q_recv_ + j * chunk, s_recv_ + j * cblocks, acc_, chunk, st);
  int8_quantize(acc_, q_, s_, chunk, st);
  comm.all_gather(q_, q_recv_, chunk, st);
  comm.all_gather(s_, s_recv_, cblocks * sizeof(float), st);
  int8_dequantize(q_recv_, s_recv_, buf, count, st);
}

TopKAllGather::~TopKAllGather() { release(); }

void TopKAllGather::release() {
  for (void* p : {static_cast<void*>(vals_), static_cast<void*>(all_vals_), sample_, static_cast<void*>(idx_),
                  static_cast<void*>(all_idx_), static_cast<void*>(counter_)})
    if (p) cudaFree(p);
  vals_ = all_vals_ = nullptr;
  sample_ = nullptr;
  idx_ = all_idx_ = counter_ = nullptr;
  cap_ = 0;
}

void TopKAllGather::reserve(std::size_t capacity, int n) {
  if (capacity <= cap_ && n == n_) return;
  release();
  cap_ = capacity;
  n_ = n;
  TRAINSIM_CUDA(cudaMalloc(&vals_, capacity * sizeof(float)));
  TRAINSIM_CUDA(cudaMalloc(&idx_, capacity * sizeof(int)));
  TRAINSIM_CUDA(cudaMalloc(&all_vals_, capacity * n * sizeof(float)));
  TRAINSIM_CUDA(cudaMalloc(&all_idx_, capacity * n * sizeof(int)));
  TRAINSIM_CUDA(cudaMalloc(&sample_, topk_device_scratch_bytes()));
  TRAINSIM_CUDA(cudaMalloc(&counter_, sizeof(int)));
}

void TopKAllGather::run(GradComm& comm, float* buf, float* residual, std::size_t count, double fraction, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  const int n = comm.size();
  const std::size_t capacity = std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil(fraction * count)));
  reserve(capacity, n);
  // Unused slots: index -1, value 0.
  TRAINSIM_CUDA(cudaMemsetAsync(idx_, 0xFF, capacity * sizeof(int), st));
  TRAINSIM_CUDA(cudaMemsetAsync(vals_, 0, capacity * sizeof(float), st));
  topk_error_feedback_async(buf, residual, vals_, idx_, capacity, count, fraction, sample_, counter_, st);
  comm.all_gather(vals_, all_vals_, capacity * sizeof(float), st);
  comm.all_gather(idx_, all_idx_, capacity * sizeof(int), st);
  TRAINSIM_CUDA(cudaMemsetAsync(buf, 0, count * sizeof(float), st));
  for (int r = 0; r < n; ++r) scatter_add(all_vals_ + r * capacity, all_idx_ + r * capacity, capacity, buf, st);
}

}  // namespace trainsim::gpu

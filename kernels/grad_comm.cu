#include "grad_comm.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
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
  void all_reduce_bf16_sum(void* buf, std::size_t count, void* stream) override {
    TRAINSIM_NCCL(ncclAllReduce(buf, buf, count, ncclBfloat16, ncclSum, comm_, static_cast<cudaStream_t>(stream)));
  }
  void send_recv(const std::vector<P2pMessage>& sends, const std::vector<P2pMessage>& recvs, void* stream) override {
    auto st = static_cast<cudaStream_t>(stream);
    TRAINSIM_NCCL(ncclGroupStart());
    for (const auto& m : sends) TRAINSIM_NCCL(ncclSend(m.buf, m.bytes, ncclInt8, m.peer, comm_, st));
    for (const auto& m : recvs) TRAINSIM_NCCL(ncclRecv(m.buf, m.bytes, ncclInt8, m.peer, comm_, st));
    TRAINSIM_NCCL(ncclGroupEnd());
  }
  std::unique_ptr<GradComm> split(int color, int key) override {
    ncclComm_t sub = nullptr;
    TRAINSIM_NCCL(ncclCommSplit(comm_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &sub, nullptr));
    if (color < 0) return nullptr;
    return std::unique_ptr<GradComm>(new NcclGradComm(sub));
  }

 private:
  explicit NcclGradComm(ncclComm_t c) : comm_(c) {
    TRAINSIM_NCCL(ncclCommUserRank(c, &rank_));
    TRAINSIM_NCCL(ncclCommCount(c, &size_));
  }
  int rank_ = 0, size_ = 1;
  ncclComm_t comm_ = nullptr;
};

uint16_t to_bf16_bits(float x) {  // round to nearest even, as __float2bfloat16
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN stays NaN
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
float from_bf16_bits(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

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
  void all_reduce_bf16_sum(void* buf, std::size_t count, void* stream) override {
    auto st = static_cast<cudaStream_t>(stream);
    std::vector<uint16_t> bits(count);
    TRAINSIM_CUDA(cudaMemcpyAsync(bits.data(), buf, count * 2, cudaMemcpyDeviceToHost, st));
    TRAINSIM_CUDA(cudaStreamSynchronize(st));
    host_.resize(count);
    for (std::size_t i = 0; i < count; ++i) host_[i] = from_bf16_bits(bits[i]);
    h_.all_reduce_sum(host_.data(), count);
    for (std::size_t i = 0; i < count; ++i) bits[i] = to_bf16_bits(host_[i]);
    TRAINSIM_CUDA(cudaMemcpyAsync(buf, bits.data(), count * 2, cudaMemcpyHostToDevice, st));
    TRAINSIM_CUDA(cudaStreamSynchronize(st));
  }
  void send_recv(const std::vector<P2pMessage>& sends, const std::vector<P2pMessage>& recvs, void* stream) override {
    auto st = static_cast<cudaStream_t>(stream);
    std::vector<std::vector<char>> in(sends.size()), out(recvs.size());
    std::vector<P2pMessage> hs(sends), hr(recvs);
    for (std::size_t i = 0; i < sends.size(); ++i) {
      in[i].resize(sends[i].bytes);
      TRAINSIM_CUDA(cudaMemcpyAsync(in[i].data(), sends[i].buf, sends[i].bytes, cudaMemcpyDeviceToHost, st));
      hs[i].buf = in[i].data();
    }
    for (std::size_t i = 0; i < recvs.size(); ++i) {
      out[i].resize(recvs[i].bytes);
      hr[i].buf = out[i].data();
    }
    TRAINSIM_CUDA(cudaStreamSynchronize(st));
    h_.send_recv(hs, hr);
    for (std::size_t i = 0; i < recvs.size(); ++i)
      TRAINSIM_CUDA(cudaMemcpyAsync(recvs[i].buf, out[i].data(), recvs[i].bytes, cudaMemcpyHostToDevice, st));
    TRAINSIM_CUDA(cudaStreamSynchronize(st));
  }
  std::unique_ptr<GradComm> split(int color, int key) override {
    HostCollectives sub;
    int rank = 0, size = 0;
    h_.split(color, key, &sub, &rank, &size);
    if (size == 0) return nullptr;
    return std::make_unique<HostGradComm>(rank, size, std::move(sub));
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

namespace {

// Chunks of whole quantisation blocks, one per rank; the padding quantises to zero.
std::size_t int8_padded(std::size_t count, int n) {
  const std::size_t unit = static_cast<std::size_t>(kQuantBlock) * n;
  return (count + unit - 1) / unit * unit;
}

std::size_t topk_capacity(std::size_t count, double fraction) {
  return std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil(fraction * count)));
}

}  // namespace

void Int8AllReduce::reserve(std::size_t count, int n) {
  const std::size_t padded = int8_padded(count, n);
  if (padded <= cap_ && n == n_) return;
  cap_ = padded;
  n_ = n;
  q_ = DeviceBuffer(padded);
  q_recv_ = DeviceBuffer(padded);
  s_ = DeviceBuffer(padded / kQuantBlock * sizeof(float));
  s_recv_ = DeviceBuffer(padded / kQuantBlock * sizeof(float));
  acc_ = DeviceBuffer(padded / n * sizeof(float));
}

void Int8AllReduce::run(GradComm& comm, float* buf, std::size_t count, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  const int n = comm.size();
  const std::size_t padded = int8_padded(count, n), chunk = padded / n, cblocks = chunk / kQuantBlock;
  reserve(count, n);
  auto* q = q_.get<signed char>();
  auto* q_recv = q_recv_.get<signed char>();
  auto* sc = s_.get<float>();
  auto* sc_recv = s_recv_.get<float>();
  auto* acc = acc_.get<float>();
  TRAINSIM_CUDA(cudaMemsetAsync(acc, 0, chunk * sizeof(float), st));
  int8_quantize(buf, q, sc, count, st);
  if (padded > count) {
    // The padding past `count`, which the quantiser does not write: values 0, scales 0.
    const std::size_t b0 = (count + kQuantBlock - 1) / kQuantBlock;
    TRAINSIM_CUDA(cudaMemsetAsync(q + count, 0, padded - count, st));
    TRAINSIM_CUDA(cudaMemsetAsync(sc + b0, 0, (padded / kQuantBlock - b0) * sizeof(float), st));
  }
  comm.all_to_all(q, q_recv, chunk, st);
  comm.all_to_all(sc, sc_recv, cblocks * sizeof(float), st);
  for (int j = 0; j < n; ++j) int8_dequantize_add(q_recv + j * chunk, sc_recv + j * cblocks, acc, chunk, st);
  int8_quantize(acc, q, sc, chunk, st);
  comm.all_gather(q, q_recv, chunk, st);
  comm.all_gather(sc, sc_recv, cblocks * sizeof(float), st);
  int8_dequantize(q_recv, sc_recv, buf, count, st);
}

void TopKAllGather::reserve(std::size_t count, int n, double fraction) {
  const std::size_t capacity = topk_capacity(count, fraction);
  if (capacity <= cap_ && n == n_) return;
  cap_ = capacity;
  n_ = n;
  vals_ = DeviceBuffer(capacity * sizeof(float));
  idx_ = DeviceBuffer(capacity * sizeof(int));
  all_vals_ = DeviceBuffer(capacity * n * sizeof(float));
  all_idx_ = DeviceBuffer(capacity * n * sizeof(int));
  scratch_ = DeviceBuffer(topk_device_scratch_bytes());
  counter_ = DeviceBuffer(sizeof(int));
}

void TopKAllGather::run(GradComm& comm, float* buf, float* residual, std::size_t count, double fraction, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  const int n = comm.size();
  const std::size_t capacity = topk_capacity(count, fraction);
  reserve(count, n, fraction);
  float* vals = vals_.get<float>();
  float* all_vals = all_vals_.get<float>();
  int* idx = idx_.get<int>();
  int* all_idx = all_idx_.get<int>();
  // Unused slots: index -1, value 0.
  TRAINSIM_CUDA(cudaMemsetAsync(idx, 0xFF, capacity * sizeof(int), st));
  TRAINSIM_CUDA(cudaMemsetAsync(vals, 0, capacity * sizeof(float), st));
  topk_error_feedback_async(buf, residual, vals, idx, capacity, count, fraction, scratch_.get(), counter_.get<int>(), st);
  comm.all_gather(vals, all_vals, capacity * sizeof(float), st);
  comm.all_gather(idx, all_idx, capacity * sizeof(int), st);
  TRAINSIM_CUDA(cudaMemsetAsync(buf, 0, count * sizeof(float), st));
  for (int r = 0; r < n; ++r) scatter_add(all_vals + r * capacity, all_idx + r * capacity, capacity, buf, st);
}

}  // namespace trainsim::gpu

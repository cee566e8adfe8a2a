#include "runtime_memory.h"

#include <cublas_v2.h>

#include <algorithm>
#include <vector>

#include "cuda_compat.h"
#include "lt_matmul.h"
#include "timing.h"

namespace trainsim::gpu {

namespace {

double used_bytes(int device) {
  TRAINSIM_CUDA(cudaSetDevice(device));
  TRAINSIM_CUDA(cudaDeviceSynchronize());
  size_t free_b = 0, total_b = 0;
  TRAINSIM_CUDA(cudaMemGetInfo(&free_b, &total_b));
  return static_cast<double>(total_b - free_b);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// A communicator over devices 0..n-1 that has run all-reduces at small and large sizes (so that
// the protocols' buffers are connected); returns each device's growth in memory in use.
std::vector<double> communicator_growth(int n, std::vector<ncclComm_t>& comms) {
  std::vector<double> before(n);
  for (int d = 0; d < n; ++d) before[d] = used_bytes(d);
  std::vector<int> devs(n);
  for (int d = 0; d < n; ++d) devs[d] = d;
  comms.resize(n);
  TRAINSIM_NCCL(ncclCommInitAll(comms.data(), n, devs.data()));
  const size_t max_elems = 16u << 20;  // 64 MiB of fp32
  std::vector<DeviceBuffer> bufs;
  std::vector<cudaStream_t> streams(n);
  for (int d = 0; d < n; ++d) {
    TRAINSIM_CUDA(cudaSetDevice(d));
    bufs.emplace_back(max_elems * 4);
    TRAINSIM_CUDA(cudaMemset(bufs.back().get(), 0, max_elems * 4));
    TRAINSIM_CUDA(cudaStreamCreateWithFlags(&streams[d], cudaStreamNonBlocking));
  }
  for (size_t elems = 1024; elems <= max_elems; elems *= 16) {
    TRAINSIM_NCCL(ncclGroupStart());
    for (int d = 0; d < n; ++d)
      TRAINSIM_NCCL(ncclAllReduce(bufs[d].get(), bufs[d].get(), elems, ncclFloat, ncclSum, comms[d], streams[d]));
    TRAINSIM_NCCL(ncclGroupEnd());
    for (int d = 0; d < n; ++d) {
      TRAINSIM_CUDA(cudaSetDevice(d));
      TRAINSIM_CUDA(cudaStreamSynchronize(streams[d]));
    }
  }
  for (int d = 0; d < n; ++d) {
    TRAINSIM_CUDA(cudaSetDevice(d));
    TRAINSIM_CUDA(cudaStreamDestroy(streams[d]));
  }
  bufs.clear();  // the collective's own buffers are not the communicator's
  std::vector<double> growth(n);
  for (int d = 0; d < n; ++d) growth[d] = used_bytes(d) - before[d];
  return growth;
}

}  // namespace

RuntimeMemorySample measure_runtime_memory(int gpus) {
  RuntimeMemorySample s;
  TRAINSIM_CUDA(cudaSetDevice(0));
  TRAINSIM_CUDA(cudaFree(nullptr));
  {
    // What the step runner keeps besides its arena: two streams, a cuBLAS handle, a cuBLASLt one
    // with its workspace, and the GEMM kernels loaded by a first call of each.
    cudaStream_t st, comm_st;
    TRAINSIM_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    TRAINSIM_CUDA(cudaStreamCreateWithFlags(&comm_st, cudaStreamNonBlocking));
    cublasHandle_t cb;
    if (cublasCreate(&cb) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cublasCreate failed");
    TRAINSIM_CUBLAS(cublasSetStream(cb, st));
    {
      LtMatmul mm(st);
      const int m = 1024;
      DeviceBuffer a(static_cast<size_t>(m) * m * 2), b(static_cast<size_t>(m) * m * 2), c(static_cast<size_t>(m) * m * 4);
      fill_random_bf16(a.get(), static_cast<size_t>(m) * m, 1, 1.0f, st);
      fill_random_bf16(b.get(), static_cast<size_t>(m) * m, 2, 1.0f, st);
      mm.gemm(false, false, m, m, m, a.get(), b.get(), c.get(), true);
      mm.gemm(false, false, m, m, m, a.get(), b.get(), c.get(), false);
      const float one = 1.0f, zero = 0.0f;
      TRAINSIM_CUBLAS(cublasSgemm(cb, CUBLAS_OP_N, CUBLAS_OP_N, 256, 256, 256, &one, c.get<float>(), 256, c.get<float>(), 256,
                                  &zero, c.get<float>() + 256 * 256, 256));
      TRAINSIM_CUDA(cudaStreamSynchronize(st));
      a = DeviceBuffer();
      b = DeviceBuffer();
      c = DeviceBuffer();
      s.context_bytes = used_bytes(0);
    }
    cublasDestroy(cb);
    TRAINSIM_CUDA(cudaStreamDestroy(st));
    TRAINSIM_CUDA(cudaStreamDestroy(comm_st));
  }
  if (gpus >= 2) {
    std::vector<ncclComm_t> first, second;
    const std::vector<double> g1 = communicator_growth(gpus, first);
    const std::vector<double> g2 = communicator_growth(gpus, second);
    s.nccl_first_bytes = median(g1);
    s.nccl_further_bytes = median(g2);
    s.gpus = gpus;
    for (auto* cs : {&second, &first})
      for (ncclComm_t c : *cs) ncclCommDestroy(c);
  }
  TRAINSIM_CUDA(cudaSetDevice(0));
  return s;
}

}  // namespace trainsim::gpu

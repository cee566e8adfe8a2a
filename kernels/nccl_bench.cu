#include "nccl_bench.h"

#include <cublas_v2.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>

#include "timing.h"

namespace trainsim::gpu {

namespace {

__global__ void fill_value(float* p, size_t n, float v) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<size_t>(gridDim.x) * blockDim.x) p[i] = v;
}

// Counts elements of chunk c (chunk_elems each, chunks in a row) that differ from expected(c).
__global__ void count_wrong(const float* p, size_t chunk_elems, int chunks, const float* expected, unsigned long long* wrong) {
  const size_t n = chunk_elems * chunks;
  unsigned long long local = 0;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<size_t>(gridDim.x) * blockDim.x)
    if (p[i] != expected[i / chunk_elems]) ++local;
  if (local) atomicAdd(wrong, local);
}

struct Rank {
  int dev = 0;
  int rank = 0;  // in the communicator
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  DeviceBuffer send, recv, expected;
  DeviceBuffer wrong;
};

const char* kCollectives[] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv"};

double bus_factor(const std::string& c, int n) {
  if (c == "all_reduce") return 2.0 * (n - 1) / n;
  if (c == "send_recv") return 1.0;
  return static_cast<double>(n - 1) / n;
}

}  // namespace

namespace {

// The sweep over collectives and sizes for the ranks this process drives (all of them with
// ncclCommInitAll, one under MPI); `n` is the communicator's size. Times are this process's slowest
// rank; across processes the caller takes the maximum.
std::vector<CollectiveSample> sweep(std::vector<Rank>& ranks, int n, double max_bytes, bool quick) {
  std::vector<CollectiveSample> out;
  const size_t cap = static_cast<size_t>(max_bytes);
  for (auto& rk : ranks) {
    TRAINSIM_CUDA(cudaSetDevice(rk.dev));
    TRAINSIM_CUDA(cudaStreamCreateWithFlags(&rk.stream, cudaStreamNonBlocking));
    rk.send = DeviceBuffer(cap);
    rk.recv = DeviceBuffer(cap);
    rk.expected = DeviceBuffer(64 * sizeof(float));
    rk.wrong = DeviceBuffer(sizeof(unsigned long long));
  }
  for (const char* coll_c : kCollectives) {
    const std::string coll(coll_c);
    if (coll == "send_recv" && n < 2) continue;
    // --quick: sizes step by 8 up to 1 MiB and by 2 above it, where the fits look.
    for (double bytes = 8; bytes <= max_bytes; bytes *= (quick && bytes < (1 << 20) ? 8 : 2)) {
      // Element counts: float elements, divisible by n where the collective splits the buffer.
      size_t elems = std::max<size_t>(1, static_cast<size_t>(bytes) / 4);
      if (coll != "all_reduce" && coll != "send_recv") elems = std::max<size_t>(n, elems / n * n);
      const double size = elems * 4.0;
      const size_t chunk = elems / (coll == "all_reduce" || coll == "send_recv" ? 1 : n);
      for (auto& rk : ranks) {
        TRAINSIM_CUDA(cudaSetDevice(rk.dev));
        fill_value<<<512, 256, 0, rk.stream>>>(rk.send.get<float>(), elems, static_cast<float>(rk.rank + 1));
        TRAINSIM_KERNEL_CHECK();
        TRAINSIM_CUDA(cudaMemsetAsync(rk.recv.get(), 0xFF, elems * 4, rk.stream));  // poison: NaN
      }
      auto launch = [&]() {
        TRAINSIM_NCCL(ncclGroupStart());
        for (auto& rk : ranks) {
          float* s = rk.send.get<float>();
          float* d = rk.recv.get<float>();
          if (coll == "all_reduce") TRAINSIM_NCCL(ncclAllReduce(s, d, elems, ncclFloat, ncclSum, rk.comm, rk.stream));
          else if (coll == "all_gather") TRAINSIM_NCCL(ncclAllGather(s, d, chunk, ncclFloat, rk.comm, rk.stream));
          else if (coll == "reduce_scatter") TRAINSIM_NCCL(ncclReduceScatter(s, d, chunk, ncclFloat, ncclSum, rk.comm, rk.stream));
          else if (coll == "all_to_all") {
            for (int p = 0; p < n; ++p) {
              TRAINSIM_NCCL(ncclSend(s + p * chunk, chunk, ncclFloat, p, rk.comm, rk.stream));
              TRAINSIM_NCCL(ncclRecv(d + p * chunk, chunk, ncclFloat, p, rk.comm, rk.stream));
            }
          } else {
            TRAINSIM_NCCL(ncclSend(s, elems, ncclFloat, (rk.rank + 1) % n, rk.comm, rk.stream));
            TRAINSIM_NCCL(ncclRecv(d, elems, ncclFloat, (rk.rank + n - 1) % n, rk.comm, rk.stream));
          }
        }
        TRAINSIM_NCCL(ncclGroupEnd());
      };
      const int iters = size < 64e6 ? 20 : 5;
      launch();  // warm-up, also the result we check
      for (auto& rk : ranks) { TRAINSIM_CUDA(cudaSetDevice(rk.dev)); TRAINSIM_CUDA(cudaStreamSynchronize(rk.stream)); }
      // Correctness: compare every element with its expected value.
      long wrong = 0;
      for (auto& rk : ranks) {
        TRAINSIM_CUDA(cudaSetDevice(rk.dev));
        std::vector<float> exp;
        int chunks = 1;
        size_t celems = elems;
        const float tri = n * (n + 1) / 2.0f;
        if (coll == "all_reduce") exp = {tri};
        else if (coll == "reduce_scatter") { exp = {tri}; celems = chunk; }
        else if (coll == "all_gather" || coll == "all_to_all") {
          chunks = n; celems = chunk;
          for (int p = 0; p < n; ++p) exp.push_back(static_cast<float>(p + 1));
        } else exp = {static_cast<float>((rk.rank + n - 1) % n + 1)};
        TRAINSIM_CUDA(cudaMemcpyAsync(rk.expected.get(), exp.data(), exp.size() * 4, cudaMemcpyHostToDevice, rk.stream));
        TRAINSIM_CUDA(cudaMemsetAsync(rk.wrong.get(), 0, 8, rk.stream));
        count_wrong<<<512, 256, 0, rk.stream>>>(rk.recv.get<float>(), celems, chunks, rk.expected.get<float>(),
                                                 rk.wrong.get<unsigned long long>());
        TRAINSIM_KERNEL_CHECK();
        unsigned long long w = 0;
        TRAINSIM_CUDA(cudaMemcpyAsync(&w, rk.wrong.get(), 8, cudaMemcpyDeviceToHost, rk.stream));
        TRAINSIM_CUDA(cudaStreamSynchronize(rk.stream));
        wrong += static_cast<long>(w);
      }
      // Timing: events on every rank's stream around `iters` launches; the slowest rank counts.
      const std::size_t nl = ranks.size();
      std::vector<cudaEvent_t> a(nl), b(nl);
      for (std::size_t i = 0; i < nl; ++i) {
        TRAINSIM_CUDA(cudaSetDevice(ranks[i].dev));
        TRAINSIM_CUDA(cudaEventCreate(&a[i]));
        TRAINSIM_CUDA(cudaEventCreate(&b[i]));
        TRAINSIM_CUDA(cudaEventRecord(a[i], ranks[i].stream));
      }
      for (int i = 0; i < iters; ++i) launch();
      double worst_ms = 0;
      for (std::size_t i = 0; i < nl; ++i) {
        TRAINSIM_CUDA(cudaSetDevice(ranks[i].dev));
        TRAINSIM_CUDA(cudaEventRecord(b[i], ranks[i].stream));
      }
      for (std::size_t i = 0; i < nl; ++i) {
        TRAINSIM_CUDA(cudaSetDevice(ranks[i].dev));
        TRAINSIM_CUDA(cudaEventSynchronize(b[i]));
        float ms = 0;
        TRAINSIM_CUDA(cudaEventElapsedTime(&ms, a[i], b[i]));
        worst_ms = std::max(worst_ms, static_cast<double>(ms));
        cudaEventDestroy(a[i]);
        cudaEventDestroy(b[i]);
      }
      const double us = worst_ms * 1000.0 / iters;
      const double algbw = size / (us * 1e3);
      out.push_back({coll, n, size, us, algbw, algbw * bus_factor(coll, n), wrong});
    }
  }
  for (auto& rk : ranks) {
    TRAINSIM_CUDA(cudaSetDevice(rk.dev));
    cudaStreamDestroy(rk.stream);
    ncclCommDestroy(rk.comm);
  }
  TRAINSIM_CUDA(cudaSetDevice(ranks.front().dev));
  return out;
}

}  // namespace

std::vector<CollectiveSample> bench_collectives(int n, double max_bytes, bool quick) {
  std::vector<int> devs(n);
  for (int i = 0; i < n; ++i) devs[i] = i;
  std::vector<ncclComm_t> comms(n);
  TRAINSIM_NCCL(ncclCommInitAll(comms.data(), n, devs.data()));
  std::vector<Rank> ranks(n);
  for (int r = 0; r < n; ++r) {
    ranks[r].dev = r;
    ranks[r].rank = r;
    ranks[r].comm = comms[r];
  }
  auto out = sweep(ranks, n, max_bytes, quick);
  TRAINSIM_CUDA(cudaSetDevice(0));
  return out;
}

NcclId new_nccl_id() {
  ncclUniqueId id;
  TRAINSIM_NCCL(ncclGetUniqueId(&id));
  NcclId out;
  static_assert(sizeof(id.internal) == sizeof(out.bytes), "ncclUniqueId size");
  std::memcpy(out.bytes, id.internal, sizeof(out.bytes));
  return out;
}

std::vector<CollectiveSample> bench_collectives_rank(const NcclId& id, int nranks, int rank, int device, double max_bytes,
                                                     bool quick, const std::function<bool()>& after_init) {
  ncclUniqueId uid;
  std::memcpy(uid.internal, id.bytes, sizeof(id.bytes));
  TRAINSIM_CUDA(cudaSetDevice(device));
  std::vector<Rank> ranks(1);
  ranks[0].dev = device;
  ranks[0].rank = rank;
  TRAINSIM_NCCL(ncclCommInitRank(&ranks[0].comm, nranks, uid, rank));
  if (after_init && !after_init()) {
    ncclCommDestroy(ranks[0].comm);
    return {};
  }
  return sweep(ranks, nranks, max_bytes, quick);
}

namespace {

// Fractional slowdown of a large bf16 GEMM on GPU 0 while `launch_load` keeps NCCL busy on the n
// devices' communicators (it enqueues on each device's communication stream, for longer than the
// timed GEMMs take).
double gemm_slowdown_beside(int n, const std::function<void(std::vector<ncclComm_t>&, std::vector<cudaStream_t>&)>& launch_load) {
  std::vector<int> devs(n);
  for (int i = 0; i < n; ++i) devs[i] = i;
  std::vector<ncclComm_t> comms(n);
  TRAINSIM_NCCL(ncclCommInitAll(comms.data(), n, devs.data()));
  std::vector<cudaStream_t> comm_streams(n);
  for (int r = 0; r < n; ++r) {
    TRAINSIM_CUDA(cudaSetDevice(r));
    TRAINSIM_CUDA(cudaStreamCreateWithFlags(&comm_streams[r], cudaStreamNonBlocking));
  }
  TRAINSIM_CUDA(cudaSetDevice(0));
  const int m = 8192;
  DeviceBuffer A(static_cast<size_t>(m) * m * 2), B(static_cast<size_t>(m) * m * 2), C(static_cast<size_t>(m) * m * 2);
  fill_random_bf16(A.get(), static_cast<size_t>(m) * m, 1, 1.0f, 0);
  fill_random_bf16(B.get(), static_cast<size_t>(m) * m, 2, 1.0f, 0);
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cublasCreate failed");
  cudaStream_t gs;
  TRAINSIM_CUDA(cudaStreamCreateWithFlags(&gs, cudaStreamNonBlocking));
  cublasSetStream(h, gs);
  const float alpha = 1.0f, beta = 0.0f;
  auto gemm = [&] {
    cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, m, m, &alpha, A.get(), CUDA_R_16BF, m, B.get(), CUDA_R_16BF, m, &beta,
                 C.get(), CUDA_R_16BF, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  };
  const double alone = time_median_us(gs, 3, 10, gemm);
  launch_load(comms, comm_streams);
  TRAINSIM_CUDA(cudaSetDevice(0));
  const double loaded = time_median_us(gs, 1, 10, gemm);
  for (int r = 0; r < n; ++r) {
    TRAINSIM_CUDA(cudaSetDevice(r));
    TRAINSIM_CUDA(cudaStreamSynchronize(comm_streams[r]));
    cudaStreamDestroy(comm_streams[r]);
    ncclCommDestroy(comms[r]);
  }
  TRAINSIM_CUDA(cudaSetDevice(0));
  cublasDestroy(h);
  cudaStreamDestroy(gs);
  return loaded / alone - 1.0;
}

}  // namespace

double bench_interference(int n) {
  if (n < 2) return -1;
  const size_t elems = 64ull << 20;  // 256 MiB all-reduce
  std::vector<DeviceBuffer> bufs;
  for (int r = 0; r < n; ++r) {
    TRAINSIM_CUDA(cudaSetDevice(r));
    bufs.emplace_back(elems * 4);
    fill_random_f32(bufs.back().get<float>(), elems, 5 + r, 1.0f, 0);
  }
  return gemm_slowdown_beside(n, [&](std::vector<ncclComm_t>& comms, std::vector<cudaStream_t>& streams) {
    TRAINSIM_NCCL(ncclGroupStart());
    for (int i = 0; i < 40; ++i)
      for (int r = 0; r < n; ++r)
        TRAINSIM_NCCL(ncclAllReduce(bufs[r].get(), bufs[r].get(), elems, ncclFloat, ncclSum, comms[r], streams[r]));
    TRAINSIM_NCCL(ncclGroupEnd());
  });
}

double bench_p2p_interference(int n) {
  if (n < 2) return -1;
  // GPUs 0 and 1 exchange 64 MiB both ways at once, as a pipeline stage sends activations
  // forward and receives gradients back, 400 times: some 70 ms at the 394 GB/s a direction that
  // calibrate measured between the H200 pair's peers, about three times the 11 GEMMs timed beside
  // it (8192^3 each, 1.4-1.6 ms alone at 700-800 TFLOP/s, some 2 ms slowed).
  const size_t bytes = 64ull << 20;
  std::vector<DeviceBuffer> send, recv;
  for (int r = 0; r < 2; ++r) {
    TRAINSIM_CUDA(cudaSetDevice(r));
    send.emplace_back(bytes);
    recv.emplace_back(bytes);
    fill_random_f32(send.back().get<float>(), bytes / 4, 7 + r, 1.0f, 0);
  }
  return gemm_slowdown_beside(n, [&](std::vector<ncclComm_t>& comms, std::vector<cudaStream_t>& streams) {
    for (int i = 0; i < 400; ++i) {
      TRAINSIM_NCCL(ncclGroupStart());
      for (int r = 0; r < 2; ++r) {
        TRAINSIM_NCCL(ncclSend(send[r].get(), bytes, ncclInt8, 1 - r, comms[r], streams[r]));
        TRAINSIM_NCCL(ncclRecv(recv[r].get(), bytes, ncclInt8, 1 - r, comms[r], streams[r]));
      }
      TRAINSIM_NCCL(ncclGroupEnd());
    }
  });
}

}  // namespace trainsim::gpu

#pragma once
// Every CUDA / cuBLAS / NCCL version difference and error check lives here.
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <stdexcept>
#include <string>

#include "device_out_of_memory.h"

#define TRAINSIM_CUDA(call)                                                                           \
  do {                                                                                                \
    cudaError_t err_ = (call);                                                                        \
    if (err_ != cudaSuccess)                                                                          \
      throw std::runtime_error(std::string(#call) + " failed: " + cudaGetErrorString(err_) + " at " + \
                               __FILE__ + ":" + std::to_string(__LINE__));                            \
  } while (0)

#define TRAINSIM_CUBLAS(call)                                                                                   \
  do {                                                                                                          \
    cublasStatus_t st_ = (call);                                                                                \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                                                           \
      throw std::runtime_error(std::string(#call) + " failed: cuBLAS status " + std::to_string(static_cast<int>(st_)) + \
                               " at " + __FILE__ + ":" + std::to_string(__LINE__));                             \
  } while (0)

#define TRAINSIM_NCCL(call)                                                                           \
  do {                                                                                                \
    ncclResult_t r_ = (call);                                                                         \
    if (r_ != ncclSuccess)                                                                            \
      throw std::runtime_error(std::string(#call) + " failed: " + ncclGetErrorString(r_) + " at " +   \
                               __FILE__ + ":" + std::to_string(__LINE__));                            \
  } while (0)

#define TRAINSIM_KERNEL_CHECK() TRAINSIM_CUDA(cudaGetLastError())

namespace trainsim::gpu {

// fp8 GEMMs need cuBLASLt from CUDA 11.8 and a Hopper (or newer) device.
inline bool fp8_supported(int cc_major) {
#if CUDART_VERSION >= 11080
  return cc_major >= 9;
#else
  (void)cc_major;
  return false;
#endif
}

// RAII device buffer.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // Throws DeviceOutOfMemory where the device has too little free (the error is cleared, so the
  // device stays usable), std::runtime_error on any other failure.
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    const cudaError_t err = cudaMalloc(&ptr_, bytes);
    if (err == cudaErrorMemoryAllocation) {
      ptr_ = nullptr;
      cudaGetLastError();
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      throw DeviceOutOfMemory(static_cast<double>(bytes), static_cast<double>(free_b), static_cast<double>(total_b));
    }
    TRAINSIM_CUDA(err);
  }
  ~DeviceBuffer() { if (ptr_) cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; o.bytes_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) { if (ptr_) cudaFree(ptr_); ptr_ = o.ptr_; bytes_ = o.bytes_; o.ptr_ = nullptr; o.bytes_ = 0; }
    return *this;
  }
  template <class T = void>
  T* get() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};


}  // namespace trainsim::gpu

#pragma once
// Which physical GPU a measurement ran on: its UUID as nvidia-smi prints it. Two records of the
// same model name may come from different cards (each with its own power and clock behaviour), so
// profiles and validation records name the card itself. Plain C++ (no CUDA), tested anywhere.
#include <string>

namespace trainsim::gpu {

// The 16 bytes of a CUDA device's UUID (cudaDeviceProp::uuid) as nvidia-smi -L writes them:
// "GPU-" and the bytes in order as lower-case hex, grouped 8-4-4-4-12.
std::string format_gpu_uuid(const unsigned char (&bytes)[16]);

}  // namespace trainsim::gpu

#pragma once
// Device memory a training process holds besides its tensors: the CUDA context with the streams,
// cuBLAS and cuBLASLt handles (and its 64 MiB workspace) and kernels a training step loads; and
// what each NCCL communicator adds once it has run its first collectives.
namespace trainsim::gpu {

struct RuntimeMemorySample {
  double context_bytes = -1;       // device 0: in use once the handles ran their first GEMMs
  double nccl_first_bytes = -1;    // per device (median): the first communicator over every GPU
  double nccl_further_bytes = -1;  // per device (median): a second one beside it
  int gpus = 0;                    // GPUs the communicators spanned (0: not measured)
};

// Measures the context on device 0, which must hold nothing else yet (run it first); with two or
// more GPUs also the communicators (all-reduces from 4 KiB to 64 MiB on each).
RuntimeMemorySample measure_runtime_memory(int gpus);

}  // namespace trainsim::gpu

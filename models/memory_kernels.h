#pragma once
// The element-wise and row-wise kernels a step prices by name: the memory-bound ops of
// layer_ops.cpp (their Op::kernel) and the optimizer's update. calibrate times them under these
// names into a profile's gpu.memory_kernels, and a profile naming any other kernel is refused, so
// that a misspelt row cannot silently leave its op on the generic memory-bound curve.
#include <string>
#include <vector>

namespace trainsim {

const std::vector<std::string>& memory_kernel_names();
bool is_memory_kernel(const std::string& name);

}  // namespace trainsim

// cuda_info.hpp: ask whether CUDA can be used (built in, driver present, at least one GPU).
// Answered by the device registry (core/device_registry.hpp), which cuda/ fills in.
#pragma once
#include "core/device_registry.hpp"

namespace ampgrad::cuda {
inline int device_count() { return ampgrad::device_count(kCUDA); }
inline bool is_available() { return device_count() > 0; }
}  // namespace ampgrad::cuda

// cuda_info.hpp: ask whether CUDA can be used (built in, driver present, at least one GPU).
#pragma once

namespace ampgrad::cuda {
bool is_available();
int device_count();
}  // namespace ampgrad::cuda

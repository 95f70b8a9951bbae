// stub.cpp: built instead of the CUDA backend when ampgrad is configured without CUDA
// (-Dcuda=disabled, or no nvcc found). Any CUDA request fails with a clear DeviceError.
#include "core/backend.hpp"
#include "core/error.hpp"

namespace ampgrad::cuda {

[[noreturn]] static void not_built(int index) {
    throw DeviceError(fmt::format("cuda:{}: ampgrad was built without CUDA support; rebuild with -Dcuda=enabled "
                                  "on a machine with the CUDA toolkit (nvcc)", index));
}

Backend& cuda_backend(int device_index) { not_built(device_index); }
Allocator& cuda_allocator(int device_index) { not_built(device_index); }
bool is_available() { return false; }
int device_count() { return 0; }

}  // namespace ampgrad::cuda

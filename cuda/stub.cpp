// stub.cpp: built instead of the CUDA backend when ampgrad is configured without CUDA
// (-Dcuda=disabled, or no nvcc found). Any CUDA request fails with a clear DeviceError. No stream
// runtime is registered for CUDA, so core/stream.cpp's lookup says the same.
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

namespace {
[[maybe_unused]] const bool registered = [] {
    register_allocator(kCUDA, &cuda_allocator);
    return true;
}();
}  // namespace

}  // namespace ampgrad::cuda

// stub.cpp: built instead of the CUDA backend when ampgrad is configured without CUDA
// (-Dcuda=disabled, or no nvcc found). It registers a CUDA device type with no devices, so any
// CUDA request fails with a DeviceError that says how to get CUDA support. No stream runtime is
// registered for CUDA, so core/stream.cpp's lookup says the same.
#include "core/device_registry.hpp"
#include "core/error.hpp"

namespace ampgrad::cuda {

namespace {
[[noreturn]] void not_built(int index) {
    throw DeviceError(fmt::format("cuda:{}: ampgrad was built without CUDA support; rebuild with -Dcuda=enabled "
                                  "on a machine with the CUDA toolkit (nvcc)", index));
}
int no_devices() { return 0; }
Allocator& no_allocator(int index) { not_built(index); }
}  // namespace

AMPGRAD_REGISTER_DEVICE(kCUDA, (DeviceHooks{&no_devices, &not_built, &no_allocator}));

}  // namespace ampgrad::cuda

// device_registry.hpp: what core knows about each device type, filled in by the backends.
// A backend (cpu/, cuda/) registers one DeviceHooks for its device type at load time:
//
//     AMPGRAD_REGISTER_DEVICE(kCUDA, (DeviceHooks{&device_count, &require_device, &cuda_allocator}));
//
// and core asks through it: allocator_for(device) (core/allocator.hpp) to make storage,
// require_device(device) to check that a device can be used, device_count(type). Core never
// names a backend's symbols; a device type nobody registered fails with a DeviceError.
#pragma once
#include "core/allocator.hpp"
#include "core/device.hpp"

namespace ampgrad {

struct DeviceHooks {
    int (*device_count)() = nullptr;              // usable devices of this type (0 when none)
    // Throws DeviceError saying why device `index` cannot be used ("no CUDA device is available
    // (...)", "device index out of range (2 devices)", "built without CUDA support; rebuild ...").
    void (*require_device)(int index) = nullptr;
    Allocator& (*allocator)(int index) = nullptr;  // the allocator of device `index` (checked first)
    // Page-locked host memory for asynchronous copies to and from this device type (CPU tensors made
    // by Tensor::pin_memory()); null for a type that has none. Checked first, like `allocator`.
    Allocator& (*pinned_host_allocator)() = nullptr;
};

void register_device(DeviceType type, const DeviceHooks& hooks);

int device_count(DeviceType type);                 // 0 when the type is not registered
bool is_available(DeviceType type);                // device_count(type) > 0
void require_device(Device device);                // throws DeviceError unless `device` can be used
// The page-locked host allocator of an accelerator type; DeviceError when it has none or no device.
Allocator& pinned_host_allocator(DeviceType accelerator);

}  // namespace ampgrad

// At namespace scope in the backend's source: register `hooks` for `type` at load time.
#define AMPGRAD_REGISTER_DEVICE(type, hooks)                                                     \
    [[maybe_unused]] static const bool AMPGRAD_DEVICE_REGISTRY_CONCAT(ampgrad_device_registered_, \
                                                                      __COUNTER__) =              \
        (::ampgrad::register_device((type), (hooks)), true)
#define AMPGRAD_DEVICE_REGISTRY_CONCAT_(a, b) a##b
#define AMPGRAD_DEVICE_REGISTRY_CONCAT(a, b) AMPGRAD_DEVICE_REGISTRY_CONCAT_(a, b)

// device_registry.cpp: the per-device-type hooks table behind allocator_for, pinned_host_allocator,
// require_device and device_count. The table is constant-initialised (empty) and filled by the backends at load time.
#include "core/device_registry.hpp"

#include <array>

#include "core/error.hpp"

namespace ampgrad {

namespace {
constinit std::array<DeviceHooks, kNumDeviceTypes> g_hooks{};

const DeviceHooks& hooks_of(Device device) {
    const DeviceHooks& h = g_hooks[device_type_index(device.type)];
    if (h.require_device == nullptr || h.allocator == nullptr)
        throw DeviceError(fmt::format("{}: no {} backend is registered in this build of ampgrad", device.str(),
                                      device_type_name(device.type)));
    return h;
}
}  // namespace

void register_device(DeviceType type, const DeviceHooks& hooks) { g_hooks[device_type_index(type)] = hooks; }

int device_count(DeviceType type) {
    const DeviceHooks& h = g_hooks[device_type_index(type)];
    return h.device_count ? h.device_count() : 0;
}

bool is_available(DeviceType type) { return device_count(type) > 0; }

void require_device(Device device) { hooks_of(device).require_device(device.index); }

Allocator& allocator_for(Device device) { return hooks_of(device).allocator(device.index); }

Allocator& pinned_host_allocator(DeviceType accelerator) {
    const Device first(accelerator, 0);
    const DeviceHooks& h = hooks_of(first);
    h.require_device(0);                                   // says why the accelerator cannot be used
    if (h.pinned_host_allocator == nullptr)
        throw DeviceError(fmt::format("pin_memory: {} has no page-locked host memory", device_type_name(accelerator)));
    return h.pinned_host_allocator();
}

}  // namespace ampgrad

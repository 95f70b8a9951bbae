// allocator.cpp: the table of per-device-type allocator getters (filled by cpu/ and cuda/ at load
// time) and the public memory statistics built on it.
#include "core/allocator.hpp"

#include <array>

#include "core/error.hpp"

namespace ampgrad {

namespace {
constexpr size_t kDeviceTypes = 2;                       // kCPU, kCUDA
// Constant-initialized, so registrations from static initializers in any order are safe.
constinit std::array<AllocatorGetter, kDeviceTypes> g_getters{};
}  // namespace

void register_allocator(DeviceType type, AllocatorGetter getter) { g_getters[static_cast<size_t>(type)] = getter; }

Allocator& allocator_for(Device device) {
    AllocatorGetter getter = g_getters[static_cast<size_t>(device.type)];
    if (getter == nullptr)
        throw DeviceError(fmt::format("{}: no allocator is registered for this device type (ampgrad was built without "
                                      "{} support)", device.str(), device_type_name(device.type)));
    return getter(device.index);
}

AllocatorStats memory_stats(Device device) { return allocator_for(device).stats(); }
int64_t memory_allocated(Device device) { return memory_stats(device).allocated_bytes; }
int64_t max_memory_allocated(Device device) { return memory_stats(device).peak_allocated_bytes; }
int64_t memory_reserved(Device device) { return memory_stats(device).reserved_bytes; }
int64_t max_memory_reserved(Device device) { return memory_stats(device).peak_reserved_bytes; }
void reset_peak_memory_stats(Device device) { allocator_for(device).reset_peak_stats(); }
void empty_cache(Device device) { allocator_for(device).empty_cache(); }

}  // namespace ampgrad

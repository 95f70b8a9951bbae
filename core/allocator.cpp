// allocator.cpp: the public memory statistics, asked of the allocator each device type registers
// with its DeviceHooks (core/device_registry.hpp).
#include "core/allocator.hpp"

#include "core/device_registry.hpp"

namespace ampgrad {

// allocator_for is core/device_registry.cpp's: each device's allocator comes with its DeviceHooks.

AllocatorStats memory_stats(Device device) { return allocator_for(device).stats(); }
int64_t memory_allocated(Device device) { return memory_stats(device).allocated_bytes; }
int64_t max_memory_allocated(Device device) { return memory_stats(device).peak_allocated_bytes; }
int64_t memory_reserved(Device device) { return memory_stats(device).reserved_bytes; }
int64_t max_memory_reserved(Device device) { return memory_stats(device).peak_reserved_bytes; }
void reset_peak_memory_stats(Device device) { allocator_for(device).reset_peak_stats(); }
void empty_cache(Device device) { allocator_for(device).empty_cache(); }

}  // namespace ampgrad

// allocator.hpp: the memory interface every device implements, and the public memory statistics
// (after torch.cuda.memory_stats / memory_allocated / max_memory_reserved / empty_cache).
//
// Memory is stream-ordered: a block is allocated for use on a stream (the current stream when a
// Storage is made) and may be reused as soon as that stream's work is done with it. A block used on
// another stream too must be told so with record_stream(), or the allocator could hand it out again
// while that stream still reads it (PyTorch's Tensor.record_stream contract).
//
// "allocated" counts bytes handed out (as requested); "reserved" counts bytes the allocator holds
// from the system or device (blocks rounded up, plus anything it caches for reuse).
// The CPU allocator is cpu/allocator.cpp; the CUDA one is cuda/allocator.cu. Each device type hands
// core its allocator through its DeviceHooks (core/device_registry.hpp), the one registration a
// backend makes for its device.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/device.hpp"
#include "core/stream.hpp"

namespace ampgrad {

struct AllocatorStats {
    int64_t allocated_bytes = 0;        // live bytes handed out now
    int64_t reserved_bytes = 0;         // bytes held from the system/device now (>= allocated)
    int64_t peak_allocated_bytes = 0;   // high-water marks since the last reset_peak_stats()
    int64_t peak_reserved_bytes = 0;
    int64_t num_allocs = 0;             // allocate() calls that returned memory, ever
    int64_t num_frees = 0;              // deallocate() calls, ever
    int64_t num_device_allocs = 0;      // system/device allocations (malloc, cudaMallocAsync), ever
    int64_t num_device_frees = 0;       // and their releases
};

class Allocator {
public:
    virtual ~Allocator() = default;
    virtual Device device() const = 0;
    // A block of at least nbytes for use on `stream` (a stream of this allocator's device, else
    // DeviceError). nbytes == 0 may return null.
    virtual void* allocate(size_t nbytes, const Stream& stream) = 0;
    // Gives back a block from allocate(); never throws (it runs in Storage destructors).
    virtual void deallocate(void* ptr, size_t nbytes) noexcept = 0;
    // `ptr` (a live block from allocate) is also used on `stream`: do not reuse it before the work
    // issued on `stream` so far has finished. A stream of another device is a DeviceError.
    virtual void record_stream(void* ptr, const Stream& stream) = 0;
    virtual AllocatorStats stats() const = 0;
    virtual void reset_peak_stats() = 0;        // peaks := current values
    // Returns cached, unused memory to the system/device (reserved_bytes drops towards allocated_bytes).
    virtual void empty_cache() = 0;
};

// The allocator for a device, from its DeviceHooks (core/device_registry.cpp); throws DeviceError
// when the device cannot be used or no backend registered its type.
Allocator& allocator_for(Device device);

// ---- public statistics, per device ----
AllocatorStats memory_stats(Device device);
int64_t memory_allocated(Device device);        // stats().allocated_bytes
int64_t max_memory_allocated(Device device);    // stats().peak_allocated_bytes
int64_t memory_reserved(Device device);         // stats().reserved_bytes
int64_t max_memory_reserved(Device device);     // stats().peak_reserved_bytes
void reset_peak_memory_stats(Device device);
void empty_cache(Device device);

}  // namespace ampgrad

// allocator.hpp: the memory interface every device implements. The CPU allocator hands out
// 64-byte-aligned blocks; the CUDA caching allocator (cuda/) will implement the same interface.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/device.hpp"

namespace ampgrad {

struct AllocatorStats {
    int64_t allocated_bytes = 0;       // live bytes handed out now
    int64_t peak_allocated_bytes = 0;  // high-water mark since the last reset
    int64_t num_allocs = 0;            // calls to allocate() so far
};

class Allocator {
public:
    virtual ~Allocator() = default;
    virtual void* allocate(size_t nbytes) = 0;
    virtual void deallocate(void* ptr, size_t nbytes) = 0;
    virtual AllocatorStats stats() const = 0;
    virtual void reset_peak() = 0;
};

// The allocator for a device (the CPU one, or the CUDA one if built and a GPU exists).
Allocator& allocator_for(Device device);

}  // namespace ampgrad

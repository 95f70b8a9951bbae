// caching_allocator.hpp: a stream-aware caching allocator for devices whose raw allocations are slow
// and synchronising (cudaMalloc/cudaFree), in the design of PyTorch's CUDA caching allocator
// (c10/cuda/CUDACachingAllocator.cpp), reduced to its rules:
//   - requests are rounded up to 512 bytes and served from cached blocks, so a training step that
//     repeats its allocations stops calling the device allocator after the first step;
//   - two pools: small requests (<= 1 MiB) are cut from 2 MiB segments, large ones from segments of
//     20 MiB (requests under 10 MiB) or the request rounded up to 2 MiB;
//   - a cached block bigger than the request is split; a freed block merges with free neighbours
//     of the same segment;
//   - a block is cached per stream: a block freed by stream A is handed out again only to stream A,
//     whose order makes the reuse safe. A block that record_stream() says is used on stream B too
//     is not reusable at its free: an event is recorded on B, and the block returns to the pool when
//     that event has completed;
//   - when the device is out of memory, cached unused segments are released and the allocation is
//     retried once; then OutOfMemoryError names the request and the memory state.
// The device side (raw allocation, events) is a DeviceMemory: cuda/allocator.cu implements it with
// cudaMalloc and cudaEvent; tests/core/caching_allocator_test.cpp drives the pool logic on the CPU.
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/allocator.hpp"

namespace ampgrad {

// The raw device operations the caching allocator needs.
class DeviceMemory {
public:
    virtual ~DeviceMemory() = default;
    virtual Device device() const = 0;
    virtual void* raw_allocate(size_t nbytes) = 0;       // null when the device is out of memory
    virtual void raw_free(void* ptr) noexcept = 0;
    virtual void* record_event(const Stream& stream) = 0;   // an event marking the work issued so far
    virtual bool event_completed(void* event) = 0;
    virtual void wait_event(void* event) = 0;            // blocks the host until it has completed
    virtual void destroy_event(void* event) noexcept = 0;
    virtual size_t free_device_bytes() = 0;              // what the device reports as free (for errors)
    // Streams record_stream accepts: this device's; page-locked host memory also takes the
    // accelerator's streams, which copy from and to it.
    virtual bool usable_on(const Stream& stream) const { return stream.device() == device(); }
};

struct CachingAllocatorConfig {
    size_t round_bytes = 512;                  // every block is a multiple of this
    size_t small_request = 1 << 20;            // requests up to this size use the small pool
    size_t small_segment = 2 << 20;            // the small pool's segment size
    size_t large_segment = 20 << 20;           // large requests under mid_request share a segment this big
    size_t mid_request = 10 << 20;
    size_t large_round = 2 << 20;              // bigger requests get their own segment, rounded to this
};

class CachingAllocator final : public Allocator {
public:
    CachingAllocator(DeviceMemory& memory, CachingAllocatorConfig config = {});
    ~CachingAllocator() override;

    Device device() const override { return memory_.device(); }
    void* allocate(size_t nbytes, const Stream& stream) override;
    void deallocate(void* ptr, size_t nbytes) noexcept override;
    void record_stream(void* ptr, const Stream& stream) override;
    AllocatorStats stats() const override;
    void reset_peak_stats() override;
    // Waits for the events of blocks freed while in use on other streams, then returns every cached
    // segment that holds no live block to the device.
    void empty_cache() override;

    // For tests and docs/cuda.md: the number of cached (free) blocks and of segments held.
    int64_t cached_blocks() const;
    int64_t segments() const;

private:
    struct Block;
    struct ByStreamSizeAddress {
        bool operator()(const Block* a, const Block* b) const;
    };
    using Pool = std::set<Block*, ByStreamSizeAddress>;

    size_t rounded(size_t nbytes) const;
    // A request's pool is chosen by its size; a block stays in the pool of the segment it was cut
    // from (a merged small segment is 2 MiB, yet still a small-pool block).
    Pool& pool_for_request(size_t size) { return size <= config_.small_request ? small_ : large_; }
    Pool& pool_of(const Block* block);
    size_t segment_size(size_t size) const;
    Block* find_cached(size_t size, uint64_t stream);
    Block* new_segment(size_t size, uint64_t stream, size_t requested);
    Block* split(Block* block, size_t size);
    void return_to_pool(Block* block);
    void process_events();
    void release_cached_segments();
    void require_own_stream(const char* call, const Stream& stream) const;
    [[noreturn]] void throw_out_of_memory(size_t requested, size_t segment);

    DeviceMemory& memory_;
    CachingAllocatorConfig config_;
    mutable std::mutex mutex_;
    Pool small_, large_;
    std::unordered_map<void*, Block*> live_;                // allocated blocks by address
    std::deque<std::pair<void*, Block*>> pending_;          // (event, block) freed while used elsewhere
    std::vector<Block*> segments_;                          // the first block of every segment held
    AllocatorStats stats_;
};

}  // namespace ampgrad

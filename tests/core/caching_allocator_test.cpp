// caching_allocator_test.cpp: the pool logic of core/caching_allocator.hpp, driven on the CPU through
// a DeviceMemory whose raw memory is malloc with a byte budget (so out-of-memory can be forced) and
// whose events complete only when the test says so (so "stream B is still reading" is explicit).
// The CUDA allocator (cuda/allocator.cu) is the same class over cudaMalloc and cudaEvents.
#include <doctest/doctest.h>

#include <cstdlib>
#include <memory>
#include <map>
#include <set>

#include "core/caching_allocator.hpp"
#include "core/error.hpp"

using namespace ampgrad;

namespace {

class BudgetMemory final : public DeviceMemory {
public:
    explicit BudgetMemory(size_t budget) : budget_(budget) {}
    // The allocator keeps segments with live blocks when it dies (they could still be in use); the
    // test's memory outlives it and gives back whatever is left.
    ~BudgetMemory() override {
        for (auto& [ptr, nbytes] : sizes_) std::free(ptr);
    }
    Device device() const override { return Device(kCPU); }
    void* raw_allocate(size_t nbytes) override {
        if (used_ + nbytes > budget_) return nullptr;
        used_ += nbytes;
        ++raw_allocs;
        void* p = std::malloc(nbytes);
        sizes_[p] = nbytes;
        return p;
    }
    void raw_free(void* ptr) noexcept override {
        used_ -= sizes_[ptr];
        sizes_.erase(ptr);
        ++raw_frees;
        std::free(ptr);
    }
    // An event is a heap int: 0 while its stream is busy, 1 once the test completes it.
    void* record_event(const Stream& stream) override {
        auto* e = new int(0);
        events_on[stream.id()].insert(e);
        return e;
    }
    bool event_completed(void* event) override { return *static_cast<int*>(event) != 0; }
    void wait_event(void* event) override { *static_cast<int*>(event) = 1; }   // "the host waited"
    void destroy_event(void* event) noexcept override {
        for (auto& [stream, set] : events_on) set.erase(static_cast<int*>(event));
        delete static_cast<int*>(event);
    }
    size_t free_device_bytes() override { return budget_ - used_; }
    // As page-locked host memory: also usable on another device's streams (the copies' streams).
    bool usable_on(const Stream& stream) const override {
        return DeviceMemory::usable_on(stream) || (host_memory_for_cuda && stream.device().is_cuda());
    }
    bool host_memory_for_cuda = false;

    void finish_stream(uint64_t stream) {          // the device caught up with `stream`
        for (int* e : events_on[stream]) *e = 1;
    }
    int raw_allocs = 0, raw_frees = 0;
    std::map<uint64_t, std::set<int*>> events_on;

private:
    size_t budget_, used_ = 0;
    std::map<void*, size_t> sizes_;
};

constexpr size_t kMiB = 1 << 20;
const Stream kStreamA(Device(kCPU), 1), kStreamB(Device(kCPU), 2);

}  // namespace

TEST_CASE("a repeated allocation pattern is served from the cache after its first round") {
    BudgetMemory memory(1024 * kMiB);
    CachingAllocator alloc(memory);
    for (int round = 0; round < 3; ++round) {
        void* a = alloc.allocate(1000, kStreamA);                  // small pool
        void* b = alloc.allocate(3 * kMiB, kStreamA);              // large pool, shares a 20 MiB segment
        void* c = alloc.allocate(50 * kMiB, kStreamA);             // its own segment
        alloc.deallocate(a, 1000);
        alloc.deallocate(b, 3 * kMiB);
        alloc.deallocate(c, 50 * kMiB);
    }
    CHECK(memory.raw_allocs == 3);                                 // 2 MiB + 20 MiB + 50 MiB, once
    const AllocatorStats s = alloc.stats();
    CHECK(s.num_allocs == 9);
    CHECK(s.num_device_allocs == 3);
    CHECK(s.allocated_bytes == 0);
    CHECK(s.peak_allocated_bytes == 1000 + 53 * kMiB);             // counted as requested
    CHECK(s.reserved_bytes == (2 + 20 + 50) * kMiB);
}

TEST_CASE("blocks split from one segment, and merge back into it when freed in any order") {
    BudgetMemory memory(1024 * kMiB);
    CachingAllocator alloc(memory);
    void* a = alloc.allocate(100 * 1024, kStreamA);
    void* b = alloc.allocate(100 * 1024, kStreamA);
    void* c = alloc.allocate(100 * 1024, kStreamA);
    CHECK(memory.raw_allocs == 1);                                 // all three from one 2 MiB segment
    CHECK(static_cast<char*>(b) == static_cast<char*>(a) + 100 * 1024);
    CHECK(static_cast<char*>(c) == static_cast<char*>(b) + 100 * 1024);
    alloc.deallocate(b, 100 * 1024);
    alloc.deallocate(a, 100 * 1024);                               // merges with b's hole
    CHECK(alloc.allocate(200 * 1024, kStreamA) == a);              // the merged block is reused in place
    alloc.deallocate(a, 200 * 1024);
    alloc.deallocate(c, 100 * 1024);
    CHECK(alloc.cached_blocks() == 1);                             // one free block: the whole segment
    alloc.empty_cache();
    CHECK(memory.raw_frees == 1);
    CHECK(alloc.stats().reserved_bytes == 0);
    CHECK(alloc.segments() == 0);
}

TEST_CASE("requests round up to 512 bytes; a small remainder stays attached to a large block") {
    BudgetMemory memory(1024 * kMiB);
    CachingAllocator alloc(memory);
    void* a = alloc.allocate(1, kStreamA);
    void* b = alloc.allocate(1, kStreamA);
    CHECK(static_cast<char*>(b) - static_cast<char*>(a) == 512);
    void* big = alloc.allocate(19 * kMiB + kMiB / 2, kStreamA);    // 20 MiB segment, 0.5 MiB left: not split
    void* next = alloc.allocate(2 * kMiB, kStreamA);
    CHECK(memory.raw_allocs == 3);                                 // the 0.5 MiB rest was not a block
    for (void* p : {a, b, big, next}) alloc.deallocate(p, 0);
}

TEST_CASE("a freed block is reused by its own stream at once, never by another stream") {
    BudgetMemory memory(1024 * kMiB);
    CachingAllocator alloc(memory);
    void* a = alloc.allocate(4096, kStreamA);
    alloc.deallocate(a, 4096);
    void* on_b = alloc.allocate(4096, kStreamB);
    CHECK(on_b != a);                                              // B gets its own segment
    CHECK(memory.raw_allocs == 2);
    CHECK(alloc.allocate(4096, kStreamA) == a);                    // A reuses its block
}

TEST_CASE("record_stream: the block returns to the pool only after the other stream's event") {
    BudgetMemory memory(1024 * kMiB);
    CachingAllocator alloc(memory);
    void* a = alloc.allocate(4096, kStreamA);
    alloc.record_stream(a, kStreamB);
    alloc.record_stream(a, kStreamA);                              // its own stream: nothing to wait for
    alloc.deallocate(a, 4096);
    CHECK(memory.events_on[2].size() == 1);                        // an event on B, none on A
    CHECK(memory.events_on[1].empty());
    void* while_b_reads = alloc.allocate(4096, kStreamA);
    CHECK(while_b_reads != a);                                     // B may still read a
    memory.finish_stream(2);
    void* after = alloc.allocate(4096, kStreamA);
    CHECK(after == a);                                             // the event completed: reusable
    CHECK(memory.events_on[2].empty());                            // and the event was destroyed
    CHECK_THROWS_AS(alloc.record_stream(static_cast<char*>(a) + 1, kStreamB), ValueError);
    CHECK_THROWS_AS(alloc.record_stream(a, Stream(Device(kCUDA, 0), 7)), DeviceError);
}

TEST_CASE("out of memory: the cache is released and the allocation retried, then OutOfMemoryError") {
    BudgetMemory memory(60 * kMiB);
    CachingAllocator alloc(memory);
    void* a = alloc.allocate(30 * kMiB, kStreamA);
    alloc.deallocate(a, 30 * kMiB);                                // cached: 30 MiB reserved, 0 allocated
    void* b = alloc.allocate(40 * kMiB, kStreamA);                 // 30 + 40 > 60: release, retry, succeed
    CHECK(b != nullptr);
    CHECK(memory.raw_frees == 1);
    CHECK(alloc.stats().reserved_bytes == 40 * kMiB);
    CHECK_THROWS_WITH_AS(alloc.allocate(30 * kMiB, kStreamA),
                         doctest::Contains("cpu: out of memory: tried to allocate 31457280 bytes"), OutOfMemoryError);
    try {
        alloc.allocate(30 * kMiB, kStreamA);
    } catch (const OutOfMemoryError& e) {
        CHECK(std::string(e.what()).find("41943040 bytes allocated by tensors, 41943040 reserved") !=
              std::string::npos);
        CHECK(std::string(e.what()).find("20971520 free on the device") != std::string::npos);
    }
    alloc.deallocate(b, 40 * kMiB);
    CHECK(alloc.allocate(30 * kMiB, kStreamA) != nullptr);         // it recovers
}

TEST_CASE("a block still awaited by another stream is not released by empty_cache until its event") {
    BudgetMemory memory(1024 * kMiB);
    CachingAllocator alloc(memory);
    void* a = alloc.allocate(8 * kMiB, kStreamA);
    alloc.record_stream(a, kStreamB);
    alloc.deallocate(a, 8 * kMiB);
    alloc.empty_cache();                                           // waits for B's event (the host blocks)
    CHECK(memory.raw_frees == 1);
    CHECK(alloc.stats().reserved_bytes == 0);
    CHECK(alloc.allocate(0, kStreamA) == nullptr);
    CHECK(alloc.stats().num_allocs == 1);                          // a 0-byte request is not an allocation
}

TEST_CASE("host memory for a GPU: record_stream takes the GPU's streams, and reuse waits for their events") {
    BudgetMemory memory(1024 * kMiB);
    memory.host_memory_for_cuda = true;                            // as the pinned host allocator's memory
    CachingAllocator alloc(memory);
    const Stream copy_stream(Device(kCUDA, 0), 7);
    void* a = alloc.allocate(4096, kStreamA);
    alloc.record_stream(a, copy_stream);                           // a copy to the GPU reads it
    alloc.deallocate(a, 4096);
    CHECK(memory.events_on[7].size() == 1);
    CHECK(alloc.allocate(4096, kStreamA) != a);                    // the copy may still be reading
    memory.finish_stream(7);
    CHECK(alloc.allocate(4096, kStreamA) == a);
    memory.host_memory_for_cuda = false;
    void* b = alloc.allocate(4096, kStreamA);
    CHECK_THROWS_WITH_AS(alloc.record_stream(b, copy_stream), doctest::Contains("which cannot use this memory"),
                         DeviceError);
}

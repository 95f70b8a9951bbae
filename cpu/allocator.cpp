// allocator.cpp: the CPU allocator (64-byte aligned, with live/peak byte counters) and the CPU's
// entry in core's device registry. Kernels register themselves from their own files.
//
// Large blocks are cached: a training step frees and reallocates the same activation sizes every
// step, and handing them back to the OS (glibc munmaps or trims large blocks) made the next step
// fault every page in again and zero it (about 8% of a GPT training step in `perf`). Freed blocks
// of at least kCacheMinBytes wait in a per-size free list, up to kCacheMaxBytes in all, and are
// reused by the next allocation of the same rounded size; empty_cache() frees them.
//
// Statistics (core/allocator.hpp): "allocated" counts the bytes of blocks in use, as requested;
// "reserved" counts what malloc was asked for and not yet given back (blocks in use, rounded up,
// plus the cached ones); a "device alloc" is a malloc, so cache hits do not count.
// CPU work is synchronous, so stream ordering asks nothing of it: any CPU stream may allocate, and
// record_stream has nothing to wait for.
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "core/device_registry.hpp"
#include "core/error.hpp"
#include "cpu/loops.hpp"

namespace ampgrad {

namespace {
constexpr size_t kAlignment = 64;

// What aligned_malloc asks malloc for, for an nbytes block.
size_t malloc_size(size_t nbytes) {
    size_t rounded = (std::max<size_t>(nbytes, 1) + kAlignment - 1) / kAlignment * kAlignment;
    return rounded + kAlignment + sizeof(void*);
}

// Blocks are 64-byte aligned and sized in whole multiples of 64 bytes. We align by hand inside a
// slightly larger malloc block (the raw pointer is kept just before the aligned address) rather
// than calling aligned_alloc: glibc's memalign path bypasses its per-thread cache and splits heap
// chunks, which made it the largest cost of creating a small tensor (bench/autograd_overhead.cpp).
// Null when malloc has no memory (the caller releases its cache and retries, then raises).
void* aligned_malloc(size_t nbytes) {
    void* raw = std::malloc(malloc_size(nbytes));
    if (!raw) return nullptr;
    uintptr_t first = reinterpret_cast<uintptr_t>(raw) + sizeof(void*);
    void* aligned = reinterpret_cast<void*>((first + kAlignment - 1) & ~(uintptr_t{kAlignment} - 1));
    static_cast<void**>(aligned)[-1] = raw;
    return aligned;
}

void aligned_free(void* aligned) {
    if (aligned) std::free(static_cast<void**>(aligned)[-1]);
}

constexpr size_t kCacheMinBytes = size_t{64} << 10;     // smaller blocks stay in malloc's own bins
constexpr size_t kCacheMaxBytes = size_t{1} << 30;      // at most this much held for reuse
constexpr size_t kCacheRounding = size_t{4} << 10;      // cached sizes round up to whole pages

// The size a block of nbytes really has: large blocks are rounded to whole pages for the cache.
size_t block_size(size_t nbytes) {
    return nbytes < kCacheMinBytes ? nbytes : (nbytes + kCacheRounding - 1) / kCacheRounding * kCacheRounding;
}

// Free lists of large blocks by block size (thread-safe).
class BlockCache {
public:
    void* take(size_t size) {
        std::lock_guard<std::mutex> lock(mutex_);
        auto it = free_.find(size);
        if (it == free_.end() || it->second.empty()) return nullptr;
        void* p = it->second.back();
        it->second.pop_back();
        held_ -= size;
        return p;
    }
    bool put(void* p, size_t size) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (held_ + size > kCacheMaxBytes) return false;
        free_[size].push_back(p);
        held_ += size;
        return true;
    }
    // Frees every cached block; returns how many and their block sizes' sum.
    std::pair<int64_t, size_t> release_all() {
        std::lock_guard<std::mutex> lock(mutex_);
        int64_t count = 0;
        size_t held_malloc = 0;
        for (auto& [size, blocks] : free_) {
            for (void* p : blocks) {
                aligned_free(p);
                ++count;
                held_malloc += malloc_size(size);
            }
        }
        free_.clear();
        held_ = 0;
        return {count, held_malloc};
    }

private:
    std::mutex mutex_;
    std::unordered_map<size_t, std::vector<void*>> free_;
    size_t held_ = 0;
};

// Raises `peak` to `now` if it is lower (lock-free).
void raise_peak(std::atomic<int64_t>& peak, int64_t now) {
    int64_t seen = peak.load(std::memory_order_relaxed);
    while (now > seen && !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {}
}

void require_cpu_stream(const char* call, const Stream& stream) {
    if (!stream.device().is_cpu())
        throw DeviceError(fmt::format("cpu allocator {}: {} is not a CPU stream", call, stream.str()));
}

class CpuAllocator final : public Allocator {
public:
    Device device() const override { return Device(kCPU); }

    void* allocate(size_t nbytes, const Stream& stream) override {
        require_cpu_stream("allocate", stream);
        const size_t size = block_size(nbytes);
        void* p = size >= kCacheMinBytes ? cache_.take(size) : nullptr;
        if (p == nullptr) {
            p = aligned_malloc(size);
            if (p == nullptr) {   // the cached blocks may be what is missing: give them back, then try once more
                empty_cache();
                p = aligned_malloc(size);
            }
            if (p == nullptr) throw_out_of_memory(nbytes);
            auto held = static_cast<int64_t>(malloc_size(size));
            raise_peak(peak_reserved_, reserved_.fetch_add(held, std::memory_order_relaxed) + held);
            num_mallocs_.fetch_add(1, std::memory_order_relaxed);
        }
        auto requested = static_cast<int64_t>(nbytes);
        raise_peak(peak_allocated_, allocated_.fetch_add(requested, std::memory_order_relaxed) + requested);
        num_allocs_.fetch_add(1, std::memory_order_relaxed);
        return p;
    }
    void deallocate(void* ptr, size_t nbytes) noexcept override {
        if (ptr == nullptr) return;
        const size_t size = block_size(nbytes);
        allocated_.fetch_sub(static_cast<int64_t>(nbytes), std::memory_order_relaxed);
        num_frees_.fetch_add(1, std::memory_order_relaxed);
        if (size >= kCacheMinBytes && cache_.put(ptr, size)) return;        // stays reserved
        aligned_free(ptr);
        reserved_.fetch_sub(static_cast<int64_t>(malloc_size(size)), std::memory_order_relaxed);
        num_system_frees_.fetch_add(1, std::memory_order_relaxed);
    }
    void record_stream(void* ptr, const Stream& stream) override {
        require_cpu_stream("record_stream", stream);
        if (ptr == nullptr) throw ValueError("cpu allocator record_stream: null pointer (not a block from allocate)");
    }
    AllocatorStats stats() const override {
        AllocatorStats s;
        s.allocated_bytes = allocated_.load();
        s.reserved_bytes = reserved_.load();
        s.peak_allocated_bytes = peak_allocated_.load();
        s.peak_reserved_bytes = peak_reserved_.load();
        s.num_allocs = num_allocs_.load();
        s.num_frees = num_frees_.load();
        s.num_device_allocs = num_mallocs_.load();
        s.num_device_frees = num_system_frees_.load();
        return s;
    }
    void reset_peak_stats() override {
        peak_allocated_.store(allocated_.load());
        peak_reserved_.store(reserved_.load());
    }
    void empty_cache() override {
        auto [count, bytes] = cache_.release_all();
        reserved_.fetch_sub(static_cast<int64_t>(bytes));
        num_system_frees_.fetch_add(count);
    }

private:
    // PyTorch's CPU allocator says "DefaultCPUAllocator: not enough memory: you tried to allocate N bytes".
    [[noreturn]] void throw_out_of_memory(size_t nbytes) const {
        throw OutOfMemoryError(fmt::format("cpu: out of memory: not enough memory: you tried to allocate {} bytes "
                                           "({:.3g} GiB); {} bytes are allocated by tensors; free tensors or use a "
                                           "smaller batch", nbytes, static_cast<double>(nbytes) / (1 << 30),
                                           allocated_.load()));
    }

    std::atomic<int64_t> allocated_{0}, reserved_{0}, peak_allocated_{0}, peak_reserved_{0};
    std::atomic<int64_t> num_allocs_{0}, num_frees_{0}, num_mallocs_{0}, num_system_frees_{0};
    BlockCache cache_;
};
}  // namespace

Allocator& cpu_allocator() {
    static CpuAllocator* a = new CpuAllocator();   // never destroyed: tensors may outlive statics
    return *a;
}

namespace cpu {
namespace {
int one_device() { return 1; }
void require_cpu(int) {}
Allocator& allocator_of(int) { return cpu_allocator(); }
}  // namespace

AMPGRAD_REGISTER_DEVICE(kCPU, (DeviceHooks{&one_device, &require_cpu, &allocator_of}));
}  // namespace cpu

}  // namespace ampgrad

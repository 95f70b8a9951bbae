// allocator.cpp: the CPU allocator (64-byte aligned, with live/peak byte counters) and the
// CPU backend singleton. Threads: OpenMP, defaulting to the core count.
//
// Large blocks are cached: a training step frees and reallocates the same activation sizes every
// step, and handing them back to the OS (glibc munmaps or trims large blocks) made the next step
// fault every page in again and zero it (about 8% of a GPT training step in `perf`). Freed blocks
// of at least kCacheMinBytes wait in a per-size free list, up to kCacheMaxBytes in all, and are
// reused by the next allocation of the same rounded size. The live/peak counters count only
// blocks in use, as before.
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "cpu/backend_cpu.hpp"
#include "cpu/loops.hpp"

namespace ampgrad {

namespace {
constexpr size_t kAlignment = 64;

// Blocks are 64-byte aligned and sized in whole multiples of 64 bytes. We align by hand inside a
// slightly larger malloc block (the raw pointer is kept just before the aligned address) rather
// than calling aligned_alloc: glibc's memalign path bypasses its per-thread cache and splits heap
// chunks, which made it the largest cost of creating a small tensor (bench/autograd_overhead.cpp).
void* aligned_malloc(size_t nbytes) {
    size_t rounded = (std::max<size_t>(nbytes, 1) + kAlignment - 1) / kAlignment * kAlignment;
    void* raw = std::malloc(rounded + kAlignment + sizeof(void*));
    if (!raw) throw std::bad_alloc();
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

// Free lists of large blocks by rounded size (thread-safe).
class BlockCache {
public:
    static size_t rounded(size_t nbytes) { return (nbytes + kCacheRounding - 1) / kCacheRounding * kCacheRounding; }

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

private:
    std::mutex mutex_;
    std::unordered_map<size_t, std::vector<void*>> free_;
    size_t held_ = 0;
};

void* cached_malloc(BlockCache& cache, size_t nbytes) {
    if (nbytes < kCacheMinBytes) return aligned_malloc(nbytes);
    const size_t size = BlockCache::rounded(nbytes);
    if (void* p = cache.take(size)) return p;
    return aligned_malloc(size);
}

void cached_free(BlockCache& cache, void* p, size_t nbytes) {
    if (!p) return;
    if (nbytes < kCacheMinBytes || !cache.put(p, BlockCache::rounded(nbytes))) aligned_free(p);
}

class CpuAllocator final : public Allocator {
public:
    void* allocate(size_t nbytes) override {
        void* p = cached_malloc(cache_, nbytes);
        int64_t now = allocated_.fetch_add(static_cast<int64_t>(nbytes)) + static_cast<int64_t>(nbytes);
        int64_t peak = peak_.load();
        while (now > peak && !peak_.compare_exchange_weak(peak, now)) {}
        ++num_allocs_;
        return p;
    }
    void deallocate(void* ptr, size_t nbytes) override {
        cached_free(cache_, ptr, nbytes);
        allocated_.fetch_sub(static_cast<int64_t>(nbytes));
    }
    AllocatorStats stats() const override { return {allocated_.load(), peak_.load(), num_allocs_.load()}; }
    void reset_peak() override { peak_.store(allocated_.load()); }

private:
    std::atomic<int64_t> allocated_{0}, peak_{0}, num_allocs_{0};
    BlockCache cache_;
};
}  // namespace

Allocator& cpu_allocator() {
    static CpuAllocator* a = new CpuAllocator();   // never destroyed: tensors may outlive statics
    return *a;
}

void set_num_threads(int n) {
#ifdef _OPENMP
    omp_set_num_threads(std::max(n, 1));
#else
    (void)n;
#endif
}

int get_num_threads() {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

namespace cpu {
CpuBackend& cpu_backend() {
    static CpuBackend* b = new CpuBackend();
    return *b;
}

void throw_bad_dtype(const char* kernel, DType dtype, const char* expected) {
    throw DTypeError(fmt::format("{}: unsupported dtype {}; expected {}", kernel, dtype_name(dtype), expected));
}
}  // namespace cpu

}  // namespace ampgrad

namespace ampgrad::cpu {
Backend& cpu_backend_ref() { return cpu_backend(); }
}  // namespace ampgrad::cpu

// allocator.cpp: the CPU allocator (64-byte aligned, with live/peak byte counters) and the
// CPU backend singleton. Threads: OpenMP, defaulting to the core count.
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>

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

class CpuAllocator final : public Allocator {
public:
    void* allocate(size_t nbytes) override {
        void* p = aligned_malloc(nbytes);
        int64_t now = allocated_.fetch_add(static_cast<int64_t>(nbytes)) + static_cast<int64_t>(nbytes);
        int64_t peak = peak_.load();
        while (now > peak && !peak_.compare_exchange_weak(peak, now)) {}
        ++num_allocs_;
        return p;
    }
    void deallocate(void* ptr, size_t nbytes) override {
        aligned_free(ptr);
        allocated_.fetch_sub(static_cast<int64_t>(nbytes));
    }
    AllocatorStats stats() const override { return {allocated_.load(), peak_.load(), num_allocs_.load()}; }
    void reset_peak() override { peak_.store(allocated_.load()); }

private:
    std::atomic<int64_t> allocated_{0}, peak_{0}, num_allocs_{0};
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

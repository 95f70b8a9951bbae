// allocator.cu: the CUDA allocator, one per GPU: cudaMalloc/cudaFree with live/peak byte counters.
// It implements core/allocator.hpp, so the caching allocator that comes later (free blocks kept in
// size-binned pools per stream, reused without cudaFree's device-wide sync) replaces this class
// behind cuda_allocator() and nothing else changes.
#include <atomic>
#include <vector>

#include "cuda/backend_cuda.hpp"
#include "cuda/common.cuh"

namespace ampgrad::cuda {

namespace {
class CudaAllocator final : public Allocator {
public:
    explicit CudaAllocator(int index) : index_(index) {}

    void* allocate(size_t nbytes) override {
        ++num_allocs_;
        if (nbytes == 0) return nullptr;                   // empty tensors own no memory
        DeviceGuard guard(index_);
        void* ptr = nullptr;
        cudaError_t status = cudaMalloc(&ptr, nbytes);
        if (status == cudaErrorMemoryAllocation) {
            cudaGetLastError();                            // out of memory is not sticky: clear it
            throw DeviceError(fmt::format("cuda:{}: out of memory: tried to allocate {} bytes with {} bytes live "
                                          "(peak {}); free tensors or use a smaller batch", index_, nbytes,
                                          allocated_.load(), peak_.load()));
        }
        CUDA_CHECK(status);
        int64_t now = allocated_.fetch_add(static_cast<int64_t>(nbytes)) + static_cast<int64_t>(nbytes);
        int64_t peak = peak_.load();
        while (now > peak && !peak_.compare_exchange_weak(peak, now)) {}
        return ptr;
    }

    // Never throws: it runs in Storage destructors, possibly after the CUDA runtime has shut down
    // at process exit (cudaErrorCudartUnloading), when the memory is gone anyway.
    void deallocate(void* ptr, size_t nbytes) override {
        if (ptr == nullptr) return;
        int previous = -1;
        cudaGetDevice(&previous);
        cudaSetDevice(index_);
        cudaFree(ptr);
        cudaGetLastError();
        if (previous >= 0) cudaSetDevice(previous);
        allocated_.fetch_sub(static_cast<int64_t>(nbytes));
    }

    AllocatorStats stats() const override { return {allocated_.load(), peak_.load(), num_allocs_.load()}; }
    void reset_peak() override { peak_.store(allocated_.load()); }

private:
    int index_;
    std::atomic<int64_t> allocated_{0}, peak_{0}, num_allocs_{0};
};
}  // namespace

Allocator& cuda_allocator(int index) {
    require_device(index);
    // One allocator per GPU, never destroyed: tensors may outlive statics.
    static std::vector<CudaAllocator*>* allocators = [] {
        auto* v = new std::vector<CudaAllocator*>();
        for (int i = 0; i < device_count(); ++i) v->push_back(new CudaAllocator(i));
        return v;
    }();
    return *(*allocators)[static_cast<size_t>(index)];
}

}  // namespace ampgrad::cuda

// allocator.cu: the CUDA allocator, one per GPU, on CUDA's stream-ordered allocator
// (cudaMallocAsync/cudaFreeAsync on the device's default memory pool, as PyTorch's
// PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync does). A block is allocated on a stream and
// freed on that same stream, so it is reused only after the work queued there before the free.
// record_stream adds streams the block must also wait for: at the free, the allocation stream
// waits (on the device) for an event recorded on each of them.
//
// The pool keeps freed memory for reuse (its release threshold is raised to "never"): that is
// "reserved" (cudaMemPoolAttrReservedMemCurrent/High), and empty_cache() trims it. The caching
// allocator of the CUDA issue (size-binned blocks per stream) can replace this class behind
// cuda_allocator() without changing anything else.
#include <atomic>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "cuda/common.cuh"

namespace ampgrad::cuda {

namespace {

void raise_peak(std::atomic<int64_t>& peak, int64_t now) {
    int64_t seen = peak.load();
    while (now > seen && !peak.compare_exchange_weak(seen, now)) {}
}

// Sets the current device for its lifetime without throwing (for deallocate, which runs in
// destructors, possibly after the CUDA runtime has shut down at exit: cudaErrorCudartUnloading).
class QuietDeviceGuard {
public:
    explicit QuietDeviceGuard(int index) {
        cudaGetDevice(&previous_);
        cudaSetDevice(index);
    }
    ~QuietDeviceGuard() {
        cudaGetLastError();
        if (previous_ >= 0) cudaSetDevice(previous_);
    }

private:
    int previous_ = -1;
};

class CudaAllocator final : public Allocator {
public:
    explicit CudaAllocator(int index) : index_(index) {
        DeviceGuard guard(index_);
        CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool_, index_));
        uint64_t keep_everything = ~uint64_t{0};
        CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep_everything));
    }

    Device device() const override { return Device(kCUDA, index_); }

    void* allocate(size_t nbytes, const Stream& stream) override {
        require_own_stream("allocate", stream);
        if (nbytes == 0) return nullptr;                   // empty tensors own no memory
        DeviceGuard guard(index_);
        void* ptr = nullptr;
        cudaStream_t s = static_cast<cudaStream_t>(stream.native_handle());
        cudaError_t status = cudaMallocAsync(&ptr, nbytes, s);
        if (status == cudaErrorMemoryAllocation) {
            cudaGetLastError();                            // out of memory is not sticky: clear it
            throw DeviceError(fmt::format("cuda:{}: out of memory: tried to allocate {} bytes with {} bytes live "
                                          "(peak {}); free tensors or use a smaller batch", index_, nbytes,
                                          allocated_.load(), peak_allocated_.load()));
        }
        CUDA_CHECK(status);
        {
            std::lock_guard<std::mutex> lock(mutex_);
            blocks_[ptr] = Block{nbytes, s, {}};
        }
        auto n = static_cast<int64_t>(nbytes);
        raise_peak(peak_allocated_, allocated_.fetch_add(n) + n);
        ++num_allocs_;
        return ptr;
    }

    void deallocate(void* ptr, size_t nbytes) noexcept override {
        if (ptr == nullptr) return;
        Block block;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            auto it = blocks_.find(ptr);
            if (it == blocks_.end()) return;               // not ours: nothing sane to do in a destructor
            block = std::move(it->second);
            blocks_.erase(it);
        }
        QuietDeviceGuard guard(index_);
        for (cudaStream_t used : block.used_on) {          // the free waits for every recorded stream
            cudaEvent_t done = nullptr;
            if (cudaEventCreateWithFlags(&done, cudaEventDisableTiming) != cudaSuccess) continue;
            cudaEventRecord(done, used);
            cudaStreamWaitEvent(block.stream, done, 0);
            cudaEventDestroy(done);                        // released once it has completed
        }
        cudaFreeAsync(ptr, block.stream);
        allocated_.fetch_sub(static_cast<int64_t>(nbytes));
        ++num_frees_;
    }

    void record_stream(void* ptr, const Stream& stream) override {
        require_own_stream("record_stream", stream);
        cudaStream_t s = static_cast<cudaStream_t>(stream.native_handle());
        std::lock_guard<std::mutex> lock(mutex_);
        auto it = blocks_.find(ptr);
        if (it == blocks_.end())
            throw ValueError(fmt::format("cuda:{} allocator record_stream: {} is not a live block of this allocator",
                                         index_, ptr));
        Block& block = it->second;
        if (s == block.stream) return;                     // the free is ordered on it already
        for (cudaStream_t used : block.used_on)
            if (used == s) return;
        block.used_on.push_back(s);
    }

    AllocatorStats stats() const override {
        AllocatorStats st;
        st.allocated_bytes = allocated_.load();
        st.peak_allocated_bytes = peak_allocated_.load();
        st.reserved_bytes = static_cast<int64_t>(pool_attribute(cudaMemPoolAttrReservedMemCurrent));
        st.peak_reserved_bytes = static_cast<int64_t>(pool_attribute(cudaMemPoolAttrReservedMemHigh));
        st.num_allocs = st.num_device_allocs = num_allocs_.load();   // every block is a cudaMallocAsync
        st.num_frees = st.num_device_frees = num_frees_.load();
        return st;
    }

    void reset_peak_stats() override {
        peak_allocated_.store(allocated_.load());
        uint64_t zero = 0;                                 // the driver then restarts the mark from now
        CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReservedMemHigh, &zero));
    }

    // Waits for the device (freed blocks become reusable only after their streams' work), then
    // gives every unused byte of the pool back to the driver.
    void empty_cache() override {
        DeviceGuard guard(index_);
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaMemPoolTrimTo(pool_, 0));
    }

private:
    struct Block {
        size_t nbytes = 0;
        cudaStream_t stream = nullptr;                 // allocated on, freed on
        std::vector<cudaStream_t> used_on;             // record_stream: other streams the free waits for
    };

    void require_own_stream(const char* call, const Stream& stream) const {
        if (!(stream.device() == Device(kCUDA, index_)))
            throw DeviceError(fmt::format("cuda:{} allocator {}: {} is on {}, not cuda:{}", index_, call, stream.str(),
                                          stream.device().str(), index_));
    }

    uint64_t pool_attribute(cudaMemPoolAttr attr) const {
        uint64_t value = 0;
        CUDA_CHECK(cudaMemPoolGetAttribute(pool_, attr, &value));
        return value;
    }

    int index_;
    cudaMemPool_t pool_ = nullptr;
    std::mutex mutex_;
    std::unordered_map<void*, Block> blocks_;
    std::atomic<int64_t> allocated_{0}, peak_allocated_{0}, num_allocs_{0}, num_frees_{0};
};

}  // namespace

Allocator& cuda_allocator(int index) {
    require_device(index);
    // One allocator per GPU, made on first use and never destroyed: tensors may outlive statics.
    static std::vector<CudaAllocator*>* allocators = [] {
        auto* v = new std::vector<CudaAllocator*>();
        for (int i = 0; i < count_devices(); ++i) v->push_back(new CudaAllocator(i));
        return v;
    }();
    return *(*allocators)[static_cast<size_t>(index)];
}

// Registered with the CUDA device's hooks in cuda/backend.cu.

}  // namespace ampgrad::cuda

// allocator.cu: the CUDA allocators, one per GPU. Two backends, chosen once per process by
// AMPGRAD_CUDA_ALLOC_CONF (PyTorch's PYTORCH_CUDA_ALLOC_CONF spelling):
//   - "backend:native" (the default): core/caching_allocator.hpp's stream-aware caching allocator over
//     cudaMalloc/cudaFree and cudaEvents (CudaMemory below), as PyTorch's native allocator;
//   - "backend:cudaMallocAsync": CUDA's stream-ordered allocator (cudaMallocAsync/cudaFreeAsync on
//     the device's default memory pool), as PyTorch's backend of that name. A block is allocated on a
//     stream and freed on that same stream, so it is reused only after the work queued there before
//     the free. record_stream adds streams the block must also wait for: at the free, the allocation
//     stream waits (on the device) for an event recorded on each of them. The pool keeps freed
//     memory (its release threshold is "never"): that is "reserved", and empty_cache() trims it.
#include <atomic>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <cstdlib>
#include <unistd.h>
#include <string>

#include "core/caching_allocator.hpp"
#include "core/host_sync.hpp"
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

class AsyncAllocator final : public Allocator {
public:
    explicit AsyncAllocator(int index) : index_(index) {
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
        cudaStream_t s = to_cuda_stream(index_, stream.id());
        cudaError_t status = cudaMallocAsync(&ptr, nbytes, s);
        if (status == cudaErrorMemoryAllocation) {
            cudaGetLastError();                            // out of memory is not sticky: clear it
            note_host_sync(HostSync::kStreamSynchronize, Device(kCUDA, index_));
            CUDA_CHECK(cudaStreamSynchronize(s));          // let pending frees land, trim, retry once
            CUDA_CHECK(cudaMemPoolTrimTo(pool_, 0));
            status = cudaMallocAsync(&ptr, nbytes, s);
        }
        if (status == cudaErrorMemoryAllocation) {
            cudaGetLastError();
            size_t free_bytes = 0, total_bytes = 0;
            cudaMemGetInfo(&free_bytes, &total_bytes);
            throw OutOfMemoryError(fmt::format("cuda:{}: out of memory: tried to allocate {} bytes; {} bytes allocated "
                                               "by tensors, {} reserved by the memory pool, {} free on the device; "
                                               "free tensors or use a smaller batch", index_, nbytes,
                                               allocated_.load(), pool_attribute(cudaMemPoolAttrReservedMemCurrent),
                                               free_bytes));
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
        cudaStream_t s = to_cuda_stream(index_, stream.id());
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
        note_host_sync(HostSync::kDeviceSynchronize, Device(kCUDA, index_));
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

// Timing-free events for the caching allocators below: recorded on a stream of a GPU, polled, waited.
void* record_cuda_event(const Stream& stream) {
    DeviceGuard guard(stream.device().index);
    cudaEvent_t event = nullptr;
    CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventRecord(event, to_cuda_stream(stream.device().index, stream.id())));
    return event;
}

bool cuda_event_completed(void* event) {
    cudaError_t status = cudaEventQuery(static_cast<cudaEvent_t>(event));
    if (status == cudaErrorNotReady) {
        cudaGetLastError();
        return false;
    }
    CUDA_CHECK(status);
    return true;
}

void wait_cuda_event(void* event, Device device) {
    note_host_sync(HostSync::kEventSynchronize, device);
    CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event)));
}

// The raw side of the native caching allocator: cudaMalloc/cudaFree and timing-free events.
class CudaMemory final : public DeviceMemory {
public:
    explicit CudaMemory(int index) : index_(index) {}
    Device device() const override { return Device(kCUDA, index_); }

    void* raw_allocate(size_t nbytes) override {
        DeviceGuard guard(index_);
        void* ptr = nullptr;
        cudaError_t status = cudaMalloc(&ptr, nbytes);
        if (status == cudaErrorMemoryAllocation) {
            cudaGetLastError();                            // out of memory is not sticky: clear it
            return nullptr;
        }
        CUDA_CHECK(status);
        return ptr;
    }
    void raw_free(void* ptr) noexcept override {
        QuietDeviceGuard guard(index_);
        cudaFree(ptr);                                     // may fail at process exit: nothing to do then
    }
    void* record_event(const Stream& stream) override { return record_cuda_event(stream); }
    bool event_completed(void* event) override { return cuda_event_completed(event); }
    void wait_event(void* event) override { wait_cuda_event(event, device()); }
    void destroy_event(void* event) noexcept override { cudaEventDestroy(static_cast<cudaEvent_t>(event)); }
    size_t free_device_bytes() override {
        DeviceGuard guard(index_);
        size_t free_bytes = 0, total_bytes = 0;
        CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
        return free_bytes;
    }

private:
    int index_;
};

// Page-locked host memory (cudaHostAlloc, portable across GPUs) for Tensor::pin_memory(). The same
// caching allocator serves it: a block that a copy on a GPU stream used (record_stream, cuda/copy.cu)
// returns to the pool only after that stream's event, as in PyTorch's CachingHostAllocator.
class PinnedHostMemory final : public DeviceMemory {
public:
    Device device() const override { return Device(kCPU); }
    void* raw_allocate(size_t nbytes) override {
        void* ptr = nullptr;
        cudaError_t status = cudaHostAlloc(&ptr, nbytes, cudaHostAllocPortable);
        if (status == cudaErrorMemoryAllocation) {
            cudaGetLastError();
            return nullptr;
        }
        CUDA_CHECK(status);
        return ptr;
    }
    void raw_free(void* ptr) noexcept override { cudaFreeHost(ptr); }
    void* record_event(const Stream& stream) override { return record_cuda_event(stream); }
    bool event_completed(void* event) override { return cuda_event_completed(event); }
    void wait_event(void* event) override { wait_cuda_event(event, Device(kCUDA)); }
    void destroy_event(void* event) noexcept override { cudaEventDestroy(static_cast<cudaEvent_t>(event)); }
    size_t free_device_bytes() override {
        return static_cast<size_t>(sysconf(_SC_AVPHYS_PAGES)) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
    }
    bool usable_on(const Stream& stream) const override { return stream.device().is_cpu() || stream.device().is_cuda(); }
};

// AMPGRAD_CUDA_ALLOC_CONF: "backend:native" (default) or "backend:cudaMallocAsync"; ValueError otherwise.
bool use_async_backend() {
    const char* conf = std::getenv("AMPGRAD_CUDA_ALLOC_CONF");
    const std::string value = conf ? conf : "";
    if (value.empty() || value == "backend:native") return false;
    if (value == "backend:cudaMallocAsync") return true;
    throw ValueError(fmt::format("AMPGRAD_CUDA_ALLOC_CONF={}: expected backend:native or backend:cudaMallocAsync",
                                 value));
}

Allocator* make_allocator(int index) {
    if (use_async_backend()) return new AsyncAllocator(index);
    return new CachingAllocator(*new CudaMemory(index));
}

}  // namespace

Allocator& cuda_allocator(int index) {
    require_device(index);
    // One allocator per GPU, made when that GPU is first used (the cudaMallocAsync backend opens
    // the device's context, which costs memory on every GPU it touches) and never destroyed:
    // tensors may outlive statics.
    struct Slot {
        std::once_flag made;
        Allocator* allocator = nullptr;
    };
    static auto* slots = new std::vector<Slot>(static_cast<size_t>(count_devices()));
    Slot& slot = (*slots)[static_cast<size_t>(index)];
    std::call_once(slot.made, [&] { slot.allocator = make_allocator(index); });
    return *slot.allocator;
}

Allocator& cuda_pinned_host_allocator() {
    static Allocator* pinned = new CachingAllocator(*new PinnedHostMemory());   // never destroyed, as above
    return *pinned;
}

// Registered with the CUDA device's hooks in cuda/backend.cu.

}  // namespace ampgrad::cuda

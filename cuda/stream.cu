// stream.cu: the CUDA StreamRuntime (core/stream.hpp). A Stream's id is its cudaStream_t's value,
// except id 0, ampgrad's default stream of a device: a non-blocking stream created on first use and
// shared by every thread. The legacy NULL stream is never used: it would serialise against every
// other stream (and libraries' work on it) and hide ordering bugs. new_stream() hands out, round-robin, streams from a
// per-GPU pool of 32 non-blocking streams created on first use and never destroyed (PyTorch's
// c10/cuda/CUDAStream.cpp does the same: creating and destroying streams is slow and synchronizing).
// Events are cudaEvent_t, made without timing unless asked (timing makes recording slower).
#include <array>
#include <atomic>
#include <mutex>
#include <vector>

#include "core/stream.hpp"
#include "cuda/common.cuh"

namespace ampgrad::cuda {

namespace {

constexpr size_t kPoolSize = 32;

cudaStream_t to_cuda(const Stream& stream) { return to_cuda_stream(stream.device().index, stream.id()); }
cudaEvent_t to_cuda(void* event) { return static_cast<cudaEvent_t>(event); }

struct StreamPool {
    std::once_flag created;
    std::array<cudaStream_t, kPoolSize> streams{};
    std::atomic<size_t> next{0};
};

// The stream behind id 0 of each device, created non-blocking on first use and never destroyed.
cudaStream_t default_stream_of(int index) {
    static std::vector<std::once_flag>* created = new std::vector<std::once_flag>(static_cast<size_t>(count_devices()));
    static std::vector<cudaStream_t>* streams = new std::vector<cudaStream_t>(static_cast<size_t>(count_devices()));
    std::call_once((*created)[static_cast<size_t>(index)], [&] {
        DeviceGuard guard(index);
        CUDA_CHECK(cudaStreamCreateWithFlags(&(*streams)[static_cast<size_t>(index)], cudaStreamNonBlocking));
    });
    return (*streams)[static_cast<size_t>(index)];
}

StreamPool& pool_for(int index) {
    static std::vector<StreamPool>* pools = new std::vector<StreamPool>(static_cast<size_t>(count_devices()));
    StreamPool& pool = (*pools)[static_cast<size_t>(index)];
    std::call_once(pool.created, [&] {
        DeviceGuard guard(index);
        for (cudaStream_t& s : pool.streams) CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    });
    return pool;
}

// cudaSuccess -> true, cudaErrorNotReady -> false (and cleared: it is not an error), else throws.
bool ready(cudaError_t status, const char* expr) {
    if (status == cudaSuccess) return true;
    if (status == cudaErrorNotReady) {
        cudaGetLastError();
        return false;
    }
    throw_cuda_error(status, expr, __FILE__, __LINE__);
}

class CudaStreamRuntime final : public StreamRuntime {
public:
    void check_device(int index) override { require_device(index); }

    Stream new_stream(int index) override {
        StreamPool& pool = pool_for(index);
        cudaStream_t s = pool.streams[pool.next.fetch_add(1) % kPoolSize];
        return Stream(Device(kCUDA, index), reinterpret_cast<uintptr_t>(s));
    }
    bool query_stream(const Stream& stream) override {
        DeviceGuard guard(stream.device().index);
        return ready(cudaStreamQuery(to_cuda(stream)), "cudaStreamQuery");
    }
    void synchronize_stream(const Stream& stream) override {
        DeviceGuard guard(stream.device().index);
        CUDA_CHECK(cudaStreamSynchronize(to_cuda(stream)));
    }
    void synchronize_device(int index) override {
        DeviceGuard guard(index);
        CUDA_CHECK(cudaDeviceSynchronize());
    }
    void* create_event(int index, bool enable_timing) override {
        DeviceGuard guard(index);
        cudaEvent_t event = nullptr;
        CUDA_CHECK(cudaEventCreateWithFlags(&event, enable_timing ? cudaEventDefault : cudaEventDisableTiming));
        return event;
    }
    // No throw: events die in destructors, possibly after the runtime has shut down at exit.
    void destroy_event(void* event, int index) noexcept override {
        int previous = -1;
        cudaGetDevice(&previous);
        cudaSetDevice(index);
        cudaEventDestroy(to_cuda(event));
        cudaGetLastError();
        if (previous >= 0) cudaSetDevice(previous);
    }
    void record_event(void* event, const Stream& stream) override {
        DeviceGuard guard(stream.device().index);
        CUDA_CHECK(cudaEventRecord(to_cuda(event), to_cuda(stream)));
    }
    void wait_event(void* event, const Stream& stream) override {
        DeviceGuard guard(stream.device().index);
        CUDA_CHECK(cudaStreamWaitEvent(to_cuda(stream), to_cuda(event), 0));
    }
    bool query_event(void* event) override { return ready(cudaEventQuery(to_cuda(event)), "cudaEventQuery"); }
    void synchronize_event(void* event) override { CUDA_CHECK(cudaEventSynchronize(to_cuda(event))); }
    double elapsed_ms(void* start, void* end) override {
        float ms = 0.0f;
        CUDA_CHECK(cudaEventElapsedTime(&ms, to_cuda(start), to_cuda(end)));
        return ms;
    }
};

[[maybe_unused]] const bool registered = [] {
    register_stream_runtime(kCUDA, new CudaStreamRuntime());   // never destroyed (events may outlive statics)
    return true;
}();

}  // namespace

cudaStream_t to_cuda_stream(int device_index, uint64_t id) {
    if (id != 0) return reinterpret_cast<cudaStream_t>(static_cast<uintptr_t>(id));
    return default_stream_of(device_index);
}

cudaStream_t current_stream() {
    int index = 0;
    CUDA_CHECK(cudaGetDevice(&index));
    return to_cuda(::ampgrad::current_stream(Device(kCUDA, index)));
}

}  // namespace ampgrad::cuda

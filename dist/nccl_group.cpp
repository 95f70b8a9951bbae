// dist/nccl_group.cpp: the NCCL process group (CUDA tensors). Built when Meson finds NCCL with the
// CUDA toolkit (AMPGRAD_WITH_NCCL). Rank 0 makes NCCL's unique id and passes it to the others
// through the TCP store (key "nccl/<group>/unique_id"); each rank uses GPU LOCAL_RANK % device count.
//
// Ordering, as PyTorch's ProcessGroupNCCL: a collective runs on the group's own stream, after an
// event recorded on this thread's current ampgrad stream of the device (core/stream.hpp), so it
// reads its buffers only once the kernels that filled them have run. Its buffers are recorded on
// the group's stream (Tensor::record_stream), so the caching allocator does not hand their memory
// out again before NCCL is done with it, even if the caller drops them. A Work is the `done` event:
// wait(timeout) polls it and NCCL's async error, makes the current stream wait for it, and past the
// timeout aborts the communicator (so no rank stays blocked in NCCL) and throws DistTimeoutError
// naming the op and group. NCCL reduces f16/bf16, avg and reduce-scatter natively.
//
// Shutdown: CUDA's runtime tears itself down at exit, before a group held by a static (the default
// group) would be destroyed. Each group therefore registers itself with an exit hook, installed
// after CUDA was first used (atexit runs hooks last-in first-out), that releases every live
// communicator while CUDA still works.
#include "ampgrad_config.h"
#include "dist/send_recv_rules.hpp"
#include "dist/process_group.hpp"

#if AMPGRAD_WITH_NCCL
#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

#include "core/stream.hpp"

namespace ampgrad::dist {

namespace {

void cuda_check(cudaError_t e, const char* what, const std::string& group) {
    if (e != cudaSuccess)
        throw DistError(fmt::format("{} on NCCL group '{}': CUDA error: {}", what, group, cudaGetErrorString(e)));
}
void nccl_check(ncclResult_t r, const char* what, const std::string& group) {
    if (r != ncclSuccess && r != ncclInProgress)
        throw DistError(fmt::format("{} on NCCL group '{}': NCCL error: {}", what, group, ncclGetErrorString(r)));
}

ncclDataType_t nccl_dtype(DType dt) {
    switch (dt) {
    case DType::kFloat32: return ncclFloat32;
    case DType::kFloat16: return ncclFloat16;
    case DType::kBFloat16: return ncclBfloat16;
    case DType::kFloat64: return ncclFloat64;
    case DType::kInt64: return ncclInt64;
    case DType::kInt32: return ncclInt32;
    case DType::kBool: return ncclUint8;
    case DType::kUInt8: return ncclUint8;
    case DType::kFloat8_e4m3fn:                 // bytes: only the collectives that move data (check_reducible)
    case DType::kFloat8_e5m2: return ncclUint8;
    }
    return ncclFloat32;
}

// fp8 tensors travel as bytes (all_gather, broadcast), but their sums would be byte sums.
void check_reducible(const char* what, const Tensor& t) {
    if (is_float8(t.dtype()))
        throw DTypeError(fmt::format("{}: {} is not reducible (fp8 is a storage dtype: reduce in f32 and cast)", what,
                                     t.describe()));
}

// The reduction for a tensor of `dt`: a bool is "any rank true" whatever the op, as on Gloo
// (dist/gloo_collectives.cpp) and in PyTorch's NCCL group; a byte sum would leave 2 in a bool, and
// wrap to 0 (false) at 256 ranks.
ncclRedOp_t nccl_op(ReduceOp op, DType dt) {
    if (dt == DType::kBool) return ncclMax;
    switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kAvg: return ncclAvg;
    case ReduceOp::kMax: return ncclMax;
    }
    return ncclSum;
}

class NcclWork : public Work {
public:
    // done: recorded on the group's stream after the collective. keep: the tensors it reads and
    // writes, alive until the Work is dropped.
    // aborted: the group's flag, set here when a timeout aborts the communicator (which frees it).
    NcclWork(std::string what, Event done, ncclComm_t comm, std::shared_ptr<std::atomic<bool>> aborted, int device,
             Millis timeout, std::vector<Tensor> keep)
        : what_(std::move(what)), done_(std::move(done)), comm_(comm), aborted_(std::move(aborted)), device_(device),
          timeout_(timeout), keep_(std::move(keep)) {}
    bool is_completed() override { return finished(); }
    // Blocks until the collective has finished (or fails, or times out), then orders this thread's
    // current stream after it.
    void wait(std::optional<Millis> timeout) override {
        auto until = std::chrono::steady_clock::now() + timeout.value_or(timeout_);
        while (!finished()) {
            if (aborted_->load())
                throw DistError(fmt::format("{} failed: the communicator was aborted after an earlier timeout", what_));
            ncclResult_t async_error = ncclSuccess;
            ncclCommGetAsyncError(comm_, &async_error);
            if (async_error != ncclSuccess && async_error != ncclInProgress)
                throw DistError(fmt::format("{} failed: NCCL error: {} (a peer may have died)", what_,
                                            ncclGetErrorString(async_error)));
            if (std::chrono::steady_clock::now() > until) {
                if (!aborted_->exchange(true))
                    ncclCommAbort(comm_);   // frees the ranks blocked in this collective; the group is unusable after
                throw DistTimeoutError(fmt::format("{} did not complete within {} ms; the communicator was aborted",
                                                   what_, timeout.value_or(timeout_).count()));
            }
            std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
        done_.wait(current_stream(Device(kCUDA, device_)));
    }

private:
    bool finished() {
        try {
            return done_.query();
        } catch (const Error& e) {
            throw DistError(fmt::format("{} failed: {}", what_, e.what()));
        }
    }

    std::string what_;
    Event done_;
    ncclComm_t comm_;
    std::shared_ptr<std::atomic<bool>> aborted_;
    int device_;
    Millis timeout_;
    std::vector<Tensor> keep_;
};

// The live groups and the exit hook that releases them (see the file comment).
class NcclGroup;
std::mutex& live_groups_mutex() {
    static auto* m = new std::mutex();   // never destroyed: the exit hook may run after statics
    return *m;
}
std::set<NcclGroup*>& live_groups() {
    static auto* groups = new std::set<NcclGroup*>();
    return *groups;
}
void release_live_groups_at_exit();

// Makes the device current for the calling thread, restoring the previous one on exit.
class CudaDeviceScope {
public:
    CudaDeviceScope(int device, const std::string& group) {
        cuda_check(cudaGetDevice(&previous_), "cudaGetDevice", group);
        if (previous_ != device) cuda_check(cudaSetDevice(device), "cudaSetDevice", group);
    }
    ~CudaDeviceScope() { cudaSetDevice(previous_); }
    CudaDeviceScope(const CudaDeviceScope&) = delete;
    CudaDeviceScope& operator=(const CudaDeviceScope&) = delete;

private:
    int previous_ = 0;
};

class NcclGroup : public ProcessGroup {
public:
    NcclGroup(std::shared_ptr<TCPStore> store, const RendezvousInfo& info, const InitOptions& opt)
        : store_(std::move(store)), name_(opt.group_name), rank_(info.rank), world_size_(info.world_size),
          timeout_(opt.timeout) {
        int devices = 0;
        if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
            throw DistError(fmt::format("init_process_group('nccl'): rank {} sees no CUDA device", rank_));
        device_ = info.local_rank % devices;
        cuda_check(cudaSetDevice(device_), "init_process_group", name_);
        ncclUniqueId id;
        const std::string key = "nccl/" + name_ + "/unique_id";
        if (rank_ == 0) {
            nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId", name_);
            store_->set(key, std::vector<char>(id.internal, id.internal + sizeof id.internal));
        } else {
            std::vector<char> bytes = store_->get(key, timeout_);
            std::memcpy(id.internal, bytes.data(), std::min(bytes.size(), sizeof id.internal));
        }
        nccl_check(ncclCommInitRank(&comm_, world_size_, id, rank_), "ncclCommInitRank", name_);
        cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate", name_);
        static std::once_flag hook_installed;      // after CUDA's own exit handling: runs before it
        std::call_once(hook_installed, [] { std::atexit(release_live_groups_at_exit); });
        std::lock_guard<std::mutex> lock(live_groups_mutex());
        live_groups().insert(this);
    }
    ~NcclGroup() override {
        {
            std::lock_guard<std::mutex> lock(live_groups_mutex());
            live_groups().erase(this);
        }
        release();
    }
    // Destroys the communicator (aborts it if a collective is still queued or running: a peer may
    // be gone, and ncclCommDestroy would wait for it), then the stream and the barrier's buffer.
    // Idempotent; never throws.
    void release() noexcept {
        if (comm_ == nullptr) return;
        cudaSetDevice(device_);
        if (!aborted_->load()) {                                   // else a timeout's abort freed it already
            if (cudaStreamQuery(stream_) == cudaSuccess) ncclCommDestroy(comm_);
            else ncclCommAbort(comm_);
        }
        cudaStreamDestroy(stream_);
        if (scratch_) cudaFree(scratch_);
        comm_ = nullptr, stream_ = nullptr, scratch_ = nullptr;
    }
    int rank() const override { return rank_; }
    int world_size() const override { return world_size_; }
    const std::string& name() const override { return name_; }
    std::string backend() const override { return "nccl"; }
    Millis timeout() const override { return timeout_; }
    // The watchdog's abort (dist/recording_group.cpp): frees the ranks blocked in a collective; the
    // Work handles then fail, and release() skips the communicator.
    void abort(const std::string& reason) override {
        (void)reason;
        if (comm_ != nullptr && !aborted_->exchange(true)) ncclCommAbort(comm_);
    }

    WorkPtr all_reduce(Tensor& t, ReduceOp op, bool async_op) override {
        check("all_reduce", t);
        check_reducible("all_reduce", t);
        return enqueue(fmt::format("all_reduce({}, {})", reduce_op_name(op), t.describe()), async_op, {t}, [&] {
            return ncclAllReduce(t.raw_data(), t.raw_data(), t.numel(), nccl_dtype(t.dtype()), nccl_op(op, t.dtype()),
                                 comm_, stream_);
        });
    }
    WorkPtr reduce_scatter(Tensor& out, const Tensor& in, ReduceOp op, bool async_op) override {
        check("reduce_scatter", out);
        check("reduce_scatter", in);
        check_reducible("reduce_scatter", in);
        if (in.numel() != out.numel() * world_size_ || in.dtype() != out.dtype())
            throw ShapeError(fmt::format("reduce_scatter: input {} must be world size {} x output {}", in.describe(),
                                         world_size_, out.describe()));
        return enqueue(fmt::format("reduce_scatter({}, {})", reduce_op_name(op), in.describe()), async_op, {out, in}, [&] {
            return ncclReduceScatter(in.raw_data(), out.raw_data(), out.numel(), nccl_dtype(in.dtype()),
                                     nccl_op(op, in.dtype()), comm_, stream_);
        });
    }
    WorkPtr all_gather(Tensor& out, const Tensor& in, bool async_op) override {
        check("all_gather", out);
        check("all_gather", in);
        if (out.numel() != in.numel() * world_size_ || in.dtype() != out.dtype())
            throw ShapeError(fmt::format("all_gather: output {} must be world size {} x input {}", out.describe(),
                                         world_size_, in.describe()));
        return enqueue(fmt::format("all_gather({})", in.describe()), async_op, {out, in}, [&] {
            return ncclAllGather(in.raw_data(), out.raw_data(), in.numel(), nccl_dtype(in.dtype()), comm_, stream_);
        });
    }
    WorkPtr broadcast(Tensor& t, int src, bool async_op) override {
        check("broadcast", t);
        if (src < 0 || src >= world_size_)
            throw ValueError(fmt::format("broadcast: src={} is outside [0, world size {})", src, world_size_));
        return enqueue(fmt::format("broadcast(src={}, {})", src, t.describe()), async_op, {t}, [&] {
            return ncclBroadcast(t.raw_data(), t.raw_data(), t.numel(), nccl_dtype(t.dtype()), src, comm_, stream_);
        });
    }
    // ncclSend and ncclRecv in one group call, so that two ranks exchanging with each other do not
    // wait on one another (NCCL's point-to-point, as torch.distributed.batch_isend_irecv).
    WorkPtr send_recv(const Tensor& send, int dst, Tensor& recv, int src, bool async_op) override {
        check("send_recv", send);
        check("send_recv", recv);
        if (send.dtype() != recv.dtype())
            throw DTypeError(fmt::format("send_recv: dtypes differ: {} and {}", send.describe(), recv.describe()));
        check_send_recv_peers(dst, src, rank_, world_size_, send, recv);
        if (dst == rank_) {   // with itself: a copy on the current stream
            recv.copy_(send);
            return enqueue("send_recv(self)", async_op, {}, [] { return ncclSuccess; });
        }
        return enqueue(fmt::format("send_recv(dst={}, src={}, {})", dst, src, send.describe()), async_op, {send, recv}, [&] {
            ncclResult_t r = ncclGroupStart();
            if (r == ncclSuccess) r = ncclSend(send.raw_data(), send.numel(), nccl_dtype(send.dtype()), dst, comm_, stream_);
            if (r == ncclSuccess) r = ncclRecv(recv.raw_data(), recv.numel(), nccl_dtype(recv.dtype()), src, comm_, stream_);
            const ncclResult_t end = ncclGroupEnd();
            return r == ncclSuccess ? end : r;
        });
    }
    // A one-element all-reduce on a scratch device buffer, as PyTorch's NCCL barrier does.
    WorkPtr barrier(bool async_op) override {
        if (!scratch_) {
            CudaDeviceScope device_scope(device_, name_);
            cuda_check(cudaMalloc(&scratch_, sizeof(float)), "barrier", name_);
        }
        return enqueue("barrier", async_op, {}, [&] {
            return ncclAllReduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, comm_, stream_);
        });
    }

private:
    void check(const char* op, const Tensor& t) const {
        if (t.device().type != DeviceType::kCUDA)
            throw DeviceError(fmt::format("{} on the NCCL group '{}': needs a CUDA tensor, got {}", op, name_, t.describe()));
        if (t.device().index != device_)
            throw DeviceError(fmt::format("{} on the NCCL group '{}': rank {} communicates on cuda:{}, but the tensor "
                                          "is {}", op, name_, rank_, device_, t.describe()));
        if (comm_ == nullptr)
            throw DistError(fmt::format("{} on the NCCL group '{}': the communicator was released at exit", op, name_));
        if (aborted_->load())
            throw DistError(fmt::format("{} on the NCCL group '{}': the communicator was aborted after a collective "
                                        "timed out; destroy the process group and start a new one", op, name_));
        if (!t.is_contiguous())
            throw ValueError(fmt::format("{}: needs a contiguous tensor, got {}", op, t.describe()));
    }

    Stream comm_stream() const { return Stream(Device(kCUDA, device_), reinterpret_cast<uintptr_t>(stream_)); }

    // Queues `launch` on the group's stream after the work on the current stream, records its
    // buffers there, and returns its Work (waited for here unless async_op).
    template <typename Launch>
    WorkPtr enqueue(const std::string& what, bool async_op, std::vector<Tensor> keep, Launch launch) {
        std::string full = fmt::format("{} on group '{}' (rank {} of {})", what, name_, rank_, world_size_);
        CudaDeviceScope device_scope(device_, name_);
        const Stream comm = comm_stream();
        Event ready, done;
        try {
            ready.record(current_stream(Device(kCUDA, device_)));   // after the kernels that produced the inputs
            ready.wait(comm);
            for (const Tensor& t : keep) t.record_stream(comm);       // no reuse of their memory before NCCL is done
        } catch (const Error& e) {
            throw DistError(fmt::format("{}: ordering it after the current stream failed: {}", full, e.what()));
        }
        nccl_check(launch(), full.c_str(), name_);
        try {
            done.record(comm);
        } catch (const Error& e) {
            throw DistError(fmt::format("{}: recording its completion failed: {}", full, e.what()));
        }
        auto work = std::make_shared<NcclWork>(full, std::move(done), comm_, aborted_, device_, timeout_, std::move(keep));
        if (!async_op) work->wait(std::nullopt);
        return work;
    }

    std::shared_ptr<TCPStore> store_;
    std::string name_;
    int rank_, world_size_, device_ = 0;
    Millis timeout_;
    ncclComm_t comm_ = nullptr;
    std::shared_ptr<std::atomic<bool>> aborted_ = std::make_shared<std::atomic<bool>>(false);
    cudaStream_t stream_ = nullptr;
    void* scratch_ = nullptr;
};

void release_live_groups_at_exit() {
    std::lock_guard<std::mutex> lock(live_groups_mutex());
    for (NcclGroup* group : live_groups()) group->release();
    live_groups().clear();
}

}  // namespace

std::unique_ptr<ProcessGroup> make_nccl_group(std::shared_ptr<TCPStore> store, const RendezvousInfo& info,
                                              const InitOptions& options) {
    return std::make_unique<NcclGroup>(std::move(store), info, options);
}

}  // namespace ampgrad::dist

#else  // no NCCL in this build

namespace ampgrad::dist {
std::unique_ptr<ProcessGroup> make_nccl_group(std::shared_ptr<TCPStore>, const RendezvousInfo&, const InitOptions&) {
    throw DistError("init_process_group('nccl'): ampgrad was built without NCCL (it needs the CUDA toolkit's "
                    "libnccl; configure with -Dnccl=enabled to require it)");
}
}  // namespace ampgrad::dist

#endif  // AMPGRAD_WITH_NCCL

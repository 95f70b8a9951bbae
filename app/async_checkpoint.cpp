// app/async_checkpoint.cpp: the boundary copy, the background copier (with its version check) and
// the background writer of `train --ckpt-async` (see async_checkpoint.hpp for the three phases).
#include "app/async_checkpoint.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include <sys/resource.h>
#include <unistd.h>

#include "autograd/ops/ops.hpp"
#include "core/error.hpp"
#include "core/profiler.hpp"
#include "core/stream.hpp"

namespace ampgrad::app {

namespace {

using Clock = std::chrono::steady_clock;

// A host copy of `t`, into `staging` when it is a CPU tensor of the same dtype and sizes (the
// previous save's copy, free again once its write finished): no allocation and no page faults.
Tensor host_tensor(const Tensor& t, const Tensor* staging) {
    const Tensor live = t.detach();
    const bool reuse = staging && staging->dtype() == live.dtype() && staging->sizes() == live.sizes() &&
                       staging->is_contiguous();
    if (live.device().type == DeviceType::kCPU) {
        Tensor out = reuse ? *staging : empty(live.sizes(), TensorOptions().dtype(live.dtype()));
        if (live.is_contiguous())   // one memcpy: no thread team for a copy that memory bandwidth bounds
            std::memcpy(out.raw_data(), live.raw_data(), static_cast<size_t>(live.numel()) * live.element_size());
        else
            out.copy_(live);
        return out;
    }
    Tensor pinned = reuse && staging->is_pinned()
        ? *staging : empty(live.sizes(), TensorOptions().dtype(live.dtype())).pin_memory(live.device().type);
    pinned.copy_(live);   // device -> page-locked host; synchronizes before returning
    return pinned;
}

// Tensors that are one tensor in the live state (a tied head and its embedding) stay one in the
// copy, so that the safetensors file stores them once, as a synchronous save does.
nn::NamedTensors host_tensors(const nn::NamedTensors& live, const nn::NamedTensors* staging) {
    nn::NamedTensors out;
    std::vector<std::pair<Tensor, Tensor>> copied;   // (live, its copy)
    for (const auto& [name, t] : live) {
        auto same = std::find_if(copied.begin(), copied.end(), [&t](const auto& c) {
            return c.first.raw_data() == t.raw_data() && c.first.sizes() == t.sizes() &&
                   c.first.strides() == t.strides() && c.first.dtype() == t.dtype();
        });
        if (same != copied.end()) {
            out.insert(name, same->second);
            continue;
        }
        Tensor copy = host_tensor(t, staging ? staging->find(name) : nullptr);
        copied.emplace_back(t, copy);
        out.insert(name, copy);
    }
    return out;
}

// The tensors the forward pass writes (Fp8Training's amax histories and scales, in
// optimizer.safetensors as "fp8.<layer>.*"): save() copies them at the boundary.
bool written_by_forward(const std::string& name) { return name.rfind("fp8.", 0) == 0; }

// `live` with each tensor the forward writes replaced by a copy of it, in the same order.
nn::NamedTensors copy_forward_written(const nn::NamedTensors& live) {
    nn::NamedTensors out;
    for (const auto& [name, t] : live) out.insert(name, written_by_forward(name) ? host_tensor(t, nullptr) : t);
    return out;
}

// On a GPU the copier copies on its own thread's stream: the training thread's stream must have
// finished the writes of the step (the optimizer's) first. Usually it has (the step reads the loss),
// so this costs nothing; CPU work is done when issued.
void finish_device_writes(const CheckpointContent& c) {
    std::vector<Device> devices;
    for (const nn::NamedTensors* part : {&c.model, &c.optimizer})
        for (const auto& [name, t] : *part)
            if (t.device().type != DeviceType::kCPU && std::find(devices.begin(), devices.end(), t.device()) == devices.end())
                devices.push_back(t.device());
    for (const Device& d : devices) current_stream(d).synchronize();
}

// The version counter of every tensor of `c` (model first, then optimizer), in order.
std::vector<uint32_t> versions_of(const CheckpointContent& c) {
    std::vector<uint32_t> out;
    for (const nn::NamedTensors* part : {&c.model, &c.optimizer})
        for (const auto& [name, t] : *part) out.push_back(t._version());
    return out;
}

// The first tensor of `c` whose version is not the one in `versions` ("" when none moved).
std::string first_written(const CheckpointContent& c, const std::vector<uint32_t>& versions) {
    size_t i = 0;
    for (const nn::NamedTensors* part : {&c.model, &c.optimizer})
        for (const auto& [name, t] : *part)
            if (t._version() != versions.at(i++)) return name;
    return "";
}

// Fault injection for tests/app: AMPGRAD_TEST_DELAY_ASYNC_COPY_MS=N makes the copier sleep N ms
// before it copies, so that a write before the fence would land first.
void maybe_delay_copy_for_test() {
    if (const char* ms = std::getenv("AMPGRAD_TEST_DELAY_ASYNC_COPY_MS"))
        std::this_thread::sleep_for(std::chrono::milliseconds(std::atoll(ms)));
}

double ms_since(Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace

CheckpointContent host_copy(const CheckpointContent& live, const CheckpointContent* staging) {
    return {live.step, host_tensors(live.model, staging ? &staging->model : nullptr),
            host_tensors(live.optimizer, staging ? &staging->optimizer : nullptr), live.state};
}

void SaveBlockTimes::add(double ms) {
    ++saves;
    total_ms += ms;
    last_ms_ = ms;
    max_ms = std::max(max_ms, ms);
}

void SaveBlockTimes::add_fence(double ms) {
    total_ms += ms;
    fence_ms += ms;
    last_ms_ += ms;
    max_ms = std::max(max_ms, last_ms_);
}

std::string SaveBlockTimes::describe(bool async) const {
    const std::string what = async ? fmt::format("--ckpt-async: the step boundary, and {:.1f} ms in all at the fence "
                                                 "before the next optimizer step", fence_ms)
                                   : std::string("synchronous: the whole write");
    return fmt::format("{} checkpoint save(s) blocked the step {:.1f} ms on average (longest {:.1f} ms, {})", saves,
                       saves ? total_ms / static_cast<double>(saves) : 0.0, max_ms, what);
}

AsyncCheckpointer::AsyncCheckpointer() : copier_([this] { copier_loop(); }), writer_([this] { writer_loop(); }) {}

AsyncCheckpointer::~AsyncCheckpointer() {
    try {
        wait();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ampgrad: the checkpoint save in flight at exit failed: %s\n", e.what());
    }
    {
        std::lock_guard lk(m_);
        stop_ = true;
    }
    cv_.notify_all();
    copier_.join();
    writer_.join();
}

// Phase 2: the host copy of the live state, then the check that nothing wrote it meanwhile.
void AsyncCheckpointer::copy_job(Job& job) {
    maybe_delay_copy_for_test();
    profiler::Span span("checkpoint", "async_copy");
    auto copy = std::make_shared<CheckpointContent>(host_copy(job.live, staging_.get()));
    const std::string written = first_written(job.live, job.versions);
    if (!written.empty())
        throw InternalError(fmt::format("--ckpt-async: \"{}\" was written during the background copy of step {} "
                                        "(a write before the fence, AsyncCheckpointer::wait_for_copy)", written, job.live.step));
    staging_ = copy;
    job.copy = std::move(copy);
}

void AsyncCheckpointer::copier_loop() {
    std::unique_lock lk(m_);
    for (;;) {
        cv_.wait(lk, [&] { return stop_ || (job_ && !job_->copy); });
        if (!job_ || job_->copy) return;
        Job job = *job_;   // tensor handles: the same storage
        lk.unlock();
        std::exception_ptr error;
        try {
            copy_job(job);
        } catch (const InternalError&) {   // a write before the fence: a bug, named as one
            error = std::current_exception();
        } catch (const std::exception& e) {
            error = std::make_exception_ptr(IOError(fmt::format(
                "--ckpt-async: the background save of step {} under {} failed: {}", job.live.step, job.root, e.what())));
        }
        lk.lock();
        if (error) {   // nothing to write: the save ends here
            error_ = error;
            job_.reset();
        } else {
            job_->copy = job.copy;
            job_->live = {};   // the live state is no longer read
        }
        cv_.notify_all();
    }
}

void AsyncCheckpointer::writer_loop() {
    setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 10);   // this thread only (Linux); best effort
    std::unique_lock lk(m_);
    for (;;) {
        cv_.wait(lk, [&] { return stop_ || (job_ && job_->copy); });
        if (!job_ || !job_->copy) return;
        const Job job = *job_;
        lk.unlock();
        std::string dir;
        std::exception_ptr error;
        try {
            profiler::Span span("checkpoint", "async_save");
            dir = publish_checkpoint(*job.copy, job.root, job.keep);
        } catch (const std::exception& e) {
            error = std::make_exception_ptr(IOError(fmt::format(
                "--ckpt-async: the background save of step {} under {} failed: {}", job.copy->step, job.root, e.what())));
        }
        lk.lock();
        if (error) error_ = error;
        else last_saved_ = dir;
        job_.reset();
        cv_.notify_all();
    }
}

double AsyncCheckpointer::save(const CheckpointContent& live, const std::string& root, int keep) {
    const auto start = Clock::now();
    wait();   // at most one save in flight; its copy is free again
    Job job;
    job.live = {live.step, live.model, copy_forward_written(live.optimizer), live.state};
    job.versions = versions_of(job.live);
    finish_device_writes(job.live);
    job.root = root;
    job.keep = keep;
    {
        std::lock_guard lk(m_);
        job_ = std::move(job);
    }
    cv_.notify_all();
    return ms_since(start);
}

double AsyncCheckpointer::wait_for_copy() {
    const auto start = Clock::now();
    std::unique_lock lk(m_);
    if (!job_ || job_->copy) return 0.0;
    cv_.wait(lk, [&] { return !job_ || job_->copy; });
    return ms_since(start);
}

void AsyncCheckpointer::wait() {
    std::exception_ptr error;
    {
        std::unique_lock lk(m_);
        cv_.wait(lk, [&] { return !job_.has_value(); });
        std::swap(error, error_);
    }
    if (error) std::rethrow_exception(error);
}

std::string AsyncCheckpointer::last_saved() {
    std::lock_guard lk(m_);
    return last_saved_;
}

}  // namespace ampgrad::app

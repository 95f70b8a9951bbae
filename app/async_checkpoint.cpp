// app/async_checkpoint.cpp: the copy to host memory and the background writer of
// `train --ckpt-async` (see async_checkpoint.hpp).
#include "app/async_checkpoint.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include <sys/resource.h>
#include <unistd.h>

#include "autograd/ops/ops.hpp"
#include "core/error.hpp"
#include "core/profiler.hpp"

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
    max_ms = std::max(max_ms, ms);
}

std::string SaveBlockTimes::describe(bool async) const {
    return fmt::format("{} checkpoint save(s) blocked the step {:.1f} ms on average (longest {:.1f} ms, {})", saves,
                       saves ? total_ms / static_cast<double>(saves) : 0.0, max_ms,
                       async ? "--ckpt-async: the copy to host memory" : "synchronous: the whole write");
}

AsyncCheckpointer::AsyncCheckpointer() : writer_([this] { writer_loop(); }) {}

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
    writer_.join();
}

void AsyncCheckpointer::writer_loop() {
    setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 10);   // this thread only (Linux); best effort
    std::unique_lock lk(m_);
    for (;;) {
        cv_.wait(lk, [&] { return stop_ || job_.has_value(); });
        if (!job_) return;
        const Job job = *job_;
        lk.unlock();
        std::string dir;
        std::exception_ptr error;
        try {
            profiler::Span span("checkpoint", "async_save");
            dir = publish_checkpoint(*job.content, job.root, job.keep);
        } catch (const std::exception& e) {
            error = std::make_exception_ptr(IOError(fmt::format(
                "--ckpt-async: the background save of step {} under {} failed: {}", job.content->step, job.root, e.what())));
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
    auto copy = std::make_shared<CheckpointContent>(host_copy(live, staging_.get()));
    staging_ = copy;
    {
        std::lock_guard lk(m_);
        job_ = Job{copy, root, keep};
    }
    cv_.notify_all();
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

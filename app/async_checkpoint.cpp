// app/async_checkpoint.cpp: the copy to host memory and the background writer of
// `train --ckpt-async` (see async_checkpoint.hpp).
#include "app/async_checkpoint.hpp"

#include <cstdio>

#include "autograd/ops/ops.hpp"
#include "core/error.hpp"
#include "core/profiler.hpp"

namespace ampgrad::app {

namespace {

using Clock = std::chrono::steady_clock;

Tensor host_tensor(const Tensor& t) {
    const Tensor live = t.detach();
    if (live.device().type == DeviceType::kCPU) return live.clone();
    Tensor pinned = empty(live.sizes(), TensorOptions().dtype(live.dtype())).pin_memory(live.device().type);
    pinned.copy_(live);   // device -> page-locked host; synchronizes before returning
    return pinned;
}

nn::NamedTensors host_tensors(const nn::NamedTensors& live) {
    nn::NamedTensors out;
    for (const auto& [name, t] : live) out.insert(name, host_tensor(t));
    return out;
}

double ms_since(Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace

CheckpointContent host_copy(const CheckpointContent& live) {
    return {live.step, host_tensors(live.model), host_tensors(live.optimizer), live.state};
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

AsyncCheckpointer::~AsyncCheckpointer() {
    try {
        wait();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ampgrad: the checkpoint save in flight at exit failed: %s\n", e.what());
    }
}

double AsyncCheckpointer::save(const CheckpointContent& live, const std::string& root, int keep) {
    const auto start = Clock::now();
    wait();   // at most one save in flight
    auto copy = std::make_shared<CheckpointContent>(host_copy(live));
    writer_ = std::thread([this, copy, root, keep] {
        try {
            profiler::Span span("checkpoint", "async_save");
            const std::string dir = publish_checkpoint(*copy, root, keep);
            std::lock_guard lk(m_);
            last_saved_ = dir;
        } catch (const std::exception& e) {
            std::lock_guard lk(m_);
            error_ = std::make_exception_ptr(
                IOError(fmt::format("--ckpt-async: the background save of step {} under {} failed: {}", copy->step,
                                    root, e.what())));
        }
    });
    return ms_since(start);
}

void AsyncCheckpointer::wait() {
    if (writer_.joinable()) writer_.join();
    std::exception_ptr error;
    {
        std::lock_guard lk(m_);
        std::swap(error, error_);
    }
    if (error) std::rethrow_exception(error);
}

std::string AsyncCheckpointer::last_saved() {
    std::lock_guard lk(m_);
    return last_saved_;
}

}  // namespace ampgrad::app

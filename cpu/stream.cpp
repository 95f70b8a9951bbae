// stream.cpp: the CPU's StreamRuntime. CPU kernels run to completion on the calling thread when they
// are issued, so a CPU stream never has pending work: queries are true, synchronizing returns at
// once, and an event is finished when it is recorded. Events keep the host time of their last
// record(), so elapsed_time between two of them measures the work issued in between.
#include <atomic>
#include <chrono>

#include "core/error.hpp"
#include "core/stream.hpp"

namespace ampgrad::cpu {

namespace {

using Clock = std::chrono::steady_clock;

struct CpuEvent {
    Clock::time_point recorded_at;
};

class CpuStreamRuntime final : public StreamRuntime {
public:
    void check_device(int index) override {
        if (index != 0) throw DeviceError(fmt::format("cpu:{}: the CPU has one device, index 0", index));
    }
    Stream new_stream(int) override { return Stream(Device(kCPU), next_id_.fetch_add(1) + 1); }
    bool query_stream(const Stream&) override { return true; }
    void synchronize_stream(const Stream&) override {}
    void synchronize_device(int) override {}
    void* create_event(int, bool) override { return new CpuEvent{}; }
    void destroy_event(void* event, int) noexcept override { delete static_cast<CpuEvent*>(event); }
    void record_event(void* event, const Stream&) override { static_cast<CpuEvent*>(event)->recorded_at = Clock::now(); }
    void wait_event(void*, const Stream&) override {}
    bool query_event(void*) override { return true; }
    void synchronize_event(void*) override {}
    double elapsed_ms(void* start, void* end) override {
        auto span = static_cast<CpuEvent*>(end)->recorded_at - static_cast<CpuEvent*>(start)->recorded_at;
        return std::chrono::duration<double, std::milli>(span).count();
    }

private:
    std::atomic<uint64_t> next_id_{0};
};

// Never destroyed: events may be released by static destructors after this file's would have run.
[[maybe_unused]] const bool registered = [] {
    register_stream_runtime(kCPU, new CpuStreamRuntime());
    return true;
}();

}  // namespace

}  // namespace ampgrad::cpu

// stream.cpp: the per-thread current stream of each device, StreamGuard, Event, and the table of
// StreamRuntimes the device folders register (see stream.hpp).
#include "core/stream.hpp"

#include <array>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/host_sync.hpp"

namespace ampgrad {

namespace {

constexpr size_t kDeviceTypes = 2;                       // kCPU, kCUDA
size_t type_slot(DeviceType type) { return static_cast<size_t>(type); }

// Filled by static initializers in cpu/ and cuda/; constant-initialized to null before any of them run.
constinit std::array<StreamRuntime*, kDeviceTypes> g_runtimes{};

// This thread's current stream id per device type and index. kUnchecked: the device index has not
// been checked on this thread yet (the first current_stream() asks the runtime, later ones do not).
constexpr uint64_t kUnchecked = ~uint64_t{0};
thread_local std::array<std::vector<uint64_t>, kDeviceTypes> t_current;

uint64_t& current_slot(Device device) {
    std::vector<uint64_t>& ids = t_current[type_slot(device.type)];
    if (device.index < 0)
        throw DeviceError(fmt::format("{}: negative device index", device.str()));
    if (static_cast<size_t>(device.index) >= ids.size()) ids.resize(static_cast<size_t>(device.index) + 1, kUnchecked);
    uint64_t& id = ids[static_cast<size_t>(device.index)];
    if (id == kUnchecked) {
        // The CPU (always index 0) needs no runtime: tensors made by static initializers that run
        // before cpu/stream.cpp registers still get their stream.
        if (!device.is_cpu()) stream_runtime(device.type).check_device(device.index);
        id = 0;
    }
    return id;
}

}  // namespace

// ---- registry ----

void register_stream_runtime(DeviceType type, StreamRuntime* runtime) { g_runtimes[type_slot(type)] = runtime; }

StreamRuntime& stream_runtime(DeviceType type) {
    StreamRuntime* runtime = g_runtimes[type_slot(type)];
    if (runtime == nullptr)
        throw DeviceError(fmt::format("{}: no stream runtime is registered for this device type (ampgrad was built "
                                      "without {} support)", device_type_name(type), device_type_name(type)));
    return *runtime;
}

// ---- streams ----

bool Stream::query() const { return stream_runtime(device_.type).query_stream(*this); }
void Stream::synchronize() const {
    note_host_sync(HostSync::kStreamSynchronize, device_);
    stream_runtime(device_.type).synchronize_stream(*this);
}
std::string Stream::str() const {
    return is_default() ? fmt::format("default stream on {}", device_.str())
                        : fmt::format("stream {:#x} on {}", id_, device_.str());
}

Stream default_stream(Device device) {
    stream_runtime(device.type).check_device(device.index);
    return Stream(device, 0);
}

Stream new_stream(Device device) {
    StreamRuntime& runtime = stream_runtime(device.type);
    runtime.check_device(device.index);
    return runtime.new_stream(device.index);
}

Stream current_stream(Device device) { return Stream(device, current_slot(device)); }

void set_current_stream(const Stream& stream) { current_slot(stream.device()) = stream.id(); }

void synchronize(Device device) {
    StreamRuntime& runtime = stream_runtime(device.type);
    runtime.check_device(device.index);
    note_host_sync(HostSync::kDeviceSynchronize, device);
    runtime.synchronize_device(device.index);
}

StreamGuard::StreamGuard(const Stream& stream)
    : original_(::ampgrad::current_stream(stream.device())), current_(stream) {
    set_current_stream(stream);
}

StreamGuard::~StreamGuard() { current_slot(original_.device()) = original_.id(); }   // checked: cannot throw

// ---- events ----

Event::~Event() { release(); }

Event::Event(Event&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), device_(other.device_), enable_timing_(other.enable_timing_) {}

Event& Event::operator=(Event&& other) noexcept {
    if (this != &other) {
        release();
        handle_ = std::exchange(other.handle_, nullptr);
        device_ = other.device_;
        enable_timing_ = other.enable_timing_;
    }
    return *this;
}

void Event::release() noexcept {
    if (handle_ == nullptr) return;
    if (StreamRuntime* runtime = g_runtimes[type_slot(device_.type)]) runtime->destroy_event(handle_, device_.index);
    handle_ = nullptr;
}

void Event::record(const Stream& stream) {
    StreamRuntime& runtime = stream_runtime(stream.device().type);
    if (handle_ == nullptr) {
        runtime.check_device(stream.device().index);
        handle_ = runtime.create_event(stream.device().index, enable_timing_);
        device_ = stream.device();
    } else if (!(device_ == stream.device())) {
        throw DeviceError(fmt::format("Event.record: the event was recorded on {} and cannot be recorded on {} ({})",
                                      device_.str(), stream.device().str(), stream.str()));
    }
    runtime.record_event(handle_, stream);
}

void Event::wait(const Stream& stream) const {
    if (handle_ == nullptr) return;                       // nothing recorded: nothing to wait for
    // Another device of the same type may wait (cudaStreamWaitEvent takes an event of any GPU: the
    // peer copies in cuda/copy.cu order two GPUs' streams this way); another type cannot.
    if (device_.type != stream.device().type)
        throw DeviceError(fmt::format("Event.wait: the event was recorded on {} but {} is on {}", device_.str(),
                                      stream.str(), stream.device().str()));
    stream_runtime(device_.type).wait_event(handle_, stream);
}

bool Event::query() const { return handle_ == nullptr || stream_runtime(device_.type).query_event(handle_); }

void Event::synchronize() const {
    if (handle_ == nullptr) return;
    note_host_sync(HostSync::kEventSynchronize, device_);
    stream_runtime(device_.type).synchronize_event(handle_);
}

double Event::elapsed_time(const Event& end) const {
    if (!enable_timing_ || !end.enable_timing_)
        throw ValueError("Event.elapsed_time: both events must be created with enable_timing=true");
    if (handle_ == nullptr || end.handle_ == nullptr)
        throw ValueError("Event.elapsed_time: both events must be recorded before calculating elapsed time");
    if (!(device_ == end.device_))
        throw DeviceError(fmt::format("Event.elapsed_time: the events were recorded on {} and {}", device_.str(),
                                      end.device_.str()));
    return stream_runtime(device_.type).elapsed_ms(handle_, end.handle_);
}

}  // namespace ampgrad

// stream.hpp: streams and events, the ordering primitives of a device (after PyTorch's c10::Stream,
// c10::Event and c10/core/impl/DeviceGuardImplInterface.h).
//
// A Stream is a queue of work on one device: work issued on one stream runs in issue order; work on
// two streams may overlap. Each thread has a current stream per device (the device's default stream
// until set), and every kernel, copy and allocation is issued on it. An Event marks a point in a
// stream: other streams can wait for it without blocking the host, and the host can wait for it.
//
//   Stream side = new_stream(dev);
//   Event ready;
//   ready.record(current_stream(dev));       // after the producer's work
//   { StreamGuard g(side); ready.wait(side); ...work on side...; t.record_stream(side); }
//
// The CPU implementation (cpu/stream.cpp) is real but trivial: CPU work runs to completion when it
// is issued, so every stream is always idle, events complete when recorded and elapsed_time measures
// host time. The CUDA one (cuda/stream.cu) maps streams to cudaStream_t and events to cudaEvent_t.
// Each device type registers a StreamRuntime; nothing here names a device type.
#pragma once
#include <cstdint>
#include <string>

#include "core/device.hpp"

namespace ampgrad {

class Stream {
public:
    Stream() = default;                                   // the CPU's default stream
    Stream(Device device, uint64_t id) : device_(device), id_(id) {}

    Device device() const { return device_; }
    // 0 is the device's default stream. Other ids are what the device's runtime hands out (for CUDA,
    // the cudaStream_t's value), so native_handle() needs no lookup. The default stream's handle is
    // the backend's to resolve (CUDA's is a non-blocking stream of its own, never the NULL stream).
    uint64_t id() const { return id_; }
    bool is_default() const { return id_ == 0; }
    void* native_handle() const { return reinterpret_cast<void*>(static_cast<uintptr_t>(id_)); }

    bool query() const;          // true when all work issued on it so far has finished
    void synchronize() const;    // blocks the calling thread until then
    std::string str() const;     // "stream 0 on cuda:0"
    bool operator==(const Stream& o) const { return device_ == o.device_ && id_ == o.id_; }

private:
    Device device_;
    uint64_t id_ = 0;
};

// The device's default stream (id 0). Throws DeviceError when the device cannot be used.
Stream default_stream(Device device);
// A new stream on the device. CUDA takes it from a per-device pool of non-blocking streams handed
// out round-robin (streams are never destroyed, as in PyTorch); the CPU numbers them 1, 2, ...
Stream new_stream(Device device);
// This thread's current stream on the device: its default stream until set_current_stream.
Stream current_stream(Device device);
void set_current_stream(const Stream& stream);
// Blocks until every stream of the device is idle.
void synchronize(Device device);

// Makes `stream` current on its device for this thread and restores the previous current stream of
// that device on destruction (PyTorch's c10::StreamGuard).
class StreamGuard {
public:
    explicit StreamGuard(const Stream& stream);
    ~StreamGuard();
    StreamGuard(const StreamGuard&) = delete;
    StreamGuard& operator=(const StreamGuard&) = delete;

    Stream original_stream() const { return original_; }
    Stream current_stream() const { return current_; }

private:
    Stream original_;
    Stream current_;
};

// A marker in a stream. The device is fixed by the first record(); before that, query() is true and
// synchronize() returns at once, as in PyTorch. Move-only: it owns the device's event object.
class Event {
public:
    explicit Event(bool enable_timing = false) : enable_timing_(enable_timing) {}
    ~Event();
    Event(Event&& other) noexcept;
    Event& operator=(Event&& other) noexcept;
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;

    // Marks the current end of `stream`'s work (again, if recorded before). Throws DeviceError if
    // the event was recorded on another device.
    void record(const Stream& stream);
    // Makes `stream` wait (on the device, not the host) until the recorded work has finished.
    void wait(const Stream& stream) const;
    bool query() const;            // true when the recorded work has finished (or nothing was recorded)
    void synchronize() const;      // blocks the calling thread until then
    // Milliseconds between this event and `end`, both recorded with enable_timing and finished.
    // Throws ValueError naming what is missing otherwise.
    double elapsed_time(const Event& end) const;

    bool is_recorded() const { return handle_ != nullptr; }
    Device device() const { return device_; }     // meaningful once recorded
    bool timing_enabled() const { return enable_timing_; }

private:
    void release() noexcept;

    void* handle_ = nullptr;       // the runtime's event object, made by the first record()
    Device device_;
    bool enable_timing_ = false;
};

// What one device type implements (cpu/stream.cpp, cuda/stream.cu) and registers at load time.
// Events are opaque handles made and destroyed by the runtime. Every call gets a valid device index
// of its type; the runtime throws DeviceError when the device cannot be used.
class StreamRuntime {
public:
    virtual ~StreamRuntime() = default;
    virtual void check_device(int index) = 0;                 // throws DeviceError if unusable
    virtual Stream new_stream(int index) = 0;
    virtual bool query_stream(const Stream& stream) = 0;
    virtual void synchronize_stream(const Stream& stream) = 0;
    virtual void synchronize_device(int index) = 0;
    virtual void* create_event(int index, bool enable_timing) = 0;
    virtual void destroy_event(void* event, int index) noexcept = 0;
    virtual void record_event(void* event, const Stream& stream) = 0;
    virtual void wait_event(void* event, const Stream& stream) = 0;
    virtual bool query_event(void* event) = 0;
    virtual void synchronize_event(void* event) = 0;
    virtual double elapsed_ms(void* start, void* end) = 0;    // both finished and made with timing
};

// Registration (from the device's folder, at load time) and lookup. Looking up a device type with
// no runtime throws DeviceError.
void register_stream_runtime(DeviceType type, StreamRuntime* runtime);
StreamRuntime& stream_runtime(DeviceType type);

}  // namespace ampgrad

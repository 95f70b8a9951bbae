// profiler.hpp: spans of host time, written as a Chrome trace (the Trace Event Format that Perfetto
// and chrome://tracing open; docs/profiling.md). Code marks a region with an RAII Span:
//
//   profiler::Span span("optim", "AdamW.step");                            // category, name
//   profiler::Span span("kernel", "gemm", [&] { return shapes_json(); }); // args, built only when on
//
// With profiling off (the default) a Span costs one relaxed load and a branch where it starts and a
// null test where it ends: nothing is allocated, the name is not copied, the args lambda never runs. With
// it on, each thread appends finished spans to its own buffer (no lock on the hot path; the buffer
// is registered once per thread), with steady-clock start and duration in nanoseconds.
//
//   profiler::start();                                   // clears the buffers, turns spans on
//   ... the steps to trace ...
//   profiler::stop();
//   profiler::write_chrome_trace("trace.json", rank);   // pid = rank: one process track per rank
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace ampgrad::profiler {

namespace detail {
extern std::atomic<bool> g_enabled;
}

inline bool enabled() { return detail::g_enabled.load(std::memory_order_relaxed); }

// One finished span. args is a JSON object's text ("{}" when none).
struct SpanEvent {
    std::string category, name, args;
    int64_t start_ns = 0, duration_ns = 0;   // steady clock
    int thread = 0;                          // small ids in order of each thread's first span
    int64_t device_token = -1;               // the device range hooks' mark for it (-1: none)
};

// A backend's marks on each span while profiling (cuda/profiler_ranges.cu, registered at load time):
// an NVTX range, so Nsight Systems shows the same spans, and a pair of events on the current stream,
// whose elapsed time the trace gives as the span's "gpu_us" (the device time of the work it issued).
struct DeviceRangeHooks {
    int64_t (*begin)(std::string_view name) = nullptr;   // push the range, record the start event: a token
    void (*end)(int64_t token) = nullptr;                // record the end event, pop the range
    double (*elapsed_us)(int64_t token) = nullptr;       // waits for the end event; < 0 when unknown
    void (*reset)() = nullptr;                           // start(): forget the previous window's events
};
void set_device_range_hooks(const DeviceRangeHooks& hooks);

class Span {
public:
    Span(std::string_view category, std::string_view name) {
        if (enabled()) [[unlikely]] begin(category, name, nullptr);
    }
    template <class ArgsFn>
    Span(std::string_view category, std::string_view name, ArgsFn&& args) {
        if (enabled()) [[unlikely]] {
            const std::function<std::string()> fn = std::forward<ArgsFn>(args);
            begin(category, name, &fn);
        }
    }
    ~Span() {
        if (event_ != nullptr) [[unlikely]] end();
    }
    Span(const Span&) = delete;
    Span& operator=(const Span&) = delete;

private:
    void begin(std::string_view category, std::string_view name, const std::function<std::string()>* args);
    void end();
    SpanEvent* event_ = nullptr;   // set only while profiling: the span being timed
};

void start();   // drops what was recorded and turns spans on
void stop();    // turns spans off (the recorded spans stay until the next start)
// Every finished span of every thread, by start time.
std::vector<SpanEvent> collected();
// {"traceEvents": [...], "displayTimeUnit": "ms"}: an "X" event per span (ts: the steady clock in
// microseconds, which all processes of one host share, so the ranks' files merge into one timeline;
// dur in microseconds), and "M" events naming the process "rank <pid>" and each thread's track.
std::string chrome_trace_json(const std::vector<SpanEvent>& spans, int pid);
// Writes chrome_trace_json(collected(), pid) to path (atomically); IOError naming path on failure.
void write_chrome_trace(const std::string& path, int pid);

// Text helpers for args: a JSON string literal (quoted, escaped).
std::string json_string(std::string_view s);

}  // namespace ampgrad::profiler

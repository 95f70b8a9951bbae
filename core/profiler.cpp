// profiler.cpp: the per-thread span buffers and the Chrome trace writer (core/profiler.hpp).
#include "core/profiler.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "core/atomic_file.hpp"

namespace ampgrad::profiler {

namespace detail {
std::atomic<bool> g_enabled{false};
}

namespace {

int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// One thread's finished spans. Buffers live as long as the process (a thread that ended keeps its
// spans for the trace); the registry lock is taken when a thread records its first span, and to
// collect or clear.
struct ThreadBuffer {
    int thread = 0;
    std::mutex mutex;   // uncontended while tracing: only collect/clear take it from another thread
    std::vector<SpanEvent> spans;
};

struct Registry {
    std::mutex mutex;
    std::vector<std::unique_ptr<ThreadBuffer>> buffers;
};

Registry& registry() {
    static Registry* r = new Registry();   // never destroyed: threads may record while the process exits
    return *r;
}

ThreadBuffer& this_thread_buffer() {
    thread_local ThreadBuffer* mine = [] {
        Registry& r = registry();
        std::lock_guard<std::mutex> lock(r.mutex);
        r.buffers.push_back(std::make_unique<ThreadBuffer>());
        r.buffers.back()->thread = static_cast<int>(r.buffers.size()) - 1;
        return r.buffers.back().get();
    }();
    return *mine;
}

}  // namespace

namespace {
DeviceRangeHooks& device_hooks() {   // set once at load time by a backend, read while profiling
    static DeviceRangeHooks hooks;
    return hooks;
}
}  // namespace

void set_device_range_hooks(const DeviceRangeHooks& hooks) { device_hooks() = hooks; }

void Span::begin(std::string_view category, std::string_view name, const std::function<std::string()>* args) {
    event_ = new SpanEvent{std::string(category), std::string(name), args ? (*args)() : std::string()};
    if (device_hooks().begin != nullptr) event_->device_token = device_hooks().begin(name);
    event_->start_ns = now_ns();
}

void Span::end() {
    const std::unique_ptr<SpanEvent> event(event_);
    event->duration_ns = now_ns() - event->start_ns;
    if (event->device_token >= 0 && device_hooks().end != nullptr) device_hooks().end(event->device_token);
    ThreadBuffer& buffer = this_thread_buffer();
    event->thread = buffer.thread;
    std::lock_guard<std::mutex> lock(buffer.mutex);
    buffer.spans.push_back(std::move(*event));
}

void start() {
    Registry& r = registry();
    {
        std::lock_guard<std::mutex> lock(r.mutex);
        for (auto& b : r.buffers) {
            std::lock_guard<std::mutex> guard(b->mutex);
            b->spans.clear();
        }
    }
    if (device_hooks().reset != nullptr) device_hooks().reset();
    detail::g_enabled.store(true, std::memory_order_relaxed);
}

void stop() { detail::g_enabled.store(false, std::memory_order_relaxed); }

std::vector<SpanEvent> collected() {
    std::vector<SpanEvent> all;
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    for (auto& b : r.buffers) {
        std::lock_guard<std::mutex> guard(b->mutex);
        all.insert(all.end(), b->spans.begin(), b->spans.end());
    }
    // By start; an enclosing span (same start, longer) before the spans inside it.
    std::sort(all.begin(), all.end(), [](const SpanEvent& a, const SpanEvent& b) {
        return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.duration_ns > b.duration_ns;
    });
    return all;
}

std::string json_string(std::string_view s) {
    std::string out = "\"";
    for (const char c : s) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\t': out += "\\t"; break;
            default:
                if (static_cast<unsigned char>(c) < 0x20) out += fmt::format("\\u{:04x}", static_cast<int>(c));
                else out += c;
        }
    }
    return out + "\"";
}

namespace {
// A span's args with its device time added ("gpu_us") when a backend timed it.
std::string args_with_device_time(const SpanEvent& s) {
    const std::string args = s.args.empty() ? "{}" : s.args;
    if (s.device_token < 0 || device_hooks().elapsed_us == nullptr) return args;
    const double us = device_hooks().elapsed_us(s.device_token);
    if (us < 0) return args;
    return args.substr(0, args.size() - 1) + (args == "{}" ? "" : ", ") + fmt::format("\"gpu_us\": {:.3f}}}", us);
}
}  // namespace

std::string chrome_trace_json(const std::vector<SpanEvent>& spans, int pid) {
    std::string out = "{\"traceEvents\": [\n";
    out += fmt::format(R"({{"ph": "M", "name": "process_name", "pid": {}, "tid": 0, "args": {{"name": "rank {}"}}}})",
                       pid, pid);
    std::vector<int> named;
    for (const SpanEvent& s : spans) {
        if (std::find(named.begin(), named.end(), s.thread) != named.end()) continue;
        named.push_back(s.thread);
        out += fmt::format(",\n{{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": {}, \"tid\": {}, \"args\": "
                           "{{\"name\": \"{}\"}}}}", pid, s.thread, s.thread == 0 ? "main" : fmt::format("thread {}", s.thread));
    }
    for (const SpanEvent& s : spans) {
        out += fmt::format(",\n{{\"ph\": \"X\", \"cat\": {}, \"name\": {}, \"ts\": {:.3f}, \"dur\": {:.3f}, \"pid\": {}, "
                           "\"tid\": {}, \"args\": {}}}",
                           json_string(s.category), json_string(s.name), 1e-3 * static_cast<double>(s.start_ns),
                           1e-3 * static_cast<double>(s.duration_ns), pid, s.thread, args_with_device_time(s));
    }
    return out + "\n], \"displayTimeUnit\": \"ms\"}\n";
}

void write_chrome_trace(const std::string& path, int pid) { write_file_atomic(path, chrome_trace_json(collected(), pid)); }

}  // namespace ampgrad::profiler

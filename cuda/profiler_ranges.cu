// profiler_ranges.cu: the CUDA backend's marks on profiler spans (core/profiler.hpp, DeviceRangeHooks):
// each span pushes an NVTX range (Nsight Systems shows the trace's spans on its timeline) and records
// a pair of CUDA events on the current stream, whose elapsed time the Chrome trace gives as the span's
// "gpu_us": the device time between the span's start and end on that stream. Only while profiling:
// with spans off, nothing here runs.
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <mutex>
#include <string>
#include <vector>

#include "core/profiler.hpp"
#include "cuda/common.cuh"

namespace ampgrad::cuda {

namespace {

struct EventPair {
    cudaEvent_t start = nullptr, end = nullptr;
    bool ended = false;
};

std::mutex g_mutex;
std::vector<EventPair> g_events;   // indexed by token; destroyed at the next profiler::start()

int64_t range_begin(std::string_view name) {
    const std::string text(name);
    nvtxRangePushA(text.c_str());
    EventPair pair;   // without a usable device the events stay null: the range still marks the span
    if (cudaEventCreate(&pair.start) == cudaSuccess && cudaEventCreate(&pair.end) == cudaSuccess)
        cudaEventRecord(pair.start, current_stream());
    else
        cudaGetLastError(), pair = EventPair{};
    std::lock_guard<std::mutex> lock(g_mutex);
    g_events.push_back(pair);
    return static_cast<int64_t>(g_events.size()) - 1;
}

void range_end(int64_t token) {
    nvtxRangePop();
    std::lock_guard<std::mutex> lock(g_mutex);
    if (token < 0 || token >= static_cast<int64_t>(g_events.size())) return;
    EventPair& pair = g_events[static_cast<size_t>(token)];
    if (pair.end == nullptr) return;
    cudaEventRecord(pair.end, current_stream());
    pair.ended = true;
}

double range_elapsed_us(int64_t token) {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (token < 0 || token >= static_cast<int64_t>(g_events.size())) return -1.0;
    const EventPair& pair = g_events[static_cast<size_t>(token)];
    float ms = 0.0f;
    if (!pair.ended || cudaEventSynchronize(pair.end) != cudaSuccess ||
        cudaEventElapsedTime(&ms, pair.start, pair.end) != cudaSuccess) {
        cudaGetLastError();
        return -1.0;
    }
    return 1e3 * static_cast<double>(ms);
}

void range_reset() {
    std::lock_guard<std::mutex> lock(g_mutex);
    for (EventPair& pair : g_events) {
        if (pair.start != nullptr) cudaEventDestroy(pair.start);
        if (pair.end != nullptr) cudaEventDestroy(pair.end);
    }
    g_events.clear();
}

[[maybe_unused]] const bool g_registered = (profiler::set_device_range_hooks(
    {.begin = &range_begin, .end = &range_end, .elapsed_us = &range_elapsed_us, .reset = &range_reset}), true);

}  // namespace

}  // namespace ampgrad::cuda

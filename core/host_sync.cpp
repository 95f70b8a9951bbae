// host_sync.cpp: the registry of live HostSyncCounters (core/host_sync.hpp).
#include "core/host_sync.hpp"

#include <algorithm>
#include <atomic>

#include <fmt/format.h>

namespace ampgrad {

namespace {

std::atomic<int> live_counters{0};

std::mutex& registry_mutex() {
    static std::mutex m;
    return m;
}

std::vector<HostSyncCounter*>& registry() {
    static std::vector<HostSyncCounter*> counters;
    return counters;
}

}  // namespace

const char* host_sync_name(HostSync kind) {
    switch (kind) {
        case HostSync::kStreamSynchronize: return "stream synchronize";
        case HostSync::kDeviceSynchronize: return "device synchronize";
        case HostSync::kEventSynchronize: return "event synchronize";
        case HostSync::kCopyToHost: return "copy to host";
        case HostSync::kPageableCopyToDevice: return "copy to device from pageable memory";
        case HostSync::kHostRead: return "host read";
    }
    return "?";
}

void note_host_sync(HostSync kind, Device device) {
    if (live_counters.load(std::memory_order_relaxed) == 0) return;
    std::lock_guard<std::mutex> lock(registry_mutex());
    for (HostSyncCounter* counter : registry()) counter->add(kind, device);
}

HostSyncCounter::HostSyncCounter() {
    std::lock_guard<std::mutex> lock(registry_mutex());
    registry().push_back(this);
    live_counters.fetch_add(1, std::memory_order_relaxed);
}

HostSyncCounter::~HostSyncCounter() {
    std::lock_guard<std::mutex> lock(registry_mutex());
    auto& counters = registry();
    counters.erase(std::remove(counters.begin(), counters.end(), this), counters.end());
    live_counters.fetch_sub(1, std::memory_order_relaxed);
}

void HostSyncCounter::add(HostSync kind, Device device) {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.push_back({kind, device});
}

int64_t HostSyncCounter::count() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return static_cast<int64_t>(entries_.size());
}

int64_t HostSyncCounter::count(HostSync kind) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return std::count_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.kind == kind; });
}

std::vector<HostSyncCounter::Entry> HostSyncCounter::entries() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return entries_;
}

std::string HostSyncCounter::describe() const {
    std::vector<Entry> all = entries();
    std::string text = fmt::format("{} host sync{}", all.size(), all.size() == 1 ? "" : "s");
    for (size_t i = 0; i < all.size(); ++i)
        text += fmt::format("{}{} on {}", i == 0 ? ": " : ", ", host_sync_name(all[i].kind), all[i].device.str());
    return text;
}

void HostSyncCounter::reset() {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.clear();
}

}  // namespace ampgrad

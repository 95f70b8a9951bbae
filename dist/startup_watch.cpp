// dist/startup_watch.cpp: aborts through the store, and start-up that stops when a peer fails
// (dist/startup_watch.hpp).
#include "dist/startup_watch.hpp"

#include <chrono>
#include <future>
#include <memory>
#include <thread>

#include <fmt/format.h>

namespace ampgrad::dist {

std::string host_key(const std::string& group, int rank) { return fmt::format("rdzv/{}/host/{}", group, rank); }
std::string abort_key(const std::string& group, int rank) { return fmt::format("rdzv/{}/abort/{}", group, rank); }
std::string gone_key(const std::string& group, int rank) { return fmt::format("rdzv/{}/gone/{}", group, rank); }
std::string ready_key(const std::string& group, int rank) { return fmt::format("rdzv/{}/ready/{}", group, rank); }

void publish_host(TCPStore& store, const std::string& group, int rank, const std::string& host) {
    try {
        store.set_string(host_key(group, rank), host);
    } catch (const DistError&) {
    }
}

void publish_abort(TCPStore& store, const std::string& group, int rank, const std::string& why) {
    if (!store.connected()) return;   // reconnecting would wait out the timeout: the store is gone
    try {
        store.set_string(abort_key(group, rank), why);
        store.set_string(fmt::format("rdzv/{}/aborted", group), "1");   // one key for the watchers to poll
    } catch (const DistError&) {
    }
}

namespace {

std::string host_of(TCPStore& store, const std::string& group, int rank) {
    if (!store.check({host_key(group, rank)})) return "an unknown host";
    return "host " + store.get_string(host_key(group, rank));
}

}  // namespace

std::string failed_peer(TCPStore& store, const std::string& group, int rank, int world_size, bool scan_gone) {
    try {
        const bool aborted = store.check({fmt::format("rdzv/{}/aborted", group)});
        for (int r = 0; aborted && r < world_size; ++r) {
            if (r == rank) continue;
            if (store.check({abort_key(group, r)}))
                return fmt::format("rank {} on {} failed: {}", r, host_of(store, group, r),
                                   store.get_string(abort_key(group, r)));
        }
        for (int r = 0; scan_gone && r < world_size; ++r)
            if (r != rank && store.check({gone_key(group, r)}) && !store.check({ready_key(group, r)}))
                return fmt::format("rank {} on {} exited during start-up", r, host_of(store, group, r));
    } catch (const DistError& e) {
        return fmt::format("rank 0, which hosts the store at {}:{}, is unreachable ({})", store.host(), store.port(),
                           e.what());
    }
    return "";
}

void run_watched(const std::function<void()>& step, TCPStore& watch, const std::string& what,
                 const std::string& group, int rank, int world_size) {
    auto done = std::make_shared<std::promise<void>>();
    std::future<void> result = done->get_future();
    std::thread worker([step, done] {
        try {
            step();
            done->set_value();
        } catch (...) {
            done->set_exception(std::current_exception());
        }
    });
    for (int poll = 0;; ++poll) {
        if (result.wait_for(std::chrono::milliseconds(50)) == std::future_status::ready) {
            worker.join();
            result.get();
            return;
        }
        const std::string failed = failed_peer(watch, group, rank, world_size, /*scan_gone=*/poll % 10 == 0);
        // A peer that finished start-up and left at once (or took the store with it) may still
        // have let this rank finish too: give the step a moment before calling it failed.
        if (!failed.empty() && result.wait_for(std::chrono::milliseconds(500)) != std::future_status::ready) {
            worker.detach();   // blocked in a wait with its own timeout; it owns what it uses
            throw PeerFailedError(fmt::format("{}: rank {} of {} stopped because {}", what, rank, world_size, failed));
        }
    }
}

}  // namespace ampgrad::dist

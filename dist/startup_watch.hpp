// dist/startup_watch.hpp: fail-fast start-up and aborts through the store.
//
// Each rank publishes its host under rdzv/<group>/host/<rank>. A rank that fails during start-up
// (or in a collective) publishes why under rdzv/<group>/abort/<rank>; a rank whose process exits
// has rdzv/<group>/gone/<rank> set by the store (TCPStore::set_on_disconnect), which counts as a
// failure until the rank has set rdzv/<group>/ready/<rank> at the end of its start-up. Every rank waiting
// in start-up polls these keys and stops at once with a DistError naming the failed rank and its
// host, instead of waiting for its timeout. Rank 0 hosts the store: when the store is unreachable,
// rank 0 is the one lost.
#pragma once
#include <functional>
#include <string>

#include "dist/error.hpp"
#include "dist/store.hpp"

namespace ampgrad::dist {

std::string host_key(const std::string& group, int rank);
std::string abort_key(const std::string& group, int rank);
std::string gone_key(const std::string& group, int rank);
std::string ready_key(const std::string& group, int rank);   // set when a rank's start-up is done

// Best effort (never throws): the store may be gone already.
void publish_host(TCPStore& store, const std::string& group, int rank, const std::string& host);
void publish_abort(TCPStore& store, const std::string& group, int rank, const std::string& why);

// The first other rank that aborted (one key to poll, rdzv/<group>/aborted, then the ranks' keys) or,
// with scan_gone (a request per rank: callers do it every 0.5 s), that exited; described with its
// host and reason; "" when none. A store that cannot be reached describes rank 0.
std::string failed_peer(TCPStore& store, const std::string& group, int rank, int world_size, bool scan_gone);

// Thrown when start-up stops because another rank failed: that rank has published its abort, so
// this one does not publish another.
struct PeerFailedError : DistError { using DistError::DistError; };

// Runs `step` (a blocking part of start-up that cannot watch the store itself, such as Gloo's
// full-mesh connect) on a thread, while this thread polls `watch` (a store connection of its own).
// Throws PeerFailedError naming the failed peer as soon as one fails; `step`'s own exception
// otherwise. The abandoned thread ends at its own timeout; it must own everything it uses.
void run_watched(const std::function<void()>& step, TCPStore& watch, const std::string& what,
                 const std::string& group, int rank, int world_size);

}  // namespace ampgrad::dist

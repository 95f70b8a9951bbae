// dist/recording_group.hpp: the one place every collective is recorded, and the watchdog.
//
// init_process_group wraps the backend's group (Gloo or NCCL) in a RecordingGroup, a decorator that
// gives each collective its sequence number and a flight-recorder entry (dist/flight_recorder.hpp),
// and runs a watchdog thread that, every 100 ms:
//   - discovers async collectives that completed;
//   - turns a collective running past the group's timeout into a failure on every rank: it marks the
//     entry timed out, dumps the flight recorder, publishes the abort through the store and calls
//     the backend's abort() (NCCL: ncclCommAbort, which frees the ranks blocked in it);
//   - polls the store for another rank's abort: then it dumps this rank's recorder too, and every
//     later collective on this rank throws DistError naming that rank and its reason;
//   - dumps on SIGUSR1 (and carries on) and on SIGTERM (then dies of it, as it would have), when the
//     program has no handlers of its own for them.
#pragma once
#include "dist/process_group.hpp"

#include <memory>

namespace ampgrad::dist {

std::unique_ptr<ProcessGroup> make_recording_group(std::unique_ptr<ProcessGroup> inner, std::shared_ptr<TCPStore> store);

}  // namespace ampgrad::dist

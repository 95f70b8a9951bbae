// dist/flight_recorder.hpp: each rank's record of its last K collectives, and the file it dumps.
//
// The idea and the field names are PyTorch's flight recorder (torch.distributed's
// `_dump_nccl_trace`, read by `torch.distributed.flight_recorder` / `fr_trace`): every collective a
// group issues gets a per-group sequence number (`collective_seq_id`), and a ring buffer keeps the
// last K entries (op, group, dtype, element count, the calling site, start and completion times,
// state, optionally a checksum of the input). When a collective times out or fails, or the process
// gets SIGTERM or SIGUSR1, each rank writes `flight_recorder_rank<R>.json` (dist/recording_group.cpp
// decides when), and `ampgrad fr DIR` compares the ranks' files (dist/flight_analysis.hpp).
//
//   AMPGRAD_FR_BUFFER_SIZE  K, the entries kept (default 2000, PyTorch's TORCH_FR_BUFFER_SIZE; 0: off)
//   AMPGRAD_FR_DIR          where the dumps go (default: the system's temporary folder)
//   AMPGRAD_FR_CHECKSUM=1   also record a 64-bit FNV-1a hash of each CPU input (costs a pass over it)
//
// The calling site is the innermost dist::CollectiveSite on the calling thread ("ddp.bucket 3"), or
// the file:line of the dist:: free function's caller.
#pragma once
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace ampgrad::dist {

// One collective as the recorder saw it. Times are nanoseconds since the Unix epoch (system clock),
// so that the ranks' entries can be laid side by side.
struct FlightEntry {
    int64_t record_id = 0;           // this rank's running count of entries (all groups)
    int64_t collective_seq_id = 0;   // the group's running count of collectives: the same on every rank
    std::string process_group;       // the group's name
    std::string backend;             // "gloo", "nccl"
    std::string op;                  // "all_reduce", "reduce_scatter", "all_gather", "broadcast", "barrier"
    std::string detail;              // "sum", "src=1", ... ("" when none)
    std::string dtype;               // "f32"
    std::vector<int64_t> input_sizes;
    int64_t numel = 0;               // elements of the input
    std::string site;                // where it was called
    std::string state = "started";   // "started", "completed", "failed", "timed_out"
    int64_t time_created_ns = 0;
    int64_t time_discovered_completed_ns = 0;   // 0 until seen complete
    int64_t timeout_ms = 0;
    std::optional<uint64_t> checksum;            // FNV-1a 64 of the input bytes (AMPGRAD_FR_CHECKSUM=1)
    std::string error;                           // the failure, for "failed" / "timed_out"
};

// A rank's dump: the header and the entries, oldest first.
struct FlightDump {
    int rank = 0, world_size = 1;
    std::string reason;               // why it was written
    int64_t dump_time_ns = 0;
    int64_t buffer_size = 0;
    int64_t dropped = 0;              // entries the ring overwrote before the oldest kept
    std::vector<FlightEntry> entries;
};

// The ring buffer. Thread-safe: collectives start on the caller's thread and are discovered
// complete on the caller's or the watchdog's.
class FlightRecorder {
public:
    explicit FlightRecorder(size_t capacity);
    size_t capacity() const { return capacity_; }
    bool enabled() const { return capacity_ > 0; }

    // Appends the entry (its record_id is set here) and returns the id to finish it with.
    int64_t start(FlightEntry entry);
    // state: "completed", "failed" or "timed_out". A finished entry stays as it is.
    void finish(int64_t record_id, const std::string& state, const std::string& error = "");
    std::vector<FlightEntry> entries() const;
    FlightDump snapshot(int rank, int world_size, const std::string& reason) const;

private:
    size_t capacity_;
    mutable std::mutex m_;
    std::deque<FlightEntry> ring_;
    int64_t next_id_ = 0;
};

// The process's recorder (one for all groups), sized from AMPGRAD_FR_BUFFER_SIZE on first use.
FlightRecorder& flight_recorder();

// AMPGRAD_FR_DIR, or the system's temporary folder.
std::string flight_recorder_dir();
std::string flight_recorder_file(const std::string& dir, int rank);   // DIR/flight_recorder_rank<R>.json

// The JSON text of a dump, and back. parse_flight_dump throws ValueError naming `source` and the
// field when the text is not a dump.
std::string flight_dump_json(const FlightDump& dump);
FlightDump parse_flight_dump(const std::string& text, const std::string& source);

// Writes the recorder's snapshot to flight_recorder_file(dir, rank) atomically; returns the path.
std::string dump_flight_recorder(const std::string& dir, int rank, int world_size, const std::string& reason);

// The calling site recorded for the collectives this thread issues while it lives (innermost wins).
class CollectiveSite {
public:
    explicit CollectiveSite(std::string site);
    ~CollectiveSite();
    CollectiveSite(const CollectiveSite&) = delete;
    CollectiveSite& operator=(const CollectiveSite&) = delete;
    static const std::string* current();   // nullptr when none is active

private:
    std::string site_;
    const CollectiveSite* outer_;
};

// FNV-1a 64 of `size` bytes: the optional checksum of an entry's input.
uint64_t fnv1a64(const void* data, size_t size);

}  // namespace ampgrad::dist

// dist/flight_recorder.cpp: the ring buffer of collectives, its JSON dump and the calling-site
// tag (see flight_recorder.hpp). The dump's field names follow PyTorch's flight recorder.
#include "dist/flight_recorder.hpp"

#include <charconv>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/error_context.hpp"
#include "core/json_file.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>

namespace ampgrad::dist {

namespace {

thread_local const CollectiveSite* t_site = nullptr;

int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::system_clock::now().time_since_epoch()).count();
}

size_t capacity_from_env() {
    const char* v = std::getenv("AMPGRAD_FR_BUFFER_SIZE");
    if (!v || !*v) return 2000;
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (*end != '\0' || n < 0)
        throw ValueError(fmt::format("flight recorder: AMPGRAD_FR_BUFFER_SIZE='{}' is not a count of entries", v));
    return static_cast<size_t>(n);
}

nlohmann::json entry_json(const FlightEntry& e) {
    nlohmann::json j = {
        {"record_id", e.record_id}, {"collective_seq_id", e.collective_seq_id},
        {"process_group", e.process_group}, {"profiling_name", e.backend + ":" + e.op}, {"op", e.op},
        {"detail", e.detail}, {"input_dtypes", {e.dtype}}, {"input_sizes", {e.input_sizes}}, {"numel", e.numel},
        {"site", e.site}, {"state", e.state}, {"time_created_ns", e.time_created_ns},
        {"time_discovered_completed_ns", e.time_discovered_completed_ns}, {"timeout_ms", e.timeout_ms},
        {"error", e.error},
    };
    j["duration_ms"] = e.time_discovered_completed_ns
        ? nlohmann::json((e.time_discovered_completed_ns - e.time_created_ns) / 1e6) : nlohmann::json(nullptr);
    j["checksum"] = e.checksum ? nlohmann::json(fmt::format("{:016x}", *e.checksum)) : nlohmann::json(nullptr);
    return j;
}

FlightEntry entry_from_json(const nlohmann::json& j) {
    FlightEntry e;
    e.record_id = j.at("record_id").get<int64_t>();
    e.collective_seq_id = j.at("collective_seq_id").get<int64_t>();
    e.process_group = j.at("process_group").get<std::string>();
    const std::string profiling = j.at("profiling_name").get<std::string>();
    e.backend = profiling.substr(0, profiling.find(':'));
    e.op = j.at("op").get<std::string>();
    e.detail = j.value("detail", "");
    e.dtype = j.at("input_dtypes").at(0).get<std::string>();
    e.input_sizes = j.at("input_sizes").at(0).get<std::vector<int64_t>>();
    e.numel = j.at("numel").get<int64_t>();
    e.site = j.value("site", "");
    e.state = j.at("state").get<std::string>();
    e.time_created_ns = j.at("time_created_ns").get<int64_t>();
    e.time_discovered_completed_ns = j.value("time_discovered_completed_ns", int64_t{0});
    e.timeout_ms = j.value("timeout_ms", int64_t{0});
    e.error = j.value("error", "");
    if (j.contains("checksum") && j["checksum"].is_string()) {
        const std::string hex = j["checksum"].get<std::string>();
        uint64_t checksum = 0;
        const auto [end, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), checksum, 16);
        if (ec != std::errc() || end != hex.data() + hex.size() || hex.empty())
            throw ValueError(fmt::format("the checksum \"{}\" of collective {} is not a hexadecimal number", hex,
                                         e.collective_seq_id));
        e.checksum = checksum;
    }
    return e;
}

}  // namespace

FlightRecorder::FlightRecorder(size_t capacity) : capacity_(capacity) {}

int64_t FlightRecorder::start(FlightEntry entry) {
    std::lock_guard lk(m_);
    entry.record_id = next_id_++;
    if (entry.time_created_ns == 0) entry.time_created_ns = now_ns();
    if (capacity_ == 0) return entry.record_id;
    if (ring_.size() == capacity_) ring_.pop_front();
    ring_.push_back(std::move(entry));
    return ring_.back().record_id;
}

void FlightRecorder::finish(int64_t record_id, const std::string& state, const std::string& error) {
    std::lock_guard lk(m_);
    if (ring_.empty() || record_id < ring_.front().record_id) return;   // overwritten already
    const auto index = static_cast<size_t>(record_id - ring_.front().record_id);
    if (index >= ring_.size()) return;
    FlightEntry& e = ring_[index];
    if (e.state != "started" && state == "completed") return;   // a failure seen later overrides "completed"
    e.state = state;
    e.error = error;
    e.time_discovered_completed_ns = now_ns();
}

std::vector<FlightEntry> FlightRecorder::entries() const {
    std::lock_guard lk(m_);
    return {ring_.begin(), ring_.end()};
}

FlightDump FlightRecorder::snapshot(int rank, int world_size, const std::string& reason) const {
    FlightDump d;
    d.rank = rank;
    d.world_size = world_size;
    d.reason = reason;
    d.dump_time_ns = now_ns();
    d.buffer_size = static_cast<int64_t>(capacity_);
    std::lock_guard lk(m_);
    d.entries.assign(ring_.begin(), ring_.end());
    d.dropped = ring_.empty() ? next_id_ : ring_.front().record_id;
    return d;
}

FlightRecorder& flight_recorder() {
    static FlightRecorder recorder(capacity_from_env());
    return recorder;
}

std::string flight_recorder_dir() {
    const char* v = std::getenv("AMPGRAD_FR_DIR");
    if (v && *v) return v;
    return std::filesystem::temp_directory_path().string();
}

std::string flight_recorder_file(const std::string& dir, int rank) {
    return (std::filesystem::path(dir) / fmt::format("flight_recorder_rank{}.json", rank)).string();
}

std::string flight_dump_json(const FlightDump& d) {
    nlohmann::json entries = nlohmann::json::array();
    for (const FlightEntry& e : d.entries) entries.push_back(entry_json(e));
    nlohmann::json j = {
        {"version", "ampgrad-fr-1"}, {"rank", d.rank}, {"world_size", d.world_size}, {"reason", d.reason},
        {"dump_time_ns", d.dump_time_ns}, {"buffer_size", d.buffer_size}, {"dropped", d.dropped},
        {"entries", entries},
    };
    return j.dump(1) + "\n";
}

FlightDump parse_flight_dump(const std::string& text, const std::string& source) {
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        throw ValueError(fmt::format("flight recorder: {} is not JSON: {}", source, e.what()));
    }
    try {
        if (j.value("version", "") != "ampgrad-fr-1")
            throw ValueError(fmt::format("flight recorder: {} has version '{}', expected 'ampgrad-fr-1'", source,
                                         j.value("version", "(none)")));
        FlightDump d;
        d.rank = j.at("rank").get<int>();
        d.world_size = j.at("world_size").get<int>();
        d.reason = j.value("reason", "");
        d.dump_time_ns = j.value("dump_time_ns", int64_t{0});
        d.buffer_size = j.value("buffer_size", int64_t{0});
        d.dropped = j.value("dropped", int64_t{0});
        for (const auto& e : j.at("entries")) d.entries.push_back(entry_from_json(e));
        return d;
    } catch (const nlohmann::json::exception& e) {
        throw ValueError(fmt::format("flight recorder: {} is not a flight recorder dump: {}", source, json_error_text(e)));
    } catch (const ValueError& e) {
        rethrow_with_context(e, "flight recorder: " + source);
    }
}

std::string dump_flight_recorder(const std::string& dir, int rank, int world_size, const std::string& reason) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw IOError(fmt::format("flight recorder: cannot create the folder {}: {}", dir, ec.message()));
    const std::string path = flight_recorder_file(dir, rank);
    write_file_atomic(path, flight_dump_json(flight_recorder().snapshot(rank, world_size, reason)));
    return path;
}

CollectiveSite::CollectiveSite(std::string site) : site_(std::move(site)), outer_(t_site) { t_site = this; }
CollectiveSite::~CollectiveSite() { t_site = outer_; }
const std::string* CollectiveSite::current() { return t_site ? &t_site->site_ : nullptr; }

uint64_t fnv1a64(const void* data, size_t size) {
    const auto* p = static_cast<const unsigned char*>(data);
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < size; ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

}  // namespace ampgrad::dist

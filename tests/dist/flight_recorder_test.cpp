// tests/dist/flight_recorder_test.cpp: the flight recorder's ring buffer, its states, the JSON dump
// and its parser, and the calling-site tag (dist/flight_recorder.hpp), in one process.
#include "dist/flight_recorder.hpp"
#include "core/error.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

using namespace ampgrad;
using namespace ampgrad::dist;

namespace {

FlightEntry collective(int64_t seq, const std::string& op = "all_reduce") {
    FlightEntry e;
    e.collective_seq_id = seq;
    e.process_group = "default";
    e.backend = "gloo";
    e.op = op;
    e.detail = "sum";
    e.dtype = "f32";
    e.input_sizes = {2, 4};
    e.numel = 8;
    e.site = "step " + std::to_string(seq);
    e.timeout_ms = 3000;
    return e;
}

}  // namespace

TEST_CASE("flight recorder: the ring keeps the last K entries, and a snapshot counts the dropped ones") {
    FlightRecorder rec(3);
    for (int64_t s = 0; s < 5; ++s) CHECK(rec.start(collective(s)) == s);
    const auto entries = rec.entries();
    REQUIRE(entries.size() == 3);
    CHECK(entries.front().collective_seq_id == 2);
    CHECK(entries.back().collective_seq_id == 4);
    const FlightDump d = rec.snapshot(1, 2, "SIGUSR1");
    CHECK(d.dropped == 2);
    CHECK(d.buffer_size == 3);
    CHECK(d.rank == 1);
}

TEST_CASE("flight recorder: finish sets the state once; a failure seen later overrides completed") {
    FlightRecorder rec(4);
    const int64_t a = rec.start(collective(0)), b = rec.start(collective(1));
    rec.finish(a, "completed");
    rec.finish(a, "completed");
    rec.finish(b, "completed");
    rec.finish(b, "failed", "lost rank 1");
    rec.finish(99, "completed");   // unknown ids are ignored
    const auto entries = rec.entries();
    CHECK(entries[0].state == "completed");
    CHECK(entries[0].time_discovered_completed_ns >= entries[0].time_created_ns);
    CHECK(entries[1].state == "failed");
    CHECK(entries[1].error == "lost rank 1");
    FlightRecorder off(0);
    off.start(collective(0));
    CHECK(off.entries().empty());
}

TEST_CASE("flight recorder: the JSON dump reads back field by field, and bad files are ValueErrors") {
    FlightRecorder rec(4);
    FlightEntry e = collective(7, "broadcast");
    e.detail = "src=1";
    e.checksum = 0x0123456789abcdefull;
    rec.finish(rec.start(e), "timed_out", "ran past 3000 ms");
    rec.start(collective(8));
    const FlightDump d = rec.snapshot(3, 4, "all_reduce timed out");
    const std::string text = flight_dump_json(d);
    CHECK(text.find("\"profiling_name\": \"gloo:broadcast\"") != std::string::npos);
    const FlightDump back = parse_flight_dump(text, "test");
    CHECK(back.rank == 3);
    CHECK(back.world_size == 4);
    CHECK(back.reason == "all_reduce timed out");
    REQUIRE(back.entries.size() == 2);
    const FlightEntry& b = back.entries[0];
    CHECK(b.collective_seq_id == 7);
    CHECK(b.op == "broadcast");
    CHECK(b.backend == "gloo");
    CHECK(b.detail == "src=1");
    CHECK(b.dtype == "f32");
    CHECK(b.input_sizes == std::vector<int64_t>{2, 4});
    CHECK(b.numel == 8);
    CHECK(b.site == "step 7");
    CHECK(b.state == "timed_out");
    CHECK(b.error == "ran past 3000 ms");
    CHECK(b.checksum == 0x0123456789abcdefull);
    CHECK_FALSE(back.entries[1].checksum.has_value());
    CHECK(back.entries[1].state == "started");

    CHECK_THROWS_WITH_AS(parse_flight_dump("{", "f.json"), doctest::Contains("f.json is not JSON"), ValueError);
    CHECK_THROWS_WITH_AS(parse_flight_dump("{\"version\": \"x\"}", "f.json"), doctest::Contains("version 'x'"),
                         ValueError);
    CHECK_THROWS_WITH_AS(parse_flight_dump("{\"version\": \"ampgrad-fr-1\", \"rank\": 0}", "f.json"),
                         doctest::Contains("f.json is not a flight recorder dump"), ValueError);
}

TEST_CASE("flight recorder: dump_flight_recorder writes flight_recorder_rank<R>.json whole") {
    const std::string dir = (std::filesystem::temp_directory_path() / ("ampgrad_fr_test_" + std::to_string(getpid()))).string();
    const std::string path = dump_flight_recorder(dir, 5, 8, "test");
    CHECK(path == flight_recorder_file(dir, 5));
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    const FlightDump d = parse_flight_dump(text.str(), path);
    CHECK(d.rank == 5);
    CHECK(d.world_size == 8);
    std::filesystem::remove_all(dir);
}

TEST_CASE("flight recorder: CollectiveSite nests, innermost first") {
    CHECK(CollectiveSite::current() == nullptr);
    {
        CollectiveSite outer("ddp.bucket 0");
        CHECK(*CollectiveSite::current() == "ddp.bucket 0");
        {
            CollectiveSite inner("zero.reduce_scatter");
            CHECK(*CollectiveSite::current() == "zero.reduce_scatter");
        }
        CHECK(*CollectiveSite::current() == "ddp.bucket 0");
    }
    CHECK(CollectiveSite::current() == nullptr);
    CHECK(fnv1a64("", 0) == 14695981039346656037ull);
    CHECK(fnv1a64("a", 1) == 0xaf63dc4c8601ec8cull);   // FNV-1a 64 of "a" (the reference test vector)
}

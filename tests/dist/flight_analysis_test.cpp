// tests/dist/flight_analysis_test.cpp: `ampgrad fr`'s analysis (dist/flight_analysis.hpp) on made-up
// dumps: agreement, a missing collective, a size mismatch, a different op, different call sites,
// the common window of rings that dropped different amounts, and bad folders.
#include "dist/flight_analysis.hpp"
#include "core/error.hpp"
#include "tests/support/corrupt_inputs.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace ampgrad;
using namespace ampgrad::dist;

namespace {

FlightEntry collective(int64_t seq, const std::string& site, const std::string& state = "completed") {
    FlightEntry e;
    e.collective_seq_id = seq;
    e.process_group = "default";
    e.backend = "gloo";
    e.op = "all_reduce";
    e.detail = "sum";
    e.dtype = "f32";
    e.input_sizes = {8};
    e.numel = 8;
    e.site = site;
    e.state = state;
    return e;
}

// Rank r's dump with collectives first..last, at sites "s<seq>".
FlightDump dump(int rank, int world, int64_t first, int64_t last) {
    FlightDump d;
    d.rank = rank;
    d.world_size = world;
    for (int64_t s = first; s <= last; ++s) d.entries.push_back(collective(s, "s" + std::to_string(s)));
    return d;
}

FlightFinding only_finding(const std::vector<FlightDump>& dumps) {
    auto findings = analyze_flight_dumps(dumps);
    REQUIRE(findings.size() == 1);
    return findings[0];
}

}  // namespace

TEST_CASE("ampgrad fr: ranks that agree are reported as agreeing") {
    FlightFinding f = only_finding({dump(0, 2, 0, 5), dump(1, 2, 0, 5)});
    CHECK(f.agree);
    CHECK(f.behind.empty());
    CHECK(f.not_completed.empty());
}

TEST_CASE("ampgrad fr: a rank that never issued a collective is behind, at that sequence number") {
    std::vector<FlightDump> dumps{dump(0, 3, 0, 6), dump(1, 3, 0, 6), dump(2, 3, 0, 4)};
    dumps[0].entries.back().state = "timed_out";
    dumps[1].entries.back().state = "started";
    FlightFinding f = only_finding(dumps);
    CHECK_FALSE(f.agree);
    CHECK(f.first_seq == 5);
    CHECK(f.kind == "missing collective");
    CHECK(f.behind == std::vector<int>{2});
    CHECK(f.not_completed == std::vector<int>{0, 1});
    const std::string report = flight_report(dumps, {f});
    CHECK(report.find("first disagreement at collective_seq_id 5: missing collective") != std::string::npos);
    CHECK(report.find("rank 2: never issued it") != std::string::npos);
    CHECK(report.find("rank 2 is behind: its last collective is #4, the others reached #6") != std::string::npos);
}

TEST_CASE("ampgrad fr: a size mismatch, then a different op, name the odd rank") {
    std::vector<FlightDump> dumps{dump(0, 3, 0, 3), dump(1, 3, 0, 3), dump(2, 3, 0, 3)};
    dumps[1].entries[2].numel = 4;
    dumps[1].entries[2].input_sizes = {4};
    dumps[2].entries[3].op = "broadcast";
    FlightFinding f = only_finding(dumps);
    CHECK(f.first_seq == 2);
    CHECK(f.kind == "size mismatch");
    CHECK(f.behind.empty());
    CHECK(flight_report(dumps, {f}).find("differing from the others: rank 1") != std::string::npos);
    dumps[1].entries[2].numel = 8;
    f = only_finding(dumps);
    CHECK(f.first_seq == 3);
    CHECK(f.kind == "different op");
    CHECK(flight_report(dumps, {f}).find("differing from the others: rank 2") != std::string::npos);
}

TEST_CASE("ampgrad fr: a skipped collective shows as different call sites, and the skipper is behind") {
    // Rank 1 skipped the collective at site s2: its later ones paired with rank 0's earlier ones.
    FlightDump r0 = dump(0, 2, 0, 4), r1 = dump(1, 2, 0, 3);
    r0.entries.back().state = "timed_out";
    for (int64_t s = 2; s <= 3; ++s) r1.entries[static_cast<size_t>(s)].site = "s" + std::to_string(s + 1);
    FlightFinding f = only_finding({r0, r1});
    CHECK(f.first_seq == 2);
    CHECK(f.kind == "different call site");
    CHECK(f.behind == std::vector<int>{1});
}

TEST_CASE("ampgrad fr: rings that dropped different amounts are compared on what all of them hold") {
    FlightFinding f = only_finding({dump(0, 2, 10, 20), dump(1, 2, 14, 20)});
    CHECK(f.agree);
    FlightDump r1 = dump(1, 2, 14, 19);
    f = only_finding({dump(0, 2, 10, 20), r1});
    CHECK(f.first_seq == 20);
    CHECK(f.behind == std::vector<int>{1});
}

TEST_CASE("ampgrad fr: each process group is analysed on its own") {
    FlightDump r0 = dump(0, 2, 0, 2), r1 = dump(1, 2, 0, 2);
    FlightEntry other = collective(0, "x");
    other.process_group = "pipeline";
    r0.entries.push_back(other);
    auto findings = analyze_flight_dumps({r0, r1});
    REQUIRE(findings.size() == 2);
    CHECK(findings[0].group == "default");
    CHECK(findings[0].agree);
    CHECK(findings[1].group == "pipeline");
    CHECK(findings[1].behind == std::vector<int>{1});
}

TEST_CASE("ampgrad fr: a folder without dumps, or with a file that is not one, is a typed error") {
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path() / ("ampgrad_fr_analysis_" + std::to_string(getpid()));
    fs::create_directories(dir);
    CHECK_THROWS_WITH_AS(read_flight_dumps(dir.string()), doctest::Contains("no flight_recorder_rank<R>.json"), IOError);
    CHECK_THROWS_AS(read_flight_dumps((dir / "missing").string()), IOError);
    std::ofstream(dir / "flight_recorder_rank0.json") << flight_dump_json(dump(0, 2, 0, 1));
    std::ofstream(dir / "flight_recorder_rank1.json") << "{ not json";
    CHECK_THROWS_WITH_AS(read_flight_dumps(dir.string()), doctest::Contains("flight_recorder_rank1.json is not JSON"),
                         ValueError);
    std::ofstream(dir / "flight_recorder_rank1.json") << flight_dump_json(dump(0, 2, 0, 1));
    CHECK_THROWS_WITH_AS(read_flight_dumps(dir.string()), doctest::Contains("holds rank 0's records"), ValueError);
    std::ofstream(dir / "flight_recorder_rank1.json") << flight_dump_json(dump(1, 2, 0, 1));
    CHECK(read_flight_dumps(dir.string()).size() == 2);
    fs::remove_all(dir);
}

TEST_CASE("ampgrad fr: every corruption of a dump is read and analysed, or is an ampgrad::Error naming the file") {
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path() / ("ampgrad_fr_corrupt_" + std::to_string(getpid()));
    fs::create_directories(dir);
    std::ofstream(dir / "flight_recorder_rank0.json") << flight_dump_json(dump(0, 2, 0, 3));
    const std::string rank1 = (dir / "flight_recorder_rank1.json").string();
    std::ofstream(rank1) << flight_dump_json(dump(1, 2, 0, 2));
    auto analyse = [&] {
        const std::vector<FlightDump> dumps = read_flight_dumps(dir.string());
        flight_report(dumps, analyze_flight_dumps(dumps));
    };
    CHECK(ampgrad::testing::check_file_corruptions(rank1, ampgrad::testing::json_corruptions(
                                                              ampgrad::testing::read_whole_file(rank1)),
                                                   analyse, "flight_recorder_rank1.json") > 40);
    std::ofstream(dir / "flight_recorder_rank99999999999.json") << "{}";   // a rank past int: not one of ours
    CHECK_NOTHROW(analyse());
    fs::remove_all(dir);
}

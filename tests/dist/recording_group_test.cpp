// tests/dist/recording_group_test.cpp: the flight recorder and the watchdog with real processes
// (dist/recording_group.hpp). The injected fault: rank 1 skips one all_reduce while every process
// stays alive; the others must time out, rank 1 must get a typed error too, every rank must dump,
// and the analysis of the dumps (what `ampgrad fr` prints) must name rank 1 and the collective.
#include "dist/flight_analysis.hpp"
#include "spawn.hpp"

#include <doctest/doctest.h>

#include <fmt/format.h>

#include <csignal>
#include <filesystem>
#include <unistd.h>

using namespace ampgrad_test;
namespace dist = ampgrad::dist;
namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& name) {
    const fs::path dir = fs::temp_directory_path() / fmt::format("ampgrad_{}_{}", name, getpid());
    fs::remove_all(dir);
    fs::create_directories(dir);
    return dir;
}

}  // namespace

TEST_CASE("flight recorder: rank 1 skips an all_reduce; every rank dumps, and the dumps name rank 1 and #2") {
    const fs::path dir = fresh_dir("fr_skip");
    auto results = run_workers("skip_all_reduce", 2, free_port(),
                               all_ranks(2, {{"AMPGRAD_TEST_TIMEOUT_MS", "2000"}, {"AMPGRAD_FR_DIR", dir.string()}}),
                               std::chrono::seconds(40));
    CAPTURE(results[0].output);
    CAPTURE(results[1].output);
    // Rank 0 waits in step 4's all_reduce, which rank 1 never issues: a timeout, not a silent wait.
    CHECK(results[0].exit_code == 3);
    CHECK(contains(results[0].output, "timed out after 2000 ms"));
    // Rank 1 was elsewhere: its next collective is refused, naming rank 0's failure.
    CHECK(results[1].exit_code == 3);
    CHECK(contains(results[1].output, "barrier on group 'default' (rank 1 of 2): not started, because the group "
                                      "was aborted: rank 0 on host"));
    const auto dumps = dist::read_flight_dumps(dir.string());
    REQUIRE(dumps.size() == 2);
    CHECK(dumps[0].entries.size() == 5);
    CHECK(dumps[0].entries.back().state == "timed_out");
    CHECK(dumps[0].entries.back().site == "train step 4");
    CHECK(dumps[1].entries.size() == 4);
    CHECK(dumps[1].entries[2].site == "train step 3");
    const auto findings = dist::analyze_flight_dumps(dumps);
    REQUIRE(findings.size() == 1);
    CHECK(findings[0].first_seq == 2);
    CHECK(findings[0].kind == "different call site");
    CHECK(findings[0].behind == std::vector<int>{1});
    const std::string report = dist::flight_report(dumps, findings);
    CAPTURE(report);
    CHECK(contains(report, "rank 1 is behind: its last collective is #3, the others reached #4"));
    fs::remove_all(dir);
}

TEST_CASE("flight recorder: SIGUSR1 dumps and the run goes on; SIGTERM dumps and then kills") {
    const fs::path dir = fresh_dir("fr_signal");
    auto results = run_workers("fr_signal", 2, free_port(), all_ranks(2, {{"AMPGRAD_FR_DIR", dir.string()}}),
                               std::chrono::seconds(30));
    CAPTURE(results[0].output);
    CAPTURE(results[1].output);
    CHECK(results[0].exit_code == 0);
    CHECK(contains(results[0].output, "SURVIVED SIGUSR1"));
    CHECK(contains(results[1].output, "SURVIVED SIGUSR1"));
    CHECK(results[1].signal == SIGTERM);
    const auto dumps = dist::read_flight_dumps(dir.string());
    REQUIRE(dumps.size() == 2);
    CHECK(dumps[0].reason == "SIGUSR1");
    CHECK(dumps[1].reason == "SIGTERM");
    CHECK(dumps[0].entries.size() == 3);   // dumped before the barrier: the three all_reduces
    REQUIRE(dumps[1].entries.size() == 4);   // and the barrier
    CHECK(dumps[1].entries.back().op == "barrier");
    CHECK(dumps[1].entries.back().state == "completed");
    CHECK(contains(dumps[1].entries.front().site, "dist_worker.cpp:"));   // the caller's file:line
    fs::remove_all(dir);
}

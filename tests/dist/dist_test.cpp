// tests/dist/dist_test.cpp: ampgrad::dist with real processes over loopback. Each case forks and
// execs N copies of dist_worker (1, 2 or 4 ranks, OMP_NUM_THREADS=1) with the rendezvous
// environment set, collects their output and exit status, and kills them all past a deadline, so a
// hang fails the test instead of stalling the suite (the harness: tests/dist/spawn.hpp).
#include "dist/store.hpp"
#include "dist/error.hpp"
#include "spawn.hpp"

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <netinet/in.h>
#include <string>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace ampgrad_test;
using Clock = std::chrono::steady_clock;

TEST_CASE("dist: every collective in every dtype, sync and async, with 1, 2 and 4 ranks") {
    for (int n : {1, 2, 4}) {
        CAPTURE(n);
        auto results = run_workers("collectives", n, free_port(), all_ranks(n), std::chrono::seconds(60));
        for (size_t r = 0; r < results.size(); ++r) {
            CAPTURE(r);
            CAPTURE(results[r].output);
            CHECK(results[r].exit_code == 0);
        }
    }
}

// True when the error names `rank` as lost: "lost rank R at [addr]:port" (from Gloo's error), or in the
// store's list "lost rank A on host h (ip), R on host h (ip): its process exited".
bool names_lost_rank(const std::string& out, int rank) {
    const std::string r = std::to_string(rank);
    return contains(out, "lost rank " + r + " ") || contains(out, ", " + r + " on host");
}

TEST_CASE("dist: a rank killed during all_reduce gives the others an error within the timeout") {
    for (int n : {2, 4}) {
        CAPTURE(n);
        auto results = run_workers("kill", n, free_port(), all_ranks(n, {{"AMPGRAD_TEST_TIMEOUT_MS", "3000"}}),
                                   std::chrono::seconds(30));
        CHECK(results.back().signal == SIGKILL);
        for (int r = 0; r + 1 < n; ++r) {
            const std::string& out = results[static_cast<size_t>(r)].output;
            CAPTURE(r);
            CAPTURE(out);
            CHECK(results[static_cast<size_t>(r)].exit_code == 3);
            CHECK(contains(out, "all_reduce"));
            CHECK(contains(out, "group 'default'"));
            CHECK(elapsed_ms(out) >= 0);
            CHECK(elapsed_ms(out) < 3000 + 2500);
            // Named from the peer address in Gloo's error, or from the store's record of closed connections.
            // Rank 0 hosts the store, so it can always tell; another survivor may first see rank 0
            // itself leave (after its own error), and then names rank 0. A survivor that failed and
            // exited before rank 0 looked is named too: "lost rank 2 on host h (ip), 3 on host h (ip)".
            CHECK(contains(out, "lost rank "));
            if (r == 0) CHECK(names_lost_rank(out, n - 1));
        }
    }
}

// Gloo writes with writev: a peer that is gone raises SIGPIPE, whose default action killed a
// surviving rank silently (rarely, when it was writing as the other died). The Gloo group ignores it.
TEST_CASE("dist: a Gloo process ignores SIGPIPE, so a gone peer is an error, not a silent death") {
    auto results = run_workers("sigpipe", 2, free_port(), all_ranks(2), std::chrono::seconds(30));
    for (size_t r = 0; r < results.size(); ++r) {
        CAPTURE(r);
        CAPTURE(results[r].output);
        CHECK(results[r].signal == 0);
        CHECK(results[r].exit_code == 0);
        CHECK(contains(results[r].output, "survived SIGPIPE"));
    }
}

TEST_CASE("dist: rendezvous errors are clear") {
    SUBCASE("WORLD_SIZE larger than the processes started") {
        auto results = run_workers("init", 3, free_port(), all_ranks(2, {{"AMPGRAD_TEST_TIMEOUT_MS", "1500"}}),
                                   std::chrono::seconds(20));
        CAPTURE(results[0].output);
        CAPTURE(results[1].output);
        CHECK(results[0].exit_code == 3);
        CHECK(contains(results[0].output, "rank(s) 2 of world size 3 did not join within 1500 ms"));
        // Rank 1 times out too, or sees rank 0 (the store's host) leave first.
        CHECK(results[1].exit_code == 3);
        CHECK((contains(results[1].output, "rank(s) 2 of world size 3 did not join") ||
               contains(results[1].output, "rank 0, which hosts the store, left")));
    }
    SUBCASE("ranks disagree on WORLD_SIZE") {
        int port = free_port();
        auto results = run_workers("init", 2, port,
                                   {{0, {{"AMPGRAD_TEST_TIMEOUT_MS", "1500"}}},
                                    {1, {{"AMPGRAD_TEST_TIMEOUT_MS", "1500"}, {"WORLD_SIZE", "3"}}}},
                                   std::chrono::seconds(20));
        CAPTURE(results[1].output);
        CHECK(results[1].exit_code == 3);
        CHECK(contains(results[1].output, "WORLD_SIZE=3 on rank 1 but 2 on rank 0"));
        CHECK(results[0].exit_code == 3);
    }
    SUBCASE("RANK outside WORLD_SIZE") {
        auto results = run_workers("init", 2, free_port(), {{2, {}}}, std::chrono::seconds(20));
        CHECK(results[0].exit_code == 3);
        CHECK(contains(results[0].output, "RANK=2 is outside [0, WORLD_SIZE=2)"));
    }
    SUBCASE("MASTER_PORT already in use") {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        REQUIRE(listen(fd, 1) == 0);
        socklen_t len = sizeof a;
        getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
        auto results = run_workers("init", 1, ntohs(a.sin_port), all_ranks(1), std::chrono::seconds(20));
        close(fd);
        CAPTURE(results[0].output);
        CHECK(results[0].exit_code == 3);
        CHECK(contains(results[0].output, "cannot listen on 127.0.0.1:"));
        CHECK(contains(results[0].output, "Address already in use"));
    }
    SUBCASE("MASTER_PORT=0: a group of one lets the kernel pick its store's port; a larger group cannot") {
        auto one = run_workers("init", 1, 0, all_ranks(1), std::chrono::seconds(20));
        CAPTURE(one[0].output);
        CHECK(one[0].exit_code == 0);
        auto two = run_workers("init", 2, 0, {{0, {}}}, std::chrono::seconds(20));
        CAPTURE(two[0].output);
        CHECK(two[0].exit_code == 3);
        CHECK(contains(two[0].output, "MASTER_PORT=0 (any free port) needs WORLD_SIZE=1, but it is 2"));
    }
    SUBCASE("no master at MASTER_ADDR:MASTER_PORT") {
        auto results = run_workers("init", 2, free_port(), {{1, {{"AMPGRAD_TEST_TIMEOUT_MS", "1000"}}}},
                                   std::chrono::seconds(20));
        CAPTURE(results[0].output);
        CHECK(results[0].exit_code == 3);
        CHECK(contains(results[0].output, "cannot reach the master at 127.0.0.1:"));
        CHECK(contains(results[0].output, "within 1000 ms"));
    }
}

TEST_CASE("dist: CUDA tensors through the Gloo group, as ranks sharing a GPU send them (skipped without a GPU)") {
    auto results = run_workers("staged", 2, free_port(), all_ranks(2), std::chrono::seconds(60));
    for (const auto& r : results) {
        CAPTURE(r.output);
        CHECK(r.exit_code == 0);
        CHECK((contains(r.output, "STAGED OK") || contains(r.output, "STAGED SKIPPED: no CUDA device")));
    }
}

TEST_CASE("dist: the NCCL group runs on a GPU, or says clearly why not") {
    auto results = run_workers("nccl", 1, free_port(), all_ranks(1), std::chrono::seconds(60));
    CAPTURE(results[0].output);
    if (results[0].exit_code == 0) {
        CHECK(contains(results[0].output, "NCCL OK"));
    } else {
        CHECK(results[0].exit_code == 3);
        CHECK((contains(results[0].output, "sees no CUDA device") ||
               contains(results[0].output, "built without NCCL")));
    }
}

TEST_CASE("dist: TCPStore set/get/add/wait and its timeout errors, in one process") {
    using namespace ampgrad::dist;
    TCPStore server("127.0.0.1", 0, true, Millis(2000));
    TCPStore client("127.0.0.1", server.port(), false, Millis(2000));
    server.set_string("a", "hello");
    CHECK(client.get_string("a") == "hello");
    CHECK(client.add("n", 3) == 3);
    CHECK(server.add("n", -1) == 2);
    CHECK(client.check({"a", "n"}));
    CHECK_FALSE(client.check({"a", "missing"}));
    std::thread later([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        server.set_string("b", "x");
    });
    client.wait({"a", "b"}, Millis(2000));
    later.join();
    auto t0 = Clock::now();
    try {
        client.get("never", Millis(300));
        FAIL("get of a missing key returned");
    } catch (const DistTimeoutError& e) {
        CHECK(contains(e.what(), "get of key 'never' timed out after 300 ms"));
    }
    CHECK(Clock::now() - t0 < std::chrono::seconds(2));
    CHECK(client.get_string("a") == "hello");   // the client reconnects after a timeout
    CHECK_THROWS_AS(client.wait({"nope"}, Millis(100)), DistTimeoutError);
}

// tests/dist/spawn.hpp: the multi-process test harness shared by tests/dist/*_test.cpp. run_workers
// forks and execs N copies of dist_worker (tests/dist/dist_worker.cpp) with the rendezvous
// environment set (RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT, OMP_NUM_THREADS=1),
// collects each rank's output and exit status, and kills them all past a deadline, so a hang fails
// the test instead of stalling the suite.
#pragma once
#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace ampgrad_test {

struct RankResult {
    int exit_code = -1;   // -1: killed by a signal (see signal)
    int signal = 0;
    std::string output;
};

struct Spawn {
    int rank;
    std::vector<std::pair<std::string, std::string>> env;   // on top of the rendezvous variables
};

std::string worker_path();   // $AMPGRAD_BUILD_ROOT/tests/dist_worker
int free_port();             // a port that was free a moment ago (the kernel's pick for port 0)

// Runs one worker per entry of `ranks` with the given scenario (argv[1]); waits at most `deadline`.
std::vector<RankResult> run_workers(const std::string& scenario, int world_size, int port,
                                    const std::vector<Spawn>& ranks, std::chrono::seconds deadline);
std::vector<Spawn> all_ranks(int n, std::vector<std::pair<std::string, std::string>> env = {});
bool contains(const std::string& s, const std::string& part);
long elapsed_ms(const std::string& out);   // the worker's "ELAPSED_MS n" line, or -1
std::string line_after(const std::string& out, const std::string& key);   // the rest of a "KEY value" line
// Runs `scenario` on n ranks over a free port and CHECKs that every rank exited with 0.
std::vector<RankResult> run_passing(const std::string& scenario, int n);

}  // namespace ampgrad_test

// tests/dist/launcher_test.cpp: ampgrad-run (tools/ampgrad_run.cpp) with real processes: the
// environment it gives each rank, rank-prefixed output, a failing rank stopping the others with its
// exit code, SIGTERM forwarding, a real 2-rank job through it, and restart rounds (--max-restarts,
// --nnodes MIN:MAX; tools/restart_rounds.hpp) on one and two launchers.
#include <doctest/doctest.h>

#include "spawn.hpp"

#include <arpa/inet.h>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <string>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

std::string build_root() {
    const char* root = std::getenv("AMPGRAD_BUILD_ROOT");
    return root ? root : "build";
}


struct Launch {
    int code = -1;          // exit code, or 128 + signal
    std::string output;     // stdout and stderr together
    double seconds = 0;
};

using Env = std::vector<std::pair<std::string, std::string>>;

// Runs ampgrad-run with `args` then dist_worker `scenario` (none when empty), with `env` added. If
// `signal_after` is set, the launcher gets SIGTERM once its output holds `signal_after` ranks'
// "sleeping" lines.
Launch launch(std::vector<std::string> args, const std::string& scenario, int signal_after = 0, const Env& env = {}) {
    const std::string launcher = build_root() + "/tools/ampgrad-run";
    args.insert(args.begin(), launcher);
    if (!scenario.empty()) {
        args.push_back(build_root() + "/tests/dist_worker");
        args.push_back(scenario);
    }
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    auto t0 = Clock::now();
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        close(fds[0]);
        unsetenv("OMP_NUM_THREADS");   // the launcher sets 1 when it is unset (meson's test env sets 2)
        for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        execv(argv[0], argv.data());
        _exit(127);
    }
    close(fds[1]);
    Launch out;
    bool signalled = false;
    auto deadline = t0 + std::chrono::seconds(40);
    for (;;) {
        pollfd p{fds[0], POLLIN, 0};
        poll(&p, 1, 50);
        char buf[4096];
        ssize_t n = (p.revents & (POLLIN | POLLHUP)) ? read(fds[0], buf, sizeof buf) : -1;
        if (n > 0) out.output.append(buf, static_cast<size_t>(n));
        if (signal_after > 0 && !signalled) {
            int seen = 0;
            for (size_t at = 0; (at = out.output.find("sleeping", at)) != std::string::npos; ++at) ++seen;
            if (seen >= signal_after) {
                kill(pid, SIGTERM);
                signalled = true;
            }
        }
        if (n == 0) break;
        if (Clock::now() > deadline) {
            kill(pid, SIGKILL);
            FAIL_CHECK("ampgrad-run still running after 40 s");
            break;
        }
    }
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    out.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    out.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    return out;
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("ampgrad-run: each rank's environment, with rank-prefixed stdout and stderr") {
    SUBCASE("one node") {
        Launch r = launch({"--nproc-per-node", "2", "--master-port", "29611"}, "env");
        CAPTURE(r.output);
        CHECK(r.code == 0);
        for (const char* line : {"[rank 0] RANK=0", "[rank 1] RANK=1", "[rank 0] LOCAL_RANK=0", "[rank 1] LOCAL_RANK=1",
                                 "[rank 1] WORLD_SIZE=2", "[rank 1] LOCAL_WORLD_SIZE=2", "[rank 0] MASTER_ADDR=127.0.0.1",
                                 "[rank 0] MASTER_PORT=29611", "[rank 0] OMP_NUM_THREADS=1", "[rank 1] to stderr"})
            CHECK(has(r.output, line));
    }
    SUBCASE("second of two nodes") {
        Launch r = launch({"--nnodes", "2", "--node-rank", "1", "--nproc-per-node=2", "--master-addr", "10.1.2.3"}, "env");
        CAPTURE(r.output);
        CHECK(r.code == 0);
        for (const char* line : {"[rank 2] RANK=2", "[rank 3] RANK=3", "[rank 3] LOCAL_RANK=1", "[rank 3] WORLD_SIZE=4",
                                 "[rank 2] LOCAL_WORLD_SIZE=2", "[rank 2] MASTER_ADDR=10.1.2.3", "[rank 2] MASTER_PORT=29500"})
            CHECK(has(r.output, line));
    }
}

TEST_CASE("ampgrad-run takes torchrun's spellings: underscores in any flag, and --standalone") {
    Launch r = launch({"--standalone", "--nproc_per_node=2", "--max_restarts", "0", "--master_port", "29613"}, "env");
    CAPTURE(r.output);
    CHECK(r.code == 0);
    for (const char* line : {"[rank 1] WORLD_SIZE=2", "[rank 0] MASTER_PORT=29613"}) CHECK(has(r.output, line));
}

TEST_CASE("ampgrad-run: a failing rank stops the others and its exit code is returned") {
    Launch r = launch({"--nproc-per-node", "3"}, "exit7");
    CAPTURE(r.output);
    CHECK(r.code == 7);
    CHECK(has(r.output, "rank 1 exited with code 7; stopping the other ranks"));
    CHECK(r.seconds < 10);   // the others sleep 60 s unless stopped
}

TEST_CASE("ampgrad-run: SIGTERM is forwarded to every rank") {
    Launch r = launch({"--nproc-per-node", "2"}, "sleep", /*signal_after=*/2);
    CAPTURE(r.output);
    CHECK(r.code == 128 + SIGTERM);
    CHECK(r.seconds < 10);
}

TEST_CASE("ampgrad-run: a 2-rank job runs every collective") {
    Launch r = launch({"--nproc-per-node", "2", "--master-port", std::to_string(ampgrad_test::free_port())}, "collectives");
    CAPTURE(r.output);
    CHECK(r.code == 0);
}

TEST_CASE("ampgrad-run --help prints the usage and exits 0") {
    Launch r = launch({"--help"}, "");
    CAPTURE(r.output);
    CHECK(r.code == 0);
    CHECK(has(r.output, "usage: ampgrad-run"));
    CHECK(has(r.output, "--master-addr A"));
    for (const char* flag : {"--max-restarts R", "--monitor-interval S", "--rdzv-timeout S", "--rdzv-port P", "MIN:MAX"})
        CHECK(has(r.output, flag));
    CHECK_FALSE(has(r.output, "needs a value"));
}

TEST_CASE("ampgrad-run under srun: the Slurm variables stand in for the flags not given") {
    const Env slurm = {{"SLURM_NNODES", "2"}, {"SLURM_NODEID", "1"}, {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"},
                       {"SLURM_JOB_NODELIST", "gpu[07-08],cpu1"}};
    SUBCASE("second of two nodes, master the first host of the node list") {
        Launch r = launch({"--nproc-per-node", "2"}, "env", 0, slurm);
        CAPTURE(r.output);
        CHECK(r.code == 0);
        for (const char* line : {"[rank 2] RANK=2", "[rank 3] RANK=3", "[rank 3] WORLD_SIZE=4", "[rank 2] LOCAL_RANK=0",
                                 "[rank 2] MASTER_ADDR=gpu07"})
            CHECK(has(r.output, line));
    }
    SUBCASE("flags win over the variables") {
        Launch r = launch({"--nproc-per-node", "1", "--nnodes", "3", "--node-rank", "2", "--master-addr", "10.0.0.5"},
                          "env", 0, slurm);
        CAPTURE(r.output);
        CHECK(r.code == 0);
        CHECK(has(r.output, "[rank 2] WORLD_SIZE=3"));
        CHECK(has(r.output, "[rank 2] MASTER_ADDR=10.0.0.5"));
    }
    SUBCASE("one ampgrad-run per node, or a clear error") {
        const Env many = {{"SLURM_NNODES", "2"}, {"SLURM_NODEID", "1"}, {"SLURM_PROCID", "5"},
                          {"SLURM_NTASKS", "8"}};   // srun started 8 launchers on 2 nodes
        Launch r = launch({"--nproc-per-node", "2"}, "env", 0, many);
        CAPTURE(r.output);
        CHECK(r.code == 2);
        CHECK(has(r.output, "one ampgrad-run per node (srun --ntasks-per-node=1): SLURM_NTASKS=8 but SLURM_NNODES=2"));
    }
}

// A program that cannot run is named before any rank starts, with the fix; `ampgrad` off PATH is
// taken from the launcher's own build folder (build/tools/ampgrad-run -> build/app/ampgrad).
TEST_CASE("ampgrad-run: a program not on PATH is named with the fix; ampgrad is found in the build folder") {
    Launch missing = launch({"--nproc-per-node", "2", "no-such-program-here"}, "", 0, {{"PATH", "/usr/bin:/bin"}});
    CAPTURE(missing.output);
    CHECK(missing.code == 2);
    CHECK(has(missing.output, "cannot run no-such-program-here: not found on PATH; give its path"));
    CHECK_FALSE(has(missing.output, "[rank"));
    Launch ampgrad = launch({"--nproc-per-node", "1", "ampgrad", "info"}, "", 0, {{"PATH", "/usr/bin:/bin"}});
    CAPTURE(ampgrad.output);
    CHECK(ampgrad.code == 0);
    CHECK(has(ampgrad.output, "ampgrad is not on PATH; running"));
    CHECK(has(ampgrad.output, "[rank 0] ampgrad 0.1.0"));
}

// --max-restarts (issue 36): the ranks of a failed round are stopped and started again through the
// launchers' store, with the round and the cause in their environment, until the restarts run out
// or the ranks fail at the same step twice in a row. dist_worker "flaky": rank 1 exits 9 in the
// first AMPGRAD_TEST_FAIL_ROUNDS rounds (at step 10 + round, or 5 with AMPGRAD_TEST_SAME_STEP=1).
TEST_CASE("ampgrad-run --max-restarts: a failed round starts again with its cause, up to the limit") {
    const auto flags = [](const char* restarts) {
        const int port = ampgrad_test::free_port();
        return std::vector<std::string>{"--nproc-per-node", "2", "--max-restarts", restarts, "--monitor-interval", "0.2",
                                        "--master-port", std::to_string(port), "--rdzv-port", std::to_string(ampgrad_test::free_port())};
    };
    SUBCASE("one failure, then a clean round") {
        Launch r = launch(flags("2"), "flaky", 0, {{"AMPGRAD_TEST_FAIL_ROUNDS", "1"}});
        CAPTURE(r.output);
        CHECK(r.code == 0);
        CHECK(has(r.output, "ampgrad-run: rank 1 exited with code 9; stopping the other ranks"));
        CHECK(has(r.output, "ampgrad-run: round 1: 1 host(s), world size 2; restarting after: rank 1 (host 0) exited "
                            "with code 9 at step 10"));
        CHECK(has(r.output, "[rank 0] round 1 world 2 cause 'rank 1 (host 0) exited with code 9 at step 10'"));
        CHECK(has(r.output, "[rank 1] round 1 world 2 cause"));
        CHECK(r.seconds < 20);   // the sleeping rank 0 of round 0 was stopped, not waited for
    }
    SUBCASE("the restarts run out: the last failure's code, and why") {
        Launch r = launch(flags("2"), "flaky", 0, {{"AMPGRAD_TEST_FAIL_ROUNDS", "5"}});
        CAPTURE(r.output);
        CHECK(r.code == 9);
        CHECK(has(r.output, "round 2: 1 host(s)"));
        CHECK(has(r.output, "ampgrad-run: rank 1 (host 0) exited with code 9 at step 12; no restarts left (--max-restarts 2)"));
        CHECK_FALSE(has(r.output, "round 3"));
    }
    SUBCASE("the same step twice in a row stops the run instead of looping") {
        Launch r = launch(flags("5"), "flaky", 0, {{"AMPGRAD_TEST_FAIL_ROUNDS", "9"}, {"AMPGRAD_TEST_SAME_STEP", "1"}});
        CAPTURE(r.output);
        CHECK(r.code == 9);
        CHECK(has(r.output, "ampgrad-run: rank 1 (host 0) exited with code 9 at step 5, the step at which the previous "
                            "round failed too; stopping rather than restarting into the same failure"));
        CHECK_FALSE(has(r.output, "round 2"));
    }
}

// --nnodes MIN:MAX: node 0 waits --rdzv-timeout for the hosts, then goes on with at least MIN of
// them, numbering the ranks over those that came; fewer than MIN is an error naming the numbers.
TEST_CASE("ampgrad-run --nnodes MIN:MAX: a round goes on with the hosts that joined, or says why not") {
    const std::string port = std::to_string(ampgrad_test::free_port()), rdzv = std::to_string(ampgrad_test::free_port());
    Launch one = launch({"--nproc-per-node", "2", "--nnodes", "1:2", "--rdzv-timeout", "1", "--master-port", port,
                         "--rdzv-port", rdzv}, "env");
    CAPTURE(one.output);
    CHECK(one.code == 0);
    CHECK(has(one.output, "ampgrad-run: round 0: 1 host(s), world size 2"));
    CHECK(has(one.output, "[rank 1] WORLD_SIZE=2"));
    Launch few = launch({"--nproc-per-node", "1", "--nnodes", "2:3", "--rdzv-timeout", "1", "--master-port", port,
                         "--rdzv-port", rdzv}, "env");
    CAPTURE(few.output);
    CHECK(few.code == 1);
    CHECK(has(few.output, "restart round 0: only 1 of at least 2 hosts (--nnodes) joined within --rdzv-timeout 1 s: hosts 0"));
    Launch bad = launch({"--nnodes", "3:2", "--node-rank", "0"}, "env");
    CHECK(bad.code == 2);
    CHECK(has(bad.output, "--nnodes 3:2: MIN must be at least 1 and at most MAX"));
}

// Two launchers (two "hosts" on loopback): a rank failing under node 1 stops node 0's rank through
// the store, both restart in the next round, and both stop when the restarts run out.
TEST_CASE("ampgrad-run --max-restarts with two launchers: both restart, and both stop when the restarts run out") {
    for (const char* fail_rounds : {"1", "5"}) {
        CAPTURE(fail_rounds);
        const std::string port = std::to_string(ampgrad_test::free_port()), rdzv = std::to_string(ampgrad_test::free_port());
        const auto node = [&](const char* node_rank) {
            return launch({"--nnodes", "2", "--node-rank", node_rank, "--nproc-per-node", "1", "--max-restarts", "1",
                           "--monitor-interval", "0.2", "--master-port", port, "--rdzv-port", rdzv},
                          "flaky", 0, {{"AMPGRAD_TEST_FAIL_ROUNDS", fail_rounds}});
        };
        Launch second;
        std::thread other([&] { second = node("1"); });
        Launch first = node("0");
        other.join();
        CAPTURE(first.output);
        CAPTURE(second.output);
        CHECK(has(second.output, "ampgrad-run: round 1: 2 host(s), world size 2; restarting after: rank 1 (host 1) exited "
                                 "with code 9 at step 10"));
        CHECK(has(first.output, "ampgrad-run: a rank on another host failed; stopping this host's ranks"));
        if (std::string(fail_rounds) == "1") {
            CHECK(first.code == 0);
            CHECK(second.code == 0);
            CHECK(has(first.output, "[rank 0] round 1 world 2 cause 'rank 1 (host 1) exited with code 9 at step 10'"));
        } else {
            CHECK(first.code == 1);
            CHECK(second.code == 9);
            for (const std::string& out : {first.output, second.output})
                CHECK(has(out, "rank 1 (host 1) exited with code 9 at step 11; no restarts left (--max-restarts 1)"));
        }
    }
}

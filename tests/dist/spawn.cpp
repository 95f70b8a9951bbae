// tests/dist/spawn.cpp: the multi-process harness of tests/dist/spawn.hpp.
#include "spawn.hpp"

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace ampgrad_test {

namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

std::string worker_path() {
    const char* root = std::getenv("AMPGRAD_BUILD_ROOT");
    return std::string(root ? root : "build") + "/tests/dist_worker";
}

int free_port() {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    close(fd);
    return ntohs(a.sin_port);
}

std::vector<RankResult> run_workers(const std::string& scenario, int world_size, int port,
                                    const std::vector<Spawn>& ranks, std::chrono::seconds deadline) {
    std::vector<pid_t> pids;
    std::vector<int> pipes;
    for (const Spawn& s : ranks) {
        int fds[2];
        REQUIRE(pipe(fds) == 0);
        pid_t pid = fork();
        if (pid == 0) {
            dup2(fds[1], 1);
            dup2(fds[1], 2);
            close(fds[0]);
            setenv("RANK", std::to_string(s.rank).c_str(), 1);
            setenv("LOCAL_RANK", std::to_string(s.rank).c_str(), 1);
            setenv("WORLD_SIZE", std::to_string(world_size).c_str(), 1);
            setenv("MASTER_ADDR", "127.0.0.1", 1);
            setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
            setenv("OMP_NUM_THREADS", "1", 1);
            for (const auto& [k, v] : s.env) setenv(k.c_str(), v.c_str(), 1);
            std::string path = worker_path();
            execl(path.c_str(), path.c_str(), scenario.c_str(), static_cast<char*>(nullptr));
            _exit(127);
        }
        close(fds[1]);
        fcntl(fds[0], F_SETFL, O_NONBLOCK);
        pids.push_back(pid);
        pipes.push_back(fds[0]);
    }
    std::vector<RankResult> results(ranks.size());
    std::vector<bool> done(ranks.size(), false);
    auto end = Clock::now() + deadline;
    size_t left = ranks.size();
    while (left > 0) {
        for (size_t i = 0; i < ranks.size(); ++i) {
            char buf[4096];
            ssize_t n;
            while ((n = read(pipes[i], buf, sizeof buf)) > 0) results[i].output.append(buf, static_cast<size_t>(n));
            int status;
            if (!done[i] && waitpid(pids[i], &status, WNOHANG) == pids[i]) {
                done[i] = true;
                --left;
                if (WIFEXITED(status)) results[i].exit_code = WEXITSTATUS(status);
                else results[i].signal = WTERMSIG(status);
            }
        }
        if (Clock::now() > end) {
            for (size_t i = 0; i < ranks.size(); ++i)
                if (!done[i]) kill(pids[i], SIGKILL);
            FAIL_CHECK("workers of scenario '" << scenario << "' still running after " << deadline.count() << " s");
            end = Clock::now() + std::chrono::seconds(100);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    for (size_t i = 0; i < ranks.size(); ++i) {
        char buf[4096];
        ssize_t n;
        while ((n = read(pipes[i], buf, sizeof buf)) > 0) results[i].output.append(buf, static_cast<size_t>(n));
        close(pipes[i]);
    }
    return results;
}

std::vector<Spawn> all_ranks(int n, std::vector<std::pair<std::string, std::string>> env) {
    std::vector<Spawn> out;
    for (int r = 0; r < n; ++r) out.push_back({r, env});
    return out;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

long elapsed_ms(const std::string& out) {
    auto at = out.find("ELAPSED_MS ");
    return at == std::string::npos ? -1 : std::atol(out.c_str() + at + 11);
}

std::string line_after(const std::string& out, const std::string& key) {
    auto at = out.find(key + " ");
    if (at == std::string::npos) return "(missing)";
    auto end = out.find('\n', at);
    return out.substr(at + key.size() + 1, end == std::string::npos ? std::string::npos : end - at - key.size() - 1);
}

std::vector<RankResult> run_passing(const std::string& scenario, int n) {
    auto results = run_workers(scenario, n, free_port(), all_ranks(n), std::chrono::seconds(60));
    for (size_t r = 0; r < results.size(); ++r) {
        CAPTURE(scenario);
        CAPTURE(n);
        CAPTURE(r);
        CAPTURE(results[r].output);
        CHECK(results[r].exit_code == 0);
    }
    return results;
}

}  // namespace ampgrad_test

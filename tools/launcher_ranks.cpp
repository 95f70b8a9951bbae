// tools/launcher_ranks.cpp: one round of this host's ranks for ampgrad-run (tools/launcher.hpp).
#include "launcher.hpp"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <algorithm>
#include <fstream>
#include <stdexcept>
#include <sys/wait.h>
#include <unistd.h>

namespace ampgrad_run {

namespace {

struct Rank {
    int rank;
    pid_t pid = -1;
    int out = -1, err = -1;         // read ends of the child's stdout and stderr
    std::string out_buf, err_buf;   // a partial last line
    bool running = true;
    int code = 0;                   // exit code, or 128 + signal
};

void start(Rank& r, int local_rank, const Options& o, const RoundEnv& round) {
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) { std::perror("ampgrad-run: pipe"); std::exit(1); }
    r.pid = fork();
    if (r.pid == 0) {
        setpgid(0, 0);   // its own process group: a terminal's Ctrl-C reaches ranks only through us
        dup2(out[1], 1);
        dup2(err[1], 2);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        setenv("RANK", std::to_string(r.rank).c_str(), 1);
        setenv("LOCAL_RANK", std::to_string(local_rank).c_str(), 1);
        setenv("WORLD_SIZE", std::to_string(round.world_size).c_str(), 1);
        setenv("LOCAL_WORLD_SIZE", std::to_string(o.nproc_per_node).c_str(), 1);
        setenv("GROUP_RANK", std::to_string(round.group_rank).c_str(), 1);
        setenv("MASTER_ADDR", o.master_addr.c_str(), 1);
        setenv("MASTER_PORT", std::to_string(o.master_port).c_str(), 1);
        setenv("OMP_NUM_THREADS", "1", 0);
        if (o.collective_timeout_s > 0) setenv("AMPGRAD_COLLECTIVE_TIMEOUT", std::to_string(o.collective_timeout_s).c_str(), 1);
        if (!o.fr_dir.empty()) setenv("AMPGRAD_FR_DIR", o.fr_dir.c_str(), 1);
        for (const auto& [name, value] : round.extra) setenv(name.c_str(), value.c_str(), 1);
        std::vector<char*> args;
        for (const auto& a : o.command) args.push_back(const_cast<char*>(a.c_str()));
        args.push_back(nullptr);
        execvp(args[0], args.data());
        std::fprintf(stderr, "ampgrad-run: cannot run %s: %s\n", args[0], std::strerror(errno));
        _exit(127);
    }
    close(out[1]);
    close(err[1]);
    r.out = out[0];
    r.err = err[0];
    fcntl(r.out, F_SETFL, O_NONBLOCK);   // pump() reads what is there and never waits
    fcntl(r.err, F_SETFL, O_NONBLOCK);
}

// Moves what a rank wrote into its buffer and prints each complete line with the rank's prefix.
// Returns false at end of file.
bool pump(int& fd, std::string& buf, int rank, FILE* to) {
    char chunk[65536];
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
    if (n > 0) buf.append(chunk, static_cast<size_t>(n));
    size_t start = 0, nl;
    while ((nl = buf.find('\n', start)) != std::string::npos || (n <= 0 && start < buf.size())) {
        size_t end = nl == std::string::npos ? buf.size() : nl;
        std::fprintf(to, "[rank %d] %.*s\n", rank, static_cast<int>(end - start), buf.data() + start);
        start = end + 1;
    }
    buf.erase(0, std::min(start, buf.size()));
    std::fflush(to);
    if (n <= 0) {
        close(fd);
        fd = -1;
        return false;
    }
    return true;
}

void signal_all(std::vector<Rank>& ranks, int sig) {
    for (auto& r : ranks)
        if (r.running) kill(r.pid, sig);
}


// The step a rank was in when it stopped (its AMPGRAD_STEP_FILE), or -1.
int64_t step_in_progress(const std::string& step_file) {
    std::ifstream in(step_file);
    long long step = -1;
    return in >> step ? step : -1;
}

std::string step_file_of(const std::string& dir, int rank) { return dir + "/rank" + std::to_string(rank) + ".step"; }

// A round in progress: the ranks, and whether (and why) they are being stopped.
class Round {
public:
    Round(const Options& o, const std::string& step_dir) : o_(o), step_dir_(step_dir) {}

    void start_ranks(const RoundEnv& env) {
        const int first_rank = env.group_rank * o_.nproc_per_node;
        for (int l = 0; l < o_.nproc_per_node; ++l) ranks_.push_back(Rank{first_rank + l});
        for (int l = 0; l < o_.nproc_per_node; ++l) {
            RoundEnv mine = env;
            if (!step_dir_.empty()) mine.extra.emplace_back("AMPGRAD_STEP_FILE", step_file_of(step_dir_, first_rank + l));
            start(ranks_[static_cast<size_t>(l)], l, o_, mine);
        }
    }

    // Waits up to 100 ms for output or a signal; forwards a signal, prints complete lines.
    void pump_once(int signal_fd) {
        std::vector<pollfd> fds{{signal_fd, POLLIN, 0}};
        for (auto& r : ranks_) {
            if (r.out >= 0) fds.push_back({r.out, POLLIN, 0});
            if (r.err >= 0) fds.push_back({r.err, POLLIN, 0});
        }
        poll(fds.data(), fds.size(), 100);
        now_ms_ += 100;   // coarse: only the SIGKILL grace period and the monitor interval use it
        char sig;
        if ((fds[0].revents & POLLIN) && read(signal_fd, &sig, 1) == 1) {
            signal_all(ranks_, sig);
            if (result_.end != RoundResult::End::kSignal) stop(RoundResult::End::kSignal, 128 + sig, 0);
        }
        for (auto& r : ranks_) {
            if (r.out >= 0) pump(r.out, r.out_buf, r.rank, stdout);
            if (r.err >= 0) pump(r.err, r.err_buf, r.rank, stderr);
        }
    }

    // Collects the ranks that ended; the first failure stops the others.
    void reap() {
        int status;
        pid_t pid;
        while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
            for (auto& r : ranks_) {
                if (r.pid != pid) continue;
                r.running = false;
                r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
                if (r.code != 0 && !stopping_) failed(r, status);
            }
        }
    }

    // Every --monitor-interval: has another host reported a failure in this round?
    void watch(RestartRounds* rounds, int round) {
        if (rounds == nullptr || stopping_ || now_ms_ < next_monitor_ms_) return;
        next_monitor_ms_ = now_ms_ + static_cast<long>(o_.monitor_interval_s * 1000);
        try {
            if (!rounds->failed_elsewhere(round)) return;
            std::fprintf(stderr, "ampgrad-run: a rank on another host failed; stopping this host's ranks\n");
            stop(RoundResult::End::kFailedElsewhere, 1, SIGTERM);
        } catch (const std::exception& e) {   // node 0 is gone: no round can follow
            std::fprintf(stderr, "ampgrad-run: the launchers' store on node 0 is gone (%s); stopping this host's ranks\n",
                         e.what());
            stop(RoundResult::End::kStoreLost, 1, SIGTERM);
        }
    }

    // False once every rank has ended and its output is drained; SIGKILLs the late ones.
    bool going() {
        bool any_running = false, any_open = false;
        for (auto& r : ranks_) {
            any_running |= r.running;
            any_open |= r.out >= 0 || r.err >= 0;
        }
        if (stopping_ && any_running && now_ms_ > kill_deadline_ms_) signal_all(ranks_, SIGKILL);
        return any_running || any_open;
    }

    const RoundResult& result() const { return result_; }

private:
    void stop(RoundResult::End end, int code, int sig) {
        result_.end = end;
        result_.code = code;
        if (!stopping_) kill_deadline_ms_ = now_ms_ + 5000;
        stopping_ = true;
        if (sig != 0) signal_all(ranks_, sig);
    }

    void failed(const Rank& r, int status) {
        const std::string how = WIFEXITED(status) ? "exited with code " + std::to_string(r.code)
                                                  : "was killed by signal " + std::to_string(WTERMSIG(status));
        std::fprintf(stderr, "ampgrad-run: rank %d %s; stopping the other ranks\n", r.rank, how.c_str());
        Failure& f = result_.failure;
        f.step = step_dir_.empty() ? -1 : step_in_progress(step_file_of(step_dir_, r.rank));
        f.exited = WIFEXITED(status);
        f.cause = "rank " + std::to_string(r.rank) + " (host " + std::to_string(o_.node_rank) + ") " + how;
        if (f.step >= 0) f.cause += " at step " + std::to_string(f.step);
        stop(RoundResult::End::kLocalFailure, r.code, SIGTERM);
    }

    const Options& o_;
    const std::string step_dir_;
    std::vector<Rank> ranks_;
    RoundResult result_;
    bool stopping_ = false;
    long kill_deadline_ms_ = -1, now_ms_ = 0, next_monitor_ms_ = 0;
};

}  // namespace

RoundResult run_round(const Options& o, const RoundEnv& env, RestartRounds* rounds, int round,
                      const std::string& step_dir, int signal_fd) {
    Round r(o, step_dir);
    r.start_ranks(env);
    do {
        r.pump_once(signal_fd);
        r.reap();
        r.watch(rounds, round);
    } while (r.going());
    return r.result();
}

}  // namespace ampgrad_run

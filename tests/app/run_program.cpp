// run_program.cpp: see run_program.hpp.
#include "tests/app/run_program.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "data/text.hpp"

extern char** environ;

namespace ampgrad::testing {

namespace fs = std::filesystem;

namespace {
std::string build_root() {
    const char* root = std::getenv("AMPGRAD_BUILD_ROOT");
    return root ? root : "build";
}
}  // namespace

std::string ampgrad_program() { return build_root() + "/app/ampgrad"; }
std::string ampgrad_run_program() { return build_root() + "/tools/ampgrad-run"; }

namespace {

// The low end of the kernel's ephemeral range (bind to port 0, outgoing connections, Gloo's pair
// sockets): ports below it are never handed out behind a test's back.
int ephemeral_low() {
    std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
    int low = 32768, high = 60999;
    in >> low >> high;
    return low;
}

bool can_bind(int port) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    const bool ok = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    if (fd >= 0) ::close(fd);
    return ok;
}

int kernel_pick() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    ::close(fd);
    return ntohs(a.sin_port);
}

}  // namespace

int free_port() {
    // Ports in [10000, ephemeral low), walked from a start that depends on the process id, never
    // twice in one test process: runs started at the same time (run_jobs) cannot be handed the same
    // port, and no Gloo pair socket or outgoing connection can take one before its store binds it.
    static std::mutex mutex;
    static int next = -1;
    std::lock_guard<std::mutex> lock(mutex);
    const int first = 10000, span = ephemeral_low() - first;
    if (span < 1000) return kernel_pick();
    if (next < 0) next = first + static_cast<int>((static_cast<int64_t>(::getpid()) * 7919) % span);
    for (int tries = 0; tries < span; ++tries) {
        const int port = next;
        next = first + (next - first + 1) % span;
        if (can_bind(port)) return port;
    }
    return kernel_pick();
}

std::vector<ProgramResult> run_jobs(const std::vector<Job>& jobs, int parallel, int max_processes) {
    std::vector<ProgramResult> results(jobs.size());
    std::mutex m;
    std::condition_variable changed;
    size_t next = 0;
    int processes = 0;   // of the jobs running now
    auto worker = [&] {
        std::unique_lock lock(m);
        for (;;) {
            // In order: the next job starts when its processes fit, or when nothing runs.
            changed.wait(lock, [&] {
                return next == jobs.size() || processes == 0 || processes + jobs[next].processes <= max_processes;
            });
            if (next == jobs.size()) return;
            const size_t i = next++;
            processes += jobs[i].processes;
            lock.unlock();
            ProgramResult r = jobs[i].run();
            lock.lock();
            results[i] = std::move(r);
            processes -= jobs[i].processes;
            changed.notify_all();
        }
    };
    std::vector<std::thread> workers;
    for (int w = 0; w < std::max(1, parallel); ++w) workers.emplace_back(worker);
    for (std::thread& t : workers) t.join();
    return results;
}

std::string make_temp_dir(const std::string& tag) {
    static std::atomic<int> counter{0};   // run_jobs calls it from several threads
    fs::path p = fs::temp_directory_path() / fmt::format("ampgrad_app_test_{}_{}_{}", ::getpid(), tag, counter++);
    fs::remove_all(p);
    fs::create_directories(p);
    return p.string();
}

ProgramResult run_program(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                          bool kill_when_stopped) {
    const std::string out_path = make_temp_dir("out") + "/output.txt";
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    // The extra entries replace inherited ones of the same name: getenv returns the first match, and
    // the suite's OMP_NUM_THREADS=2 (tests/meson.build) used to win over a test's OMP_NUM_THREADS=1.
    auto name_of = [](const std::string& entry) { return entry.substr(0, entry.find('=')); };
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) {
        const std::string entry = *e;
        const bool replaced = std::any_of(env.begin(), env.end(),
                                          [&](const std::string& extra) { return name_of(extra) == name_of(entry); });
        if (!replaced) env_strings.push_back(entry);
    }
    env_strings.insert(env_strings.end(), env.begin(), env.end());
    std::vector<char*> args, envp;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    for (const std::string& e : env_strings) envp.push_back(const_cast<char*>(e.c_str()));
    args.push_back(nullptr);
    envp.push_back(nullptr);
    pid_t pid = 0;
    ProgramResult r;
    if (posix_spawn(&pid, args[0], &actions, nullptr, args.data(), envp.data()) != 0) {
        r.output = "posix_spawn failed for " + argv[0];
        return r;
    }
    posix_spawn_file_actions_destroy(&actions);
    int status = 0;
    while (true) {
        if (waitpid(pid, &status, kill_when_stopped ? WUNTRACED : 0) < 0) break;
        if (WIFSTOPPED(status)) {
            r.was_stopped = true;
            ::kill(pid, SIGKILL);
            continue;
        }
        break;
    }
    if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
    std::ifstream in(out_path);
    std::stringstream s;
    s << in.rdbuf();
    r.output = s.str();
    fs::remove_all(fs::path(out_path).parent_path());
    return r;
}

ProgramResult run_ampgrad_with_file_limit(const std::vector<std::string>& args, int64_t kib) {
    std::string command = fmt::format("ulimit -f {} && exec '{}'", kib, ampgrad_program());
    for (const std::string& a : args) command += " '" + a + "'";
    return run_program({"/bin/sh", "-c", command});
}

ProgramResult run_ampgrad(std::vector<std::string> args, const std::vector<std::string>& env, bool kill_when_stopped) {
    args.insert(args.begin(), ampgrad_program());
    return run_program(args, env, kill_when_stopped);
}

std::string read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

std::string lower_case_text(const std::string& dir) {
    std::string text;
    for (char c : data::tiny_shakespeare().substr(0, 100000)) {
        const char lower = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if ((lower >= 'a' && lower <= 'z') || lower == ' ' || lower == '\n') text.push_back(lower);
    }
    const std::string path = dir + "/lower.txt";
    std::ofstream(path) << text;
    return path;
}

std::map<int64_t, nlohmann::json> train_records(const std::string& out) {
    std::map<int64_t, nlohmann::json> records;
    std::ifstream in(out + "/metrics.jsonl");
    for (std::string line; std::getline(in, line);) {
        nlohmann::json j = nlohmann::json::parse(line);
        if (j["kind"] == "train") records[j["step"].get<int64_t>()] = j;
    }
    return records;
}

std::vector<std::string> plus(std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

std::string latest_dir(const std::string& out) {
    std::string name = read_bytes((std::filesystem::path(out) / "checkpoints" / "latest").string());
    return out + "/checkpoints/" + name.substr(0, name.find('\n'));
}

}  // namespace ampgrad::testing

// run_program.hpp: runs the `ampgrad` program as a child process for tests/app (posix_spawn), with
// its output captured, optionally stopping it where it stops itself (SIGSTOP) and killing it there.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ampgrad::testing {

struct ProgramResult {
    int exit_code = -1;        // -1 when killed by a signal
    int signal = 0;            // the signal that ended it
    bool was_stopped = false;  // it stopped itself and the test SIGKILLed it
    std::string output;        // stdout and stderr together
};

// build/app/ampgrad and build/tools/ampgrad-run (from AMPGRAD_BUILD_ROOT).
std::string ampgrad_program();
std::string ampgrad_run_program();
// A loopback TCP port that was free a moment ago, for --master-port: below the kernel's ephemeral
// range and never the same twice in one test process (run_program.cpp says why).
int free_port();
// Runs `argv` (argv[0] is the program path) with extra "KEY=VALUE" environment entries (each replaces
// an inherited entry of its name). With kill_when_stopped, a child that stops itself is killed with
// SIGKILL at that point.
ProgramResult run_program(const std::vector<std::string>& argv, const std::vector<std::string>& env = {},
                          bool kill_when_stopped = false);
// A child run for run_jobs, and how many processes it starts (its ranks).
struct Job {
    std::function<ProgramResult()> run;
    int processes = 1;
};
// Runs the jobs in order, up to `parallel` at once and, unless one runs alone, up to `max_processes`
// processes at once (a sanitizer's process holds hundreds of MB). The results are in the jobs'
// order. Jobs must not use doctest's assertions (the caller checks the results).
std::vector<ProgramResult> run_jobs(const std::vector<Job>& jobs, int parallel, int max_processes);
// `ampgrad ARGS...` through `sh -c` with a file-size limit of `kib` KiB (ulimit -f): writes past
// it fail with EFBIG, as on a full disk.
ProgramResult run_ampgrad_with_file_limit(const std::vector<std::string>& args, int64_t kib);
// A fresh empty temporary directory.
std::string make_temp_dir(const std::string& tag);
// `ampgrad ARGS...` (ampgrad_program()) through run_program.
ProgramResult run_ampgrad(std::vector<std::string> args, const std::vector<std::string>& env = {},
                          bool kill_when_stopped = false);
// A file's bytes ("" when it cannot be read).
std::string read_bytes(const std::string& path);
// The Hugging Face Llama fixtures have 40 token ids: the first 100,000 characters of Tiny Shakespeare
// in lower case, letters, spaces and newlines only (28 characters), written to DIR/lower.txt, fit a
// char tokenizer under them. Returns the file's path.
std::string lower_case_text(const std::string& dir);
// The "train" records of OUT/metrics.jsonl by step (empty when there is no such file).
std::map<int64_t, nlohmann::json> train_records(const std::string& out);
// a followed by b (argument lists).
std::vector<std::string> plus(std::vector<std::string> a, const std::vector<std::string>& b);
// OUT/checkpoints/<the folder `latest` names>.
std::string latest_dir(const std::string& out);

}  // namespace ampgrad::testing

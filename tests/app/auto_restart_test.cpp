// auto_restart_test.cpp: what `ampgrad train` does for a launcher that restarts it
// (app/auto_restart.hpp): --resume auto starts fresh, then continues from the newest checkpoint, and
// names a `latest` that points nowhere; and the issue-36 fault: rank 1 of a 2-rank data-parallel run
// SIGKILLed mid-run under `ampgrad-run --max-restarts 1` restarts by itself from the last
// checkpoint and ends with weights bit for bit those of the uninterrupted run (`ampgrad verify`),
// with a "restart" record in metrics.jsonl naming the cause. And the elastic step layout: a run
// continued on 3 processes that cannot share --batch-size 4 keeps its global batch by accumulating
// more micro-steps, and trains on the same windows as one process (the same losses to rounding).
#include <doctest/doctest.h>

#include <dirent.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ampgrad_config.h"
#include "app/auto_restart.hpp"
#include "app/run_config.hpp"
#include "core/error.hpp"
#include "tests/app/run_program.hpp"
#include "tests/app/shard_fixtures.hpp"

using namespace ampgrad::testing;
namespace fs = std::filesystem;

namespace {

// A tiny model on token shards, checkpointed every 4 steps, resuming by itself (--resume auto).
std::vector<std::string> auto_run(const std::string& data, const std::string& out, int64_t steps) {
    return {"train", "--data", data, "--tokenizer", "byte", "--n-layer", "1", "--n-embd", "32", "--n-head", "2",
            "--block-size", "16", "--batch-size", "4", "--steps", std::to_string(steps), "--warmup", "1",
            "--eval-every", "0", "--eval-iters", "2", "--sample-tokens", "0", "--progress", "plain", "--log-every", "1",
            "--ckpt-every", "4", "--resume", "auto", "--out", out};
}

// The step of the checkpoint OUT/checkpoints/latest names, or -1.
int64_t latest_step(const std::string& out) {
    std::ifstream in(fs::path(out) / "checkpoints" / "latest");
    std::string name;
    in >> name;
    return name.rfind("step-", 0) == 0 ? std::stoll(name.substr(5)) : -1;
}

// `ampgrad ARGS` on `procs` processes through ampgrad-run (one process: directly), one thread each.
ProgramResult run_on(int procs, std::vector<std::string> args) {
    if (procs > 1)
        args.insert(args.begin(), {ampgrad_run_program(), "--nproc-per-node", std::to_string(procs), "--master-port",
                                   std::to_string(free_port()), ampgrad_program()});
    else
        args.insert(args.begin(), ampgrad_program());
    return run_program(args, {"OMP_NUM_THREADS=1"});
}

// The records of metrics.jsonl of one kind.
std::vector<nlohmann::json> records(const std::string& out, const std::string& kind) {
    std::vector<nlohmann::json> found;
    std::ifstream in(fs::path(out) / "metrics.jsonl");
    for (std::string line; std::getline(in, line);)
        if (nlohmann::json j = nlohmann::json::parse(line); j["kind"] == kind) found.push_back(j);
    return found;
}

// The pid of the process whose environment holds RANK=<rank> and whose command line names `out`
// (the run's unique folder), or -1.
pid_t rank_process(const std::string& out, int rank) {
    DIR* proc = opendir("/proc");
    if (proc == nullptr) return -1;
    pid_t found = -1;
    while (dirent* e = readdir(proc)) {
        const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
        if (pid <= 0) continue;
        const std::string dir = std::string("/proc/") + e->d_name;
        std::string cmdline = read_bytes(dir + "/cmdline"), environ = read_bytes(dir + "/environ");
        const std::string rank_var = std::string("RANK=") + std::to_string(rank) + '\0';
        if (cmdline.find(out) == std::string::npos || cmdline.find("ampgrad-run") != std::string::npos) continue;
        if (environ.find(std::string(1, '\0') + rank_var) != std::string::npos || environ.rfind(rank_var, 0) == 0) {
            found = pid;
            break;
        }
    }
    closedir(proc);
    return found;
}

}  // namespace

TEST_CASE("train --resume auto: fresh without a checkpoint, then the newest one; a broken latest is named") {
    const std::string data = write_text_shards(make_temp_dir("auto_data"), 5000, 20000, 60000);
    const std::string straight = make_temp_dir("auto_straight"), split = make_temp_dir("auto_split");
    REQUIRE(run_ampgrad(auto_run(data, straight, 8), {"OMP_NUM_THREADS=1"}).exit_code == 0);
    std::vector<std::string> first = auto_run(data, split, 8);
    first.insert(first.end(), {"--until", "4"});
    const ProgramResult a = run_ampgrad(first, {"OMP_NUM_THREADS=1"});
    REQUIRE_MESSAGE(a.exit_code == 0, a.output);
    CHECK(a.output.find("resumed from") == std::string::npos);
    const ProgramResult b = run_ampgrad(auto_run(data, split, 8), {"OMP_NUM_THREADS=1"});
    REQUIRE_MESSAGE(b.exit_code == 0, b.output);
    CHECK(b.output.find("checkpoints/step-00000004 at step 4") != std::string::npos);
    const ProgramResult same = run_ampgrad({"verify", straight, split});
    CHECK_MESSAGE(same.exit_code == 0, same.output);
    CHECK(same.output.find("step 8: ") != std::string::npos);

    std::ofstream(fs::path(split) / "checkpoints" / "latest") << "step-00000099\n";
    const ProgramResult broken = run_ampgrad(auto_run(data, split, 8), {"OMP_NUM_THREADS=1"});
    CHECK(broken.exit_code == 1);
    CHECK_MESSAGE(broken.output.find("names \"step-00000099\", which holds no state.json") != std::string::npos,
                  broken.output);
}

TEST_CASE("ampgrad-run --max-restarts 1: rank 1 SIGKILLed mid-run; the run restarts from its last checkpoint and "
          "ends bit for bit as the uninterrupted run" * doctest::skip(!AMPGRAD_WITH_GLOO)) {
    const std::string data = write_text_shards(make_temp_dir("restart_data"), 5000, 20000, 100000);
    const std::string straight = make_temp_dir("restart_straight"), killed = make_temp_dir("restart_killed");
    const auto launched = [&](const std::string& out) {
        std::vector<std::string> args = {ampgrad_run_program(), "--nproc-per-node", "2", "--max-restarts", "1",
                                         "--monitor-interval", "0.2", "--master-port", std::to_string(free_port()),
                                         "--rdzv-port", std::to_string(free_port()), ampgrad_program()};
        const std::vector<std::string> train = auto_run(data, out, 16);
        args.insert(args.end(), train.begin(), train.end());
        return args;
    };
    const ProgramResult a = run_program(launched(straight), {"OMP_NUM_THREADS=1"});
    REQUIRE_MESSAGE(a.exit_code == 0, a.output);

    // Once step 8's checkpoint is published, SIGKILL rank 1 (it is then in step 9 or a little later;
    // on a loaded machine the next checkpoint may be out first).
    std::atomic<bool> done{false};
    std::atomic<int> killed_pid{-1};
    std::thread killer([&] {
        while (!done && latest_step(killed) < 8) std::this_thread::sleep_for(std::chrono::milliseconds(2));
        for (int tries = 0; !done && tries < 500 && killed_pid < 0; ++tries) {
            const pid_t pid = rank_process(killed, 1);
            if (pid > 0 && ::kill(pid, SIGKILL) == 0) killed_pid = pid;
        }
    });
    const ProgramResult b = run_program(launched(killed), {"OMP_NUM_THREADS=1"});
    done = true;
    killer.join();
    CAPTURE(b.output);
    REQUIRE(killed_pid > 0);
    REQUIRE(b.exit_code == 0);
    CHECK(b.output.find("was killed by signal 9; stopping the other ranks") != std::string::npos);
    CHECK(b.output.find("ampgrad-run: round 1: 1 host(s), world size 2; restarting after: rank 1 (host 0) was "
                        "killed by signal 9 at step ") != std::string::npos);
    const std::vector<nlohmann::json> restarts = records(killed, "restart");
    REQUIRE(restarts.size() == 1);
    CHECK(restarts[0]["restart"] == 1);
    const int64_t resumed = restarts[0]["step"].get<int64_t>();   // 8, or 12 on a loaded machine
    CHECK((resumed == 8 || resumed == 12));
    CHECK(restarts[0]["cause"].get<std::string>().find("rank 1 (host 0) was killed by signal 9 at step") == 0);
    CHECK(restarts[0]["resumed_from"].get<std::string>().find(fmt::format("step-{:08d}", resumed)) != std::string::npos);
    CHECK(records(killed, "train").size() == 16);   // the lost steps' records were dropped on resume
    const ProgramResult same = run_ampgrad({"verify", straight, killed});
    CHECK_MESSAGE(same.exit_code == 0, same.output);
    CHECK(same.output.find("step 16: ") != std::string::npos);
    CHECK(same.output.find("identical") != std::string::npos);
}

TEST_CASE("step_layout: the run's own split when the world size divides --batch-size, else more micro-steps "
          "that keep the global batch, else an error naming the numbers") {
    ampgrad::app::RunConfig cfg;
    cfg.batch_size = 4;
    cfg.grad_accum = 3;
    const auto layout = [&](int world) {
        const ampgrad::app::StepLayout l = ampgrad::app::step_layout(cfg, world);
        return std::pair<int64_t, int64_t>{l.micro, l.accum};
    };
    CHECK(layout(1) == std::pair<int64_t, int64_t>{4, 3});
    CHECK(layout(2) == std::pair<int64_t, int64_t>{2, 3});
    CHECK(layout(3) == std::pair<int64_t, int64_t>{1, 4});    // 3 x 1 x 4 = 12 = 4 x 3
    CHECK(layout(6) == std::pair<int64_t, int64_t>{1, 2});
    CHECK(layout(12) == std::pair<int64_t, int64_t>{1, 1});
    try {
        ampgrad::app::step_layout(cfg, 5);
        FAIL("5 processes cannot share 12 sequences");
    } catch (const ampgrad::ValueError& e) {
        CHECK(std::string(e.what()).find("--batch-size 4 is not divisible by the 5 processes, and the global batch of 12 "
                                         "sequences per step (--batch-size 4 x 3 micro-step(s)) cannot be split evenly "
                                         "over them either: run on a number of processes that divides 12") !=
              std::string::npos);
    }
}

TEST_CASE("elastic: a 2-process run continued on 3 processes keeps its global batch and its windows (data parallel "
          "and ZeRO 2)" * doctest::skip(!AMPGRAD_WITH_GLOO)) {
    const std::string data = write_text_shards(make_temp_dir("elastic_data"), 5000, 20000, 60000);
    const auto args = [&](const std::string& out) {
        std::vector<std::string> a = auto_run(data, out, 6);
        a.insert(a.end(), {"--grad-accum", "3", "--ckpt-every", "0"});
        return a;
    };
    const std::string one = make_temp_dir("elastic_one");
    REQUIRE(run_on(1, args(one)).exit_code == 0);
    for (const std::string zero : {"", "2"}) {
        CAPTURE(zero);
        const std::string grown = make_temp_dir("elastic_grown");
        std::vector<std::string> first = args(grown), second = args(grown);
        first.insert(first.end(), {"--until", "3"});
        if (!zero.empty()) first.insert(first.end(), {"--zero", zero}), second.insert(second.end(), {"--zero", zero});
        const ProgramResult a = run_on(2, first);
        REQUIRE_MESSAGE(a.exit_code == 0, a.output);
        const ProgramResult b = run_on(3, second);
        REQUIRE_MESSAGE(b.exit_code == 0, b.output);
        CHECK(b.output.find("3 processes cannot share --batch-size 4 equally: 4 micro-steps of 1 sequences per rank "
                            "keep the global batch of 12 sequences per step") != std::string::npos);
        const std::vector<nlohmann::json> straight = records(one, "train"), elastic = records(grown, "train");
        REQUIRE(straight.size() == 6);
        REQUIRE(elastic.size() == 6);
        for (size_t i = 3; i < 6; ++i) {
            CHECK(elastic[i]["tokens_per_step"] == straight[i]["tokens_per_step"]);
            CHECK(elastic[i]["loss"].get<double>() == doctest::Approx(straight[i]["loss"].get<double>()).epsilon(1e-4));
        }
        CHECK(elastic[5]["grad_accum"] == 4);
    }
}

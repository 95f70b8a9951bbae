// ddp_train_test.cpp: `ampgrad-run --nproc-per-node 2 ampgrad train` without --zero is data parallel
// (app/trainer.hpp): one process group, the GPT wrapped in DistributedDataParallel, each rank on
// its own half of --batch-size. Rank 0 alone prints and writes metrics.jsonl and checkpoints (one
// record per step, not one per rank); the progress line shows the ranks and the global batch;
// 6 steps straight and 3 + --resume + 3 end with the same losses and checkpoint bytes (dropout on:
// every rank's data position and RNG come back); `eval` reads the checkpoint with no launcher.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "ampgrad_config.h"
#include "tests/app/run_program.hpp"

using namespace ampgrad::testing;
namespace fs = std::filesystem;

namespace {

// ampgrad-run --nproc-per-node NPROC ampgrad train <tiny run> <extra>
ProgramResult launch(const std::string& out, const std::vector<std::string>& extra, int nproc = 2) {
    std::vector<std::string> argv = {ampgrad_run_program(), "--nproc-per-node", std::to_string(nproc),
                                     "--master-port", std::to_string(free_port()), ampgrad_program(), "train",
                                     "--n-layer", "1", "--n-embd", "32", "--n-head", "2", "--block-size", "16",
                                     "--batch-size", "4", "--steps", "6", "--warmup", "2", "--eval-every", "0",
                                     "--eval-iters", "1", "--sample-tokens", "0", "--dropout", "0.1", "--progress",
                                     "plain", "--log-every", "1", "--out", out};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return run_program(argv, {"OMP_NUM_THREADS=1"});
}

std::vector<nlohmann::json> train_record_list(const std::string& out) {
    std::vector<nlohmann::json> records;
    std::ifstream in(out + "/metrics.jsonl");
    for (std::string line; std::getline(in, line);) {
        nlohmann::json j = nlohmann::json::parse(line);
        if (j["kind"] == "train") records.push_back(j);
    }
    return records;
}

}  // namespace

TEST_CASE("train on 2 processes without --zero is data parallel; rank 0 alone writes; --resume is bit-exact" *
          doctest::skip(!AMPGRAD_WITH_GLOO)) {
    const std::string straight = make_temp_dir("ddp_straight"), split = make_temp_dir("ddp_split");
    ProgramResult a = launch(straight, {});
    REQUIRE_MESSAGE(a.exit_code == 0, a.output);
    CHECK(a.output.find("[rank 0] data parallel on 2 processes: global batch 4 (2 per rank)") != std::string::npos);
    CHECK(a.output.find("| 2 ranks, batch 4 |") != std::string::npos);
    CHECK(a.output.find("[rank 1] step") == std::string::npos);   // rank 1 prints no progress
    ProgramResult b1 = launch(split, {"--until", "3"});
    REQUIRE_MESSAGE(b1.exit_code == 0, b1.output);
    ProgramResult b2 = launch(split, {"--resume", split});
    REQUIRE_MESSAGE(b2.exit_code == 0, b2.output);
    CHECK(b2.output.find("resumed from") != std::string::npos);

    // One record per step: two ranks appending to one file would leave twelve.
    std::vector<nlohmann::json> ra = train_record_list(straight), rb = train_record_list(split);
    REQUIRE(ra.size() == 6);
    REQUIRE(rb.size() == 6);
    for (size_t i = 0; i < 6; ++i) {
        CAPTURE(i);
        CHECK(ra[i]["step"] == static_cast<int64_t>(i + 1));
        CHECK(ra[i]["world_size"] == 2);
        CHECK(ra[i]["global_batch"] == 4);
        CHECK(ra[i]["loss"].get<double>() == rb[i]["loss"].get<double>());
        CHECK(ra[i]["grad_norm"].get<double>() == rb[i]["grad_norm"].get<double>());
    }
    const fs::path fa = fs::path(straight) / "checkpoints" / "step-00000006", fb = fs::path(split) / "checkpoints" / "step-00000006";
    for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
        CAPTURE(file);
        CHECK(read_bytes(fa / file) == read_bytes(fb / file));
    }
    const nlohmann::json state = nlohmann::json::parse(read_bytes(fa / "state.json"));
    CHECK(state["data_parallel"]["world_size"] == 2);
    for (const auto& entry : fs::directory_iterator(fs::path(straight) / "checkpoints")) {   // nothing half-written
        CAPTURE(entry.path());
        CHECK(entry.path().filename().string().find(".tmp") == std::string::npos);
    }

    ProgramResult e = run_program({ampgrad_program(), "eval", "--ckpt", straight});
    REQUIRE_MESSAGE(e.exit_code == 0, e.output);
    CHECK(e.output.find("\"val_loss\"") != std::string::npos);
    fs::remove_all(straight);
    fs::remove_all(split);
}

// From three ranks on, where a bucket's layout puts an element changes the order the collective adds
// it in: the resumed run must reduce its first step in the buckets the straight run had learned
// (saved in state.json), or the last bits drift (as they did before the buckets were saved).
TEST_CASE("data parallel on 3 processes: --resume is bit-exact, the learned buckets in the checkpoint" *
          doctest::skip(!AMPGRAD_WITH_GLOO)) {
    const std::string straight = make_temp_dir("ddp3_straight"), split = make_temp_dir("ddp3_split");
    const std::vector<std::string> three = {"--batch-size", "6", "--steps", "8", "--n-embd", "48", "--n-layer", "2"};
    ProgramResult a = launch(straight, three, 3);
    REQUIRE_MESSAGE(a.exit_code == 0, a.output);
    ProgramResult b1 = launch(split, plus(three, {"--until", "3"}), 3);
    REQUIRE_MESSAGE(b1.exit_code == 0, b1.output);
    const nlohmann::json saved = nlohmann::json::parse(read_bytes(fs::path(split) / "checkpoints" / "step-00000003" / "state.json"));
    CHECK(saved["data_parallel"]["buckets"]["ready_order"].size() == saved["data_parallel"]["buckets"]["hook_counts"].size());
    ProgramResult b2 = launch(split, plus(three, {"--resume", split}), 3);
    REQUIRE_MESSAGE(b2.exit_code == 0, b2.output);
    std::vector<nlohmann::json> ra = train_record_list(straight), rb = train_record_list(split);
    REQUIRE(ra.size() == 8);
    REQUIRE(rb.size() == 8);
    for (size_t i = 3; i < 8; ++i) {
        CAPTURE(i);
        CHECK(ra[i]["loss"].get<double>() == rb[i]["loss"].get<double>());
    }
    const fs::path fa = fs::path(straight) / "checkpoints" / "step-00000008", fb = fs::path(split) / "checkpoints" / "step-00000008";
    for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
        CAPTURE(file);
        CHECK(read_bytes(fa / file) == read_bytes(fb / file));
    }
    fs::remove_all(straight);
    fs::remove_all(split);
}

TEST_CASE("data parallel: a --batch-size the ranks cannot share equally is an error naming it" *
          doctest::skip(!AMPGRAD_WITH_GLOO)) {
    const std::string out = make_temp_dir("ddp_odd");
    ProgramResult r = launch(out, {"--batch-size", "5"});
    CHECK(r.exit_code != 0);
    CHECK(r.output.find("--batch-size 5 is not divisible by the 2 processes") != std::string::npos);
    fs::remove_all(out);
}

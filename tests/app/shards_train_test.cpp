// shards_train_test.cpp: `ampgrad train --data DIR` on llm.c-format token shards (app/shard_data.hpp),
// as a user runs it: the run's place in the shards is in every checkpoint, so --resume continues on
// the exact next windows: bit-exact on the same layout (one process, with accumulation; data
// parallel on 2), and at the saved position with the same losses on another world size (data
// parallel and ZeRO 2 -> one process). A token outside the model's vocabulary is named (file and
// byte offset) before training; eval --full-split reads every validation window and says so.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ampgrad_config.h"
#include "data/token_shards.hpp"
#include "tests/app/run_program.hpp"
#include "tests/app/shard_fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;
namespace fs = std::filesystem;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;   // under AddressSanitizer (about 5x slower): data parallel only, not ZeRO too
#else
constexpr bool kSanitized = false;
#endif

namespace {

std::vector<std::string> shard_run(const std::string& data, const std::string& out, int64_t steps) {
    return {"train", "--data", data, "--tokenizer", "byte", "--n-layer", "1", "--n-embd", "32", "--n-head", "2",
            "--block-size", "16", "--batch-size", "4", "--grad-accum", "2", "--steps", std::to_string(steps),
            "--warmup", "1", "--eval-every", "0", "--eval-iters", "2", "--sample-tokens", "0", "--progress", "plain",
            "--log-every", "1", "--out", out};
}

ProgramResult run_one_thread(std::vector<std::string> args) {   // the shards' tests run on one thread
    return run_ampgrad(std::move(args), {"OMP_NUM_THREADS=1"});
}

ProgramResult run_two(std::vector<std::string> args, const std::vector<std::string>& extra = {}) {
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.begin(), {ampgrad_run_program(), "--nproc-per-node", "2", "--master-port",
                               std::to_string(free_port()), ampgrad_program()});
    return run_program(args, {"OMP_NUM_THREADS=1"});
}

std::map<int64_t, double> losses(const std::string& out) {
    std::map<int64_t, double> by_step;
    std::ifstream in(out + "/metrics.jsonl");
    for (std::string line; std::getline(in, line);) {
        const nlohmann::json j = nlohmann::json::parse(line);
        if (j["kind"] == "train") by_step[j["step"].get<int64_t>()] = j["loss"].get<double>();
    }
    return by_step;
}

nlohmann::json latest_state(const std::string& out) {
    const fs::path root = fs::path(out) / "checkpoints";
    std::ifstream latest(root / "latest");
    std::string name;
    latest >> name;
    return nlohmann::json::parse(read_bytes(root / name / "state.json"));
}

}  // namespace

TEST_CASE("train on token shards: accumulation, bit-exact --resume, the position saved, eval --full-split") {
    const std::string data = write_text_shards(make_temp_dir("shards_data"), 20000, 30000, 200000);
    const std::string straight = make_temp_dir("shards_straight"), split = make_temp_dir("shards_split");
    const ProgramResult a = run_one_thread(shard_run(data, straight, 8));
    REQUIRE_MESSAGE(a.exit_code == 0, a.output);
    CHECK(a.output.find("6 train shard(s)") != std::string::npos);
    CHECK(a.output.find("2 micro-steps of 4 sequences: 128 tokens per step") != std::string::npos);
    REQUIRE(run_one_thread(plus(shard_run(data, split, 8), {"--until", "4"})).exit_code == 0);
    const ProgramResult b = run_one_thread(plus(shard_run(data, split, 8), {"--resume", split}));
    REQUIRE_MESSAGE(b.exit_code == 0, b.output);
    CHECK(losses(straight) == losses(split));
    CHECK(read_bytes(fs::path(straight) / "checkpoints" / "step-00000008" / "model.safetensors") ==
          read_bytes(fs::path(split) / "checkpoints" / "step-00000008" / "model.safetensors"));
    const nlohmann::json state = latest_state(split);
    CHECK(state["data"]["position"] == 8 * 4 * 2);   // steps x batch x accumulation windows
    CHECK(state["data"]["train"]["shards"].size() == 6);

    const ProgramResult full = run_one_thread({"eval", "--ckpt", straight, "--full-split"});
    REQUIRE_MESSAGE(full.exit_code == 0, full.output);
    CHECK(full.output.find("full split: all 1249 windows of 16 tokens") != std::string::npos);   // (20000 - 1) / 16
    const ProgramResult estimate = run_one_thread({"eval", "--ckpt", straight, "--eval-iters", "3"});
    CHECK(estimate.output.find("estimate: the first 3 batches of 4 windows") != std::string::npos);
    const ProgramResult negative = run_one_thread({"eval", "--ckpt", straight, "--eval-iters", "-1"});
    CHECK(negative.exit_code == 1);
    CHECK(negative.output.find("--eval-iters -1: must be positive") != std::string::npos);

    // Sampling needs no data: with the shards gone, sample works and eval says why it cannot.
    fs::rename(data, data + "_moved");
    const ProgramResult sample = run_one_thread({"sample", "--ckpt", straight, "--tokens", "5"});
    CHECK_MESSAGE(sample.exit_code == 0, sample.output);
    const ProgramResult gone = run_one_thread({"eval", "--ckpt", straight});
    CHECK(gone.exit_code == 1);
    CHECK(gone.output.find("the run's token shards cannot be read") != std::string::npos);
}

TEST_CASE("token shards refused by name before training: an id outside the vocabulary, a truncated shard") {
    const std::string data = write_text_shards(make_temp_dir("shards_bad"), 5000, 20000, 45000);
    {   // a byte-tokenizer model has 256 ids: put 300 at token 1234 of the second train shard
        const std::string path = (fs::path(data) / "shakespeare_train_000002.bin").string();
        std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(data::kShardHeaderBytes + 1234 * 2);
        const char bytes[2] = {static_cast<char>(300 & 0xFF), static_cast<char>(300 >> 8)};
        f.write(bytes, 2);
    }
    const ProgramResult r = run_one_thread(shard_run(data, make_temp_dir("shards_bad_out"), 2));
    CHECK(r.exit_code == 1);
    CHECK(r.output.find("shakespeare_train_000002.bin: token 1234 (id 300) at byte offset 3492") != std::string::npos);
    CHECK(r.output.find("step 1/") == std::string::npos);
    fs::resize_file(fs::path(data) / "shakespeare_train_000001.bin", 5000);
    const ProgramResult t = run_one_thread(shard_run(data, make_temp_dir("shards_bad_out2"), 2));
    CHECK(t.exit_code == 1);
    CHECK(t.output.find("shakespeare_train_000001.bin: the header at offset 8 counts 20000 uint16 tokens (41024 bytes with the header), but the file has 5000 bytes (truncated)") !=
          std::string::npos);
    const ProgramResult warm = run_one_thread(plus(shard_run(write_text_shards(make_temp_dir("shards_warm"), 5000, 20000, 45000),
                                                          make_temp_dir("shards_warm_out"), 3), {"--warmup", "10"}));
    CHECK(warm.output.find("warning: --warmup 10 is longer than --steps 3") != std::string::npos);
}

TEST_CASE("token shards on 2 processes: bit-exact resume; data parallel and ZeRO 2 resume on one process (and one "
          "process on two) at the saved position" * doctest::skip(!AMPGRAD_WITH_GLOO)) {
    const std::string data = write_text_shards(make_temp_dir("shards2_data"), 20000, 30000, 200000);
    for (const std::string zero : {"", "2"}) {
        CAPTURE(zero);
        if (kSanitized && !zero.empty()) continue;
        const std::vector<std::string> zero_flag = zero.empty() ? std::vector<std::string>{} : std::vector<std::string>{"--zero", zero};
        const std::string straight = make_temp_dir("shards2_straight"), same = make_temp_dir("shards2_same"),
                          other = make_temp_dir("shards2_other");
        REQUIRE(run_two(shard_run(data, straight, 6), zero_flag).exit_code == 0);
        REQUIRE(run_two(shard_run(data, same, 6), plus(zero_flag, {"--until", "3"})).exit_code == 0);
        REQUIRE(run_two(shard_run(data, other, 6), plus(zero_flag, {"--until", "3"})).exit_code == 0);
        const ProgramResult s = run_two(shard_run(data, same, 6), plus(zero_flag, {"--resume", same}));
        REQUIRE_MESSAGE(s.exit_code == 0, s.output);
        CHECK(losses(straight) == losses(same));
        // One process continues the 2-rank run: the same windows per step, so the same losses to rounding.
        const ProgramResult o = run_one_thread(plus(plus(shard_run(data, other, 6), zero_flag), {"--resume", other}));
        REQUIRE_MESSAGE(o.exit_code == 0, o.output);
        const std::map<int64_t, double> a = losses(straight), b = losses(other);
        for (int64_t step = 4; step <= 6; ++step) CHECK(b.at(step) == doctest::Approx(a.at(step)).epsilon(1e-4));
        CHECK(latest_state(other)["data"]["position"] == latest_state(straight)["data"]["position"]);
    }
    // And the other way: a one-process run resumed on 2 data-parallel processes.
    const std::string one = make_temp_dir("shards2_one"), grown = make_temp_dir("shards2_grown");
    REQUIRE(run_one_thread(shard_run(data, one, 6)).exit_code == 0);
    REQUIRE(run_one_thread(plus(shard_run(data, grown, 6), {"--until", "3"})).exit_code == 0);
    const ProgramResult g = run_two(shard_run(data, grown, 6), {"--resume", grown});
    REQUIRE_MESSAGE(g.exit_code == 0, g.output);
    const std::map<int64_t, double> a = losses(one), b = losses(grown);
    for (int64_t step = 4; step <= 6; ++step) CHECK(b.at(step) == doctest::Approx(a.at(step)).epsilon(1e-4));
    CHECK(latest_state(grown)["data"]["position"] == 6 * 4 * 2);
}

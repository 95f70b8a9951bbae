// fp8_train_test.cpp: `ampgrad train --prec fp8` (app/fp8_run.hpp), run as a child process: a small
// GPT learns with each --fp8-recipe and a Llama with delayed scaling, metrics.jsonl carries each
// layer's amaxes and scales, a delayed-scaling run resumed from its checkpoint (with the amax histories in it) repeats the
// straight run bit for bit, alone and with --zero 2, and a bad recipe name is refused.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "ampgrad/ampgrad.h"
#include "tests/app/run_program.hpp"

using namespace ampgrad::testing;
namespace fs = std::filesystem;

namespace {

// Widths that are multiples of 16, so every Linear but the first and the last runs in fp8.
std::vector<std::string> small_run(const std::string& model, const std::string& out, const std::string& recipe,
                                   const std::string& steps) {
    return {"train", "--model", model, "--n-layer", "2", "--n-embd", "32", "--n-head", "4", "--block-size", "16",
            "--batch-size", "8", "--steps", steps, "--warmup", "2", "--lr", "1e-2", "--eval-every", "0",
            "--eval-iters", "1", "--sample-tokens", "0", "--prec", "fp8", "--fp8-recipe", recipe,
            "--progress", "plain", "--log-every", "1", "--out", out};
}

ProgramResult run_ok(const std::vector<std::string>& args) {
    ProgramResult r = run_ampgrad(args);
    CAPTURE(r.output);
    REQUIRE(r.exit_code == 0);
    return r;
}

// The mean of the first and of the last four losses: the second is lower.
void check_loss_falls(const std::string& out, size_t steps) {
    std::map<int64_t, nlohmann::json> r = train_records(out);
    REQUIRE(r.size() == steps);
    double first = 0, last = 0;
    for (int64_t i = 0; i < 4; ++i) {
        first += r[1 + i]["loss"].get<double>() / 4;
        last += r[static_cast<int64_t>(steps) - i]["loss"].get<double>() / 4;
    }
    MESSAGE(out << ": loss " << first << " -> " << last);
    CHECK(last < first - 0.2);
}

}  // namespace

TEST_CASE("train --prec fp8: GPT with each recipe and Llama learn; metrics.jsonl holds the per-layer amaxes") {
    // The recipes themselves are checked against the oracle in tests/amp; here, the command's path.
    for (auto [model, recipe] : {std::pair{"gpt", "delayed"}, std::pair{"gpt", "tensorwise"}, std::pair{"gpt", "rowwise"},
                                 std::pair{"llama", "delayed"}}) {
        CAPTURE(std::string(model));
        CAPTURE(std::string(recipe));
        const std::string out = make_temp_dir("fp8_train");
        run_ok(small_run(model, out, recipe, "24"));
        check_loss_falls(out, 24);
        const nlohmann::json fp8 = train_records(out)[24].at("fp8");
        REQUIRE(fp8.at("layers").size() >= 4);                                   // 2 blocks, first and last Linear in bf16
        for (const auto& [layer, entry] : fp8.at("layers").items()) {
            CAPTURE(layer);
            CHECK(entry.at("input").at(0).get<double>() > 0.0);                   // this step's amaxes
            CHECK(entry.at("grad_output").at(0).get<double>() > 0.0);
            CHECK(entry.at("scale").size() == 3);
        }
        fs::remove_all(out);
    }
}

TEST_CASE("train --prec fp8 --resume: the amax histories are in the checkpoint and the run repeats bit for bit") {
    const std::string straight = make_temp_dir("fp8_straight"), split = make_temp_dir("fp8_split");
    run_ok(small_run("gpt", straight, "delayed", "8"));
    run_ok(plus(small_run("gpt", split, "delayed", "8"), {"--until", "4"}));
    const ProgramResult resumed = run_ok(plus(small_run("gpt", split, "delayed", "8"), {"--resume", split}));
    CHECK(resumed.output.find("resumed from") != std::string::npos);
    std::map<int64_t, nlohmann::json> a = train_records(straight), b = train_records(split);
    REQUIRE(a.size() == 8);
    REQUIRE(b.size() == 8);
    for (int64_t step = 1; step <= 8; ++step) {
        CAPTURE(step);
        CHECK(a[step]["loss"].get<double>() == b[step]["loss"].get<double>());
        CHECK(a[step]["fp8"] == b[step]["fp8"]);                                  // amaxes and scales too
    }
    for (const char* file : {"model.safetensors", "optimizer.safetensors"})
        CHECK(read_bytes(fs::path(latest_dir(straight)) / file) == read_bytes(fs::path(latest_dir(split)) / file));
    const std::string optimizer = read_bytes(fs::path(latest_dir(straight)) / "optimizer.safetensors");
    CHECK(optimizer.find("fp8.transformer.h.1.attn.c_attn.amax_history") != std::string::npos);
    fs::remove_all(straight);
    fs::remove_all(split);
}

TEST_CASE("train --prec fp8 --zero 2 trains, and resumes with its amax histories bit for bit; a bad --fp8-recipe is refused") {
    const std::string out = make_temp_dir("fp8_zero"), split = make_temp_dir("fp8_zero_split");
    run_ok(plus(small_run("gpt", out, "delayed", "24"), {"--zero", "2"}));
    check_loss_falls(out, 24);
    CHECK(train_records(out)[24].contains("fp8"));
    // The histories and scales go to fp8.safetensors beside the ZeRO partitions; without them the
    // resumed steps would quantise with scales of 1 and the losses would differ.
    run_ok(plus(small_run("gpt", split, "delayed", "24"), {"--zero", "2", "--until", "12"}));
    CHECK(fs::exists(fs::path(latest_dir(split)) / "fp8.safetensors"));
    run_ok(plus(small_run("gpt", split, "delayed", "24"), {"--zero", "2", "--resume", split}));
    std::map<int64_t, nlohmann::json> a = train_records(out), b = train_records(split);
    REQUIRE(b.size() == 24);
    for (int64_t step = 13; step <= 24; ++step) {
        CAPTURE(step);
        CHECK(a[step]["loss"].get<double>() == b[step]["loss"].get<double>());
        CHECK(a[step]["fp8"] == b[step]["fp8"]);
    }
    const ProgramResult bad = run_ampgrad(small_run("gpt", out, "blockwise", "2"));
    CHECK(bad.exit_code != 0);
    CHECK(bad.output.find("--fp8-recipe") != std::string::npos);
    fs::remove_all(out);
    fs::remove_all(split);
}

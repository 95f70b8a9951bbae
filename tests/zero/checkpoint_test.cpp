// tests/zero/checkpoint_test.cpp: ZeRO checkpoints (zero/checkpoint.hpp) with real processes over
// loopback (dist_worker running tests/zero/checkpoint_scenarios.cpp): a bit-exact resume in fresh
// processes (stages 0-3), resharding 4 -> 2, 4 -> 3, 2 -> 4 and 3 -> 2 across stages 1, 2 and 3, stage 0's
// checkpoints into stages 1 and 3 and back, corrupt / partial / mismatched checkpoints, and a rank
// SIGKILLed in the middle of a step.
#include "autograd/ops/ops.hpp"
#include "nn/linear.hpp"
#include "optim/sgd.hpp"
#include "tests/dist/spawn.hpp"
#include "tests/support/corrupt_inputs.hpp"
#include "tests/support/one_rank_group.hpp"
#include "zero/checkpoint.hpp"
#include "zero/engine.hpp"

#include <doctest/doctest.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

using namespace ampgrad_test;
namespace fs = std::filesystem;

namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

// A fresh directory for one test case's checkpoints.
fs::path scratch(const std::string& name) {
    fs::path p = fs::temp_directory_path() / ("ampgrad_zckpt_" + std::to_string(::getpid()) + "_" + name);
    fs::remove_all(p);
    fs::create_directories(p);
    return p;
}

std::vector<RankResult> run(int n, const Env& env) {
    auto results = run_workers("zckpt_run", n, free_port(), all_ranks(n, env), std::chrono::seconds(60));
    for (size_t r = 0; r < results.size(); ++r) {
        CAPTURE(r);
        CAPTURE(results[r].output);
        CHECK(results[r].exit_code == 0);
    }
    return results;
}

std::string final_part(const std::string& out) {
    auto at = out.find("FINAL\n");
    return at == std::string::npos ? "(no FINAL)" : out.substr(at);
}

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

std::vector<double> numbers_after(const std::string& out, const std::string& key) {
    std::istringstream in(line_after(out, key));
    std::vector<double> v;
    for (double x; in >> x;) v.push_back(x);
    return v;
}

void check_close(const std::vector<double>& got, const std::vector<double>& want, double tol) {
    REQUIRE(got.size() == want.size());
    REQUIRE(!want.empty());
    for (size_t i = 0; i < want.size(); ++i) {
        CAPTURE(i);
        CHECK(std::abs(got[i] - want[i]) <= tol * (1 + std::abs(want[i])));
    }
}

}  // namespace

TEST_CASE("zero checkpoint: 6 steps straight == 3 steps, save, fresh processes, load, 3 steps (bit-exact)") {
    // f16 with loss scaling (hysteresis and growth state, two overflows, one on each side of the
    // save) under stages 2 and 3; f64 under stage 1. Dropout makes every rank's RNG matter.
    for (auto [stage, dtype] : {std::pair{"2", "f16"}, std::pair{"1", "f64"}, std::pair{"3", "f16"}, std::pair{"0", "f16"}}) {
        CAPTURE(stage);
        CAPTURE(dtype);
        const fs::path dir = scratch(std::string("exact") + stage);
        const Env base{{"ZCKPT_STAGE", stage}, {"ZCKPT_DTYPE", dtype}};
        auto with = [&](Env extra) { extra.insert(extra.end(), base.begin(), base.end()); return extra; };
        auto straight = run(2, with({{"ZCKPT_STEPS", "6"}, {"ZCKPT_SAVE", (dir / "a").string()}}));
        auto first = run(2, with({{"ZCKPT_STEPS", "3"}, {"ZCKPT_SAVE", (dir / "b").string()}}));
        auto second = run(2, with({{"ZCKPT_STEPS", "3"}, {"ZCKPT_LOAD", (dir / "b").string()},
                                   {"ZCKPT_SAVE", (dir / "c").string()}}));
        for (size_t r = 0; r < 2; ++r) {
            CAPTURE(r);
            // The load restores exactly what was saved, this rank's RNG included.
            CHECK(line_after(second[r].output, "FINGERPRINT") == line_after(final_part(first[r].output), "FINGERPRINT"));
            CHECK(line_after(second[r].output, "RNG") == line_after(final_part(first[r].output), "RNG"));
            // And the continued run ends exactly where the straight one did.
            const std::string a = final_part(straight[r].output), c = final_part(second[r].output);
            for (const char* key : {"FINGERPRINT", "RNG", "SCALE", "LR", "COUNTERS"}) {
                CAPTURE(key);
                CHECK(line_after(c, key) == line_after(a, key));
            }
        }
        if (std::string(dtype) == "f16") CHECK(line_after(final_part(straight[0].output), "COUNTERS") == "6 6 2");
        // The two final checkpoints are the same bytes, file by file.
        const fs::path fa = dir / "a" / "step-00000006", fc = dir / "c" / "step-00000006";
        std::vector<std::string> names;
        for (const auto& e : fs::directory_iterator(fa)) names.push_back(e.path().filename().string());
        CHECK(names.size() == 3);   // two rank files and the manifest
        for (const std::string& name : names) {
            CAPTURE(name);
            CHECK(slurp(fa / name) == slurp(fc / name));
        }
        CHECK(slurp(dir / "c" / "latest") == "step-00000006");   // the tag alone, as DeepSpeed writes it
        fs::remove_all(dir);
    }
}

TEST_CASE("zero checkpoint: saved at 4 ranks (stage 2), loaded at 2 (stage 1) and 3 (stage 3); saved there, loaded at 4 and 2") {
    const fs::path dir = scratch("reshard");
    const Env f64{{"ZCKPT_DTYPE", "f64"}, {"ZCKPT_DROPOUT", "0"}};
    auto with = [&](Env extra) { extra.insert(extra.end(), f64.begin(), f64.end()); return extra; };
    auto saved4 = run(4, with({{"ZCKPT_STAGE", "2"}, {"ZCKPT_STEPS", "2"}, {"ZCKPT_SAVE", (dir / "w4").string()}}));
    const std::string saved_state = line_after(saved4[0].output, "FINGERPRINT");
    // The reference continuation: the same world size and stage.
    auto cont4 = run(4, with({{"ZCKPT_STAGE", "2"}, {"ZCKPT_STEPS", "2"}, {"ZCKPT_LOAD", (dir / "w4").string()}}));
    CHECK(line_after(cont4[0].output, "FINGERPRINT") == saved_state);
    const std::vector<double> want = numbers_after(final_part(cont4[0].output), "PARAMS");
    std::map<int, std::string> saved;   // world size -> the fingerprint of what it saved
    for (auto [n, stage] : {std::pair{2, "1"}, std::pair{3, "3"}}) {
        CAPTURE(n);
        auto res = run(n, with({{"ZCKPT_STAGE", stage}, {"ZCKPT_STEPS", "2"}, {"ZCKPT_LOAD", (dir / "w4").string()},
                                {"ZCKPT_SAVE", (dir / ("w" + std::to_string(n))).string()}}));
        for (const RankResult& r : res) {
            CHECK(line_after(r.output, "LOADED") == std::string("world 4 stage 2"));
            // The gathered masters and Adam moments are the saved ones, bit for bit.
            CHECK(line_after(r.output, "FINGERPRINT") == saved_state);
            CHECK(line_after(final_part(r.output), "COUNTERS") == "4 4 0");
            CHECK(line_after(final_part(r.output), "LR") == line_after(final_part(cont4[0].output), "LR"));
        }
        // Two more steps give what the 4 ranks give (the reduction order differs: f64 rounding).
        check_close(numbers_after(final_part(res[0].output), "PARAMS"), want, 1e-12);
        saved[n] = line_after(final_part(res[0].output), "FINGERPRINT");
    }
    // 2 -> 4 (stage 1 -> 3) and 3 -> 2 (stage 3 -> 2): what was saved after 4 steps, resharded again.
    auto up = run(4, with({{"ZCKPT_STAGE", "3"}, {"ZCKPT_LOAD", (dir / "w2").string()}}));
    for (const RankResult& r : up) {
        CHECK(line_after(r.output, "LOADED") == std::string("world 2 stage 1"));
        CHECK(line_after(r.output, "FINGERPRINT") == saved[2]);
    }
    auto down = run(2, with({{"ZCKPT_STAGE", "2"}, {"ZCKPT_LOAD", (dir / "w3").string()}}));
    for (const RankResult& r : down) {
        CHECK(line_after(r.output, "LOADED") == std::string("world 3 stage 3"));
        CHECK(line_after(r.output, "FINGERPRINT") == saved[3]);
    }
    fs::remove_all(dir);
}

// Issue 23: a stage-0 checkpoint is a stage-1 one (each rank writes the range a stage-1 rank would own),
// so it loads into stages 1-3 at any world size, and theirs load into stage 0.
TEST_CASE("zero checkpoint: stage 0 at 2 ranks loads into stage 3 at 3 and stage 1 at 2; stage 2 at 3 loads into stage 0 at 2") {
    const fs::path dir = scratch("stage0");
    const Env f64{{"ZCKPT_DTYPE", "f64"}, {"ZCKPT_DROPOUT", "0"}};
    auto with = [&](Env extra) { extra.insert(extra.end(), f64.begin(), f64.end()); return extra; };
    auto saved0 = run(2, with({{"ZCKPT_STAGE", "0"}, {"ZCKPT_STEPS", "2"}, {"ZCKPT_SAVE", (dir / "s0").string()}}));
    const std::string state0 = line_after(final_part(saved0[0].output), "FINGERPRINT");
    CHECK(line_after(final_part(saved0[1].output), "FINGERPRINT") == state0);
    for (auto [n, stage] : {std::pair{3, "3"}, std::pair{2, "1"}}) {
        CAPTURE(n);
        auto res = run(n, with({{"ZCKPT_STAGE", stage}, {"ZCKPT_LOAD", (dir / "s0").string()}}));
        for (const RankResult& r : res) {
            CHECK(line_after(r.output, "LOADED") == std::string("world 2 stage 0"));
            CHECK(line_after(r.output, "FINGERPRINT") == state0);
        }
    }
    auto saved2 = run(3, with({{"ZCKPT_STAGE", "2"}, {"ZCKPT_STEPS", "2"}, {"ZCKPT_SAVE", (dir / "s2").string()}}));
    const std::string state2 = line_after(final_part(saved2[0].output), "FINGERPRINT");
    auto into0 = run(2, with({{"ZCKPT_STAGE", "0"}, {"ZCKPT_STEPS", "1"}, {"ZCKPT_LOAD", (dir / "s2").string()}}));
    for (const RankResult& r : into0) {
        CHECK(line_after(r.output, "LOADED") == std::string("world 3 stage 2"));
        CHECK(line_after(r.output, "FINGERPRINT") == state2);
        CHECK(line_after(final_part(r.output), "COUNTERS") == "3 3 0");
    }
    fs::remove_all(dir);
}

TEST_CASE("zero checkpoint: missing, truncated, corrupt, partial and mismatched checkpoints are errors naming file and fact") {
    const fs::path dir = scratch("errors");
    auto results = run_workers("zckpt_errors", 2, free_port(), all_ranks(2, {{"ZCKPT_DIR", dir.string()}}),
                               std::chrono::seconds(60));
    for (const RankResult& r : results) {
        CAPTURE(r.output);
        CHECK(r.exit_code == 0);
        CHECK(contains(r.output, "ERRORS CHECKED"));
    }
    fs::remove_all(dir);
}

TEST_CASE("zero: a rank SIGKILLed in the middle of a step gives the others an error within the timeout") {
    auto results = run_workers("zckpt_kill", 2, free_port(), all_ranks(2, {{"AMPGRAD_TEST_TIMEOUT_MS", "3000"}}),
                               std::chrono::seconds(30));
    CHECK(results[1].signal == SIGKILL);
    const std::string& out = results[0].output;
    CAPTURE(out);
    CHECK(results[0].exit_code == 3);   // an ampgrad::Error reached dist_worker's main
    CHECK(contains(out, "lost rank 1"));
    CHECK(elapsed_ms(out) >= 0);
    CHECK(elapsed_ms(out) < 3000 + 2500);
}

TEST_CASE("zckpt: every corruption of a checkpoint's manifest or rank file is an ampgrad::Error naming it") {
    // One rank in this process: the manifest's values retyped or dropped, the rank file truncated,
    // overwritten and padded. Each load either succeeds (a flipped bit in a weight is not seen) or
    // fails naming the checkpoint; the good checkpoint still loads after all of them.
    using namespace ampgrad;
    ampgrad_test::OneRankGroup group;
    manual_seed(3);
    auto net = std::make_shared<nn::Linear>(4, 3);
    zero::ZeroConfig c;
    c.stage = 1;
    zero::ZeroEngine engine(net, c, [](std::vector<Tensor> p) {
        return std::make_unique<optim::SGD>(p, optim::SGDOptions(0.1));
    }, &group);
    engine.backward(net->forward(randn({2, 4})).pow(2.0).mean());   // (B,3) -> ()
    engine.step();
    const fs::path root = scratch("corrupt_any");
    const fs::path dir = engine.save_checkpoint(root.string(), "step-00000001");
    auto load = [&] { zero::load_checkpoint(engine, dir.string()); };
    const std::string manifest = (dir / "manifest.json").string(), rank_file = (dir / "rank-00000-of-00001.safetensors").string();
    CHECK(ampgrad::testing::check_file_corruptions(manifest, ampgrad::testing::json_corruptions(
                                                                 ampgrad::testing::read_whole_file(manifest)),
                                                   load, "step-00000001") > 40);
    CHECK(ampgrad::testing::check_file_corruptions(rank_file, ampgrad::testing::byte_corruptions(
                                                                  ampgrad::testing::read_whole_file(rank_file)),
                                                   load, "step-00000001") > 20);
    load();
    fs::remove_all(root);
}

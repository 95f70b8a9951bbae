// tokenizer_test.cpp: BPE tokenizers in the `ampgrad` program: `ampgrad tokenizer train` writes
// files that --tokenizer gpt2:DIR trains with; --tokenizer tiktoken:FILE (GPT-2's ranks); the
// checkpoint holds the whole tokenizer, so sample and eval work after its files are gone; bad
// tokenizer flags and files fail with a message naming them.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/app/run_program.hpp"

using namespace ampgrad::testing;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> tiny_bpe_run(const std::string& out, const std::string& tokenizer, const std::string& data) {
    return {"train", "--n-layer", "1", "--n-embd", "32", "--n-head", "2", "--block-size", "16", "--batch-size", "4",
            "--steps", "3", "--warmup", "1", "--eval-every", "0", "--eval-iters", "2", "--sample-tokens", "20",
            "--tokenizer", tokenizer, "--data", data, "--out", out};
}

std::string fixture(const std::string& name) { return std::string(std::getenv("AMPGRAD_FIXTURES")) + "/bpe/" + name; }

void check_ok(const ProgramResult& r) {
    CAPTURE(r.output);
    REQUIRE(r.exit_code == 0);
}

void check_fails(const ProgramResult& r, const std::vector<std::string>& facts) {
    CAPTURE(r.output);
    CHECK(r.exit_code > 0);
    CHECK(r.signal == 0);
    for (const std::string& fact : facts) CHECK(r.output.find(fact) != std::string::npos);
}

// A small training text: 30,000 bytes of Tiny Shakespeare.
std::string write_text(const fs::path& dir) {
    const char* root = std::getenv("AMPGRAD_SOURCE_ROOT");
    std::ifstream in(std::string(root) + "/data/tinyshakespeare.txt", std::ios::binary);
    std::string text(30000, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    const fs::path path = dir / "text.txt";
    std::ofstream(path, std::ios::binary) << text;
    return path.string();
}

}  // namespace

TEST_CASE("tokenizer train -> train --tokenizer gpt2:DIR -> sample and eval from the checkpoint alone") {
    const fs::path dir = make_temp_dir("bpe_app");
    const std::string text = write_text(dir), tok_dir = (dir / "tok").string(), out = (dir / "run").string();
    ProgramResult r = run_ampgrad({"tokenizer", "train", "--input", text, "--output", tok_dir, "--vocab-size", "300"});
    check_ok(r);
    CHECK(r.output.find("300 tokens") != std::string::npos);
    CHECK(fs::exists(fs::path(tok_dir) / "vocab.json"));
    CHECK(fs::exists(fs::path(tok_dir) / "merges.txt"));
    CHECK(fs::exists(fs::path(tok_dir) / "tokenizer.json"));

    r = run_ampgrad(tiny_bpe_run(out, "gpt2:" + tok_dir, text));
    check_ok(r);
    CHECK(r.output.find("bpe tokenizer") != std::string::npos);
    // The checkpoint records the tokenizer whole (kind, vocabulary, merges): the files can go.
    fs::remove_all(tok_dir);
    std::ifstream state_file(fs::path(out) / "checkpoints" / "step-00000003" / "state.json");
    REQUIRE(state_file.good());
    const nlohmann::json state = nlohmann::json::parse(state_file);
    CHECK(state.at("tokenizer").at("kind") == "bpe");
    CHECK(state.at("tokenizer").at("vocab_size") == 300);
    CHECK(state.at("tokenizer").at("merges").size() == 300 - 257);
    CHECK(state.at("model_config").at("vocab_size") == 300);

    r = run_ampgrad({"sample", "--ckpt", out, "--prompt", "ROMEO:", "--tokens", "10", "--seed", "3"});
    check_ok(r);
    CHECK(r.output.find("ROMEO:") != std::string::npos);
    check_ok(run_ampgrad({"eval", "--ckpt", out}));
    fs::remove_all(dir);
}

TEST_CASE("train --tokenizer tiktoken:FILE: GPT-2's 50,257 tokens") {
    const fs::path dir = make_temp_dir("bpe_tiktoken");
    const std::string text = write_text(dir), out = (dir / "run").string();
    ProgramResult r = run_ampgrad(tiny_bpe_run(out, "tiktoken:" + fixture("gpt2.tiktoken"), text));
    check_ok(r);
    std::ifstream state_file(fs::path(out) / "checkpoints" / "step-00000003" / "state.json");
    const nlohmann::json state = nlohmann::json::parse(state_file);
    CHECK(state.at("model_config").at("vocab_size") == 50257);
    CHECK(state.at("tokenizer").at("tokens").at(15496) == "Hello");
    check_ok(run_ampgrad({"sample", "--ckpt", out, "--prompt", "Hello world", "--tokens", "5"}));
    fs::remove_all(dir);
}

TEST_CASE("bad tokenizer flags and files are named, with a non-zero exit") {
    const fs::path dir = make_temp_dir("bpe_bad");
    const std::string text = write_text(dir);
    check_fails(run_ampgrad(tiny_bpe_run((dir / "a").string(), "wordpiece", text)),
                {"--tokenizer", "wordpiece", "gpt2:DIR"});
    check_fails(run_ampgrad(tiny_bpe_run((dir / "b").string(), "gpt2:", text)), {"--tokenizer", "names no path"});
    check_fails(run_ampgrad(tiny_bpe_run((dir / "c").string(), "gpt2:" + (dir / "none").string(), text)),
                {(dir / "none" / "vocab.json").string(), "no such file"});
    std::ofstream(dir / "bad.tiktoken") << "IQ== 0\n!!!! 1\n";
    check_fails(run_ampgrad(tiny_bpe_run((dir / "d").string(), "tiktoken:" + (dir / "bad.tiktoken").string(), text)),
                {"bad.tiktoken", "line 2"});
    check_fails(run_ampgrad({"tokenizer", "train", "--input", text, "--output", (dir / "t").string(), "--vocab-size",
                             "100"}), {"--vocab-size"});
    check_fails(run_ampgrad({"tokenizer", "train", "--input", (dir / "missing.txt").string(), "--output",
                             (dir / "t").string(), "--vocab-size", "300"}), {"missing.txt"});
    check_fails(run_ampgrad({"tokenizer"}), {"subcommand"});
    CHECK(!fs::exists(dir / "t" / "vocab.json"));
    fs::remove_all(dir);
}

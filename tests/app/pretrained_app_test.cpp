// pretrained_app_test.cpp: the `ampgrad` program with Hugging Face GPT-2 folders (the tiny
// fixtures of tools/fixtures/hf_gpt2.py): sample --hf, eval --hf, train --init-from (fp16, --zero,
// resume), export --hf, and their bad input.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "ampgrad/ampgrad.h"
#include "tests/app/run_program.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;
namespace fs = std::filesystem;

namespace {

std::string hf_fixture(const std::string& name) {
    return (fs::path(std::getenv("AMPGRAD_FIXTURES")) / "hf_gpt2" / name).string();
}

ProgramResult run_ampgrad(std::vector<std::string> args) {
    args.insert(args.begin(), ampgrad_program());
    return run_program(args);
}

ProgramResult run_ok(const std::vector<std::string>& args) {
    ProgramResult r = run_ampgrad(args);
    CAPTURE(r.output);
    REQUIRE(r.exit_code == 0);
    return r;
}

// The last line of `eval`'s output, parsed.
nlohmann::json eval_json(const ProgramResult& r) {
    const std::string out = r.output.substr(0, r.output.find_last_not_of('\n') + 1);
    return nlohmann::json::parse(out.substr(out.find_last_of('\n') + 1));
}

// A short fine-tuning run's flags from `dir` into `out`.
std::vector<std::string> fine_tune(const std::string& dir, const std::string& out, const std::string& steps) {
    return {"train", "--init-from", dir, "--tokenizer", "char", "--steps", steps, "--batch-size", "4", "--warmup",
            "0", "--eval-every", "0", "--eval-iters", "1", "--sample-tokens", "0", "--progress", "plain", "--out", out};
}

// The largest difference between two GPTs' parameters.
double max_difference(const models::GPT& a, const models::GPT& b) {
    double worst = 0.0;
    nn::NamedTensors pb = b.state_dict();
    for (const auto& [name, t] : a.state_dict())
        worst = std::max(worst, (t.to(kFloat64) - pb[name].to(kFloat64)).abs().max().item<double>());
    return worst;
}

}  // namespace

TEST_CASE("sample --hf: greedy text from a Hugging Face folder, the same from its shards") {
    const std::vector<std::string> args = {"--tokenizer", "byte", "--prompt", "ROMEO:", "--tokens", "12",
                                           "--temperature", "0"};
    std::vector<std::string> one = {"sample", "--hf", hf_fixture("lm")}, sharded = {"sample", "--hf", hf_fixture("sharded")};
    one.insert(one.end(), args.begin(), args.end());
    sharded.insert(sharded.end(), args.begin(), args.end());
    const ProgramResult a = run_ok(one), b = run_ok(sharded);
    CHECK(a.output.starts_with("ROMEO:"));
    CHECK(a.output.size() > std::string("ROMEO:\n").size());
    CHECK(a.output == b.output);
}

TEST_CASE("eval --hf: validation loss and perplexity; export of a fine-tuned run evaluates the same") {
    const nlohmann::json e = eval_json(run_ok({"eval", "--hf", hf_fixture("lm"), "--tokenizer", "char", "--eval-iters",
                                               "2", "--batch-size", "4"}));
    CHECK(e.at("val_loss").get<double>() > 0.0);
    CHECK(e.at("val_perplexity").get<double>() == doctest::Approx(std::exp(e.at("val_loss").get<double>())));
    // The sharded folder holds the same weights: the same numbers.
    CHECK(eval_json(run_ok({"eval", "--hf", hf_fixture("sharded"), "--tokenizer", "char", "--eval-iters", "2",
                            "--batch-size", "4"})) == e);
}

TEST_CASE("train --init-from: starts from the folder's weights, records its sizes, resumes, exports") {
    const std::string out = make_temp_dir("hf_init"), exported = out + "/hf";
    // One step at a learning rate of 1e-9 leaves the weights where the folder put them.
    std::vector<std::string> args = fine_tune(hf_fixture("lm"), out, "1");
    for (const char* a : {"--lr", "1e-9", "--min-lr", "0", "--weight-decay", "0", "--prec", "fp16"}) args.push_back(a);
    const ProgramResult r = run_ok(args);
    CHECK(r.output.find("init: the Hugging Face GPT-2 weights in " + hf_fixture("lm")) != std::string::npos);
    CHECK(r.output.find("L=2, NH=2, C=8, T=32, V=260") != std::string::npos);
    run_ok({"export", "--ckpt", out, "--hf", exported});
    std::shared_ptr<models::GPT> start = models::from_pretrained(hf_fixture("lm")).gpt();
    std::shared_ptr<models::GPT> after = models::from_pretrained(exported).gpt();
    CHECK(after->config() == start->config());
    CHECK(max_difference(*after, *start) < 1e-6);
    // The checkpoint rebuilds the model without the folder's config: sizes are in its run config.
    nlohmann::json state = nlohmann::json::parse(std::ifstream(out + "/checkpoints/step-00000001/state.json"));
    CHECK(state.at("run_config").at("init_from") == hf_fixture("lm"));
    CHECK(state.at("run_config").at("vocab_size") == 260);
    CHECK(state.at("run_config").at("block_size") == 32);
    const ProgramResult resumed = run_ok({"train", "--resume", out, "--steps", "3", "--sample-tokens", "0", "--progress",
                                          "plain", "--out", out});
    CHECK(resumed.output.find("trained to step 3") != std::string::npos);
    CHECK(resumed.output.find("init: the Hugging Face") == std::string::npos);
    fs::remove_all(out);
}

TEST_CASE("train --init-from --zero 2 on two processes; the exported model evaluates as the run did") {
    const std::string out = make_temp_dir("hf_zero");
    std::vector<std::string> args = {ampgrad_run_program(), "--nproc-per-node", "2", "--master-port",
                                     std::to_string(free_port()), ampgrad_program()};
    for (const std::string& a : fine_tune(hf_fixture("sharded"), out, "3")) args.push_back(a);
    for (const char* a : {"--zero", "2", "--eval-every", "3"}) args.push_back(a);
    ProgramResult r = run_program(args, {"OMP_NUM_THREADS=1"});
    CAPTURE(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK(r.output.find("ZeRO stage 2 on 2 process(es)") != std::string::npos);
    run_ok({"export", "--ckpt", out, "--hf", out + "/hf"});
    const nlohmann::json e = eval_json(run_ok({"eval", "--hf", out + "/hf", "--tokenizer", "char", "--eval-iters", "1",
                                               "--batch-size", "4"}));
    const std::string line = r.output.substr(r.output.find("final eval: "));
    CHECK(line.find(fmt::format("val loss {:.4f}", e.at("val_loss").get<double>())) != std::string::npos);
    fs::remove_all(out);
}

TEST_CASE("export --hf: a run trained from scratch becomes a GPT2LMHeadModel folder") {
    const std::string out = make_temp_dir("hf_export");
    run_ok({"train", "--n-layer", "1", "--n-embd", "16", "--n-head", "2", "--block-size", "16", "--batch-size", "2",
            "--steps", "2", "--warmup", "0", "--eval-every", "0", "--eval-iters", "1", "--sample-tokens", "0", "--out",
            out});
    const ProgramResult r = run_ok({"export", "--ckpt", out, "--hf", out + "/hf"});
    CHECK(r.output.find("GPT2LMHeadModel, V=65") != std::string::npos);   // Tiny Shakespeare's characters
    models::PretrainedModel m = models::from_pretrained(out + "/hf");
    CHECK(m.architecture == "GPT2LMHeadModel");
    CHECK(m.gpt()->config().vocab_size == 65);
    CHECK(m.gpt()->config().n_layer == 1);
    fs::remove_all(out);
}

TEST_CASE("pretrained flags: bad folders and combinations are named, with a non-zero exit") {
    auto check_fails = [](const ProgramResult& r, const std::string& fact) {
        CAPTURE(r.output);
        CHECK(r.exit_code > 0);
        CHECK(r.signal == 0);
        CHECK(r.output.find(fact) != std::string::npos);
    };
    const std::string out = make_temp_dir("hf_bad");
    check_fails(run_ampgrad(fine_tune(out + "/none", out, "1")), out + "/none/config.json");
    std::vector<std::string> deeper = fine_tune(hf_fixture("lm"), out, "1");
    deeper.push_back("--n-layer");
    deeper.push_back("3");
    check_fails(run_ampgrad(deeper), "--n-layer 3: the weights in " + hf_fixture("lm") + " have n_layer 2");
    check_fails(run_ampgrad({"sample", "--prompt", "a"}), "give one of --ckpt");
    check_fails(run_ampgrad({"sample", "--hf", hf_fixture("lm"), "--ckpt", out}), "excludes");
    check_fails(run_ampgrad({"export", "--ckpt", out}), "--hf is required");
    // A folder whose vocabulary is smaller than the tokenizer's.
    models::GPTConfig small = models::GPTConfig::preset("nano");
    small.vocab_size = 100;
    models::save_pretrained(std::make_shared<models::GPT>(small), out + "/small");
    std::vector<std::string> args = fine_tune(out + "/small", out, "1");
    args.push_back("--tokenizer");
    args.push_back("byte");
    check_fails(run_ampgrad(args), "the byte tokenizer has 256 tokens, more than the model's vocabulary of 100");
    fs::remove_all(out);
}

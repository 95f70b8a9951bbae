// pretrained_app_test.cpp: the `ampgrad` program with Hugging Face folders (the tiny fixtures of
// tools/fixtures/hf_gpt2.py, hf_llama.py and hf_qwen2.py): sample --hf, eval --hf, train --init-from
// (fp16, --zero, resume), export --hf, for GPT-2, and their bad input. Llama, Mistral and Qwen2 are in
// pretrained_llama_app_test.cpp.
#include <doctest/doctest.h>

#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "ampgrad/ampgrad.h"
#include "tests/app/pretrained_fixtures.hpp"
#include "tests/app/run_program.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;
namespace fs = std::filesystem;


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
    CHECK(r.output.find("ampgrad train: gpt from " + hf_fixture("lm")) != std::string::npos);   // no preset named
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

// What a user's walkthrough tripped on (issue 33): a tokenizer that leaves most of the model's
// vocabulary unused is warned about, naming both sizes; a --preset beside --init-from is refused.
TEST_CASE("train --init-from: a far smaller tokenizer is warned about; --preset is refused") {
    const std::string out = make_temp_dir("hf_warn");
    std::vector<std::string> args = fine_tune(hf_fixture("lm"), out, "1");   // --tokenizer char: 65 ids
    const ProgramResult r = run_ok(args);
    CHECK(r.output.find("warning: the char tokenizer has 65 ids, but the model's vocabulary has 260") != std::string::npos);
    args.insert(args.end(), {"--preset", "small"});
    const ProgramResult p = run_ampgrad(args);
    CHECK(p.exit_code == 1);
    CHECK(p.output.find("--preset small: --init-from " + hf_fixture("lm") + " takes the model's sizes") != std::string::npos);
    for (std::string& a : args)
        if (a == "char") a = "byte";   // 256 of the model's 260 ids: no warning
    args.resize(args.size() - 2);
    CHECK(run_ok(args).output.find("warning: the") == std::string::npos);
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

TEST_CASE("--tokenizer auto (the default) takes the folder's BPE; export writes it back; sample stops at <|endoftext|>") {
    const std::string out = make_temp_dir("hf_auto_tokenizer"), folder = out + "/gpt", bpe = out + "/bpe";
    models::GPTConfig c = models::GPTConfig::preset("nano");
    c.vocab_size = 512;                                                   // the trained_512 tokenizer's
    models::save_pretrained(std::make_shared<models::GPT>(c), folder);
    const fs::path tokenizer = fs::path(std::getenv("AMPGRAD_FIXTURES")) / "bpe" / "trained_512";
    for (const char* f : {"vocab.json", "merges.txt"}) fs::copy_file(tokenizer / f, fs::path(folder) / f);
    const std::vector<std::string> short_run = {"--steps", "1", "--batch-size", "2", "--warmup", "0", "--eval-every",
                                                "0", "--eval-iters", "1", "--sample-tokens", "8", "--progress", "plain"};
    std::vector<std::string> args = {"train", "--init-from", folder, "--out", out + "/run"};
    args.insert(args.end(), short_run.begin(), short_run.end());
    const ProgramResult r = run_ok(args);
    CHECK(r.output.find("(bpe tokenizer)") != std::string::npos);
    nlohmann::json state = nlohmann::json::parse(std::ifstream(out + "/run/checkpoints/step-00000001/state.json"));
    CHECK(state.at("run_config").at("tokenizer") == "gpt2:" + folder);    // what auto chose, for --resume
    CHECK(run_ok({"sample", "--hf", folder, "--prompt", "ROMEO:", "--tokens", "5", "--temperature", "0"})
              .output.starts_with("ROMEO:"));
    // export writes the run's BPE beside the weights, the same files, so the folder is complete.
    CHECK(run_ok({"export", "--ckpt", out + "/run", "--hf", out + "/exported"}).output.find(
              "written as vocab.json, merges.txt, tokenizer.json") != std::string::npos);
    auto read = [](const fs::path& p) { return std::string(std::istreambuf_iterator<char>(std::ifstream(p).rdbuf()), {}); };
    for (const char* f : {"vocab.json", "merges.txt"}) {
        CAPTURE(f);
        CHECK(read(fs::path(out) / "exported" / f) == read(tokenizer / f));
    }
    CHECK(fs::exists(fs::path(out) / "exported" / "tokenizer.json"));
    // sample stops at the BPE's <|endoftext|> (511 here), as transformers' generate does, unless
    // --ignore-eos: a model whose every position prefers it (ln_f outputs ones, wte[511] = 5).
    std::shared_ptr<models::GPT> eot_model = models::from_pretrained(folder).gpt();
    {
        NoGradGuard no_grad;
        eot_model->ln_f->weight.fill_(0.0);
        eot_model->ln_f->bias.fill_(1.0);
        eot_model->wte->weight.narrow(0, 511, 1).fill_(5.0);
    }
    models::save_pretrained(eot_model, folder);
    const std::vector<std::string> greedy = {"sample", "--hf", folder, "--prompt", "ROMEO:", "--tokens", "4",
                                             "--temperature", "0"};
    CHECK(run_ok(greedy).output == "ROMEO:<|endoftext|>\n");
    std::vector<std::string> past_end = greedy;
    past_end.push_back("--ignore-eos");
    CHECK(run_ok(past_end).output == "ROMEO:<|endoftext|><|endoftext|><|endoftext|><|endoftext|>\n");
    // The GPT-2 fixture folder has no tokenizer files: char.
    args = {"train", "--init-from", hf_fixture("lm"), "--out", out + "/char"};
    args.insert(args.end(), short_run.begin(), short_run.end());
    CHECK(run_ok(args).output.find("(char tokenizer)") != std::string::npos);
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

// pretrained_app_test.cpp: the `ampgrad` program with Hugging Face folders (the tiny fixtures of
// tools/fixtures/hf_gpt2.py, hf_llama.py and hf_qwen2.py): sample --hf, eval --hf, train --init-from
// (fp16, --zero, resume), export --hf, for GPT-2, Llama, Mistral and Qwen2, and their bad input.
#include <doctest/doctest.h>

#include <cctype>
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

std::string llama_fixture(const std::string& name) {
    return (fs::path(std::getenv("AMPGRAD_FIXTURES")) / "hf_llama" / name).string();
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

// The largest difference between two models' parameters (the same names).
double max_difference(const nn::Module& a, const nn::Module& b) {
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

TEST_CASE("sample and eval --hf with Llama and Mistral folders; --block-size is the context") {
    const std::string dir = make_temp_dir("hf_llama_sample"), text = lower_case_text(dir);
    auto sample = [&](const std::string& folder, const std::string& temperature) {
        return run_ok({"sample", "--hf", folder, "--tokenizer", "char", "--data", text, "--prompt", "romeo", "--tokens",
                       "60", "--temperature", temperature, "--seed", "5"});
    };
    // Greedy: the same text from one file and from its shards.
    const ProgramResult one = sample(llama_fixture("llama"), "0"), sharded = sample(llama_fixture("sharded"), "0");
    CHECK(one.output.starts_with("romeo"));
    CHECK(one.output == sharded.output);
    // The model has 40 ids, the tokenizer 28: at a high temperature the other 12 would come up
    // (and fail to decode) unless generation suppresses them.
    CHECK(sample(llama_fixture("tied"), "3").output.size() > std::string("romeo\n").size());
    const std::vector<std::string> eval = {"--tokenizer", "char", "--data", text, "--eval-iters", "2", "--batch-size", "4"};
    auto eval_of = [&](const std::string& folder, std::vector<std::string> extra) {
        std::vector<std::string> args = {"eval", "--hf", folder};
        args.insert(args.end(), eval.begin(), eval.end());
        args.insert(args.end(), extra.begin(), extra.end());
        return run_ampgrad(args);
    };
    const ProgramResult mistral = eval_of(llama_fixture("mistral"), {});
    CAPTURE(mistral.output);
    REQUIRE(mistral.exit_code == 0);
    CHECK(eval_json(mistral).at("val_loss").get<double>() > 0.0);
    // The Llama's context is max_position_embeddings (64); the Mistral's its sliding window (16).
    CHECK(eval_of(llama_fixture("llama"), {"--block-size", "65"}).output.find(
              "--block-size 65: longer than the context of the Llama in " + llama_fixture("llama") +
              " (max_position_embeddings 64)") != std::string::npos);
    CHECK(eval_of(llama_fixture("mistral"), {"--block-size", "17"}).exit_code == 1);
    CHECK(eval_of(llama_fixture("mistral"), {"--block-size", "16"}).exit_code == 0);
    fs::remove_all(dir);
}

TEST_CASE("train --init-from a Llama folder: fp16, resume, export; the export evaluates as the checkpoint") {
    const std::string out = make_temp_dir("hf_llama_init"), text = lower_case_text(out), exported = out + "/hf";
    std::vector<std::string> args = fine_tune(llama_fixture("llama"), out, "1");
    for (const char* a : {"--lr", "1e-9", "--min-lr", "0", "--weight-decay", "0", "--prec", "fp16", "--block-size", "32"})
        args.push_back(a);
    args.push_back("--data");
    args.push_back(text);
    const ProgramResult r = run_ok(args);
    CHECK(r.output.find("init: the Hugging Face Llama weights in " + llama_fixture("llama")) != std::string::npos);
    CHECK(r.output.find("L=2, NH=4, NKV=2, HS=4, H=16, I=32, T=32, V=40") != std::string::npos);
    const ProgramResult e = run_ok({"export", "--ckpt", out, "--hf", exported});
    CHECK(e.output.find("LlamaForCausalLM") != std::string::npos);
    std::shared_ptr<models::Llama> start = models::from_pretrained(llama_fixture("llama")).llama();
    std::shared_ptr<models::Llama> after = models::from_pretrained(exported).llama();
    CHECK(after->config() == start->config());   // max_position_embeddings stays 64: T=32 is the run's
    CHECK(max_difference(*after, *start) < 1e-6);
    // The checkpoint holds the folder's config: it resumes and evaluates without the folder.
    nlohmann::json state = nlohmann::json::parse(std::ifstream(out + "/checkpoints/step-00000001/state.json"));
    CHECK(state.at("run_config").at("model") == "llama");
    CHECK(state.at("run_config").at("pretrained_config").at("rope_scaling").at("rope_type") == "llama3");
    CHECK(state.at("run_config").at("vocab_size") == 40);
    run_ok({"train", "--resume", out, "--steps", "3", "--sample-tokens", "30", "--progress", "plain",
            "--out", out});
    run_ok({"export", "--ckpt", out, "--hf", exported});
    const nlohmann::json from_checkpoint = eval_json(run_ok({"eval", "--ckpt", out, "--eval-iters", "2"}));
    nlohmann::json from_export = eval_json(run_ok({"eval", "--hf", exported, "--tokenizer", "char", "--data", text,
                                                   "--eval-iters", "2", "--batch-size", "4", "--block-size", "32",
                                                   "--prec", "fp16"}));
    CHECK(from_export.at("val_loss") == from_checkpoint.at("val_loss"));
    CHECK(from_export.at("train_loss") == from_checkpoint.at("train_loss"));
    fs::remove_all(out);
}

TEST_CASE("train --init-from a Llama folder under --zero 3 on two processes, with a cached sample at the end") {
    const std::string out = make_temp_dir("hf_llama_zero"), text = lower_case_text(out);
    std::vector<std::string> args = {ampgrad_run_program(), "--nproc-per-node", "2", "--master-port",
                                     std::to_string(free_port()), ampgrad_program()};
    for (const std::string& a : fine_tune(llama_fixture("sharded"), out, "2")) args.push_back(a);
    for (const char* a : {"--zero", "3", "--block-size", "16", "--sample-tokens", "24", "--data"}) args.push_back(a);
    args.push_back(text);
    ProgramResult r = run_program(args, {"OMP_NUM_THREADS=1"});
    CAPTURE(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK(r.output.find("ZeRO stage 3 on 2 process(es)") != std::string::npos);
    CHECK(r.output.find("sample (temperature 0.8, top-k 40):") != std::string::npos);
    fs::remove_all(out);
}

TEST_CASE("Llama --init-from: flags that contradict the folder are named") {
    const std::string out = make_temp_dir("hf_llama_bad"), text = lower_case_text(out);
    auto fails_with = [&](const std::string& folder, std::vector<std::string> extra, const std::string& fact) {
        std::vector<std::string> args = fine_tune(folder, out, "1");
        args.insert(args.end(), extra.begin(), extra.end());
        const ProgramResult r = run_ampgrad(args);
        CAPTURE(r.output);
        CHECK(r.exit_code == 1);
        CHECK(r.output.find(fact) != std::string::npos);
    };
    const std::string llama = llama_fixture("llama");
    fails_with(llama, {"--data", text, "--model", "gpt"}, "--model gpt: the folder " + llama + " holds a LlamaForCausalLM");
    fails_with(hf_fixture("lm"), {"--model", "llama"}, "--model llama: the folder " + hf_fixture("lm") +
                                                       " holds a GPT2LMHeadModel");
    fails_with(llama, {"--data", text, "--n-head", "2"}, "--n-head 2: the weights in " + llama +
                                                         " have num_attention_heads 4");
    fails_with(llama, {"--data", text, "--dropout", "0.1"}, "--dropout 0.1: the Llama has no dropout");
    fails_with(llama, {"--data", text, "--block-size", "100"}, "(max_position_embeddings 64)");
    fails_with(llama, {"--tokenizer", "byte"}, "the byte tokenizer has 256 tokens, more than the model's vocabulary of 40");
    fs::remove_all(out);
}

// export --hf of a run --init-from a folder gives back what the folder said and ampgrad does not model:
// bos/eos ids, RoPE in transformers 5's rope_parameters, generation_config.json. The output folder is
// written whole (a later export of another model leaves nothing stale), and a folder holding other
// files is refused.
TEST_CASE("export --hf keeps the folder's bos/eos, rope_parameters and generation_config.json; writes OUT whole") {
    const std::string out = make_temp_dir("hf_export_fields"), text = lower_case_text(out);
    const fs::path folder = fs::path(out) / "llama";
    fs::copy(llama_fixture("llama"), folder);
    const nlohmann::json generation = {{"bos_token_id", 1}, {"eos_token_id", 2}, {"do_sample", true}, {"temperature", 0.6}};
    std::ofstream(folder / "generation_config.json") << generation.dump(2);
    std::vector<std::string> args = fine_tune(folder.string(), out + "/run", "1");
    args.insert(args.end(), {"--block-size", "32", "--data", text});
    run_ok(args);
    const std::string exported = out + "/hf";
    run_ok({"export", "--ckpt", out + "/run", "--hf", exported});
    const nlohmann::json config = nlohmann::json::parse(std::ifstream(exported + "/config.json"));
    CHECK(config.at("bos_token_id") == 1);
    CHECK(config.at("eos_token_id") == 2);
    CHECK(config.at("rope_parameters").at("rope_type") == "llama3");
    CHECK(config.at("rope_parameters").at("rope_theta") == 500000.0);
    CHECK_FALSE(config.contains("rope_theta"));
    CHECK(nlohmann::json::parse(std::ifstream(exported + "/generation_config.json")) == generation);
    CHECK(models::from_pretrained(exported).llama()->config() == models::from_pretrained(folder.string()).llama()->config());
    // Another model into the same folder: the Llama's generation_config.json does not stay behind.
    const std::string gpt_run = out + "/gpt";
    run_ok({"train", "--n-layer", "1", "--n-embd", "16", "--n-head", "2", "--block-size", "8", "--steps", "1",
            "--eval-every", "0", "--eval-iters", "1", "--sample-tokens", "0", "--out", gpt_run});
    run_ok({"export", "--ckpt", gpt_run, "--hf", exported});
    CHECK_FALSE(fs::exists(exported + "/generation_config.json"));
    CHECK(nlohmann::json::parse(std::ifstream(exported + "/config.json")).at("model_type") == "gpt2");
    std::ofstream(exported + "/notes.txt") << "mine";
    const ProgramResult refused = run_ampgrad({"export", "--ckpt", gpt_run, "--hf", exported});
    CHECK(refused.exit_code == 1);
    CHECK(refused.output.find("the folder holds notes.txt, which is not a Hugging Face model's file") != std::string::npos);
    CHECK(fs::exists(exported + "/notes.txt"));
    fs::remove_all(out);
}

// Qwen2 was added through the model table alone (models/model_family.hpp): nothing in app/ names it.
// Its folder fine-tunes, resumes, samples and exports as a Llama's does.
TEST_CASE("train --init-from a Qwen2 folder: resume, sample, export; the export evaluates as the checkpoint") {
    const std::string qwen2 = (fs::path(std::getenv("AMPGRAD_FIXTURES")) / "hf_qwen2" / "qwen2").string();
    const std::string out = make_temp_dir("hf_qwen2_init"), text = lower_case_text(out), exported = out + "/hf";
    std::vector<std::string> args = fine_tune(qwen2, out, "2");
    for (const char* a : {"--block-size", "32", "--lr", "1e-3"}) args.push_back(a);
    args.push_back("--data");
    args.push_back(text);
    const ProgramResult r = run_ok(args);
    CHECK(r.output.find("ampgrad train: qwen2 from " + qwen2) != std::string::npos);
    CHECK(r.output.find("init: the Hugging Face Qwen2 weights in " + qwen2) != std::string::npos);
    CHECK(r.output.find("L=2, NH=4, NKV=2, HS=4, H=16, I=32, T=32, V=40") != std::string::npos);
    nlohmann::json state = nlohmann::json::parse(std::ifstream(out + "/checkpoints/step-00000002/state.json"));
    CHECK(state.at("run_config").at("model") == "qwen2");
    CHECK(state.at("run_config").at("pretrained_config").at("model_type") == "qwen2");
    CHECK(state.at("model_config").at("architectures") == nlohmann::json::array({"Qwen2ForCausalLM"}));
    run_ok({"train", "--resume", out, "--steps", "3", "--sample-tokens", "20", "--progress", "plain", "--out", out});
    const ProgramResult e = run_ok({"export", "--ckpt", out, "--hf", exported});
    CHECK(e.output.find("Qwen2ForCausalLM") != std::string::npos);
    std::shared_ptr<models::CausalLM> start = models::from_pretrained(qwen2).causal_lm();
    std::shared_ptr<models::CausalLM> after = models::from_pretrained(exported).causal_lm();
    CHECK(after->family() == "qwen2");
    CHECK(after->max_positions() == 64);   // the folder's context; T=32 was the run's
    CHECK(max_difference(*models::as_module(after), *models::as_module(start)) > 0.0);   // it trained
    const nlohmann::json from_checkpoint = eval_json(run_ok({"eval", "--ckpt", out, "--eval-iters", "2"}));
    const nlohmann::json from_export = eval_json(run_ok({"eval", "--hf", exported, "--tokenizer", "char", "--data", text,
                                                         "--eval-iters", "2", "--batch-size", "4", "--block-size", "32"}));
    CHECK(from_export.at("val_loss") == from_checkpoint.at("val_loss"));
    const ProgramResult s = run_ok({"sample", "--hf", exported, "--tokenizer", "char", "--data", text, "--prompt",
                                    "romeo", "--tokens", "20", "--temperature", "0"});
    CHECK(s.output.starts_with("romeo"));
    fs::remove_all(out);
}

TEST_CASE("train --model qwen2: a preset trains, its checkpoint has the q/k/v biases, and it exports") {
    const std::string out = make_temp_dir("qwen2_preset"), exported = out + "/hf";
    const ProgramResult r = run_ok({"train", "--model", "qwen2", "--steps", "30", "--batch-size", "8", "--warmup", "5",
                                    "--lr", "3e-3", "--eval-every", "0", "--eval-iters", "2", "--sample-tokens", "10",
                                    "--progress", "plain", "--out", out});
    CHECK(r.output.find("ampgrad train: qwen2 preset qwen2-nano (L=3, NH=4, NKV=2") != std::string::npos);
    std::vector<double> losses;
    std::ifstream metrics(out + "/metrics.jsonl");
    for (std::string line; std::getline(metrics, line);) {
        const nlohmann::json j = nlohmann::json::parse(line);
        if (j.value("kind", "") == "train") losses.push_back(j.at("loss").get<double>());
    }
    REQUIRE(losses.size() == 30);
    MESSAGE("loss " << losses.front() << " -> " << losses.back());
    CHECK(losses.back() < losses.front() - 0.5);
    nlohmann::json state = nlohmann::json::parse(std::ifstream(out + "/checkpoints/step-00000030/state.json"));
    CHECK(state.at("run_config").at("preset") == "qwen2-nano");
    CHECK(state.at("model_config").at("model_type") == "qwen2");
    io::SafetensorsFile f = io::load_safetensors(out + "/checkpoints/step-00000030/model.safetensors");
    CHECK(f.tensors.contains("model.layers.0.self_attn.q_proj.bias"));
    CHECK_FALSE(f.tensors.contains("model.layers.0.self_attn.o_proj.bias"));
    CHECK(run_ok({"export", "--ckpt", out, "--hf", exported}).output.find("Qwen2ForCausalLM") != std::string::npos);
    CHECK(models::from_pretrained(exported).causal_lm()->family() == "qwen2");
    fs::remove_all(out);
}

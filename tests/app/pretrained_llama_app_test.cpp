// pretrained_llama_app_test.cpp: the `ampgrad` program with Llama, Mistral and Qwen2 folders (the
// tiny fixtures of tools/fixtures/hf_llama.py and hf_qwen2.py): sample --hf, eval --hf, train
// --init-from (fp16, --zero 3, resume), export --hf, presets, and flags that contradict the folder.
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

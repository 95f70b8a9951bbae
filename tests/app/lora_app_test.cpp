// lora_app_test.cpp: `ampgrad train --init-from DIR --lora ...` on the tiny Llama fixture
// (tests/fixtures/hf_llama/llama): the loss falls in every precision and under --zero 2, resume
// continues the same run, export writes PEFT's adapter folder (or, with --merge-lora, a plain model
// folder), and sample/eval --hf BASE --adapter DIR run the saved adapter.
#include <doctest/doctest.h>

#include <cctype>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "app/verify_runs.hpp"
#include "ampgrad/ampgrad.h"
#include "tests/app/run_program.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;
namespace fs = std::filesystem;

namespace {

std::string llama_base() { return (fs::path(std::getenv("AMPGRAD_FIXTURES")) / "hf_llama" / "llama").string(); }


ProgramResult run_ok(const std::vector<std::string>& args) {
    ProgramResult r = run_ampgrad(args);
    CAPTURE(r.output);
    REQUIRE(r.exit_code == 0);
    return r;
}

std::vector<std::string> lora_run(const std::string& out, const std::string& text, const std::string& steps) {
    return {"train", "--init-from", llama_base(), "--lora", "r=4,alpha=8,targets=q_proj,v_proj,o_proj",
            "--tokenizer", "char", "--data", text, "--block-size", "16", "--steps", steps, "--batch-size", "8",
            "--lr", "2e-2", "--min-lr", "2e-2", "--warmup", "0", "--weight-decay", "0", "--eval-every", "0",
            "--eval-iters", "2", "--sample-tokens", "0", "--progress", "plain", "--out", out};
}

std::vector<double> train_losses(const std::string& out) {
    std::vector<double> losses;
    std::ifstream metrics(out + "/metrics.jsonl");
    for (std::string line; std::getline(metrics, line);) {
        const nlohmann::json j = nlohmann::json::parse(line);
        if (j.value("kind", "") == "train") losses.push_back(j.at("loss").get<double>());
    }
    return losses;
}

// The mean of the first and of the last five losses: the second must be clearly lower.
void check_loss_falls(const std::string& out, size_t steps) {
    std::vector<double> l = train_losses(out);
    REQUIRE(l.size() == steps);
    double first = 0, last = 0;
    for (size_t i = 0; i < 5; ++i) first += l[i] / 5, last += l[l.size() - 1 - i] / 5;
    MESSAGE("loss " << first << " -> " << last);
    CHECK(last < first - 0.3);
}

nlohmann::json eval_json(const ProgramResult& r) {
    const std::string out = r.output.substr(0, r.output.find_last_not_of('\n') + 1);
    return nlohmann::json::parse(out.substr(out.find_last_of('\n') + 1));
}

}  // namespace

TEST_CASE("train --lora fine-tunes the tiny Llama with the loss falling in fp32, bf16 and fp16") {
    for (const std::string prec : {"fp32", "bf16", "fp16"}) {
        CAPTURE(prec);
        const std::string out = make_temp_dir("lora_" + prec), text = lower_case_text(out);
        std::vector<std::string> args = lora_run(out, text, "40");
        args.insert(args.end(), {"--prec", prec});
        const ProgramResult r = run_ok(args);
        // 2 layers x (q 16->16, v 16->8, o 16->16) rank-4 adapters: 704 parameters train, the base stays frozen
        CHECK(r.output.find("lora: r=4, alpha=8 on 6 modules (r=4,alpha=8,targets=q_proj,v_proj,o_proj): 0.001M of") !=
              std::string::npos);
        check_loss_falls(out, 40);
        fs::remove_all(out);
    }
}

TEST_CASE("train --lora under --zero 2 on two processes: the loss falls") {
    const std::string out = make_temp_dir("lora_zero"), text = lower_case_text(out);
    std::vector<std::string> args = {ampgrad_run_program(), "--nproc-per-node", "2", "--master-port",
                                     std::to_string(free_port()), ampgrad_program()};
    for (const std::string& a : lora_run(out, text, "40")) args.push_back(a);
    args.insert(args.end(), {"--zero", "2"});
    ProgramResult r = run_program(args, {"OMP_NUM_THREADS=1"});
    CAPTURE(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK(r.output.find("ZeRO stage 2 on 2 process(es)") != std::string::npos);
    check_loss_falls(out, 40);
    fs::remove_all(out);
}

TEST_CASE("a --lora run under --zero 2 resumes as the same run: the base is re-read from --init-from") {
    const std::string out = make_temp_dir("lora_zero_resume"), text = lower_case_text(out);
    auto launch = [&](std::vector<std::string> ampgrad_args) {
        std::vector<std::string> args = {ampgrad_run_program(), "--nproc-per-node", "2", "--master-port",
                                         std::to_string(free_port()), ampgrad_program()};
        args.insert(args.end(), ampgrad_args.begin(), ampgrad_args.end());
        ProgramResult r = run_program(args, {"OMP_NUM_THREADS=1"});
        CAPTURE(r.output);
        REQUIRE(r.exit_code == 0);
    };
    std::vector<std::string> whole = lora_run(out + "/whole", text, "6"), split = lora_run(out + "/split", text, "6");
    whole.insert(whole.end(), {"--zero", "2"});
    split.insert(split.end(), {"--zero", "2", "--until", "3"});
    launch(whole);
    launch(split);
    launch({"train", "--resume", out + "/split", "--out", out + "/split", "--progress", "plain"});
    CHECK(train_losses(out + "/split").size() == 6);
    CHECK(train_losses(out + "/split") == train_losses(out + "/whole"));
    fs::remove_all(out);
}

TEST_CASE("a --lora run resumes, exports PEFT's adapter folder or a merged model, and sample/eval --adapter run it") {
    const std::string out = make_temp_dir("lora_export"), text = lower_case_text(out);
    const std::string whole = out + "/whole", split = out + "/split";
    run_ok(lora_run(whole, text, "6"));
    std::vector<std::string> first = lora_run(split, text, "6");
    first.insert(first.end(), {"--until", "3"});
    run_ok(first);
    run_ok({"train", "--resume", split, "--out", split, "--progress", "plain"});
    CHECK(train_losses(split) == train_losses(whole));   // the resumed run is the same run
    // the adapter folder: PEFT's two files, PEFT's key names
    run_ok({"export", "--ckpt", whole, "--hf", out + "/adapter"});
    CHECK(fs::exists(out + "/adapter/adapter_config.json"));
    CHECK_FALSE(fs::exists(out + "/adapter/config.json"));
    const io::Header h = io::read_safetensors_header(out + "/adapter/adapter_model.safetensors");
    CHECK(h.tensors.size() == 12);
    CHECK(h.tensors.front().name.starts_with("base_model.model.model.layers.0.self_attn."));
    const nlohmann::json cfg = nlohmann::json::parse(std::ifstream(out + "/adapter/adapter_config.json"));
    CHECK(cfg.at("peft_type") == "LORA");
    CHECK(cfg.at("r") == 4);
    CHECK(cfg.at("base_model_name_or_path") == llama_base());
    // eval: the checkpoint, the base + adapter and the merged folder agree
    const std::vector<std::string> data = {"--tokenizer", "char", "--data", text, "--eval-iters", "2", "--batch-size", "4"};
    auto eval_of = [&](std::vector<std::string> args) {
        args.insert(args.begin(), "eval");
        args.insert(args.end(), data.begin(), data.end());
        return eval_json(run_ok(args)).at("val_loss").get<double>();
    };
    const double with_adapter = eval_of({"--hf", llama_base(), "--adapter", out + "/adapter"});
    const double base_only = eval_of({"--hf", llama_base()});
    run_ok({"export", "--ckpt", whole, "--hf", out + "/merged", "--merge-lora"});
    CHECK(fs::exists(out + "/merged/config.json"));
    const double merged = eval_of({"--hf", out + "/merged"});
    MESSAGE("val loss: base " << base_only << ", base + adapter " << with_adapter << ", merged " << merged);
    CHECK(with_adapter < base_only);
    CHECK(merged == doctest::Approx(with_adapter).epsilon(1e-4));
    const ProgramResult s = run_ok({"sample", "--hf", llama_base(), "--adapter", out + "/adapter", "--tokenizer", "char",
                                    "--data", text, "--prompt", "romeo", "--tokens", "10", "--temperature", "0"});
    CHECK(s.output.starts_with("romeo"));
    fs::remove_all(out);
}

TEST_CASE("--lora and --qlora misuse is named, with a non-zero exit") {
    const std::string out = make_temp_dir("lora_bad"), text = lower_case_text(out);
    auto fails_with = [&](std::vector<std::string> args, const std::string& fact) {
        const ProgramResult r = run_ampgrad(args);
        CAPTURE(r.output);
        CHECK(r.exit_code != 0);
        CHECK(r.output.find(fact) != std::string::npos);
    };
    std::vector<std::string> bad = lora_run(out + "/a", text, "2");
    bad[4] = "r=4,targets=nope";
    fails_with(bad, "target modules [\"nope\"] not found in the base model");
    std::vector<std::string> q = lora_run(out + "/b", text, "2");
    q.erase(q.begin() + 3, q.begin() + 5);   // no --lora SPEC
    q.push_back("--qlora");
    fails_with(q, "--qlora: QLoRA trains LoRA adapters on an NF4 base; give --lora too");
    fails_with({"train", "--lora", "r=4", "--steps", "1", "--out", out + "/c"}, "LoRA adapts a pretrained model");
    fs::remove_all(out);
}

TEST_CASE("train --qlora: adapters on an NF4 base in bf16; the loss falls, a resume is the same bits, export merges") {
    const std::string out = make_temp_dir("qlora"), text = lower_case_text(out);
    auto qlora_run = [&](const std::string& dir, const std::string& steps) {
        std::vector<std::string> args = lora_run(dir, text, steps);
        args.insert(args.end(), {"--qlora", "--prec", "bf16"});
        return args;
    };
    const ProgramResult r = run_ok(qlora_run(out + "/whole", "40"));
    // the 14 base Linear weights (2 layers x q,k,v,o,gate,up,down) are NF4 and still counted in the total
    CHECK(r.output.find("0.001M of 0.007M parameters train") != std::string::npos);
    CHECK(r.output.find("| trains 0.001M of 0.007M params |") != std::string::npos);   // on every progress line
    check_loss_falls(out + "/whole", 40);
    std::vector<std::string> first = qlora_run(out + "/split", "40");
    first.insert(first.end(), {"--until", "20"});
    run_ok(first);
    run_ok({"train", "--resume", out + "/split", "--out", out + "/split", "--progress", "plain"});
    const app::VerifyReport same = app::verify_runs(out + "/whole", out + "/split");   // the adapters and AdamW's state
    CHECK_MESSAGE(same.identical(), app::format_verify_report(same, "whole", "split"));
    REQUIRE(same.checkpoints.size() == 1);
    // the checkpoint holds the adapters and the trainable rest, not the NF4 base
    const io::Header h = io::read_safetensors_header(out + "/whole/checkpoints/step-00000040/model.safetensors");
    for (const auto& t : h.tensors) CHECK_MESSAGE(!t.name.ends_with("q_proj.weight"), t.name);
    // export --merge-lora dequantises the base, folds the adapters in, and evaluates as the checkpoint does
    run_ok({"export", "--ckpt", out + "/whole", "--hf", out + "/merged", "--merge-lora"});
    const std::vector<std::string> data = {"--tokenizer", "char", "--data", text, "--eval-iters", "2", "--batch-size", "8",
                                           "--block-size", "16"};   // the run's windows
    std::vector<std::string> from_checkpoint = {"eval", "--ckpt", out + "/whole", "--eval-iters", "2"};
    std::vector<std::string> from_merged = {"eval", "--hf", out + "/merged"};
    from_merged.insert(from_merged.end(), data.begin(), data.end());
    const double trained = eval_json(run_ok(from_checkpoint)).at("val_loss").get<double>();
    const double merged = eval_json(run_ok(from_merged)).at("val_loss").get<double>();
    MESSAGE("val loss: checkpoint (bf16 over NF4) " << trained << ", merged f32 folder " << merged);
    CHECK(merged == doctest::Approx(trained).epsilon(1e-3));   // bf16 autocast against f32 on the same weights
    fs::remove_all(out);
}

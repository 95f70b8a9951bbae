// lora_test.cpp: LoRA by module name (models/lora.hpp) against Hugging Face PEFT 0.21: adapters PEFT
// wrote (tests/fixtures/peft_lora/, tools/fixtures/peft_lora.py) give PEFT's logits on the Llama and
// GPT-2 base folders; ampgrad's saved adapters use PEFT's names and load back; PEFT's target
// matching; and the optimizer (plain and ZeRO stages 0-3) holds state for the adapters only.
#include <doctest/doctest.h>

#include <filesystem>
#include <set>

#include "models/lora.hpp"
#include "tests/support/check_close.hpp"
#include "tests/support/corrupt_inputs.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/one_rank_group.hpp"
#include "zero/engine.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

std::string fixture_dir(const std::string& rel) { return std::string(std::getenv("AMPGRAD_FIXTURES")) + "/" + rel; }

// The done-when bar: PEFT's logits to 1e-5 in f32.
const Tolerance kPeftTolerance{1e-5, 1e-5};

const std::map<std::string, std::string> kBaseOf = {
    {"llama", "hf_llama/llama"}, {"llama_regex", "hf_llama/llama"}, {"gpt2", "hf_gpt2/lm"}};

std::shared_ptr<models::CausalLM> base_model(const std::string& adapter) {
    return models::from_pretrained(fixture_dir(kBaseOf.at(adapter))).causal_lm();
}

Tensor eval_logits(models::CausalLM& lm, const Tensor& idx, int64_t vocab) {
    NoGradGuard no_grad;
    models::as_module(lm).eval();
    return lm.forward(idx).narrow(-1, 0, vocab);   // (B,T,V)
}

}  // namespace

TEST_CASE("adapters written by PEFT give PEFT's logits (Llama, Llama regex + rsLoRA, GPT-2 Conv1D)") {
    Fixture fx = load_fixture("peft_lora_reference");
    Tensor idx = fx.at("idx");
    for (const std::string name : {"llama", "llama_regex", "gpt2"}) {
        CAPTURE(name);
        auto lm = base_model(name);
        const Tensor& want = fx.at(name + ".logits");
        const int64_t vocab = want.size(-1);
        CHECK_CLOSE(eval_logits(*lm, idx, vocab), fx.at(name + ".base_logits"), kPeftTolerance);
        models::LoraConfig cfg = models::load_peft_adapter(*lm, fixture_dir("peft_lora/" + name));
        CHECK_CLOSE(eval_logits(*lm, idx, vocab), want, kPeftTolerance);
        CHECK(cfg.fan_in_fan_out == (name == "gpt2"));
        CHECK(cfg.use_rslora == (name == "llama_regex"));
        // merged: the same logits from the folded weights
        models::merge_lora(models::as_module(*lm));
        CHECK_CLOSE(eval_logits(*lm, idx, vocab), want, kPeftTolerance);
        models::unmerge_lora(models::as_module(*lm));
        CHECK_CLOSE(eval_logits(*lm, idx, vocab), want, kPeftTolerance);
    }
}

TEST_CASE("an adapter ampgrad saves has PEFT's key names and config, and loads back to the same logits") {
    Fixture fx = load_fixture("peft_lora_reference");
    Tensor idx = fx.at("idx");
    for (const std::string name : {"llama", "gpt2"}) {
        CAPTURE(name);
        auto lm = base_model(name);
        models::LoraConfig cfg = models::load_peft_adapter(*lm, fixture_dir("peft_lora/" + name));
        std::string dir = scratch_dir("lora_save");
        models::save_peft_adapter(*lm, cfg, dir);
        // the same tensor names, shapes and dtypes as the file PEFT wrote
        io::Header ours = io::read_safetensors_header(dir + "/adapter_model.safetensors");
        io::Header peft = io::read_safetensors_header(fixture_dir("peft_lora/" + name + "/adapter_model.safetensors"));
        REQUIRE(ours.tensors.size() == peft.tensors.size());
        std::set<std::string> our_names, peft_names;
        for (const auto& e : ours.tensors) our_names.insert(e.name + ":" + e.dtype);
        for (const auto& e : peft.tensors) peft_names.insert(e.name + ":" + e.dtype);
        CHECK(our_names == peft_names);
        models::LoraConfig back = models::read_peft_config(dir);
        CHECK(back.r == cfg.r);
        CHECK(back.lora_alpha == cfg.lora_alpha);
        CHECK(back.target_modules == cfg.target_modules);
        CHECK(back.fan_in_fan_out == (name == "gpt2"));
        auto fresh = base_model(name);
        models::load_peft_adapter(*fresh, dir);
        const Tensor& want = fx.at(name + ".logits");
        CHECK(compare_tensors(eval_logits(*fresh, idx, want.size(-1)), eval_logits(*lm, idx, want.size(-1)),
                              {0.0, 0.0}) == "");
        std::filesystem::remove_all(dir);
    }
}

TEST_CASE("PEFT's target matching: whole names or '.'-separated suffixes, or a full-match regex") {
    models::LoraConfig cfg;
    cfg.target_modules = {"q_proj", "model.layers.1.mlp.up_proj"};
    CHECK(models::lora_targets(cfg, "model.layers.0.self_attn.q_proj"));
    CHECK(models::lora_targets(cfg, "q_proj"));
    CHECK(models::lora_targets(cfg, "model.layers.1.mlp.up_proj"));
    CHECK_FALSE(models::lora_targets(cfg, "model.layers.0.mlp.up_proj"));
    CHECK_FALSE(models::lora_targets(cfg, "model.layers.0.self_attn.xq_proj"));   // not a '.' boundary
    CHECK_FALSE(models::lora_targets(cfg, "model.layers.0.self_attn.q_proj.lora_A"));
    models::LoraConfig re;
    re.target_regex = R"(.*\.layers\.0\..*_proj)";
    CHECK(models::lora_targets(re, "model.layers.0.self_attn.k_proj"));
    CHECK_FALSE(models::lora_targets(re, "model.layers.1.self_attn.k_proj"));
    CHECK_FALSE(models::lora_targets(re, "model.layers.0.self_attn.k_proj.x"));      // fullmatch
}

TEST_CASE("apply_lora freezes the base, unfreezes modules_to_save and biases as asked, and rejects bad targets") {
    auto lm = base_model("llama");
    nn::Module& m = models::as_module(*lm);
    models::LoraConfig cfg;
    cfg.r = 2;
    cfg.target_modules = {"q_proj", "v_proj"};
    cfg.modules_to_save = {"lm_head"};
    std::vector<std::string> targeted = models::apply_lora(m, cfg);
    CHECK(targeted == std::vector<std::string>{"model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.v_proj",
                                               "model.layers.1.self_attn.q_proj", "model.layers.1.self_attn.v_proj"});
    std::vector<std::string> trainable = models::lora_state_dict(m).keys();
    CHECK(trainable.size() == 9);   // 4 x (lora_A, lora_B) + lm_head.weight
    for (const std::string& n : trainable) CHECK((n.find(".lora_") != std::string::npos || n == "lm_head.weight"));
    auto [train, total] = models::trainable_and_total_parameters(m);
    CHECK(train == 2 * ((2 * 16 + 16 * 2) + (2 * 16 + 8 * 2)) + 40 * 16);   // q (16->16), v (16->8), lm_head
    CHECK(total > train);
    CHECK_THROWS_WITH_AS(models::apply_lora(models::as_module(*base_model("llama")), {.target_modules = {"nope"}}),
                         doctest::Contains("target modules [\"nope\"] not found in the base model"), ValueError);
    CHECK_THROWS_WITH_AS(models::apply_lora(models::as_module(*base_model("llama")), {.target_modules = {"mlp"}}),
                         doctest::Contains("target module model.layers.0.mlp is a LlamaMLP, not a Linear"),
                         ValueError);
}

TEST_CASE("the --lora flag parses into PEFT's config") {
    models::LoraConfig c = models::parse_lora_flag("r=16,alpha=32,targets=q_proj,v_proj,dropout=0.05,rslora");
    CHECK(c.r == 16);
    CHECK(c.lora_alpha == 32.0);
    CHECK(c.lora_dropout == 0.05);
    CHECK(c.use_rslora);
    CHECK(c.target_modules == std::vector<std::string>{"q_proj", "v_proj"});
    CHECK(models::parse_lora_flag("r=4").lora_alpha == 4.0);
    CHECK_THROWS_WITH_AS(models::parse_lora_flag("r=4,foo=1"), doctest::Contains("unknown item \"foo=1\""), ValueError);
    CHECK_THROWS_AS(models::parse_lora_flag("r=x"), ValueError);
}

TEST_CASE("the optimizer holds state for the adapters only: AdamW and ZeRO stages 0-3") {
    auto lm = base_model("llama");
    std::shared_ptr<nn::Module> m = models::as_module(lm);
    models::LoraConfig cfg{.r = 2, .target_modules = {"q_proj", "k_proj", "v_proj", "o_proj"}};
    models::apply_lora(*m, cfg);
    const auto [adapter_numel, total] = models::trainable_and_total_parameters(*m);
    Tensor idx = load_fixture("peft_lora_reference").at("idx");
    {
        optim::AdamW opt(m->parameters());
        lm->forward(idx, idx).backward();
        opt.step();
        int64_t bytes = 0;
        for (const auto& [i, state] : opt.state_dict().state)
            for (const auto& [key, t] : state) bytes += t.numel() * static_cast<int64_t>(t.element_size());
        // exp_avg + exp_avg_sq (f32) per adapter element, and one f32 step counter per adapter tensor
        CHECK(opt.state_dict().state.size() == 16);
        CHECK(bytes == 8 * adapter_numel + 16 * 4);
        CHECK(bytes < 0.2 * 8 * total);
    }
    ampgrad_test::OneRankGroup group;
    for (int stage = 0; stage <= 3; ++stage) {
        CAPTURE(stage);
        zero::ZeroConfig zc;
        zc.stage = stage;
        zero::ZeroEngine engine(m, zc, [](std::vector<Tensor> p) { return std::make_unique<optim::AdamW>(p); }, &group);
        for (const std::string& n : engine.param_names()) CHECK(n.find(".lora_") != std::string::npos);
        CHECK(engine.param_names().size() == 16);
        Tensor loss = lm->forward(idx, idx);
        engine.backward(loss);
        engine.step();
        CHECK(engine.was_step_applied());
        // the f32 master partition and Adam's two moments: 12 bytes per adapter element (+ padding)
        const int64_t optimizer_bytes = engine.model_state_bytes().optimizer;
        CHECK(optimizer_bytes >= 12 * adapter_numel);
        CHECK(optimizer_bytes <= 12 * adapter_numel + 64 * 12);
    }
}

TEST_CASE("every corruption of a PEFT adapter folder is an ampgrad::Error naming the file") {
    // adapter_config.json's values retyped or dropped, adapter_model.safetensors truncated and
    // overwritten; each loaded into a fresh base model (a refused adapter may leave layers behind).
    const std::string dir = scratch_dir("lora_corrupt");
    std::filesystem::copy(fixture_dir("peft_lora/gpt2"), dir, std::filesystem::copy_options::recursive);
    auto load = [&] {
        auto lm = base_model("gpt2");
        models::load_peft_adapter(*lm, dir);
    };
    const std::string config = dir + "/adapter_config.json", weights = dir + "/adapter_model.safetensors";
    CHECK(check_file_corruptions(config, json_corruptions(read_whole_file(config)), load, "adapter_config.json") > 10);
    CHECK(check_file_corruptions(weights, byte_corruptions(read_whole_file(weights)), load, "adapter_model.safetensors") > 10);
    std::filesystem::remove_all(dir);
}

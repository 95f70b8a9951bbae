// pretrained_qwen2_test.cpp: Hugging Face Qwen2 folders (models/qwen2.hpp, models/qwen2_family.cpp)
// against transformers: the tiny folders and reference values tools/fixtures/hf_qwen2.py wrote with
// transformers 5.x (tests/fixtures/hf_qwen2/, hf_qwen2_reference.json). Logits, loss and every
// gradient (the q/k/v biases included) of an untied f32 Qwen2 and a tied bf16 one; the byte-exact
// round trip save_pretrained(from_pretrained(x)); the errors of a config Qwen2 cannot honour.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "ampgrad/ampgrad.h"
#include "support/check_close.hpp"
#include "support/fixtures.hpp"

using namespace ampgrad;
using ampgrad::testing::Tolerance;
namespace fs = std::filesystem;

namespace {

std::string qwen2_fixture(const std::string& name) {
    return (fs::path(std::getenv("AMPGRAD_FIXTURES")) / "hf_qwen2" / name).string();
}

fs::path scratch_dir() { return testing::scratch_dir("ampgrad_hf_qwen2"); }

fs::path edited_copy(const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
    const fs::path dir = scratch_dir();
    fs::copy(qwen2_fixture(name), dir, fs::copy_options::recursive);
    nlohmann::json config = nlohmann::json::parse(std::ifstream(dir / "config.json"));
    edit(config);
    std::ofstream(dir / "config.json") << config.dump(2);
    return dir;
}

// Through the CausalLM interface only (what app/ sees): logits, loss, and every parameter's gradient
// by transformers' names.
void check_against_transformers(const models::PretrainedModel& m, const std::string& name) {
    const testing::Fixture ref = testing::load_fixture("hf_qwen2_reference");
    std::shared_ptr<models::CausalLM> lm = m.causal_lm();
    std::shared_ptr<nn::Module> module = models::as_module(lm);
    module->eval();
    const Tolerance f32{1e-5, 1e-5};
    CHECK_CLOSE(lm->forward(ref.at("idx")), ref.at(name + ".logits"), f32);              // (B,T,V)
    Tensor loss = lm->forward(ref.at("idx"), ref.at("targets"));
    CHECK_CLOSE(loss, ref.at(name + ".loss"), f32);
    module->zero_grad();
    loss.backward();
    const Tolerance grad{1e-5, 1e-4};
    size_t checked = 0, biases = 0;
    for (const auto& [param, p] : module->named_parameters()) {
        CAPTURE(param);
        CHECK_CLOSE(p.grad(), ref.at(name + ".grad." + param), grad);
        ++checked;
        biases += param.ends_with("_proj.bias");
    }
    const bool tied = m.llama()->config().tie_word_embeddings;
    CHECK(checked == (tied ? 26u : 27u));   // L=2: 12 per layer (9 + q/k/v biases) + norm, embed (+ head)
    CHECK(biases == 6u);                    // q, k, v in each layer; o_proj has none
}

}  // namespace

TEST_CASE("from_pretrained: Qwen2ForCausalLM (q/k/v biases, GQA, RoPE base 1e6) matches transformers") {
    models::PretrainedModel m = models::from_pretrained(qwen2_fixture("qwen2"));
    CHECK(m.architecture == "Qwen2ForCausalLM");
    CHECK(m.model_type == "qwen2");
    CHECK(m.causal_lm()->family() == "qwen2");
    const models::LlamaConfig& c = m.llama()->config();
    CHECK(c.qkv_bias);
    CHECK_FALSE(c.attention_bias);
    CHECK(c.rope_theta == 1000000.0);
    CHECK(c.num_key_value_heads == 2);
    CHECK(m.llama()->layer(0)->self_attn->o_proj->bias.defined() == false);
    check_against_transformers(m, "qwen2");
    CHECK_THROWS_AS(m.gpt(), ValueError);
}

TEST_CASE("from_pretrained: a tied bf16 Qwen2, as f32 and as bf16") {
    models::PretrainedModel m = models::from_pretrained(qwen2_fixture("tied"));
    CHECK(m.llama()->config().tie_word_embeddings);
    CHECK(m.llama()->lm_head == nullptr);
    check_against_transformers(m, "tied");
    models::PretrainedModel b = models::from_pretrained(qwen2_fixture("tied"), {.dtype = kBFloat16});
    CHECK(b.causal_lm()->dtype() == kBFloat16);
    const testing::Fixture ref = testing::load_fixture("hf_qwen2_reference");
    models::as_module(b.causal_lm())->eval();
    Tensor logits = b.causal_lm()->forward(ref.at("idx")).to(kFloat32);
    CHECK_CLOSE(logits, ref.at("tied.logits"), (Tolerance{0.1, 0.05}));   // bf16 compute: 8 bits of mantissa
}

TEST_CASE("from_pretrained: a float64 Qwen2 computes in float64 (its RoPE too)") {
    models::PretrainedModel m = models::from_pretrained(qwen2_fixture("qwen2"), {.dtype = kFloat64});
    const testing::Fixture ref = testing::load_fixture("hf_qwen2_reference");
    models::as_module(m.causal_lm())->eval();
    Tensor logits = m.causal_lm()->forward(ref.at("idx"));
    CHECK(logits.dtype() == kFloat64);
    CHECK_CLOSE(logits.to(kFloat32), ref.at("qwen2.logits"), (Tolerance{1e-5, 1e-5}));
}

TEST_CASE("save_pretrained: a Qwen2 round-trips byte for byte as a Qwen2ForCausalLM") {
    for (const char* name : {"qwen2", "tied"}) {
        CAPTURE(name);
        const DType dtype = std::string(name) == "tied" ? kBFloat16 : kFloat32;
        models::PretrainedModel m = models::from_pretrained(qwen2_fixture(name), {.dtype = dtype});
        const fs::path out = scratch_dir();
        models::save_pretrained(m, out.string());
        io::SafetensorsFile saved = io::load_safetensors((out / "model.safetensors").string());
        io::SafetensorsFile original = io::load_safetensors(qwen2_fixture(name) + "/model.safetensors");
        CHECK(saved.tensors.size() == original.tensors.size());
        for (const auto& [tensor_name, t] : original.tensors) {
            CAPTURE(tensor_name);
            REQUIRE(saved.tensors.contains(tensor_name));
            CHECK(testing::same_bytes(saved.tensors[tensor_name], t));
        }
        const nlohmann::json config = nlohmann::json::parse(std::ifstream(out / "config.json"));
        CHECK(config.at("architectures") == nlohmann::json::array({"Qwen2ForCausalLM"}));
        CHECK(config.at("model_type") == "qwen2");
        CHECK_FALSE(config.contains("attention_bias"));
        models::PretrainedModel again = models::from_pretrained(out.string());
        CHECK(again.architecture == "Qwen2ForCausalLM");
        CHECK(again.llama()->config() == m.llama()->config());
        // The generic handle: as_pretrained finds the family's architecture.
        CHECK(models::as_pretrained(m.causal_lm()).architecture == "Qwen2ForCausalLM");
    }
}

TEST_CASE("from_pretrained: Qwen2 configs it cannot honour are named") {
    fs::path gelu = edited_copy("qwen2", [](nlohmann::json& c) { c["hidden_act"] = "gelu"; });
    CHECK_THROWS_WITH_AS(models::from_pretrained(gelu.string()), doctest::Contains("hidden_act"), ValueError);
    fs::path o_bias = edited_copy("qwen2", [](nlohmann::json& c) { c["attention_bias"] = true; });
    CHECK_THROWS_WITH_AS(models::from_pretrained(o_bias.string()), doctest::Contains("q/k/v_proj only"), ValueError);
    fs::path wider = edited_copy("qwen2", [](nlohmann::json& c) { c["intermediate_size"] = 48; });
    CHECK_THROWS_WITH_AS(models::from_pretrained(wider.string()), doctest::Contains("intermediate_size 48"), ShapeError);
    // A sliding window in use caps the context, as for a Mistral.
    fs::path window = edited_copy("qwen2", [](nlohmann::json& c) {
        c["use_sliding_window"] = true;
        c["sliding_window"] = 16;
    });
    models::PretrainedModel w = models::from_pretrained(window.string());
    CHECK(w.causal_lm()->max_positions() == 16);
}

// pretrained_llama_test.cpp: Hugging Face Llama and Mistral folders (models/pretrained.hpp,
// models/llama_pretrained.cpp) against transformers: the tiny folders and reference values
// tools/fixtures/hf_llama.py wrote with transformers 5.x (tests/fixtures/hf_llama/,
// hf_llama_reference.json). Logits, loss and gradients of an untied GQA Llama with Llama 3 RoPE scaling, a tied
// bf16 one, a sharded save and a Mistral (its context capped at the sliding window); the byte-exact
// round trip save_pretrained(from_pretrained(x)); and the errors of a config that contradicts the
// weights or asks for what the Llama does not implement.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "ampgrad/ampgrad.h"
#include "support/check_close.hpp"
#include "support/fixtures.hpp"

using namespace ampgrad;
using ampgrad::testing::Tolerance;
namespace fs = std::filesystem;

namespace {

std::string llama_fixture(const std::string& name) {
    return (fs::path(std::getenv("AMPGRAD_FIXTURES")) / "hf_llama" / name).string();
}

fs::path scratch_dir() { return testing::scratch_dir("ampgrad_hf_llama"); }

using testing::same_bytes;

// A copy of fixture folder `name` whose config.json has `edit` applied.
fs::path edited_copy(const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
    const fs::path dir = scratch_dir();
    fs::copy(llama_fixture(name), dir, fs::copy_options::recursive);
    nlohmann::json config = nlohmann::json::parse(std::ifstream(dir / "config.json"));
    edit(config);
    std::ofstream(dir / "config.json") << config.dump(2);
    return dir;
}

// Logits, loss and every parameter's gradient against transformers' (f32 models only: the
// gradients are of the f32 loss).
void check_logits_and_loss(const models::PretrainedModel& m, const std::string& name) {
    const testing::Fixture ref = testing::load_fixture("hf_llama_reference");
    std::shared_ptr<models::Llama> llama = m.llama();
    llama->eval();
    const Tolerance f32{1e-5, 1e-5};
    CHECK_CLOSE(llama->forward(ref.at("idx")), ref.at(name + ".logits"), f32);          // (B,T,V)
    Tensor loss = llama->forward(ref.at("idx"), ref.at("targets"));
    CHECK_CLOSE(loss, ref.at(name + ".loss"), f32);
    if (llama->embed_tokens->weight.dtype() != kFloat32) return;
    llama->zero_grad();
    loss.backward();
    const Tolerance grad{1e-5, 1e-4};
    size_t checked = 0;
    for (const auto& [param, p] : llama->named_parameters()) {
        CAPTURE(param);
        CHECK_CLOSE(p.grad(), ref.at(name + ".grad." + param), grad);                   // transformers' names
        ++checked;
    }
    CHECK(checked == (llama->config().tie_word_embeddings ? 20u : 21u));               // L=2: 9 per layer + norm, embed (+ head)
}

}  // namespace

TEST_CASE("from_pretrained: LlamaForCausalLM (GQA, Llama 3 RoPE scaling, untied head) matches transformers") {
    models::PretrainedModel m = models::from_pretrained(llama_fixture("llama"));
    CHECK(m.architecture == "LlamaForCausalLM");
    CHECK(m.model_type == "llama");
    const models::LlamaConfig& c = m.llama()->config();
    CHECK(c.num_key_value_heads == 2);
    CHECK(c.num_attention_heads == 4);
    CHECK_FALSE(c.tie_word_embeddings);
    REQUIRE(c.rope_scaling.has_value());
    CHECK(c.rope_scaling->factor == 8.0);
    check_logits_and_loss(m, "llama");
    CHECK_THROWS_AS(m.gpt(), ValueError);
}

TEST_CASE("from_pretrained: a tied bf16 Llama (no lm_head in the file), as f32 and as bf16") {
    models::PretrainedModel m = models::from_pretrained(llama_fixture("tied"));
    CHECK(m.llama()->config().tie_word_embeddings);
    CHECK(m.llama()->lm_head == nullptr);
    check_logits_and_loss(m, "tied");
    models::PretrainedModel b = models::from_pretrained(llama_fixture("tied"), {.dtype = kBFloat16});
    CHECK(b.llama()->embed_tokens->weight.dtype() == kBFloat16);
    CHECK(same_bytes(b.llama()->embed_tokens->weight, m.llama()->embed_tokens->weight.to(kBFloat16)));   // exact
}

TEST_CASE("from_pretrained: a sharded Llama loads the weights of the single file") {
    models::PretrainedModel one = models::from_pretrained(llama_fixture("llama"));
    models::PretrainedModel sharded = models::from_pretrained(llama_fixture("sharded"));
    nn::NamedTensors expected = one.llama()->state_dict();
    for (const auto& [name, t] : sharded.llama()->state_dict()) {
        CAPTURE(name);
        CHECK(same_bytes(t, expected[name]));
    }
}

TEST_CASE("from_pretrained: MistralForCausalLM, its context capped at the sliding window") {
    models::PretrainedModel m = models::from_pretrained(llama_fixture("mistral"));
    CHECK(m.architecture == "MistralForCausalLM");
    CHECK(m.model_type == "mistral");
    CHECK(m.llama()->config().max_position_embeddings == 16);                          // sliding_window, not 64
    check_logits_and_loss(m, "mistral");
    CHECK_THROWS_AS(m.llama()->forward(zeros({1, 17}, TensorOptions(kInt64))), ShapeError);   // past the window
    fs::path bad = edited_copy("mistral", [](nlohmann::json& c) { c["sliding_window"] = 0; });
    CHECK_THROWS_WITH_AS(models::from_pretrained(bad.string()), doctest::Contains("sliding_window"), ValueError);
}

TEST_CASE("save_pretrained: a Llama round-trips byte for byte and its config reloads the same model") {
    for (const char* name : {"llama", "tied", "mistral"}) {
        CAPTURE(name);
        models::PretrainedModel m = models::from_pretrained(llama_fixture(name), {.dtype = std::string(name) == "tied"
                                                                                     ? kBFloat16 : kFloat32});
        const fs::path out = scratch_dir();
        models::save_pretrained(m, out.string());
        io::SafetensorsFile saved = io::load_safetensors((out / "model.safetensors").string());
        io::SafetensorsFile original = io::load_safetensors(llama_fixture(name) + "/model.safetensors");
        CHECK(saved.tensors.size() == original.tensors.size());                         // tied: no lm_head either
        for (const auto& [tensor_name, t] : original.tensors) {
            CAPTURE(tensor_name);
            REQUIRE(saved.tensors.contains(tensor_name));
            CHECK(same_bytes(saved.tensors[tensor_name], t));
        }
        models::PretrainedModel again = models::from_pretrained(out.string());
        CHECK(again.architecture == "LlamaForCausalLM");                                // a Mistral saves as a Llama
        CHECK(again.llama()->config().max_position_embeddings == m.llama()->config().max_position_embeddings);
        CHECK(again.llama()->config().rope_scaling == m.llama()->config().rope_scaling);
    }
}

TEST_CASE("from_pretrained: Llama configs that contradict the weights or ask for the unimplemented") {
    fs::path wider = edited_copy("llama", [](nlohmann::json& c) { c["intermediate_size"] = 48; });
    CHECK_THROWS_WITH_AS(models::from_pretrained(wider.string()), doctest::Contains("intermediate_size 48"), ShapeError);
    fs::path deeper = edited_copy("llama", [](nlohmann::json& c) { c["num_hidden_layers"] = 3; });
    CHECK_THROWS_WITH_AS(models::from_pretrained(deeper.string()), doctest::Contains("model.layers.2"), ValueError);
    fs::path gelu = edited_copy("llama", [](nlohmann::json& c) { c["hidden_act"] = "gelu"; });
    CHECK_THROWS_WITH_AS(models::from_pretrained(gelu.string()), doctest::Contains("hidden_act"), ValueError);
    fs::path kv = edited_copy("llama", [](nlohmann::json& c) { c["num_key_value_heads"] = 3; });
    CHECK_THROWS_WITH_AS(models::from_pretrained(kv.string()), doctest::Contains("num_key_value_heads"), ValueError);
}

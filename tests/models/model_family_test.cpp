// model_family_test.cpp: the model table (models/model_family.hpp) and the CausalLM interface every
// family implements (models/causal_lm.hpp): each family's presets build, report their sizes as they
// are, and rebuild from their own config JSON; the generation API is one (the member generate is
// models::generate); lookups name what they know.
#include <doctest/doctest.h>

#include "ampgrad/ampgrad.h"

using namespace ampgrad;

namespace {

int64_t counted_parameters(nn::Module& m) {
    int64_t n = 0;
    for (const Tensor& p : m.parameters()) n += p.numel();
    return n;
}

}  // namespace

TEST_CASE("model table: every family's presets build through the interface alone") {
    CHECK(models::model_family_names() == std::vector<std::string>{"gpt", "llama", "qwen2"});
    for (const models::ModelFamily& f : models::model_families()) {
        CAPTURE(f.name);
        REQUIRE_FALSE(f.presets.empty());
        models::ModelSpec spec;
        spec.preset = f.presets.front();
        spec.vocab_size = 65;
        manual_seed(1);
        std::shared_ptr<models::CausalLM> lm = f.build(spec);
        CHECK(lm->family() == f.name);
        CHECK(models::family_of_preset(spec.preset) == &f);
        const int64_t T = f.context_length(spec);
        CHECK(T == lm->max_positions());
        nn::Module& module = *models::as_module(lm);
        // The GPT's head GEMM pads V to a multiple of 64: those rows are parameters too.
        CHECK(lm->num_parameters() == counted_parameters(module));
        CHECK(lm->vocab_size() == 65);
        CHECK(lm->flops_per_token(T) > 6.0 * static_cast<double>(lm->num_parameters()) / 2);
        CHECK(lm->shape_text(T).find(fmt::format("T={}", T)) != std::string::npos);
        CHECK(lm->config_json().at("num_parameters") == lm->num_parameters());
        Tensor idx = tensor(std::vector<int64_t>{1, 2, 3, 4, 5, 6}, {2, 3});
        CHECK(lm->forward(idx).sizes() == Shape{2, 3, 65});
        Tensor loss = lm->forward(idx, idx);
        CHECK(loss.dim() == 0);
        CHECK(loss.item<double>() > 0.5 * std::log(65.0));   // near ln V at initialisation
        // Overrides reach the model: one more layer, a longer context.
        spec.n_layer = 1;
        spec.block_size = 32;
        std::shared_ptr<models::CausalLM> small = f.build(spec);
        CHECK(small->num_parameters() < lm->num_parameters());
        CHECK(f.context_length(spec) == 32);
    }
}

TEST_CASE("model table: lookups name the known families and presets") {
    CHECK_THROWS_WITH_AS(models::model_family("mamba"), doctest::Contains("gpt, llama, qwen2"), ValueError);
    CHECK(models::family_of_preset("qwen2-0.5b")->name == "qwen2");
    CHECK(models::family_of_preset("nope") == nullptr);
    models::ModelSpec spec;
    spec.preset = "qwen2-0.5b";
    spec.vocab_size = 151936;
    // Qwen2-0.5B has 494M parameters (tied head), as its model card says.
    const models::LlamaConfig c = models::qwen2_preset("qwen2-0.5b");
    CHECK(c.num_parameters() == 494032768);
    CHECK_THROWS_WITH_AS(models::qwen2_preset("qwen2-7b"), doctest::Contains("qwen2-nano, qwen2-0.5b"), ValueError);
}

TEST_CASE("Qwen2: its config JSON round-trips and refuses a config without q/k/v biases") {
    const models::LlamaConfig c = models::qwen2_preset("qwen2-nano");
    CHECK(models::qwen2_config_from_hf_json(models::qwen2_to_hf_json(c)) == c);
    models::LlamaConfig plain = c;
    plain.qkv_bias = false;
    CHECK_THROWS_WITH_AS(models::Qwen2{plain}, doctest::Contains("qkv_bias"), ValueError);
}

TEST_CASE("one generation API: a model's generate is models::generate's cached loop") {
    for (const char* family : {"gpt", "llama", "qwen2"}) {
        CAPTURE(family);
        const models::ModelFamily& f = models::model_family(family);
        models::ModelSpec spec{.preset = f.presets.front(), .vocab_size = 30};
        manual_seed(3);
        std::shared_ptr<models::CausalLM> lm = f.build(spec);
        Tensor prompt = tensor(std::vector<int64_t>{3, 1, 4, 1, 5}, {1, 5});
        models::GenerationConfig g;
        g.max_new_tokens = 12;
        Tensor cached = models::generate(*lm, prompt, Tensor(), g);   // greedy
        Tensor member = std::string(family) == "gpt"
                            ? std::dynamic_pointer_cast<models::GPT>(lm)->generate(prompt, 12, 0.0)
                            : std::dynamic_pointer_cast<models::Llama>(lm)->generate(prompt, 12, 0.0);
        CHECK(equal(cached, member));
        CHECK(models::as_module(lm)->is_training());   // the member restores the mode
    }
}

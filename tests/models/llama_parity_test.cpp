// llama_parity_test.cpp: models::Llama against transformers' LlamaForCausalLM (tools/fixtures/llama.py).
// Each fixture holds a tiny random transformers model's parameters (by transformers' names), one
// batch with its position ids, and transformers' logits, loss and every parameter's gradient. The
// cases cover grouped-query attention (4 query heads, 2 KV heads), head_dim != hidden / heads with
// Llama 3 rope_scaling, a tied head and positions from 5, and q/k/v/o and MLP biases with one KV
// head. In f32, logits, loss and gradients agree to 1e-5 (absolute and relative): the GEMMs and
// reductions sum in another order, so bit equality is not expected.
#include <doctest/doctest.h>

#include <cstdlib>

#include "io/safetensors.hpp"
#include "tests/support/check_close.hpp"

using namespace ampgrad;

namespace {

struct ParityCase {
    models::LlamaConfig config;
    io::SafetensorsFile file;
};

ParityCase load_case(const std::string& name) {
    ParityCase c;
    c.file = io::load_safetensors(std::string(std::getenv("AMPGRAD_FIXTURES")) + "/llama_" + name + ".safetensors");
    c.config = models::llama_config_from_hf_json(nlohmann::json::parse(c.file.metadata.at("config")));
    return c;
}

// The fixture's parameters, by transformers' names (the gradients and the batch left out).
nn::StateDict parameters_of(const io::SafetensorsFile& f, const nn::Module& model) {
    nn::StateDict state;
    for (const auto& [name, t] : model.state_dict())
        if (const Tensor* p = f.tensors.find(name)) state.insert(name, *p);
    return state;
}

const testing::Tolerance kF32Parity{1e-5, 1e-5};

}  // namespace

TEST_CASE("transformers parity: logits, loss and every parameter gradient in f32") {
    for (const char* name : {"gqa", "llama3_tied", "bias_mqa"}) {
        CAPTURE(name);
        ParityCase c = load_case(name);
        models::Llama model(c.config);
        model.load_state_dict(parameters_of(c.file, model));   // strict: every parameter is in the file
        const nn::NamedTensors& t = c.file.tensors;
        Tensor logits = model.forward(t.at("input_ids"), Tensor(), t.at("position_ids"));
        CHECK_CLOSE(logits.detach(), t.at("logits"), kF32Parity);
        Tensor loss = model.forward(t.at("input_ids"), t.at("targets"), t.at("position_ids"));
        CHECK_CLOSE(loss.detach(), t.at("loss"), kF32Parity);
        loss.backward();
        int checked = 0;
        for (const auto& [pname, p] : model.named_parameters()) {
            CAPTURE(pname);
            REQUIRE(p.grad().defined());
            CHECK_CLOSE(p.grad(), t.at("grad." + pname), kF32Parity);
            ++checked;
        }
        CHECK(checked == static_cast<int>(model.parameters().size()));
        const bool head_in_file = t.find("grad.lm_head.weight") != nullptr;
        CHECK(head_in_file == !c.config.tie_word_embeddings);
    }
}

TEST_CASE("transformers parity: the fixtures exercise what they claim") {
    ParityCase gqa = load_case("gqa"), tied = load_case("llama3_tied"), bias = load_case("bias_mqa");
    CHECK(gqa.config.num_attention_heads == 4);
    CHECK(gqa.config.num_key_value_heads == 2);
    CHECK(tied.config.head_size() != tied.config.hidden_size / tied.config.num_attention_heads);
    CHECK(tied.config.rope_scaling.has_value());
    CHECK(tied.config.tie_word_embeddings);
    CHECK((bias.config.attention_bias && bias.config.mlp_bias && bias.config.num_key_value_heads == 1));
    // The fixture sees which KV head each query head reads (a wrong GQA mapping must not pass):
    // swapping the two KV heads' rows of k_proj changes the logits far beyond the tolerance.
    models::Llama model(gqa.config);
    nn::StateDict state = parameters_of(gqa.file, model);
    model.load_state_dict(state);
    Tensor& k = model.layer(0)->self_attn->k_proj->weight;   // (NKV*HS, H)
    const int64_t hs = gqa.config.head_size();
    {
        NoGradGuard no_grad;
        Tensor swapped = cat({k.narrow(0, hs, hs), k.narrow(0, 0, hs)}, 0);
        k.copy_(swapped);
    }
    Tensor logits = model.forward(gqa.file.tensors.at("input_ids"), Tensor(), gqa.file.tensors.at("position_ids"));
    CHECK_FALSE(testing::compare_tensors(logits.detach(), gqa.file.tensors.at("logits"), kF32Parity).empty());
}

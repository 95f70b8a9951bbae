// llama_test.cpp: models::Llama: presets and parameter counts, transformers' parameter names and
// the tied head, config checks (ValueError naming the field), bf16/f16 autocast within dtype
// tolerances of f32, checkpointed layers giving the same gradients, that a small model learns,
// sampling, and bad input. Parity with transformers is in llama_parity_test.cpp, config.json in
// llama_json_test.cpp.
#include <doctest/doctest.h>

#include <cmath>

#include "tests/support/check_close.hpp"

using namespace ampgrad;
using models::Llama;
using models::LlamaConfig;

namespace {

LlamaConfig toy_config() {
    LlamaConfig c;
    c.vocab_size = 13, c.hidden_size = 32, c.intermediate_size = 64, c.num_hidden_layers = 2;
    c.num_attention_heads = 4, c.num_key_value_heads = 2, c.max_position_embeddings = 16;
    return c;
}

// (B,T) windows of a periodic sequence: token t+1 is determined by token t.
std::pair<Tensor, Tensor> periodic_batch(int64_t B, int64_t T, int64_t V, int64_t start) {
    std::vector<int64_t> x(B * T), y(B * T);
    for (int64_t b = 0; b < B; ++b)
        for (int64_t t = 0; t < T; ++t) {
            const int64_t i = start + b * 3 + t;
            x[b * T + t] = (i * 5) % V;
            y[b * T + t] = ((i + 1) * 5) % V;
        }
    return {tensor(x, {B, T}), tensor(y, {B, T})};
}

int64_t counted(const nn::Module& m) {
    int64_t n = 0;
    for (const Tensor& p : m.parameters()) n += p.numel();
    return n;
}

}  // namespace

TEST_CASE("presets: sizes, GQA, and num_parameters() equal to the modules' count") {
    for (const std::string& name : LlamaConfig::preset_names()) {
        CAPTURE(name);
        LlamaConfig c = LlamaConfig::preset(name);
        c.validate();
        CHECK(c.num_attention_heads % c.num_key_value_heads == 0);
        CHECK(c.num_key_value_heads < c.num_attention_heads);   // every preset uses grouped-query attention
        if (name != "llama-124m") CHECK(counted(Llama(c)) == c.num_parameters());
    }
    LlamaConfig big = LlamaConfig::preset("llama-124m");
    CHECK(big.num_parameters() == 121191936);   // 38597376 embedding (tied) + 12 x 6882816 per layer + 768
    CHECK(big.num_parameters() > 110'000'000);
    CHECK(big.num_parameters() < 130'000'000);
    LlamaConfig odd = toy_config();
    odd.head_dim = 6, odd.attention_bias = true, odd.mlp_bias = true, odd.tie_word_embeddings = false;
    CHECK(counted(Llama(odd)) == odd.num_parameters());
    CHECK(odd.flops_per_token() > 6.0 * static_cast<double>(odd.num_parameters() - 13 * 32));
    CHECK_THROWS_WITH_AS(LlamaConfig::preset("llama-huge"), doctest::Contains("unknown preset \"llama-huge\""),
                         ValueError);
}

TEST_CASE("transformers' parameter names; a tied head is absent from state_dict and shares the table") {
    LlamaConfig c = toy_config();
    c.attention_bias = true;
    Llama untied(c);
    nn::StateDict s = untied.state_dict();
    for (const char* key : {"model.embed_tokens.weight", "model.layers.1.self_attn.q_proj.weight",
                            "model.layers.1.self_attn.q_proj.bias", "model.layers.0.self_attn.k_proj.weight",
                            "model.layers.0.self_attn.v_proj.weight", "model.layers.0.self_attn.o_proj.weight",
                            "model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.up_proj.weight",
                            "model.layers.0.mlp.down_proj.weight", "model.layers.0.input_layernorm.weight",
                            "model.layers.0.post_attention_layernorm.weight", "model.norm.weight", "lm_head.weight"}) {
        CAPTURE(key);
        CHECK(s.contains(key));
    }
    CHECK(s.size() == 2 + 2 * (4 * 2 + 3 + 2) + 1);   // embed, head, norm; per layer 4 proj (w, b), 3 mlp, 2 norms
    CHECK(s.at("model.layers.0.self_attn.k_proj.weight").sizes() == Shape{2 * 8, 32});
    CHECK(!s.contains("model.layers.0.mlp.gate_proj.bias"));
    c.tie_word_embeddings = true;
    Llama tied(c);
    CHECK(!tied.state_dict().contains("lm_head.weight"));
    CHECK(tied.lm_head == nullptr);
    auto [x, y] = periodic_batch(2, 8, c.vocab_size, 0);
    tied.forward(x, y).backward();
    // The head's gradient lands on the embedding: rows of tokens never looked up still get one.
    Tensor g = tied.embed_tokens->weight.grad();
    CHECK(g.abs().sum({1}).min().item<float>() > 0.0f);
}

TEST_CASE("bad configs: ValueError naming the field") {
    auto fails = [](auto change, const char* what) {
        LlamaConfig c = toy_config();
        change(c);
        CHECK_THROWS_WITH_AS(c.validate(), doctest::Contains(what), ValueError);
        CHECK_THROWS_AS(Llama{c}, ValueError);
    };
    fails([](LlamaConfig& c) { c.vocab_size = 0; }, "vocab_size must be positive");
    fails([](LlamaConfig& c) { c.num_key_value_heads = 3; }, "must be a multiple of num_key_value_heads (3)");
    fails([](LlamaConfig& c) { c.hidden_size = 30; }, "hidden_size (30) must be a multiple of num_attention_heads");
    fails([](LlamaConfig& c) { c.head_dim = 7; }, "head_dim must be even");
    fails([](LlamaConfig& c) { c.rms_norm_eps = 0.0; }, "rms_norm_eps must be positive");
    fails([](LlamaConfig& c) { c.rope_theta = -1.0; }, "rope_theta must be positive");
    fails([](LlamaConfig& c) { c.rope_scaling = nn::Llama3RopeScaling{0.5, 1.0, 4.0, 8192}; }, "rope_scaling.factor");
    fails([](LlamaConfig& c) { c.rope_scaling = nn::Llama3RopeScaling{8.0, 4.0, 1.0, 8192}; }, "low_freq_factor");
    fails([](LlamaConfig& c) { c.max_position_embeddings = -2; }, "max_position_embeddings must be positive");
}

TEST_CASE("bf16 and f16 autocast: loss and gradients within dtype tolerances of f32") {
    LlamaConfig c = toy_config();
    manual_seed(3);
    Llama model(c);
    auto [x, y] = periodic_batch(2, 16, c.vocab_size, 1);
    Tensor ref = model.forward(x, y);
    ref.backward();
    std::vector<Tensor> ref_grads;
    for (const Tensor& p : model.parameters()) ref_grads.push_back(p.grad().clone());
    for (DType dt : {kBFloat16, kFloat16}) {
        CAPTURE(dtype_name(dt));
        model.zero_grad();
        Tensor loss;
        {
            amp::AutocastGuard autocast(kCPU, dt);
            loss = model.forward(x, y);
        }
        CHECK(loss.dtype() == kFloat32);
        // tol_for's budget of four roundings, relative: bf16 3.1%, f16 0.39% (measured on this model:
        // gradients within 1.7% and 0.13% of their largest entry, the loss within 1e-5).
        const testing::Tolerance tol = testing::tol_for(dt);
        CHECK(std::abs(loss.item<double>() - ref.item<double>()) <= tol.atol + tol.rtol * std::abs(ref.item<double>()));
        loss.backward();
        std::vector<Tensor> params = model.parameters();
        double worst = 0.0;
        for (size_t i = 0; i < params.size(); ++i) {
            CAPTURE(i);
            REQUIRE(params[i].grad().dtype() == kFloat32);
            // Each gradient's worst error relative to its largest entry, within the same budget.
            const double scale = ref_grads[i].abs().max().item<double>();
            const double err = (params[i].grad() - ref_grads[i]).abs().max().item<double>();
            worst = std::max(worst, err / scale);
            CHECK(err <= tol.rtol * scale + tol.atol);
        }
        MESSAGE(dtype_name(dt) << ": loss " << loss.item<double>() << " vs f32 " << ref.item<double>()
                               << "; worst gradient error " << worst << " of its largest entry (budget " << tol.rtol << ")");
    }
}

TEST_CASE("checkpoint_blocks: the same loss and bit-identical gradients") {
    LlamaConfig plain = toy_config();
    LlamaConfig ckpt = plain;
    ckpt.checkpoint_blocks = true;
    manual_seed(4);
    Llama a(plain);
    manual_seed(4);
    Llama b(ckpt);
    auto [x, y] = periodic_batch(2, 16, plain.vocab_size, 5);
    Tensor la = a.forward(x, y);
    la.backward();
    Tensor lb = b.forward(x, y);
    lb.backward();
    CHECK(la.item<float>() == lb.item<float>());
    nn::NamedTensors pa = a.named_parameters(), pb = b.named_parameters();
    for (const auto& [name, p] : pa) {
        CAPTURE(name);
        REQUIRE(p.grad().defined());
        CHECK(equal(p.grad(), pb.at(name).grad()));
    }
}

TEST_CASE("a small Llama learns a periodic sequence, then generates it greedily") {
    LlamaConfig c = toy_config();
    manual_seed(5);
    auto model = std::make_shared<Llama>(c);
    optim::AdamW opt(model->parameters(), optim::AdamWOptions(1e-2));
    double first = 0.0, last = 0.0;
    for (int step = 0; step < 60; ++step) {
        auto [x, y] = periodic_batch(4, 16, c.vocab_size, step);
        Tensor loss = model->forward(x, y);
        opt.zero_grad();
        loss.backward();
        opt.step();
        (step == 0 ? first : last) = loss.item<double>();
    }
    MESSAGE("loss " << first << " -> " << last);
    CHECK(first > 0.8 * std::log(13.0));
    CHECK(last < 0.1);
    Tensor out = model->generate(tensor(std::vector<int64_t>{0, 5}, {1, 2}), 20, 0.0);   // greedy
    REQUIRE(out.sizes() == Shape{1, 22});
    std::vector<int64_t> ids = out.to_vector<int64_t>();
    for (size_t i = 1; i < ids.size(); ++i) CHECK(ids[i] == (ids[i - 1] + 5) % 13);   // past the context too
    CHECK(model->is_training());
}

TEST_CASE("position_ids: shifting every position leaves the logits almost unchanged (RoPE is relative)") {
    LlamaConfig c = toy_config();
    manual_seed(6);
    Llama model(c);
    NoGradGuard no_grad;
    auto [x, y] = periodic_batch(2, 8, c.vocab_size, 0);
    Tensor base = model.forward(x);
    Tensor shifted = model.forward(x, Tensor(), arange(8, TensorOptions(kInt64)) + 5);
    CHECK_CLOSE(shifted, base, (testing::Tolerance{1e-4, 1e-4}));
    Tensor reversed = model.forward(x, Tensor(), tensor(std::vector<int64_t>{7, 6, 5, 4, 3, 2, 1, 0}, {8}));
    CHECK_FALSE(testing::compare_tensors(reversed, base, testing::Tolerance{1e-4, 1e-4}).empty());
}

TEST_CASE("bad input: ShapeError naming the problem") {
    Llama model(toy_config());
    Tensor x = zeros({2, 4}, TensorOptions(kInt64));
    CHECK_THROWS_WITH_AS(model.forward(zeros({2, 4})), doctest::Contains("integer token ids"), ShapeError);
    CHECK_THROWS_WITH_AS(model.forward(zeros({1, 17}, TensorOptions(kInt64))),
                         doctest::Contains("longer than the context (max_position_embeddings 16)"), ShapeError);
    CHECK_THROWS_WITH_AS(model.forward(x, zeros({2, 3}, TensorOptions(kInt64))), doctest::Contains("targets"),
                         ShapeError);
    for (const Tensor& bad : {zeros({3}, TensorOptions(kInt64)), zeros({3, 4}, TensorOptions(kInt64)),
                              zeros({}, TensorOptions(kInt64)), zeros({2, 4})}) {
        CAPTURE(bad.describe());
        CHECK_THROWS_WITH_AS(model.forward(x, Tensor(), bad), doctest::Contains("position_ids must be (B,T)"),
                             ShapeError);
    }
    CHECK_THROWS_WITH_AS(model.generate(zeros({1, 0}, TensorOptions(kInt64)), 3), doctest::Contains("T0 >= 1"),
                         ShapeError);
}

// gpt_test.cpp: models::GPT: presets and parameter counts, nanoGPT's parameter names and the
// tied head, GPT-2 initialisation statistics, shapes, that a small model learns (the loss falls
// far below ln V), attention dropout inside SDPA, that checkpointed blocks give the same gradients,
// sampling, and bad input.
#include <doctest/doctest.h>

#include <cmath>

#include "tests/support/check_close.hpp"

using namespace ampgrad;
using models::GPT;
using models::GPTConfig;

namespace {

GPTConfig toy_config() {
    GPTConfig c;
    c.vocab_size = 11, c.block_size = 16, c.n_layer = 2, c.n_head = 2, c.n_embd = 32;
    return c;
}

// (B,T+1) windows of a periodic sequence: token t+1 is determined by token t.
std::pair<Tensor, Tensor> periodic_batch(int64_t B, int64_t T, int64_t V, int64_t start) {
    std::vector<int64_t> x(B * T), y(B * T);
    for (int64_t b = 0; b < B; ++b)
        for (int64_t t = 0; t < T; ++t) {
            const int64_t i = start + b * 3 + t;
            x[b * T + t] = (i * 7) % V;
            y[b * T + t] = ((i + 1) * 7) % V;
        }
    return {tensor(x, {B, T}), tensor(y, {B, T})};
}

}  // namespace

TEST_CASE("presets: the sizes of the issue, padded vocabularies, parameter counts") {
    GPTConfig tiny = GPTConfig::preset("tiny");
    CHECK(tiny.vocab_size == 256);
    CHECK(tiny.block_size == 64);
    CHECK(tiny.n_layer == 4);
    CHECK(tiny.n_head == 4);
    CHECK(tiny.n_embd == 128);
    GPTConfig small = GPTConfig::preset("small");
    CHECK((small.block_size == 128 && small.n_layer == 6 && small.n_head == 8 && small.n_embd == 256));
    GPTConfig gpt2 = GPTConfig::preset("gpt2");
    CHECK(gpt2.padded_vocab_size() == 50304);
    CHECK(gpt2.num_parameters() == 124475904);   // llm.c's count for GPT-2 124M with V padded to 50304
    CHECK(GPTConfig::preset("nano").padded_vocab_size() % 64 == 0);
    CHECK_THROWS_WITH_AS(GPTConfig::preset("huge"), doctest::Contains("unknown preset \"huge\""), ValueError);
    GPTConfig bad = tiny;
    bad.n_head = 3;
    CHECK_THROWS_WITH_AS(GPT{bad}, doctest::Contains("multiple of n_head"), ValueError);
}

TEST_CASE("the model: nanoGPT's parameter names, a tied head, the counted parameters") {
    manual_seed(0);
    GPTConfig cfg = toy_config();
    GPT model(cfg);
    nn::NamedTensors named = model.named_parameters();
    CHECK(named.keys().front() == "transformer.wte.weight");
    CHECK(named.contains("transformer.h.1.attn.c_attn.weight"));
    CHECK(named.contains("transformer.h.0.mlp.c_proj.bias"));
    CHECK(named.contains("transformer.ln_f.weight"));
    CHECK(!named.contains("lm_head.weight"));                       // listed once, under its first name
    CHECK(model.state_dict().contains("lm_head.weight"));           // but saved under both, as PyTorch
    CHECK(model.lm_head->parameters()[0].is_same(model.wte->weight));
    CHECK(model.wte->weight.sizes() == Shape{64, 32});              // V = 11 padded to 64
    int64_t total = 0;
    for (const Tensor& p : model.parameters()) total += p.numel();
    CHECK(total == cfg.num_parameters());
}

TEST_CASE("GPT-2 initialisation: N(0, 0.02), residual projections N(0, 0.02/sqrt(2L)), zero biases") {
    manual_seed(1);
    GPTConfig cfg = toy_config();
    cfg.n_layer = 8, cfg.n_embd = 64;
    GPT model(cfg);
    auto stddev = [](const Tensor& t) { return std::sqrt(var(t.flatten(), 0, false).item<double>()); };
    CHECK(stddev(model.wte->weight) == doctest::Approx(0.02).epsilon(0.03));
    CHECK(stddev(model.block(0)->mlp->c_fc->weight) == doctest::Approx(0.02).epsilon(0.03));
    CHECK(stddev(model.block(3)->attn->c_proj->weight) == doctest::Approx(0.02 / 4.0).epsilon(0.05));
    CHECK(stddev(model.block(7)->mlp->c_proj->weight) == doctest::Approx(0.02 / 4.0).epsilon(0.03));
    CHECK(equal(model.block(0)->attn->c_attn->bias.detach(), zeros({192})));
    CHECK(equal(model.ln_f->weight.detach(), ones({64})));
}

TEST_CASE("forward: logits (B,T,V) over the real vocabulary; loss near ln V at initialisation") {
    manual_seed(2);
    GPTConfig cfg = toy_config();
    GPT model(cfg);
    auto [x, y] = periodic_batch(3, 16, cfg.vocab_size, 0);
    Tensor logits = model.forward(x);
    CHECK(logits.sizes() == Shape{3, 16, 11});
    double loss = model.forward(x, y).item<double>();
    CHECK(loss == doctest::Approx(std::log(11.0)).epsilon(0.05));
    Tensor short_x = x.narrow(1, 0, 5);
    CHECK(model.forward(short_x).sizes() == Shape{3, 5, 11});
}

TEST_CASE("forward(idx, targets): nanoGPT's -1 and Hugging Face's -100 targets are ignored alike") {
    manual_seed(3);
    GPTConfig cfg = toy_config();
    GPT model(cfg);
    auto [x, y] = periodic_batch(2, 8, cfg.vocab_size, 0);
    Tensor keep = (arange(8) < 5).unsqueeze(0).expand({2, 8});                    // (2,8): the first 5 count
    Tensor y_nanogpt = where(keep, y, full({2, 8}, -1)), y_hf = where(keep, y, full({2, 8}, -100));
    const double expected = model.forward(x, y_hf).item<double>();
    CHECK(model.forward(x, y_nanogpt).item<double>() == expected);
    Tensor logits = model.forward(x).narrow(1, 0, 5).reshape({10, cfg.vocab_size});
    CHECK(expected == doctest::Approx(F::cross_entropy(logits, y.narrow(1, 0, 5).reshape({10})).item<double>()));
}

TEST_CASE("training: AdamW drives the loss of a deterministic sequence far below ln V") {
    manual_seed(3);
    GPTConfig cfg = toy_config();
    GPT model(cfg);
    optim::AdamW opt(model.parameters(), optim::AdamWOptions(3e-3).weight_decay(0.0));
    double first = 0, last = 0;
    for (int step = 0; step < 60; ++step) {
        auto [x, y] = periodic_batch(4, 16, cfg.vocab_size, step);
        Tensor loss = model.forward(x, y);
        opt.zero_grad();
        loss.backward();
        opt.step();
        (step == 0 ? first : last) = loss.item<double>();
    }
    MESSAGE("loss " << first << " -> " << last);
    CHECK(first > 2.0);
    CHECK(last < 0.2);
}

TEST_CASE("checkpoint_blocks: the same loss and bit-identical gradients, dropout included") {
    GPTConfig plain = toy_config();
    plain.dropout = 0.1;
    GPTConfig ckpt = plain;
    ckpt.checkpoint_blocks = true;
    manual_seed(4);
    GPT a(plain);
    manual_seed(4);
    GPT b(ckpt);
    auto [x, y] = periodic_batch(2, 16, plain.vocab_size, 5);
    manual_seed(99);
    Tensor la = a.forward(x, y);
    la.backward();
    manual_seed(99);
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

TEST_CASE("attention dropout: SDPA's dropout_p on the attention probabilities, in training only") {
    GPTConfig cfg = toy_config();
    cfg.dropout = 0.5;
    manual_seed(7);
    models::CausalSelfAttention attn(cfg);
    attn.resid_dropout->p = 0.0;                            // only the attention's own dropout is left
    Tensor x = randn({2, 8, 32});                           // (B,T,C)
    // The same computation by hand, with dropout_p given to SDPA.
    auto by_hand = [&](double p) {
        tensor_list qkv = attn.c_attn->forward(x).split(32, 2);
        auto heads = [](const Tensor& t) { return t.reshape({2, 8, 2, 16}).transpose(1, 2); };
        Tensor y = F::scaled_dot_product_attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), {}, p, true);
        return attn.c_proj->forward(y.transpose(1, 2).reshape({2, 8, 32}));
    };
    NoGradGuard no_grad;
    const Tensor clean = by_hand(0.0);
    attn.eval();
    CHECK(equal(attn.forward(x), clean));                   // eval: no dropout
    attn.train();
    manual_seed(11);
    const Tensor dropped = attn.forward(x);
    CHECK_FALSE(allclose(dropped, clean, 1e-3, 1e-3));      // training: the probabilities are dropped
    manual_seed(11);
    CHECK(equal(dropped, by_hand(0.5)));                    // exactly SDPA's dropout with p = 0.5
}

TEST_CASE("generate: appends tokens, crops to the context, greedy is deterministic, reports each token") {
    manual_seed(5);
    GPTConfig cfg = toy_config();
    GPT model(cfg);
    Tensor prompt = tensor(std::vector<int64_t>{1, 2, 3}, {1, 3});
    std::vector<int64_t> streamed;
    Tensor out = model.generate(prompt, 20, 1.0, 5, [&](int64_t t) { streamed.push_back(t); });
    CHECK(out.sizes() == Shape{1, 23});                      // longer than block_size 16: cropped context
    std::vector<int64_t> ids = out.to_vector<int64_t>();
    CHECK(std::vector<int64_t>(ids.begin() + 3, ids.end()) == streamed);
    for (int64_t t : ids) CHECK((t >= 0 && t < cfg.vocab_size));
    CHECK(model.is_training());                              // the mode is restored
    Tensor g1 = model.generate(prompt, 8, 0.0), g2 = model.generate(prompt, 8, 0.0);
    CHECK(equal(g1, g2));
}

TEST_CASE("bad input names the fact") {
    manual_seed(6);
    GPT model(toy_config());
    Tensor too_long = zeros({1, 17}, TensorOptions(kInt64));
    CHECK_THROWS_WITH_AS(model.forward(too_long), doctest::Contains("longer than the context (block_size 16)"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(model.forward(zeros({2, 4})), doctest::Contains("integer token ids"), ShapeError);
    Tensor x = zeros({2, 4}, TensorOptions(kInt64));
    CHECK_THROWS_WITH_AS(model.forward(x, zeros({2, 3}, TensorOptions(kInt64))),
                         doctest::Contains("targets must have idx's shape"), ShapeError);
}

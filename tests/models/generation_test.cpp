// generation_test.cpp: models::generate on the GPT and on a counting model whose next token is
// known: greedy decoding with the cache gives the tokens of decoding without it (several prompts,
// and the old GPT::generate), a left-padded batch gives each row's tokens alone, rows stop at the
// end token and then emit padding, the seed reproduces a sample, the context slides past
// max_positions, and bad options raise typed errors.
#include <doctest/doctest.h>

#include "tests/support/causal_lm_checks.hpp"
#include "tests/support/check_close.hpp"

using namespace ampgrad;
using namespace ampgrad::models;

namespace {

GPTConfig toy_config() {
    GPTConfig c;
    c.vocab_size = 11, c.block_size = 16, c.n_layer = 2, c.n_head = 2, c.n_embd = 32;
    return c;
}

Tensor ids(std::vector<int64_t> v) { return tensor(v, {1, static_cast<int64_t>(v.size())}); }

std::vector<int64_t> tail(const Tensor& out, int64_t row, int64_t from) {
    Tensor r = out.select(0, row);
    return r.narrow(0, from, r.size(0) - from).to_vector<int64_t>();
}

// A model whose next token is (the newest token + 1) mod V: logit 5 there, 4 at + 2, else 0. It still goes
// through the cache's steps (one layer, one head of size 1), so the loop's bookkeeping is exercised.
class CountingLM : public CausalLM {
public:
    int64_t max_positions() const override { return 32; }
    int64_t vocab_size() const override { return 10; }
    KVCache make_cache(int64_t batch, int64_t max_length) const override {
        return KVCache(1, batch, 1, max_length, 1, TensorOptions(kFloat32));
    }
    Tensor forward_cached(const Tensor& idx, KVCache& cache, const Tensor& valid) const override {
        const int64_t B = idx.size(0), T = idx.size(1);
        cache.begin_step(valid, T);
        Tensor x = zeros({B, 1, T, 1});
        cache.attend(0, x, x, x);
        cache.end_step();
        std::vector<int64_t> id = idx.to_vector<int64_t>();
        std::vector<float> logits(static_cast<size_t>(B * T * 10), 0.0f);
        for (size_t i = 0; i < id.size(); ++i) {
            logits[i * 10 + static_cast<size_t>((id[i] + 1) % 10)] = 5.0f;
            logits[i * 10 + static_cast<size_t>((id[i] + 2) % 10)] = 4.0f;
        }
        return tensor(logits, {B, T, 10});                                           // (B,T,V)
    }
    // The rest of the interface, which generation does not use.
    Tensor forward(const Tensor& idx) const override {
        KVCache cache = make_cache(idx.size(0), idx.size(1));
        return forward_cached(idx, cache, Tensor());
    }
    Tensor forward(const Tensor&, const Tensor&) const override { throw ValueError("CountingLM: no loss"); }
    std::string family() const override { return "counting"; }
    int64_t num_parameters() const override { return 0; }
    double flops_per_token(int64_t) const override { return 0.0; }
    double llmc_flops_per_token(int64_t) const override { return 0.0; }
    std::string shape_text(int64_t) const override { return "V=10"; }
    std::string saved_shape_text() const override { return "V=10"; }
    nlohmann::json config_json() const override { return nlohmann::json::object(); }
    const Tensor& token_embedding() const override { return embedding_; }

private:
    Tensor embedding_ = zeros({10, 1});
};

}  // namespace

TEST_CASE("greedy with the cache gives the tokens of greedy without it (and of GPT::generate)") {
    manual_seed(11);
    GPT model(toy_config());
    ampgrad::testing::check_cached_greedy_matches_uncached(model);
}

TEST_CASE("a left-padded batch gives each row's own tokens, with and without the cache") {
    manual_seed(12);
    GPT model(toy_config());
    const std::vector<std::vector<int64_t>> prompts{{5}, {3, 1, 4, 1, 5}, {9, 2, 6}};
    auto [batch, mask] = left_pad(prompts, /*pad_token_id=*/0);
    CHECK(batch.sizes() == Shape{3, 5});
    GenerationConfig g;
    g.max_new_tokens = 8;
    for (bool use_cache : {true, false}) {
        CAPTURE(use_cache);
        g.use_cache = use_cache;
        Tensor out = generate(model, batch, mask, g);                                 // (3,13)
        for (size_t r = 0; r < prompts.size(); ++r) {
            Tensor alone = generate(model, ids(prompts[r]), Tensor(), g);
            CHECK(tail(out, static_cast<int64_t>(r), 5) == tail(alone, 0, static_cast<int64_t>(prompts[r].size())));
        }
    }
}

TEST_CASE("rows stop at the end token, then emit the pad token; the loop ends when all have") {
    CountingLM lm;
    GenerationConfig g;
    g.max_new_tokens = 20;
    g.eos_token_id = 6;
    g.pad_token_id = 0;
    auto [batch, mask] = left_pad({{1, 2}, {4}}, 0);
    std::vector<std::vector<int64_t>> steps;
    Tensor out = generate(lm, batch, mask, g, [&](const std::vector<int64_t>& t) { steps.push_back(t); });
    // row 0 counts 3 4 5 6 (end); row 1 counts 5 6 (end) then pads
    CHECK(out.sizes() == Shape{2, 6});
    CHECK(tail(out, 0, 2) == std::vector<int64_t>{3, 4, 5, 6});
    CHECK(tail(out, 1, 2) == std::vector<int64_t>{5, 6, 0, 0});
    CHECK(steps.size() == 4);
    CHECK(steps[2] == std::vector<int64_t>{5, 0});
    g.eos_token_id.reset();                                                            // no end token: all 20
    CHECK(generate(lm, ids({1}), Tensor(), g).size(1) == 21);
}

TEST_CASE("the context slides past max_positions as nanoGPT crops it, with and without the cache") {
    manual_seed(13);
    GPT model(toy_config());                                                           // 16 positions
    GenerationConfig g;
    g.max_new_tokens = 30;
    std::vector<Tensor> outs;
    for (bool use_cache : {true, false}) {
        g.use_cache = use_cache;
        Tensor out = generate(model, ids({1, 2, 3}), Tensor(), g);
        CHECK(out.sizes() == Shape{1, 33});
        for (int64_t t : out.to_vector<int64_t>()) CHECK((t >= 0 && t < 11));
        outs.push_back(out);
    }
    CHECK(equal(outs[0], outs[1]));   // every step past 16 tokens sees the latest 16, in both modes
    // nanoGPT's loop: greedy on the logits of the last 16 tokens, cropped every step
    std::vector<int64_t> seq = {1, 2, 3};
    for (int i = 0; i < 30; ++i) {
        const int64_t n = static_cast<int64_t>(seq.size()), w = std::min<int64_t>(n, 16);
        Tensor window = ids(std::vector<int64_t>(seq.end() - w, seq.end()));
        Tensor logits = model.forward(window).select(1, w - 1);                       // (1,V)
        seq.push_back(argmax(logits, -1).item<int64_t>());
    }
    CHECK(outs[0].to_vector<int64_t>() == seq);
    CountingLM lm;                                                                     // 32 positions, exact
    g.max_new_tokens = 50;
    Tensor counted = generate(lm, ids({0}), Tensor(), g);
    for (int64_t i = 0; i < 51; ++i) CHECK(counted.to_vector<int64_t>()[static_cast<size_t>(i)] == i % 10);
}

TEST_CASE("sampling: the seed reproduces the tokens; top-k 1 is greedy; the penalty changes greedy") {
    manual_seed(14);
    GPT model(toy_config());
    GenerationConfig g;
    g.max_new_tokens = 12;
    g.do_sample = true;
    g.temperature = 1.5;
    g.top_p = 0.95;
    g.seed = 7;
    Tensor a = generate(model, ids({1, 2}), Tensor(), g), b = generate(model, ids({1, 2}), Tensor(), g);
    CHECK(equal(a, b));
    g.seed = 8;
    CHECK(!equal(a, generate(model, ids({1, 2}), Tensor(), g)));
    g.top_k = 1;
    GenerationConfig greedy;
    greedy.max_new_tokens = 12;
    CHECK(equal(generate(model, ids({1, 2}), Tensor(), g), generate(model, ids({1, 2}), Tensor(), greedy)));
    CountingLM lm;                                                                     // after 3 2: 3 (seen) or 4
    GenerationConfig p;
    p.max_new_tokens = 1;
    CHECK(tail(generate(lm, ids({3, 2}), Tensor(), p), 0, 2) == std::vector<int64_t>{3});
    p.repetition_penalty = 2.0;                                                       // 5 / 2 < 4
    CHECK(tail(generate(lm, ids({3, 2}), Tensor(), p), 0, 2) == std::vector<int64_t>{4});
    p.repetition_penalty = 1.2;                                                       // 5 / 1.2 > 4
    CHECK(tail(generate(lm, ids({3, 2}), Tensor(), p), 0, 2) == std::vector<int64_t>{3});
}

TEST_CASE("bad prompts and options raise typed errors naming the fact") {
    GPT model(toy_config());
    GenerationConfig g;
    CHECK_THROWS_WITH_AS(generate(model, zeros({1, 17}, TensorOptions(kInt64)), Tensor(), g),
                         doctest::Contains("17 tokens is longer than the model's 16 positions"), ValueError);
    CHECK_THROWS_WITH_AS(generate(model, zeros({1, 0}, TensorOptions(kInt64)), Tensor(), g),
                         doctest::Contains("input_ids must be (B,T0)"), ShapeError);
    Tensor right_padded = tensor(std::vector<int32_t>{1, 0}, {1, 2}).to(kBool);
    CHECK_THROWS_WITH_AS(generate(model, zeros({1, 2}, TensorOptions(kInt64)), right_padded, g),
                         doctest::Contains("not left padding"), ValueError);
    g.do_sample = true;
    g.temperature = 0.0;
    CHECK_THROWS_WITH_AS(generate(model, ids({1}), Tensor(), g), doctest::Contains("temperature must be"), ValueError);
    g.temperature = 1.0;
    g.top_p = -0.1;
    CHECK_THROWS_WITH_AS(generate(model, ids({1}), Tensor(), g), doctest::Contains("top_p must be in [0, 1]"),
                         ValueError);
    g.top_p.reset();
    g.eos_token_id = 11;
    CHECK_THROWS_WITH_AS(generate(model, ids({1}), Tensor(), g), doctest::Contains("eos_token_id 11"), ValueError);
    CHECK_THROWS_WITH_AS(left_pad({{1}, {}}, 0), doctest::Contains("prompt 1 is empty"), ValueError);
}

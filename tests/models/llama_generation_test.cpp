// llama_generation_test.cpp: the Llama's KV cache (Llama::forward_cached, models::generate): the
// cached logits equal the full forward's for the prefill and every later step (GQA, a head_dim
// apart from H/NH, Llama 3 RoPE scaling), greedy decoding with the cache gives the tokens of
// decoding without it and of Llama::generate, and a left-padded batch gives each row its own
// tokens (RoPE positions count only a row's real tokens).
#include <doctest/doctest.h>

#include "tests/support/causal_lm_checks.hpp"
#include "tests/support/check_close.hpp"

using namespace ampgrad;
using namespace ampgrad::models;
using ampgrad::testing::tol_for;

namespace {

LlamaConfig toy_llama() {
    LlamaConfig c;
    c.vocab_size = 13, c.hidden_size = 32, c.intermediate_size = 48, c.num_hidden_layers = 2;
    c.num_attention_heads = 4, c.num_key_value_heads = 2, c.head_dim = 12, c.max_position_embeddings = 24;
    c.rope_scaling = nn::Llama3RopeScaling{8.0, 1.0, 4.0, 8};
    return c;
}

Tensor ids(std::vector<int64_t> v) { return tensor(v, {1, static_cast<int64_t>(v.size())}); }

std::vector<int64_t> tail(const Tensor& out, int64_t row, int64_t from) {
    Tensor r = out.select(0, row);
    return r.narrow(0, from, r.size(0) - from).to_vector<int64_t>();
}

}  // namespace

TEST_CASE("Llama: cached logits equal the full forward's: the prefill, then one token at a time") {
    manual_seed(21);
    Llama model(toy_llama());
    model.eval();
    NoGradGuard no_grad;
    const std::vector<int64_t> seq{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8};
    KVCache cache = model.make_cache(1, 24);
    CHECK(cache.keys(0).sizes() == Shape{1, 2, 24, 12});                              // (B,NKV,Tmax,HS)
    ampgrad::testing::check_cached_steps_match_full_forward(model, cache, seq, 4);
    CHECK_THROWS_AS(model.make_cache(1, 25), ValueError);                              // past the context
}

TEST_CASE("Llama: greedy with the cache gives the tokens of greedy without it and of Llama::generate") {
    manual_seed(22);
    Llama model(toy_llama());
    model.eval();
    ampgrad::testing::check_cached_greedy_matches_uncached(model);
}

TEST_CASE("Llama: a left-padded batch gives each row's own tokens through the cache") {
    manual_seed(23);
    Llama model(toy_llama());
    model.eval();
    const std::vector<std::vector<int64_t>> prompts{{5}, {3, 1, 4, 1, 5}, {9, 2, 6}};
    auto [batch, mask] = left_pad(prompts, /*pad_token_id=*/0);
    GenerationConfig g;
    g.max_new_tokens = 8;
    Tensor out = generate(model, batch, mask, g);                                     // (3,13)
    for (size_t r = 0; r < prompts.size(); ++r) {
        CAPTURE(r);
        Tensor alone = generate(model, ids(prompts[r]), Tensor(), g);
        CHECK(tail(out, static_cast<int64_t>(r), 5) == tail(alone, 0, static_cast<int64_t>(prompts[r].size())));
    }
}

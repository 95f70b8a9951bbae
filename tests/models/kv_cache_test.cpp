// kv_cache_test.cpp: models::KVCache and GPT::forward_cached: the cached logits equal the full
// forward's (prefill and every later one-token step), the storage is written in place (its
// address never changes, nothing is reallocated), left padding changes nothing for a row's real
// tokens, the cache serves grouped-query attention as SDPA over the whole sequence would, and
// overflows and bad shapes raise typed errors.
#include <doctest/doctest.h>

#include "tests/support/causal_lm_checks.hpp"
#include "tests/support/check_close.hpp"

using namespace ampgrad;
using models::GPT;
using models::GPTConfig;
using models::KVCache;
using ampgrad::testing::tol_for;

namespace {

GPTConfig toy_config() {
    GPTConfig c;
    c.vocab_size = 11, c.block_size = 16, c.n_layer = 2, c.n_head = 2, c.n_embd = 32;
    return c;
}

Tensor ids(std::vector<int64_t> v) { return tensor(v, {1, static_cast<int64_t>(v.size())}); }

}  // namespace

TEST_CASE("cached logits equal the full forward's: the prefill, then one token at a time") {
    manual_seed(1);
    GPT model(toy_config());
    model.eval();
    NoGradGuard no_grad;
    const std::vector<int64_t> seq{3, 1, 4, 1, 5, 9, 2, 6, 5, 3};
    KVCache cache = model.make_cache(1, 16);
    ampgrad::testing::check_cached_steps_match_full_forward(model, cache, seq, 4);
    // a multi-token step after a prefill (causal with an offset, through the mask)
    KVCache two = model.make_cache(1, 16);
    model.forward_cached(ids({3, 1, 4}), two);
    Tensor chunk = model.forward_cached(ids({1, 5, 9}), two);                          // (1,3,V)
    CHECK_CLOSE(chunk, model.forward(ids({3, 1, 4, 1, 5, 9})).narrow(1, 3, 3), tol_for(kFloat32, 32));
}

TEST_CASE("the cache is written in place: preallocated once, the same storage at every step") {
    manual_seed(2);
    GPT model(toy_config());
    KVCache cache = model.make_cache(2, 12);
    CHECK(cache.keys(0).sizes() == Shape{2, 2, 12, 16});                               // (B,NKV,Tmax,HS)
    std::vector<const void*> before;
    for (int64_t l = 0; l < cache.num_layers(); ++l) {
        before.push_back(cache.keys(l).raw_data());
        before.push_back(cache.values(l).raw_data());
    }
    Tensor k0 = cache.keys(0);
    model.forward_cached(tensor(std::vector<int64_t>{1, 2, 3, 4, 5, 6}, {2, 3}), cache);
    for (int i = 0; i < 9; ++i) model.forward_cached(tensor(std::vector<int64_t>{i % 11, 7}, {2, 1}), cache);
    CHECK(cache.length() == 12);
    for (int64_t l = 0; l < cache.num_layers(); ++l) {
        CHECK(cache.keys(l).raw_data() == before[static_cast<size_t>(2 * l)]);
        CHECK(cache.values(l).raw_data() == before[static_cast<size_t>(2 * l + 1)]);
    }
    CHECK(k0.narrow(2, 11, 1).abs().sum().item<float>() > 0.0f);                      // the last slot was written
    cache.reset();
    CHECK(cache.length() == 0);
    model.forward_cached(tensor(std::vector<int64_t>{1, 2}, {2, 1}), cache);
    CHECK(cache.keys(0).raw_data() == before[0]);
}

TEST_CASE("left padding: a padded row's real positions give the logits of the row alone") {
    manual_seed(3);
    GPT model(toy_config());
    NoGradGuard no_grad;
    // row 0: three pads then 5 7 2; row 1: 4 8 1 6 3 9
    Tensor batch = tensor(std::vector<int64_t>{0, 0, 0, 5, 7, 2, 4, 8, 1, 6, 3, 9}, {2, 6});
    Tensor valid = tensor(std::vector<int32_t>{0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1}, {2, 6}).to(kBool);
    KVCache cache = model.make_cache(2, 8);
    Tensor logits = model.forward_cached(batch, cache, valid);                         // (2,6,V)
    CHECK_CLOSE(logits.select(0, 0).narrow(0, 3, 3), model.forward(ids({5, 7, 2})).select(0, 0), tol_for(kFloat32, 32));
    CHECK_CLOSE(logits.select(0, 1), model.forward(ids({4, 8, 1, 6, 3, 9})).select(0, 0), tol_for(kFloat32, 32));
    Tensor step = model.forward_cached(tensor(std::vector<int64_t>{10, 2}, {2, 1}), cache);   // (2,1,V)
    CHECK_CLOSE(step.select(0, 0), model.forward(ids({5, 7, 2, 10})).narrow(1, 3, 1).select(0, 0),
                tol_for(kFloat32, 32));
    CHECK_CLOSE(step.select(0, 1), model.forward(ids({4, 8, 1, 6, 3, 9, 2})).narrow(1, 6, 1).select(0, 0),
                tol_for(kFloat32, 32));
}

TEST_CASE("position ids count a row's real tokens (transformers' rule: padding at position 0)") {
    KVCache cache(1, 2, 1, 6, 2, TensorOptions(kFloat32));
    Tensor valid = tensor(std::vector<int32_t>{0, 0, 1, 1, 1, 1}, {2, 3}).to(kBool);   // row 0: two pads
    Tensor pos = cache.begin_step(valid, 3);
    CHECK(pos.to_vector<int64_t>() == std::vector<int64_t>{0, 0, 0, 0, 1, 2});
    cache.end_step();
    CHECK(cache.begin_step(Tensor(), 1).to_vector<int64_t>() == std::vector<int64_t>{1, 3});
}

TEST_CASE("grouped-query attention through the cache equals SDPA over the whole sequence") {
    manual_seed(4);
    const int64_t B = 2, NH = 4, NKV = 2, T = 7, HS = 8;
    Tensor q = randn({B, NH, T, HS}), k = randn({B, NKV, T, HS}), v = randn({B, NKV, T, HS});
    Tensor expected = F::scaled_dot_product_attention(q, k, v, Tensor(), 0.0, /*is_causal=*/true, std::nullopt,
                                                      /*enable_gqa=*/true);          // (B,NH,T,HS)
    KVCache cache(1, B, NKV, T, HS, TensorOptions(kFloat32));
    cache.begin_step(Tensor(), 3);                                                    // prefill 3
    Tensor first = cache.attend(0, q.narrow(2, 0, 3), k.narrow(2, 0, 3), v.narrow(2, 0, 3));
    cache.end_step();
    CHECK_CLOSE(first, expected.narrow(2, 0, 3), tol_for(kFloat32, 16));
    for (int64_t t = 3; t < T; ++t) {
        cache.begin_step(Tensor(), 1);
        Tensor y = cache.attend(0, q.narrow(2, t, 1), k.narrow(2, t, 1), v.narrow(2, t, 1));
        cache.end_step();
        CHECK_CLOSE(y, expected.narrow(2, t, 1), tol_for(kFloat32, 16));
    }
}

TEST_CASE("overflows and bad calls raise typed errors") {
    GPT model(toy_config());
    CHECK_THROWS_WITH_AS(model.make_cache(1, 17), doctest::Contains("longer than the context (block_size 16)"),
                         ValueError);
    KVCache cache = model.make_cache(1, 4);
    model.forward_cached(ids({1, 2, 3}), cache);
    CHECK_THROWS_WITH_AS(model.forward_cached(ids({4, 5}), cache),
                         doctest::Contains("3 cached + 2 new tokens exceed the cache's max_length 4"), ValueError);
    CHECK(cache.length() == 3);                                                        // unchanged
    CHECK_THROWS_WITH_AS(model.forward_cached(tensor(std::vector<int64_t>{1, 2}, {2, 1}), cache),
                         doctest::Contains("the cache's batch"), ShapeError);
    CHECK_THROWS_AS(KVCache(0, 1, 1, 1, 1, TensorOptions()), ValueError);
    CHECK_THROWS_AS(model.forward_cached(ids({100}), cache), IndexError);           // past the 64 rows of wte
    CHECK(cache.length() == 3);                                                        // the step was dropped
    Tensor next = model.forward_cached(ids({4}), cache);                               // and the cache still works
    CHECK_CLOSE(next.select(1, 0), model.forward(ids({1, 2, 3, 4})).select(1, 3), tol_for(kFloat32, 32));
    KVCache raw(1, 1, 1, 4, 2, TensorOptions(kFloat32));
    CHECK_THROWS_WITH_AS(raw.attend(0, zeros({1, 1, 1, 2}), zeros({1, 1, 1, 2}), zeros({1, 1, 1, 2})),
                         doctest::Contains("no open step"), ValueError);
    raw.begin_step(Tensor(), 1);
    CHECK_THROWS_WITH_AS(raw.attend(0, zeros({1, 1, 1, 2}), zeros({1, 1, 2, 2}), zeros({1, 1, 1, 2})),
                         doctest::Contains("KVCache::attend: expected"), ShapeError);
    CHECK_THROWS_WITH_AS(raw.attend(3, zeros({1, 1, 1, 2}), zeros({1, 1, 1, 2}), zeros({1, 1, 1, 2})),
                         doctest::Contains("layer 3 is out of range"), IndexError);
    CHECK_THROWS_WITH_AS(raw.begin_step(Tensor(), 1), doctest::Contains("not closed"), ValueError);
}

// causal_lm_checks.hpp: the KV-cache checks every models::CausalLM must pass, shared by the GPT's
// (tests/models/kv_cache_test.cpp, generation_test.cpp) and the Llama's (llama_generation_test.cpp)
// tests: cached logits equal the full forward's, and cached greedy decoding equals uncached.
#pragma once
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "tests/support/check_close.hpp"

namespace ampgrad::testing {

// (1,T) int64 token ids
inline Tensor token_ids(const std::vector<int64_t>& v) { return tensor(v, {1, static_cast<int64_t>(v.size())}); }

// After a prefill of seq[0, prefill) into `cache`, each further token through the cache gives the
// logits of the full forward at its position, and the cache grows by one. Model: GPT or Llama, in
// eval mode under NoGradGuard.
template <typename Model>
void check_cached_steps_match_full_forward(const Model& model, models::KVCache& cache,
                                           const std::vector<int64_t>& seq, size_t prefill) {
    const std::vector<int64_t> head(seq.begin(), seq.begin() + static_cast<std::ptrdiff_t>(prefill));
    CHECK_CLOSE(model.forward_cached(token_ids(head), cache), model.forward(token_ids(head)),
                tol_for(kFloat32, 32));                                               // (1,prefill,V)
    for (size_t t = prefill; t < seq.size(); ++t) {
        CAPTURE(t);
        Tensor step = model.forward_cached(token_ids({seq[t]}), cache);                 // (1,1,V)
        Tensor full = model.forward(token_ids(std::vector<int64_t>(seq.begin(), seq.begin() + t + 1)));
        CHECK_CLOSE(step.select(1, 0), full.select(1, static_cast<int64_t>(t)), tol_for(kFloat32, 32));
        CHECK(cache.length() == static_cast<int64_t>(t) + 1);
    }
}

// Greedy decoding of 10 tokens from three prompts: with the cache, without it, and through the
// model's own uncached generate(idx, n, temperature 0), the same tokens.
template <typename Model>
void check_cached_greedy_matches_uncached(Model& model) {
    models::GenerationConfig g;
    g.max_new_tokens = 10;
    for (const auto& prompt : std::vector<std::vector<int64_t>>{{1}, {3, 1, 4}, {2, 7, 1, 8, 2, 8}}) {
        CAPTURE(prompt.size());
        g.use_cache = true;
        Tensor cached = models::generate(model, token_ids(prompt), Tensor(), g);
        g.use_cache = false;
        Tensor recomputed = models::generate(model, token_ids(prompt), Tensor(), g);
        CHECK(cached.sizes() == Shape{1, static_cast<int64_t>(prompt.size()) + 10});
        CHECK(equal(cached, recomputed));
        CHECK(equal(cached, model.generate(token_ids(prompt), 10, 0.0)));                // the uncached loop
    }
}

}  // namespace ampgrad::testing

// logits_process_test.cpp: models/logits_process.hpp against transformers' logits processors
// (fixtures from tools/fixtures/generation.py) and hand-computed rows: the repetition penalty
// (both signs, penalties above and below 1, padding ignored), temperature, top-k (ties kept),
// top-p (the most likely token always kept), suppressed tokens, the chain generate() applies, and bad input.
#include <doctest/doctest.h>

#include <cmath>

#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::models;
using ampgrad::testing::load_fixture;
using ampgrad::testing::tol_for;

namespace {
const float kInf = INFINITY;
Tensor row(std::vector<float> v) { return tensor(v, {1, static_cast<int64_t>(v.size())}); }
}  // namespace

TEST_CASE("repetition penalty: transformers' RepetitionPenaltyLogitsProcessor") {
    for (const char* name : {"generation_repetition_penalty", "generation_repetition_penalty_below_one"}) {
        CAPTURE(name);
        auto f = load_fixture(name);
        Tensor out = apply_repetition_penalty(f.at("scores"), f.at("ids"), Tensor(), f.param("penalty"));
        CHECK_CLOSE(out, f.at("expected"), tol_for(kFloat32));
    }
}

TEST_CASE("repetition penalty by hand: divide positive, multiply negative, once per token, padding ignored") {
    Tensor scores = row({2.0f, -1.0f, 0.5f, 3.0f});
    Tensor ids = tensor(std::vector<int64_t>{0, 1, 1, 3}, {1, 4});
    Tensor valid = tensor(std::vector<int32_t>{1, 1, 1, 0}, {1, 4}).to(kBool);   // token 3 is padding
    Tensor out = apply_repetition_penalty(scores, ids, valid, 2.0);
    CHECK(equal(out, row({1.0f, -2.0f, 0.5f, 3.0f})));
}

TEST_CASE("temperature and top-k: transformers' warpers") {
    auto t = load_fixture("generation_temperature");
    CHECK_CLOSE(apply_temperature(t.at("scores"), t.param("temperature")), t.at("expected"), tol_for(kFloat32));
    auto k = load_fixture("generation_top_k");
    Tensor out = apply_top_k(k.at("scores"), static_cast<int64_t>(k.param("top_k")));
    CHECK(equal(out, k.at("expected")));                        // kept scores unchanged, others exactly -inf
    CHECK(equal(apply_top_k(row({1, 3, 3, 2}), 2), row({-kInf, 3, 3, -kInf})));   // ties with the k-th kept
    CHECK(equal(apply_top_k(row({1, 3, 2}), 2), row({-kInf, 3, 2})));
    CHECK(equal(apply_top_k(row({1, 3, 2}), 10), row({1, 3, 2})));                // k > V keeps all
}

TEST_CASE("top-p: transformers' TopPLogitsWarper at three thresholds") {
    for (const char* name : {"generation_top_p_30", "generation_top_p_80", "generation_top_p_95"}) {
        CAPTURE(name);
        auto f = load_fixture(name);
        CHECK(equal(apply_top_p(f.at("scores"), f.param("top_p")), f.at("expected")));
    }
    // probabilities 0.1, 0.2, 0.7 (as log-probabilities): 0.5 keeps the 0.7 token alone, 0.75 adds 0.2
    Tensor s = row({std::log(0.1f), std::log(0.2f), std::log(0.7f)});
    CHECK(equal(apply_top_p(s, 0.5), row({-kInf, -kInf, std::log(0.7f)})));
    CHECK(equal(apply_top_p(s, 0.75), row({-kInf, std::log(0.2f), std::log(0.7f)})));
    CHECK(equal(apply_top_p(s, 0.0), row({-kInf, -kInf, std::log(0.7f)})));       // at least one kept
    CHECK(equal(apply_top_p(s, 1.0), s));
}

TEST_CASE("process_logits: the chain generate() applies, in transformers' order") {
    auto f = load_fixture("generation_chain");
    GenerationConfig g;
    g.do_sample = true;
    g.repetition_penalty = f.param("penalty");
    g.temperature = f.param("temperature");
    g.top_k = static_cast<int64_t>(f.param("top_k"));
    g.top_p = f.param("top_p");
    CHECK_CLOSE(process_logits(f.at("scores"), f.at("ids"), Tensor(), g), f.at("expected"), tol_for(kFloat32));
    g.do_sample = false;                                        // greedy: the penalty only
    Tensor greedy = process_logits(f.at("scores"), f.at("ids"), Tensor(), g);
    CHECK_CLOSE(greedy, apply_repetition_penalty(f.at("scores"), f.at("ids"), Tensor(), g.repetition_penalty),
                tol_for(kFloat32));
}

TEST_CASE("suppress_tokens: those ids are -inf in every row, greedy and sampled never pick them") {
    Tensor s = tensor(std::vector<float>{0.1f, 2.0f, -1.0f, 5.0f, 4.0f, 1.0f}, {2, 3});
    Tensor out = apply_suppress_tokens(s, {0, 1});
    CHECK(out.to_vector<float>() == std::vector<float>{-kInf, -kInf, -1.0f, -kInf, -kInf, 1.0f});
    CHECK(apply_suppress_tokens(s, {}).to_vector<float>() == s.to_vector<float>());
    GenerationConfig g;
    g.suppress_tokens = {1, 2};                                 // greedy: row 0's best (1) is gone
    CHECK(select_next_tokens(process_logits(s, Tensor(), Tensor(), g), g) == std::vector<int64_t>{0, 0});
    g.do_sample = true;
    g.temperature = 5.0;                                        // flat: without suppression 1 and 2 would come up
    g.suppress_tokens = {0, 2};
    Tensor flat = zeros({4, 3});
    for (int i = 0; i < 25; ++i)
        CHECK(select_next_tokens(process_logits(flat, Tensor(), Tensor(), g), g) == std::vector<int64_t>{1, 1, 1, 1});
    CHECK_THROWS_WITH_AS(apply_suppress_tokens(s, {3}), doctest::Contains("token id 3 is outside the vocabulary [0, 3)"),
                         IndexError);
    g.suppress_tokens = {0, 1, 2};
    CHECK_THROWS_WITH_AS(g.validate(3), doctest::Contains("suppress_tokens removes every one of the 3"), ValueError);
    g.suppress_tokens = {5};
    CHECK_THROWS_WITH_AS(g.validate(3), doctest::Contains("suppress_tokens holds 5"), ValueError);
}

TEST_CASE("select_next_tokens: greedy is argmax; sampling never picks a filtered token and follows the seed") {
    GenerationConfig g;
    Tensor s = tensor(std::vector<float>{0.1f, 2.0f, -1.0f, 5.0f, 4.0f, 1.0f}, {2, 3});
    CHECK(select_next_tokens(s, g) == std::vector<int64_t>{1, 0});
    g.do_sample = true;
    Tensor filtered = apply_top_k(s, 1);
    for (int i = 0; i < 20; ++i) CHECK(select_next_tokens(filtered, g) == std::vector<int64_t>{1, 0});
    Tensor flat = zeros({1, 50});
    manual_seed(3);
    std::vector<int64_t> a, b;
    for (int i = 0; i < 10; ++i) a.push_back(select_next_tokens(flat, g)[0]);
    manual_seed(3);
    for (int i = 0; i < 10; ++i) b.push_back(select_next_tokens(flat, g)[0]);
    CHECK(a == b);
}

TEST_CASE("bad input names the processor and the fact") {
    Tensor s = row({1, 2, 3});
    CHECK_THROWS_WITH_AS(apply_temperature(s, 0.0), doctest::Contains("temperature must be"), ValueError);
    CHECK_THROWS_WITH_AS(apply_top_k(s, 0), doctest::Contains("top_k must be >= 1"), ValueError);
    CHECK_THROWS_WITH_AS(apply_top_p(s, 1.5), doctest::Contains("top_p must be in [0, 1]"), ValueError);
    CHECK_THROWS_WITH_AS(apply_top_p(zeros({3}), 0.5), doctest::Contains("scores (B,V)"), ShapeError);
    Tensor ids = tensor(std::vector<int64_t>{7}, {1, 1});
    CHECK_THROWS_WITH_AS(apply_repetition_penalty(s, ids, Tensor(), 1.2), doctest::Contains("token id 7"), IndexError);
    CHECK_THROWS_WITH_AS(apply_repetition_penalty(s, ids, Tensor(), -1.0), doctest::Contains("penalty must be"),
                         ValueError);
}

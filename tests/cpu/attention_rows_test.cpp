// attention_rows_test.cpp: the GEMM attention path's two row kernels on the CPU (cpu/attention_rows.cpp):
// attention_probs (a row's softmax and lse, causal masking, a dead row, the backward's recomputation
// from lse) and attention_score_grad (dS = P (dP - D), in place) against hand-computed rows, and the
// typed errors for misfit operands. Their use inside the path: tests/core/attention_gemm_test.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "kernels/fused_kernels.hpp"
#include "tests/support/check_close.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

TEST_CASE("attention_probs and attention_score_grad kernels: hand-computed rows, masked and dead") {
    const float inf = std::numeric_limits<float>::infinity();
    // One group, T = 2 query positions, S = 3 keys; row 1 of the scores is all -inf (a dead row).
    Tensor scores = tensor<float>({1.0f, 2.0f, 3.0f, -inf, -inf, -inf}, {1, 2, 3});
    Tensor probs = empty({1, 2, 3}, kFloat32), lse = empty({2}, kFloat32);
    kernels::attention_probs(probs, lse, scores, 2, false, false);
    const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
    CHECK_CLOSE(probs, tensor<float>({float(std::exp(1.0) / z), float(std::exp(2.0) / z), float(std::exp(3.0) / z),
                                      0.0f, 0.0f, 0.0f}, {1, 2, 3}), tol_for(kFloat32));
    CHECK(lse.to_vector<float>()[0] == doctest::Approx(std::log(z)));
    CHECK(lse.to_vector<float>()[1] == -inf);
    // Causal: query 0 sees key 0 only (P = 1), and the backward's recomputation from lse agrees.
    Tensor causal_scores = tensor<float>({1.0f, 2.0f, 3.0f, 0.5f, 0.5f, 9.0f}, {1, 2, 3});
    kernels::attention_probs(probs, lse, causal_scores, 2, true, false);
    CHECK(probs.to_vector<float>() == std::vector<float>{1.0f, 0.0f, 0.0f, 0.5f, 0.5f, 0.0f});
    Tensor again = empty({1, 2, 3}, kFloat32);
    kernels::attention_probs(again, lse, causal_scores, 2, true, true);
    CHECK_CLOSE(again, probs, tol_for(kFloat32));
    // dS = P (dP - D), D = dO . O, written in place over P.
    Tensor dprobs = tensor<float>({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f}, {1, 2, 3});
    Tensor dout = tensor<float>({1.0f, 2.0f, 0.5f, -1.0f}, {1, 2, 2});
    Tensor out = tensor<float>({3.0f, 1.0f, 2.0f, 2.0f}, {1, 2, 2});
    kernels::attention_score_grad(probs, probs, dprobs, dout, out, 2, false);   // D = 5, then -1
    CHECK(probs.to_vector<float>() == std::vector<float>{-4.0f, 0.0f, 0.0f, 2.5f, 3.0f, 0.0f});
    // Causal: the masked keys' dS is 0 and their dprobs (NaN here: the causal GEMM path leaves them
    // unwritten) are never read.
    const float nan = std::numeric_limits<float>::quiet_NaN();
    Tensor causal_probs = tensor<float>({1.0f, 0.0f, 0.0f, 0.5f, 0.5f, 0.0f}, {1, 2, 3});
    Tensor stale_dprobs = tensor<float>({1.0f, nan, nan, 4.0f, 5.0f, nan}, {1, 2, 3});
    kernels::attention_score_grad(causal_probs, causal_probs, stale_dprobs, dout, out, 2, true);
    CHECK(causal_probs.to_vector<float>() == std::vector<float>{-4.0f, 0.0f, 0.0f, 2.5f, 3.0f, 0.0f});
}

TEST_CASE("attention row kernels refuse mismatched operands by name") {
    Tensor scores = zeros({1, 4, 3}, kFloat32), probs = zeros({1, 4, 3}, kFloat16), lse = zeros({4}, kFloat32);
    CHECK_THROWS_WITH_AS(kernels::attention_probs(probs, lse, scores, 3, false, false),
                         doctest::Contains("attention_probs: expected contiguous scores"), Error);   // 4 % 3 != 0
    CHECK_THROWS_WITH_AS(kernels::attention_probs(probs, lse, scores.to(kFloat16), 2, false, false),
                         doctest::Contains("attention_probs"), Error);                               // f16 scores
    CHECK_THROWS_WITH_AS(kernels::attention_score_grad(probs, probs, scores, zeros({1, 4, 2}, kFloat32),
                                                       zeros({1, 4, 2}, kFloat16), 4, false),
                         doctest::Contains("attention_score_grad"), Error);                         // f32 dout
}

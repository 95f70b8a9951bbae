// sampling_test.cpp: topk (PyTorch fixtures for values, indices and gradient; f64 gradcheck;
// f16/bf16/int), multinomial (statistics with a fixed seed, reproducibility, without
// replacement, bad input) and sample_from_logits (greedy, top-k restriction).
#include <doctest/doctest.h>

#include <cmath>
#include <set>

#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

TEST_CASE("topk matches torch.topk: values, indices and the gradient of the values") {
    for (const char* name : {"sampling_topk_last", "sampling_topk_dim0_smallest", "sampling_topk_3d_middle"}) {
        CAPTURE(name);
        Fixture fx = load_fixture(name);
        Tensor x = fx.at("x").clone().requires_grad_(true);
        auto [values, indices] = topk(x, fx.params.at("k").get<int64_t>(), fx.params.at("dim").get<int64_t>(),
                                      fx.params.at("largest").get<bool>());
        CHECK(indices.dtype() == kInt64);
        CHECK(indices.to_vector<int64_t>() == fx.at("indices").to_vector<int64_t>());
        CHECK_CLOSE(values, fx.at("values"), tol_for(kFloat32));
        values.backward(fx.at("dy"));
        CHECK_CLOSE(x.grad(), fx.at("dx"), tol_for(kFloat32));
    }
}

TEST_CASE("topk: f64 gradcheck, through both dims") {
    manual_seed(5);
    Tensor x = randn({3, 6}, TensorOptions(kFloat64).requires_grad(true));
    CHECK(autograd::gradcheck([](const tensor_list& in) { return tensor_list{topk(in[0], 2, 1).first}; }, {x}));
    CHECK(autograd::gradcheck([](const tensor_list& in) { return tensor_list{topk(in[0], 3, 0, false).first}; }, {x}));
}

TEST_CASE("topk keeps the dtype: f16/bf16 values equal the input's, ints are exact") {
    manual_seed(9);
    for (DType dt : {kFloat16, kBFloat16}) {
        CAPTURE(dtype_name(dt));
        Tensor x = randn({4, 10}).to(dt);
        auto [v, i] = topk(x, 4);
        auto [v64, i64] = topk(x.to(kFloat64), 4);
        CHECK(v.dtype() == dt);
        CHECK(equal(v.to(kFloat64), v64));                   // selection is exact: no rounding at all
        CHECK(equal(i, i64));
    }
    int64_t big = (int64_t{1} << 60) + 1;                    // not representable as a double
    Tensor xi = tensor(std::vector<int64_t>{3, big, big - 1, -7}, {4});
    auto [v, i] = topk(xi, 2);
    CHECK(v.to_vector<int64_t>() == std::vector<int64_t>{big, big - 1});
    CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{1, 2});
}

TEST_CASE("topk: NaN ranks highest, ties keep index order, k=0 and k=n, bad k") {
    double nan = std::nan("");
    Tensor x = tensor(std::vector<double>{1.0, nan, 3.0, 3.0, -2.0}, {5});
    auto [v, i] = topk(x, 3);
    CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3});
    auto [vs, is] = topk(x, 2, 0, /*largest=*/false);
    CHECK(is.to_vector<int64_t>() == std::vector<int64_t>{4, 0});
    CHECK(topk(x, 0).first.sizes() == Shape{0});
    CHECK(topk(x, 5).second.sizes() == Shape{5});
    CHECK_THROWS_WITH_AS(topk(x, 6), doctest::Contains("k = 6 is out of range for dim 0 of size 5"), IndexError);
    CHECK_THROWS_AS(topk(x, 1, 1), IndexError);
    CHECK(topk(scalar_tensor(1.0), 1).first.dim() == 0);                  // a 0-d input is one element (torch)
    CHECK_THROWS_AS(topk(scalar_tensor(1.0), 2), IndexError);
}

TEST_CASE("multinomial with replacement: frequencies follow the probabilities (fixed seed)") {
    manual_seed(1234);
    std::vector<double> p = {0.1, 0.0, 0.2, 0.3, 0.4};
    Tensor probs = tensor(p, {1, 5}, TensorOptions(kFloat32)) * 7.0;   // unnormalised weights are fine
    const int64_t n = 20000;
    Tensor s = multinomial(probs, n, true);
    CHECK(s.sizes() == Shape{1, n});
    std::vector<int64_t> count(5, 0);
    for (int64_t v : s.to_vector<int64_t>()) { REQUIRE(v >= 0); REQUIRE(v < 5); ++count[static_cast<size_t>(v)]; }
    CHECK(count[1] == 0);                                              // zero probability: never drawn
    double chi2 = 0.0;                                                 // 3 degrees of freedom
    for (size_t j = 0; j < 5; ++j)
        if (p[j] > 0) chi2 += std::pow(count[j] - n * p[j], 2) / (n * p[j]);
    CHECK(chi2 < 16.27);                                               // p = 0.001 critical value
}

TEST_CASE("multinomial is reproducible from the seed and advances the generator") {
    Tensor probs = F::softmax(randn({3, 50}), -1);
    manual_seed(42);
    Tensor a = multinomial(probs, 8, true);
    Tensor b = multinomial(probs, 8, true);
    manual_seed(42);
    Tensor a2 = multinomial(probs, 8, true);
    CHECK(equal(a, a2));
    CHECK_FALSE(equal(a, b));
}

TEST_CASE("multinomial without replacement: distinct indices, never zero weights, first-draw frequencies") {
    manual_seed(7);
    Tensor probs = tensor(std::vector<double>{0.5, 0.0, 0.25, 0.25, 0.0, 0.0}, {6});
    for (int i = 0; i < 50; ++i) {
        auto s = multinomial(probs, 3).to_vector<int64_t>();
        CHECK(std::set<int64_t>(s.begin(), s.end()) == std::set<int64_t>{0, 2, 3});
    }
    // The first of the draws is distributed as one draw with replacement: P(0) = 0.5.
    int64_t zeros = 0, trials = 4000;
    Tensor many = multinomial(probs.unsqueeze(0).expand({trials, 6}).contiguous(), 2);
    auto flat = many.to_vector<int64_t>();
    for (int64_t t = 0; t < trials; ++t) zeros += flat[static_cast<size_t>(t * 2)] == 0;
    CHECK(std::abs(static_cast<double>(zeros) / trials - 0.5) < 0.03);   // ~4 standard deviations
    CHECK_THROWS_WITH_AS(multinomial(probs, 4), doctest::Contains("only 3 non-zero"), ValueError);
    CHECK_THROWS_AS(multinomial(probs, 7), ValueError);
}

TEST_CASE("multinomial rejects negative, non-finite and zero-sum rows") {
    CHECK_THROWS_WITH_AS(multinomial(tensor(std::vector<float>{0.5f, -0.1f}, {2}), 1, true),
                         doctest::Contains("row 0 has -0.1"), ValueError);
    CHECK_THROWS_AS(multinomial(tensor(std::vector<float>{0.5f, INFINITY}, {2}), 1, true), ValueError);
    CHECK_THROWS_AS(multinomial(tensor(std::vector<float>{0.5f, NAN}, {2}), 1, true), ValueError);
    CHECK_THROWS_WITH_AS(multinomial(zeros({2, 3}), 1, true), doctest::Contains("sums to 0"), ValueError);
    CHECK_THROWS_AS(multinomial(ones({2, 3, 4}), 1, true), ShapeError);
    CHECK_THROWS_AS(multinomial(ones({3}), 0, true), ValueError);
    CHECK_THROWS_AS(multinomial(ones({3}, TensorOptions(kInt64)), 1, true), DTypeError);
}

TEST_CASE("sample_from_logits: greedy at temperature 0, top_k=1 is argmax, top_k restricts the support") {
    manual_seed(3);
    Tensor logits = randn({4, 30});
    Tensor greedy = F::sample_from_logits(logits, 0.0);
    CHECK(greedy.sizes() == Shape{4, 1});
    CHECK(equal(greedy, argmax(logits, -1, true)));
    CHECK(equal(F::sample_from_logits(logits, 1.0, 1), greedy));
    auto allowed = topk(logits, 5).second.to_vector<int64_t>();        // (4,5)
    for (int trial = 0; trial < 30; ++trial) {
        auto s = F::sample_from_logits(logits, 2.0, 5).to_vector<int64_t>();
        for (size_t r = 0; r < 4; ++r) {
            auto first = allowed.begin() + static_cast<std::ptrdiff_t>(r * 5);
            CHECK(std::find(first, first + 5, s[r]) != first + 5);
        }
    }
    CHECK(F::sample_from_logits(randn({30}), 1.0, 100).sizes() == Shape{1});   // top_k > V: all of V
    CHECK_THROWS_AS(F::sample_from_logits(logits, -1.0), ValueError);
    CHECK_THROWS_AS(F::sample_from_logits(logits, 1.0, 0), ValueError);
}

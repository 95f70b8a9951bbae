// dropout_test.cpp: F::dropout: PyTorch's semantics (eval and p=0 are the identity, p=1 gives
// zeros, kept values are scaled by 1/(1-p)), Philox determinism under manual_seed, the mask
// fraction on a large tensor, backward reusing the forward mask, f64 gradcheck, f16/bf16 against
// f64 with the same seed, and bad p. (No PyTorch fixture: its mask comes from a different RNG.)
#include <doctest/doctest.h>

#include <cmath>

#include "tests/support/check_close.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

TEST_CASE("dropout is the identity in eval mode and for p = 0, and zeros for p = 1") {
    Tensor x = randn({3, 4}, TensorOptions().requires_grad(true));
    CHECK(F::dropout(x, 0.5, false).is_same(x));
    CHECK(F::dropout(x, 0.0, true).is_same(x));
    Tensor y = F::dropout(x, 1.0, true);
    CHECK(equal(y, zeros({3, 4})));
    y.sum().backward();
    CHECK(equal(x.grad(), zeros({3, 4})));
}

TEST_CASE("dropout keeps each element with probability 1-p and scales it by 1/(1-p)") {
    manual_seed(1);
    const double p = 0.3;
    Tensor x = ones({400, 500});
    std::vector<float> y = F::dropout(x, p).to_vector<float>();
    int64_t dropped = 0, badly_scaled = 0;
    for (float v : y) {
        if (v == 0.0f) ++dropped;
        else if (std::abs(v - 1.0 / (1.0 - p)) > 1e-6) ++badly_scaled;
    }
    CHECK(badly_scaled == 0);
    double fraction = static_cast<double>(dropped) / static_cast<double>(y.size());
    CHECK(fraction == doctest::Approx(p).epsilon(0.02));           // 200k draws: sd of the fraction ~0.001
}

TEST_CASE("dropout masks are reproducible under manual_seed and differ between calls") {
    Tensor x = randn({64, 33});
    manual_seed(123);
    Tensor a = F::dropout(x, 0.5), b = F::dropout(x, 0.5);
    manual_seed(123);
    Tensor a2 = F::dropout(x, 0.5), b2 = F::dropout(x, 0.5);
    CHECK(equal(a, a2));
    CHECK(equal(b, b2));
    CHECK_FALSE(equal(a, b));                                       // the generator offset advanced
}

TEST_CASE("two dropouts in a row draw disjoint random numbers: no half of one mask repeats in the next") {
    // A fill of n elements draws 2n Philox counters (one 4-counter block per pair); reserving only n made
    // the second mask's first half equal the first mask's second half.
    const int64_t n = 4096;
    Tensor x = ones({n});
    manual_seed(7);
    std::vector<float> first = F::dropout(x, 0.5).to_vector<float>(), second = F::dropout(x, 0.5).to_vector<float>();
    int64_t same = 0;
    for (int64_t i = 0; i < n / 2; ++i) same += (first[static_cast<size_t>(n / 2 + i)] == 0.0f) == (second[static_cast<size_t>(i)] == 0.0f);
    CHECK(same < n / 2 * 6 / 10);                                    // independent masks agree on about half
}

TEST_CASE("dropout backward uses the forward mask") {
    manual_seed(9);
    const double p = 0.25;
    Tensor x = (rand({50, 40}) + 0.5).detach().requires_grad_(true);   // never zero
    Tensor y = F::dropout(x, p);
    Tensor dy = randn({50, 40});
    y.backward(dy);
    Tensor kept = ne(y, zeros_like(y));
    CHECK_CLOSE(x.grad(), where(kept, dy / (1.0 - p), 0.0), tol_for(kFloat32));
}

TEST_CASE("dropout passes float64 gradcheck and gradgradcheck with a fixed seed") {
    Tensor x = randn({4, 5}, TensorOptions(kFloat64).requires_grad(true));
    auto f = [](const tensor_list& in) {
        manual_seed(77);                                            // the same mask on every call
        return tensor_list{F::dropout(in[0], 0.4)};
    };
    CHECK(autograd::gradcheck(f, {x}));
    CHECK(autograd::gradgradcheck(f, {x}));
}

TEST_CASE("dropout in f16/bf16 draws the same mask as f64 and stays within dtype tolerance") {
    for (DType dt : {kFloat16, kBFloat16}) {
        CAPTURE(dtype_name(dt));
        Tensor x = randn({16, 16}).to(dt).requires_grad_(true);
        Tensor x64 = x.detach().to(kFloat64).requires_grad_(true);
        manual_seed(5);
        Tensor y = F::dropout(x, 0.1);
        manual_seed(5);
        Tensor y64 = F::dropout(x64, 0.1);
        CHECK(y.dtype() == dt);
        CHECK(equal(eq(y, zeros_like(y)), eq(y64, zeros_like(y64))));
        CHECK_CLOSE(y, y64, tol_for(dt, 2));                         // the 1/(1-p) scale is rounded too
        Tensor dy = randn({16, 16}).to(dt);
        y.backward(dy);
        y64.backward(dy.to(kFloat64));
        CHECK_CLOSE(x.grad(), x64.grad(), tol_for(dt, 2));
    }
}

TEST_CASE("dropout rejects a probability outside [0, 1]") {
    Tensor x = zeros({2});
    CHECK_THROWS_WITH_AS(F::dropout(x, -0.1),
                         doctest::Contains("dropout: dropout probability has to be between 0 and 1, but got -0.1"), ValueError);
    CHECK_THROWS_AS(F::dropout(x, 1.5), ValueError);
    CHECK_THROWS_AS(F::dropout(x, NAN), ValueError);
    CHECK_THROWS_AS(F::dropout(x, 2.0, false), ValueError);                    // checked in eval mode too
    CHECK_THROWS_AS(F::dropout(zeros({2}, TensorOptions(kInt64)), 0.5), DTypeError);
}

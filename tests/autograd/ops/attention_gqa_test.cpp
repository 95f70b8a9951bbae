// attention_gqa_test.cpp: F::scaled_dot_product_attention(..., enable_gqa): query heads sharing
// key/value heads. PyTorch fixtures (plain, causal, and a boolean mask on the general path); the fused
// path against the same attention on K/V repeated per query head, forward and backward; f64 gradcheck
// and gradgradcheck; the fused forward and backward allocate no repeated K/V; and bad input.
#include <doctest/doctest.h>

#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

TEST_CASE("enable_gqa matches PyTorch: plain, causal, and with a boolean mask") {
    for (const char* name : {"sdpa_gqa", "sdpa_gqa_causal", "sdpa_gqa_mask"}) {
        CAPTURE(name);
        Fixture fx = load_fixture(name);
        Tensor q = fx.at("q").clone().requires_grad_(true);              // (2,4,5,8)
        Tensor k = fx.at("k").clone().requires_grad_(true);              // (2,1,6,8)
        Tensor v = fx.at("v").clone().requires_grad_(true);
        Tensor mask = fx.tensors.count("mask") ? fx.at("mask") : Tensor();
        Tensor out = F::scaled_dot_product_attention(q, k, v, mask, 0.0, fx.param("is_causal") != 0.0, std::nullopt, true);
        CHECK_CLOSE(out, fx.at("out"), tol_for(kFloat32));
        out.backward(fx.at("dout"));
        CHECK_CLOSE(q.grad(), fx.at("dq"), tol_for(kFloat32));
        CHECK_CLOSE(k.grad(), fx.at("dk"), tol_for(kFloat32, 8));        // summed over 4 query heads
        CHECK_CLOSE(v.grad(), fx.at("dv"), tol_for(kFloat32, 8));
    }
}

TEST_CASE("enable_gqa equals attention on K/V repeated per query head, and maps head h to h / group") {
    manual_seed(101);
    auto opts = TensorOptions(kFloat64).requires_grad(true);
    for (bool causal : {false, true}) {
        CAPTURE(causal);
        Tensor q = randn({2, 6, 5, 4}, opts), k = randn({2, 2, 7, 4}, opts), v = randn({2, 2, 7, 3}, opts);
        Tensor kr = repeat_interleave(k, 3, 1), vr = repeat_interleave(v, 3, 1);   // heads 0,0,0,1,1,1
        Tensor out = F::scaled_dot_product_attention(q, k, v, {}, 0.0, causal, std::nullopt, true);
        Tensor ref = F::scaled_dot_product_attention(q, kr, vr, {}, 0.0, causal);
        CHECK_CLOSE(out, ref, tol_for(kFloat64));
        Tensor dout = randn(out.sizes(), TensorOptions(kFloat64));
        tensor_list got = autograd::grad({out}, {q, k, v}, {dout});
        tensor_list want = autograd::grad({ref}, {q, k, v}, {dout});
        for (size_t i = 0; i < 3; ++i) CHECK_CLOSE(got[i], want[i], tol_for(kFloat64));
    }
    // head 5 of 6 uses kv head 1: changing kv head 0 leaves its output alone
    Tensor q = randn({1, 6, 3, 4}), k = randn({1, 2, 3, 4}), v = randn({1, 2, 3, 4});
    Tensor before = select(F::scaled_dot_product_attention(q, k, v, {}, 0.0, false, std::nullopt, true), 1, 5);
    Tensor k2 = k.clone();
    select(k2, 1, 0).fill_(3.0);
    Tensor after = select(F::scaled_dot_product_attention(q, k2, v, {}, 0.0, false, std::nullopt, true), 1, 5);
    CHECK(equal(before, after));
}

TEST_CASE("enable_gqa passes float64 gradcheck and gradgradcheck") {
    manual_seed(103);
    auto opts = TensorOptions(kFloat64).requires_grad(true);
    Tensor q = randn({1, 4, 3, 4}, opts), k = randn({1, 2, 5, 4}, opts), v = randn({1, 2, 5, 4}, opts);
    auto f = [](const tensor_list& t) {
        return tensor_list{F::scaled_dot_product_attention(t[0], t[1], t[2], {}, 0.0, true, std::nullopt, true)};
    };
    CHECK(autograd::gradcheck(f, {q, k, v}));
    CHECK(autograd::gradgradcheck(f, {q, k, v}));
}

TEST_CASE("enable_gqa on the fused path allocates no repeated K/V") {
    manual_seed(107);
    const int64_t NH = 8, S = 4096, HS = 64;
    Tensor q = randn({1, NH, 4, HS}).requires_grad_(true);
    Tensor k = randn({1, 1, S, HS}).requires_grad_(true), v = randn({1, 1, S, HS}).requires_grad_(true);
    const int64_t repeated = NH * S * HS * 4;                             // bytes of one K repeated per head (8 MiB)
    const int64_t base = memory_allocated(kCPU);
    reset_peak_memory_stats(kCPU);
    Tensor out = F::scaled_dot_product_attention(q, k, v, {}, 0.0, true, std::nullopt, true);
    out.sum().backward();
    CHECK(max_memory_allocated(kCPU) - base < repeated / 2);             // q, out, grads of k and v: about 3 MiB
    CHECK(k.grad().sizes() == k.sizes());
}

TEST_CASE("enable_gqa rejects heads that do not divide, and heads still must match without it") {
    Tensor q = randn({1, 6, 3, 4}), k = randn({1, 4, 3, 4}), v = randn({1, 4, 3, 4});
    CHECK_THROWS_WITH_AS(F::scaled_dot_product_attention(q, k, v, {}, 0.0, false, std::nullopt, true),
                         doctest::Contains("enable_gqa"), ShapeError);
    Tensor k2 = randn({1, 2, 3, 4}), v2 = randn({1, 2, 3, 4});
    CHECK_THROWS_AS(F::scaled_dot_product_attention(q, k2, v2), ShapeError);                      // no enable_gqa
    CHECK_THROWS_AS(F::scaled_dot_product_attention(q, k2, randn({1, 3, 3, 4}), {}, 0.0, false, std::nullopt, true),
                    ShapeError);                                                                  // k, v heads differ
    CHECK_THROWS_AS(F::scaled_dot_product_attention(randn({3, 4}), randn({3, 4}), randn({3, 4}), {}, 0.0, false,
                                                    std::nullopt, true),
                    ShapeError);                                                                  // no head dim
}

// attention_test.cpp: F::scaled_dot_product_attention: PyTorch fixtures (plain, causal, T != S
// with HSv != HS), f64 gradcheck, causal attention against a reference built from matmul +
// softmax with a -inf mask (forward and backward), non-contiguous heads, f16/bf16 against f64,
// double backward (gradgradcheck through the fused node), the heads-last output layout, and bad input.
#include <doctest/doctest.h>

#include <cmath>

#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {
// softmax(q k^T / sqrt(HS) + mask) v from differentiable ops; mask is -inf where j > i
Tensor reference_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal) {
    Tensor scores = matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(q.size(-1)));   // (B,NH,T,S)
    if (causal) {
        int64_t T = q.size(2), S = k.size(2);
        Tensor rows = arange(T).view({T, 1}), cols = arange(S).view({1, S});
        scores = where(gt(cols, rows), full({}, -INFINITY, scores.options()), scores);
    }
    return matmul(F::softmax(scores, -1), v);
}
}  // namespace

TEST_CASE("scaled_dot_product_attention matches PyTorch forward and backward") {
    for (const char* name : {"nnf_sdpa", "nnf_sdpa_causal", "nnf_sdpa_cross", "nnf_sdpa_cross_causal"}) {
        CAPTURE(name);
        Fixture fx = load_fixture(name);
        bool causal = fx.param("is_causal") != 0.0;
        Tensor q = fx.at("q").clone().requires_grad_(true);
        Tensor k = fx.at("k").clone().requires_grad_(true);
        Tensor v = fx.at("v").clone().requires_grad_(true);
        Tensor out = F::scaled_dot_product_attention(q, k, v, causal);
        CHECK_CLOSE(out, fx.at("out"), tol_for(kFloat32));
        out.backward(fx.at("dout"));
        CHECK_CLOSE(q.grad(), fx.at("dq"), tol_for(kFloat32));
        CHECK_CLOSE(k.grad(), fx.at("dk"), tol_for(kFloat32));
        CHECK_CLOSE(v.grad(), fx.at("dv"), tol_for(kFloat32));
    }
}

TEST_CASE("scaled_dot_product_attention passes float64 gradcheck") {
    manual_seed(53);
    auto opts = TensorOptions(kFloat64).requires_grad(true);
    Tensor q = randn({2, 2, 3, 4}, opts), k = randn({2, 2, 5, 4}, opts), v = randn({2, 2, 5, 3}, opts);
    for (bool causal : {false, true}) {
        CAPTURE(causal);
        auto f = [causal](const tensor_list& in) {
            return tensor_list{F::scaled_dot_product_attention(in[0], in[1], in[2], causal)};
        };
        CHECK(autograd::gradcheck(f, {q, k, v}));
    }
}

TEST_CASE("causal attention equals matmul + softmax with a -inf mask, forward and backward") {
    manual_seed(59);
    auto opts = TensorOptions(kFloat64).requires_grad(true);
    Tensor q = randn({2, 3, 7, 8}, opts), k = randn({2, 3, 7, 8}, opts), v = randn({2, 3, 7, 8}, opts);
    Tensor dout = randn({2, 3, 7, 8}, TensorOptions(kFloat64));
    Tensor out = F::scaled_dot_product_attention(q, k, v, true);
    Tensor ref = reference_attention(q, k, v, true);
    CHECK_CLOSE(out, ref, tol_for(kFloat64));
    tensor_list got = autograd::grad({out}, {q, k, v}, {dout});
    tensor_list want = autograd::grad({ref}, {q, k, v}, {dout});
    for (size_t i = 0; i < 3; ++i) CHECK_CLOSE(got[i], want[i], tol_for(kFloat64));
    // the first query sees only the first key: its output is v[..., 0, :]
    CHECK_CLOSE(out.select(2, 0), v.select(2, 0), tol_for(kFloat64));
}

TEST_CASE("scaled_dot_product_attention takes non-contiguous heads (B,T,NH,HS).transpose(1, 2)") {
    manual_seed(61);
    Tensor qkv = randn({2, 5, 3, 3, 4}, TensorOptions(kFloat64));                // (B,T,3,NH,HS)
    tensor_list parts;
    for (int64_t i = 0; i < 3; ++i) parts.push_back(qkv.select(2, i).transpose(1, 2));   // (B,NH,T,HS) views
    CHECK_FALSE(parts[0].is_contiguous());
    Tensor out = F::scaled_dot_product_attention(parts[0], parts[1], parts[2], true);
    Tensor ref = reference_attention(parts[0].contiguous(), parts[1].contiguous(), parts[2].contiguous(), true);
    CHECK_CLOSE(out, ref, tol_for(kFloat64));
}

TEST_CASE("scaled_dot_product_attention in f16/bf16 stays within dtype tolerance of f64") {
    manual_seed(67);
    for (DType dt : {kFloat16, kBFloat16}) {
        CAPTURE(dtype_name(dt));
        tensor_list low, high;
        for (int i = 0; i < 3; ++i) {
            Tensor t = randn({2, 2, 16, 8}).to(dt);
            low.push_back(t.detach().requires_grad_(true));
            high.push_back(t.to(kFloat64).requires_grad_(true));
        }
        Tensor dout = randn({2, 2, 16, 8}).to(dt);
        Tensor out = F::scaled_dot_product_attention(low[0], low[1], low[2], true);
        Tensor out64 = F::scaled_dot_product_attention(high[0], high[1], high[2], true);
        CHECK(out.dtype() == dt);
        out.backward(dout);
        out64.backward(dout.to(kFloat64));
        // scores, probabilities and the output are each rounded once; gradients go through ~4 GEMMs
        CHECK_CLOSE(out, out64, tol_for(dt, 8));
        for (int i = 0; i < 3; ++i) CHECK_CLOSE(low[i].grad(), high[i].grad(), tol_for(dt, 16));
    }
}

TEST_CASE("scaled_dot_product_attention double backward (fused node, create_graph) passes gradgradcheck") {
    manual_seed(71);
    auto opts = TensorOptions(kFloat64).requires_grad(true);
    Tensor q = randn({1, 2, 3, 2}, opts), k = randn({1, 2, 4, 2}, opts), v = randn({1, 2, 4, 3}, opts);
    for (bool causal : {false, true}) {
        CAPTURE(causal);
        auto f = [causal](const tensor_list& in) {
            return tensor_list{F::scaled_dot_product_attention(in[0], in[1], in[2], causal)};
        };
        CHECK(autograd::gradgradcheck(f, {q, k, v}));
    }
}

TEST_CASE("scaled_dot_product_attention output is a heads-last view: merging heads copies nothing") {
    Tensor q = randn({2, 3, 4, 5});
    Tensor out = F::scaled_dot_product_attention(q, q, q, true);                  // (B,NH,T,HS)
    CHECK(out.sizes() == Shape{2, 3, 4, 5});
    CHECK(out.transpose(1, 2).is_contiguous());                                   // (B,T,NH,HS)
}

TEST_CASE("scaled_dot_product_attention rejects bad input") {
    Tensor q = zeros({1, 2, 3, 4});
    CHECK_THROWS_WITH_AS(F::scaled_dot_product_attention(q, zeros({1, 2, 3, 5}), zeros({1, 2, 3, 4})),
                         doctest::Contains("scaled_dot_product_attention: shapes do not fit: q is (1,2,3,4) f32 cpu, "
                                           "k is (1,2,3,5) f32 cpu"),
                         ShapeError);
    CHECK_THROWS_AS(F::scaled_dot_product_attention(q, q, zeros({1, 2, 4, 4})), ShapeError);   // S differs
    CHECK_THROWS_AS(F::scaled_dot_product_attention(zeros({2, 3, 4}), zeros({2, 3, 4}), zeros({2, 3, 4})),
                    ShapeError);
    CHECK_THROWS_WITH_AS(F::scaled_dot_product_attention(q, q.to(kFloat64), q),
                         doctest::Contains("scaled_dot_product_attention: dtypes differ: q is (1,2,3,4) f32 cpu, "
                                           "k is (1,2,3,4) f64 cpu"),
                         DTypeError);
    CHECK_THROWS_AS(F::scaled_dot_product_attention(q.to(kInt64), q.to(kInt64), q.to(kInt64)), DTypeError);
}

TEST_CASE("scaled_dot_product_attention runs in the autocast dtype") {
    Tensor q = randn({1, 2, 4, 8}, TensorOptions().requires_grad(true));
    amp::AutocastGuard guard(kCPU, kBFloat16);
    Tensor out = F::scaled_dot_product_attention(q, q, q, true);
    CHECK(out.dtype() == kBFloat16);
    out.sum().backward();
    CHECK(q.grad().dtype() == kFloat32);
}

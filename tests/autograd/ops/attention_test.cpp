// attention_test.cpp: F::scaled_dot_product_attention: PyTorch fixtures (plain, causal, T != S
// with HSv != HS), f64 gradcheck, causal attention against a reference built from matmul +
// softmax with a -inf mask (forward and backward), non-contiguous heads, f16/bf16 against f64,
// double backward (gradgradcheck through the fused node and the general path), the heads-last output
// layout, masks, scale, dropout, any leading rank, and bad input.
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

TEST_CASE("scaled_dot_product_attention passes gradgradcheck on the fused and the general path") {
    manual_seed(71);
    auto opts = TensorOptions(kFloat64).requires_grad(true);
    Tensor q = randn({1, 2, 3, 4}, opts), k = randn({1, 2, 5, 4}, opts), v = randn({1, 2, 5, 3}, opts);
    Tensor keep = gt(rand({3, 5}), full({}, 0.3));
    for (int64_t j = 0; j < 3; ++j) keep.select(0, j).select(0, 0).fill_(1.0);
    for (int variant = 0; variant < 4; ++variant) {
        CAPTURE(variant);
        auto f = [&](const tensor_list& in) {
            if (variant == 0) return tensor_list{F::scaled_dot_product_attention(in[0], in[1], in[2], true)};
            if (variant == 1) return tensor_list{F::scaled_dot_product_attention(in[0], in[1], in[2], keep)};
            if (variant == 2)
                return tensor_list{F::scaled_dot_product_attention(in[0], in[1], in[2], {}, 0.0, false, 0.7)};
            return tensor_list{F::scaled_dot_product_attention(in[0].select(0, 0), in[1].select(0, 0),
                                                               in[2].select(0, 0))};   // 3-d, general path
        };
        CHECK(autograd::gradcheck(f, {q, k, v}));
        CHECK(autograd::gradgradcheck(f, {q, k, v}));
    }
}

TEST_CASE("scaled_dot_product_attention output is a heads-last view: merging heads copies nothing") {
    Tensor q = randn({2, 3, 4, 5});
    Tensor out = F::scaled_dot_product_attention(q, q, q, true);                  // (B,NH,T,HS)
    CHECK(out.sizes() == Shape{2, 3, 4, 5});
    CHECK(out.transpose(1, 2).is_contiguous());                                   // (B,T,NH,HS)
}

TEST_CASE("scaled_dot_product_attention with masks, scale and any leading rank matches PyTorch") {
    for (const char* name : {"nnf_sdpa_bool_mask", "nnf_sdpa_additive_mask", "nnf_sdpa_scale_causal", "nnf_sdpa_3d",
                             "nnf_sdpa_5d_broadcast", "nnf_sdpa_dead_row"}) {
        CAPTURE(name);
        Fixture fx = load_fixture(name);
        Tensor q = fx.at("q").clone().requires_grad_(true);
        Tensor k = fx.at("k").clone().requires_grad_(true);
        Tensor v = fx.at("v").clone().requires_grad_(true);
        Tensor mask = fx.tensors.count("mask") ? fx.at("mask") : Tensor();
        std::optional<double> scale;
        if (fx.params.contains("scale")) scale = fx.param("scale");
        bool causal = std::string(name) == "nnf_sdpa_scale_causal" || std::string(name) == "nnf_sdpa_5d_broadcast";
        Tensor out = F::scaled_dot_product_attention(q, k, v, mask, 0.0, causal, scale);
        CHECK_CLOSE(out, fx.at("out"), tol_for(kFloat32));
        out.backward(fx.at("dout"));
        CHECK_CLOSE(q.grad(), fx.at("dq"), tol_for(kFloat32));
        CHECK_CLOSE(k.grad(), fx.at("dk"), tol_for(kFloat32));
        CHECK_CLOSE(v.grad(), fx.at("dv"), tol_for(kFloat32));
    }
}

TEST_CASE("a bool mask equals the additive mask 0 / -inf, and is_causal equals its tril mask") {
    manual_seed(73);
    Tensor q = randn({2, 3, 4, 8}, TensorOptions(kFloat64)), k = randn({2, 3, 6, 8}, TensorOptions(kFloat64));
    Tensor v = randn({2, 3, 6, 5}, TensorOptions(kFloat64));
    Tensor rows = arange(4).view({4, 1}), cols = arange(6).view({1, 6});
    Tensor tril = le(cols, rows);                                                  // (T,S)
    Tensor additive = where(tril, zeros({4, 6}, TensorOptions(kFloat64)), -INFINITY);
    Tensor a = F::scaled_dot_product_attention(q, k, v, true);
    CHECK_CLOSE(F::scaled_dot_product_attention(q, k, v, tril), a, tol_for(kFloat64));
    CHECK_CLOSE(F::scaled_dot_product_attention(q, k, v, additive), a, tol_for(kFloat64));
}

TEST_CASE("scaled_dot_product_attention dropout: reproducible with a seed, unbiased, gradcheck at a fixed seed") {
    manual_seed(79);
    auto opts = TensorOptions(kFloat64).requires_grad(true);
    Tensor q = randn({1, 2, 4, 3}, opts), k = randn({1, 2, 5, 3}, opts), v = randn({1, 2, 5, 2}, opts);
    manual_seed(5);
    Tensor a = F::scaled_dot_product_attention(q, k, v, {}, 0.4);
    manual_seed(5);
    Tensor b = F::scaled_dot_product_attention(q, k, v, {}, 0.4);
    CHECK(equal(a, b));
    CHECK_FALSE(equal(a, F::scaled_dot_product_attention(q, k, v, {}, 0.4)));
    auto f = [&](const tensor_list& in) {
        manual_seed(9);                                                             // the same mask every call
        return tensor_list{F::scaled_dot_product_attention(in[0], in[1], in[2], {}, 0.3, true)};
    };
    CHECK(autograd::gradcheck(f, {q, k, v}));
    CHECK(autograd::gradgradcheck(f, {q, k, v}));
    // with v = 1 each output row is sum_j keep_j p_j / (1 - p): its mean over many draws is 1
    Tensor qs = randn({64, 8, 16, 4}), ks = randn({64, 8, 16, 4}), ones_v = ones({64, 8, 16, 1});
    Tensor out = F::scaled_dot_product_attention(qs, ks, ones_v, {}, 0.25);
    CHECK(out.mean().item<double>() == doctest::Approx(1.0).epsilon(0.02));
    Tensor zero_rows = F::scaled_dot_product_attention(qs, ks, ones_v, {}, 1.0);
    CHECK(equal(zero_rows, zeros_like(zero_rows)));
}

TEST_CASE("scaled_dot_product_attention with f16/bf16 masks and 3-d inputs stays within tolerance of f64") {
    manual_seed(83);
    Tensor keep = gt(rand({16, 16}), full({}, 0.5));
    for (int64_t j = 0; j < 16; ++j) keep.select(0, j).select(0, j).fill_(1.0);
    for (DType dt : {kFloat16, kBFloat16}) {
        CAPTURE(dtype_name(dt));
        Tensor q = randn({4, 16, 8}).to(dt), k = randn({4, 16, 8}).to(dt), v = randn({4, 16, 8}).to(dt);
        Tensor out = F::scaled_dot_product_attention(q, k, v, keep, 0.0, false, 0.5);
        Tensor ref = F::scaled_dot_product_attention(q.to(kFloat64), k.to(kFloat64), v.to(kFloat64), keep, 0.0,
                                                     false, 0.5);
        CHECK(out.dtype() == dt);
        CHECK_CLOSE(out, ref, tol_for(dt, 8));
    }
}

TEST_CASE("scaled_dot_product_attention rejects bad input") {
    Tensor q = zeros({1, 2, 3, 4});
    CHECK_THROWS_WITH_AS(F::scaled_dot_product_attention(q, zeros({1, 2, 3, 5}), zeros({1, 2, 3, 4})),
                         doctest::Contains("scaled_dot_product_attention: shapes do not fit: q is (1,2,3,4) f32 cpu, "
                                           "k is (1,2,3,5) f32 cpu"),
                         ShapeError);
    CHECK_THROWS_AS(F::scaled_dot_product_attention(q, q, zeros({1, 2, 4, 4})), ShapeError);   // S differs
    CHECK_THROWS_AS(F::scaled_dot_product_attention(zeros({4}), zeros({4}), zeros({4})), ShapeError);
    CHECK_THROWS_WITH_AS(F::scaled_dot_product_attention(q, q, q, ones({3, 3}, TensorOptions(kBool)), 0.0, true),
                         doctest::Contains("explicit attn_mask should not be set when is_causal=true"), ValueError);
    CHECK_THROWS_AS(F::scaled_dot_product_attention(q, q, q, zeros({3, 3}, TensorOptions(kInt64))), DTypeError);
    CHECK_THROWS_AS(F::scaled_dot_product_attention(q, q, q, zeros({4, 3}, TensorOptions(kBool))), ShapeError);
    CHECK_THROWS_AS(F::scaled_dot_product_attention(q, q, q, {}, 1.5), ValueError);
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

// embedding_test.cpp: F::embedding: PyTorch fixture (repeated indices sum in backward), f64
// gradcheck and gradgradcheck, a large threaded scatter-add against a serial reference, f16/bf16
// against f64, int32 indices, and bad input (out-of-range index, dtypes, shapes).
#include <doctest/doctest.h>

#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

TEST_CASE("embedding matches PyTorch forward and backward") {
    Fixture fx = load_fixture("nnf_embedding");
    Tensor weight = fx.at("weight").clone().requires_grad_(true);
    Tensor out = F::embedding(fx.at("idx"), weight);
    CHECK(out.sizes() == Shape{2, 3, 4});
    CHECK_CLOSE(out, fx.at("out"), tol_for(kFloat32));
    out.backward(fx.at("dout"));
    CHECK_CLOSE(weight.grad(), fx.at("dweight"), tol_for(kFloat32));
}

TEST_CASE("embedding passes float64 gradcheck and gradgradcheck") {
    manual_seed(23);
    Tensor weight = randn({6, 3}, TensorOptions(kFloat64).requires_grad(true));
    Tensor idx = tensor<int64_t>({5, 0, 5, 2, 2, 2}, {3, 2});
    auto f = [&](const tensor_list& in) { return tensor_list{F::embedding(idx, in[0])}; };
    CHECK(autograd::gradcheck(f, {weight}));
    CHECK(autograd::gradgradcheck(f, {weight}));
    Tensor scalar_idx = tensor<int64_t>({4}, {});                                 // 0-dim index -> (C)
    CHECK(F::embedding(scalar_idx, weight).sizes() == Shape{3});
}

TEST_CASE("embedding backward with many repeated indices matches a serial scatter-add") {
    manual_seed(29);
    const int64_t V = 50, C = 96, N = 4000;                                       // large enough for threads
    Tensor weight = randn({V, C}, TensorOptions(kFloat64).requires_grad(true));
    Tensor idx = randint(0, V, {N});
    Tensor dout = randn({N, C}, TensorOptions(kFloat64));
    F::embedding(idx, weight).backward(dout);
    std::vector<double> expected(V * C, 0.0);
    std::vector<int64_t> iv = idx.to_vector<int64_t>();
    std::vector<double> dv = dout.to_vector<double>();
    for (int64_t n = 0; n < N; ++n)
        for (int64_t c = 0; c < C; ++c) expected[iv[n] * C + c] += dv[n * C + c];
    CHECK_CLOSE(weight.grad(), tensor<double>(expected, {V, C}), tol_for(kFloat64));
    // the same result on a second run: the order of the sums does not depend on scheduling
    Tensor first = weight.grad().clone();
    weight.mutable_grad() = Tensor();
    F::embedding(idx, weight).backward(dout);
    CHECK(equal(weight.grad(), first));
}

TEST_CASE("embedding in f16/bf16 stays within dtype tolerance of f64, int32 indices work") {
    manual_seed(31);
    Tensor idx = randint(0, 7, {40}, TensorOptions(kInt32));
    for (DType dt : {kFloat16, kBFloat16}) {
        CAPTURE(dtype_name(dt));
        Tensor w = randn({7, 8}).to(dt).requires_grad_(true);
        Tensor w64 = w.detach().to(kFloat64).requires_grad_(true);
        Tensor dout = randn({40, 8}).to(dt);
        Tensor y = F::embedding(idx, w), y64 = F::embedding(idx, w64);
        CHECK(y.dtype() == dt);
        CHECK(equal(y.to(kFloat64), y64));                                       // a gather is exact
        y.backward(dout);
        y64.backward(dout.to(kFloat64));
        // each table row sums ~6 gradient rows in fp32 and is rounded once
        CHECK_CLOSE(w.grad(), w64.grad(), tol_for(dt, 1));
    }
}

TEST_CASE("embedding rejects bad input") {
    Tensor weight = zeros({5, 3});
    CHECK_THROWS_WITH_AS(F::embedding(tensor<int64_t>({1, 7, 2}), weight),
                         doctest::Contains("embedding: index 7 is out of range for weight (5,3) f32 cpu "
                                           "(vocab size 5)"),
                         IndexError);
    CHECK_THROWS_WITH_AS(F::embedding(tensor<int64_t>({-1}), weight), doctest::Contains("index -1 is out of range"),
                         IndexError);
    CHECK_THROWS_WITH_AS(F::embedding(zeros({2}), weight),
                         doctest::Contains("embedding: indices must be int64 or int32 but got (2) f32 cpu"),
                         DTypeError);
    CHECK_THROWS_WITH_AS(F::embedding(tensor<int64_t>({1}), zeros({5})),
                         doctest::Contains("embedding: weight must be 2-d (V,C) but got (5) f32 cpu"), ShapeError);
    CHECK_THROWS_AS(F::embedding(tensor<int64_t>({1}), zeros({5, 3}, TensorOptions(kInt64))), DTypeError);
}

TEST_CASE("embedding with padding_idx: PyTorch fixture, no gradient to the padding row, gradcheck, f16/bf16") {
    for (const char* name : {"nnf_embedding_padding", "nnf_embedding_padding_neg"}) {
        CAPTURE(name);
        Fixture fx = load_fixture(name);
        auto pad = static_cast<int64_t>(fx.param("padding_idx"));
        Tensor weight = fx.at("weight").clone().requires_grad_(true);
        Tensor out = F::embedding(fx.at("idx"), weight, pad);
        CHECK_CLOSE(out, fx.at("out"), tol_for(kFloat32));                      // the row is still read
        out.backward(fx.at("dout"));
        CHECK_CLOSE(weight.grad(), fx.at("dweight"), tol_for(kFloat32));
    }
    manual_seed(31);
    Tensor weight = randn({6, 3}, TensorOptions(kFloat64).requires_grad(true));
    Tensor idx = tensor<int64_t>({5, 0, 5, 2, 2, 2}, {3, 2});
    // padding_idx's gradient is that of a lookup whose row 2 is a constant (not the true derivative)
    Tensor row2 = eq(arange(6).view({6, 1}), full({}, 2.0, TensorOptions(kInt64)));
    auto f = [&](const tensor_list& in) { return tensor_list{F::embedding(idx, in[0], 2)}; };
    auto constant_row = [&](const tensor_list& in) {
        return tensor_list{F::embedding(idx, where(row2, in[0].detach(), in[0]))};
    };
    Tensor dout = randn({3, 2, 3}, TensorOptions(kFloat64));
    CHECK_CLOSE(autograd::grad({f({weight})[0]}, {weight}, {dout})[0],
                autograd::grad({constant_row({weight})[0]}, {weight}, {dout})[0], tol_for(kFloat64));
    CHECK(autograd::gradgradcheck(f, {weight}));
    Tensor g = autograd::grad({F::embedding(idx, weight, -1).sum()}, {weight})[0];
    CHECK(g.select(0, 5).to_vector<double>() == std::vector<double>{0, 0, 0});   // -1 wraps to row 5
    CHECK(g.select(0, 2).to_vector<double>() == std::vector<double>{3, 3, 3});
    for (DType dt : {kFloat16, kBFloat16}) {
        Tensor w = randn({6, 3}).to(dt).requires_grad_(true);
        F::embedding(idx, w, 0).sum().backward();
        CHECK(w.grad().dtype() == dt);
        CHECK(w.grad().select(0, 0).to(kFloat32).to_vector<float>() == std::vector<float>{0, 0, 0});
        CHECK(w.grad().select(0, 2).to(kFloat32).to_vector<float>() == std::vector<float>{3, 3, 3});
    }
    CHECK_THROWS_WITH_AS(F::embedding(idx, weight, 6), doctest::Contains("padding_idx 6 must be within"),
                         ValueError);
    CHECK_THROWS_AS(F::embedding(idx, weight, -7), ValueError);
}

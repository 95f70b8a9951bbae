// lora_test.cpp: F::lora_linear, out = y + scale * (x A^T) B^T: PyTorch's values and gradients
// (tests/fixtures/lora_linear.json from tools/fixtures/peft_lora.py), f64 gradcheck and gradgradcheck,
// f16/bf16 against f64, autocast, and bad input.
#include <doctest/doctest.h>

#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

TEST_CASE("lora_linear matches PyTorch's values and gradients") {
    Fixture fx = load_fixture("lora_linear");
    tensor_list in;
    for (const char* name : {"y", "x", "A", "B"}) in.push_back(fx.at(name).clone().requires_grad_(true));
    Tensor out = F::lora_linear(in[0], in[1], in[2], in[3], fx.param("scale"));
    CHECK_CLOSE(out, fx.at("out"), tol_for(kFloat32));
    tensor_list grads = autograd::grad({out}, in, {fx.at("dout")});
    CHECK_CLOSE(grads[0], fx.at("dy"), tol_for(kFloat32));
    CHECK_CLOSE(grads[1], fx.at("dx"), tol_for(kFloat32));
    CHECK_CLOSE(grads[2], fx.at("dA"), tol_for(kFloat32));
    CHECK_CLOSE(grads[3], fx.at("dB"), tol_for(kFloat32));
}

TEST_CASE("lora_linear passes float64 gradcheck and gradgradcheck") {
    manual_seed(11);
    TensorOptions f64 = TensorOptions(kFloat64).requires_grad(true);
    tensor_list in = {randn({2, 3, 5}, f64), randn({2, 3, 4}, f64), randn({2, 4}, f64), randn({5, 2}, f64)};
    auto f = [](const tensor_list& t) { return tensor_list{F::lora_linear(t[0], t[1], t[2], t[3], 0.75)}; };
    CHECK(autograd::gradcheck(f, in));
    CHECK(autograd::gradgradcheck(f, in));
    // a 1-D x (one row), as linear accepts
    tensor_list row = {randn({5}, f64), randn({4}, f64), randn({2, 4}, f64), randn({5, 2}, f64)};
    CHECK(autograd::gradcheck(f, row));
}

TEST_CASE("lora_linear needs no gradient for a frozen base: only A and B get one") {
    manual_seed(12);
    Tensor y = randn({3, 5}), x = randn({3, 4});
    Tensor a = randn({2, 4}).requires_grad_(true), b = randn({5, 2}).requires_grad_(true);
    F::lora_linear(y, x, a, b, 2.0).sum().backward();
    CHECK_FALSE(x.grad().defined());
    // d/dB of sum(scale * h B^T) = scale * colsum(h) for every output row
    Tensor h = mm(x, a.detach().t());
    CHECK_CLOSE(b.grad(), (h.sum({0}) * 2.0).unsqueeze(0).expand({5, 2}), tol_for(kFloat32));
}

TEST_CASE("lora_linear in f16/bf16 stays within dtype tolerance of f64") {
    manual_seed(13);
    for (DType dt : {kFloat16, kBFloat16}) {
        CAPTURE(dtype_name(dt));
        tensor_list low, ref;
        for (Shape s : {Shape{4, 8}, Shape{4, 16}, Shape{3, 16}, Shape{8, 3}}) {
            Tensor t = (randn(s) * 0.5).to(dt);
            low.push_back(t.clone().requires_grad_(true));
            ref.push_back(t.to(kFloat64).requires_grad_(true));
        }
        Tensor dout = randn({4, 8}).to(dt);
        Tensor out = F::lora_linear(low[0], low[1], low[2], low[3], 2.0);
        Tensor out64 = F::lora_linear(ref[0], ref[1], ref[2], ref[3], 2.0);
        CHECK(out.dtype() == dt);
        out.backward(dout);
        out64.backward(dout.to(kFloat64));
        // two GEMMs (K = 16, then r = 3) each rounded to the dtype, then the add
        CHECK_CLOSE(out, out64, tol_for(dt, 16));
        for (size_t i = 0; i < 4; ++i) {
            CAPTURE(i);
            CHECK(low[i].grad().dtype() == dt);
            CHECK_CLOSE(low[i].grad(), ref[i].grad(), tol_for(dt, 16));
        }
    }
}

TEST_CASE("lora_linear runs in the autocast dtype with f32 adapters") {
    manual_seed(14);
    Tensor x = randn({3, 4}), a = randn({2, 4}).requires_grad_(true), b = randn({5, 2}).requires_grad_(true);
    Tensor w = randn({5, 4});
    amp::AutocastGuard autocast(kCPU, kBFloat16);
    Tensor y = linear(x, w);                          // bf16 under autocast
    Tensor out = F::lora_linear(y, x, a, b, 1.0);
    CHECK(out.dtype() == kBFloat16);
    out.to(kFloat32).sum().backward();
    CHECK(a.grad().dtype() == kFloat32);              // the engine casts back to the leaf's dtype
    CHECK(b.grad().dtype() == kFloat32);
}

TEST_CASE("lora_linear rejects bad input with the op's name and the facts") {
    Tensor y = zeros({3, 5}), x = zeros({3, 4}), a = zeros({2, 4}), b = zeros({5, 2});
    CHECK_THROWS_WITH_AS(F::lora_linear(y, x, zeros({2, 3}), b, 1.0),
                         doctest::Contains("lora_linear: expected y (*,N), x (*,K), lora_A (r,K), lora_B (N,r) but "
                                           "got y is (3,5) f32 cpu, x is (3,4) f32 cpu, lora_A is (2,3) f32 cpu"),
                         ShapeError);
    CHECK_THROWS_AS(F::lora_linear(y, x, a, zeros({5, 3}), 1.0), ShapeError);     // rank differs
    CHECK_THROWS_AS(F::lora_linear(zeros({3, 6}), x, a, b, 1.0), ShapeError);     // out features differ
    CHECK_THROWS_AS(F::lora_linear(zeros({2, 5}), x, a, b, 1.0), ShapeError);     // rows differ
    CHECK_THROWS_WITH_AS(F::lora_linear(y, x, a.to(kFloat64), b, 1.0), doctest::Contains("lora_linear: dtypes differ"),
                         DTypeError);
    CHECK_THROWS_AS(F::lora_linear(y, Tensor(), a, b, 1.0), ValueError);
}

// rotary_test.cpp: F::apply_rotary_emb: Hugging Face's rotate_half form (gradients for x, cos and
// sin, and double backward through cos) and Meta's interleaved form against PyTorch fixtures; f64
// gradcheck and gradgradcheck in both layouts; the fused op against its composition from primitives
// on a non-contiguous x; f16/bf16 against f64; promotion; and bad input.
#include <doctest/doctest.h>

#include <cmath>

#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

// Hugging Face's rotate_half, built from primitives: cat(-x2, x1)
Tensor rotate_half(const Tensor& x) {
    int64_t half = x.size(-1) / 2;
    return cat({-narrow(x, -1, half, half), narrow(x, -1, 0, half)}, -1);
}

}  // namespace

TEST_CASE("apply_rotary_emb matches Hugging Face's rotate_half form, to second order") {
    Fixture fx = load_fixture("rotary_half");
    Tensor x = fx.at("x").clone().requires_grad_(true);                 // (B,NH,T,HS)
    Tensor cos = fx.at("cos").clone().requires_grad_(true);             // (B,1,T,HS)
    Tensor sin = fx.at("sin").clone().requires_grad_(true);
    Tensor y = F::apply_rotary_emb(x, cos, sin);
    CHECK_CLOSE(y, fx.at("y"), tol_for(kFloat32));
    tensor_list g = autograd::grad({y}, {x, cos, sin}, {fx.at("dy")}, true, true);
    CHECK_CLOSE(g[0], fx.at("dx"), tol_for(kFloat32));
    CHECK_CLOSE(g[1], fx.at("dcos"), tol_for(kFloat32, 8));             // summed over the NH heads
    CHECK_CLOSE(g[2], fx.at("dsin"), tol_for(kFloat32, 8));
    Tensor ddcos = autograd::grad({sum(g[0] * fx.at("v"))}, {cos})[0];
    CHECK_CLOSE(ddcos, fx.at("ddcos"), tol_for(kFloat32, 8));
}

TEST_CASE("apply_rotary_emb(interleaved) matches Meta's complex-number form") {
    Fixture fx = load_fixture("rotary_interleaved");
    Tensor x = fx.at("x").clone().requires_grad_(true);                 // (B,T,NH,HS)
    Tensor y = F::apply_rotary_emb(x, fx.at("cos"), fx.at("sin"), true);
    CHECK_CLOSE(y, fx.at("y"), tol_for(kFloat32));
    y.backward(fx.at("dy"));
    CHECK_CLOSE(x.grad(), fx.at("dx"), tol_for(kFloat32));
}

TEST_CASE("apply_rotary_emb passes float64 gradcheck and gradgradcheck in both layouts") {
    manual_seed(41);
    auto opts = TensorOptions(kFloat64).requires_grad(true);
    Tensor x = randn({2, 3, 4, 6}, opts), cos = randn({4, 6}, opts), sin = randn({2, 1, 4, 6}, opts);
    for (bool interleaved : {false, true}) {
        CAPTURE(interleaved);
        auto f = [interleaved](const tensor_list& in) {
            return tensor_list{F::apply_rotary_emb(in[0], in[1], in[2], interleaved)};
        };
        CHECK(autograd::gradcheck(f, {x, cos, sin}));
        CHECK(autograd::gradgradcheck(f, {x, cos, sin}));
    }
}

TEST_CASE("apply_rotary_emb equals x cos + rotate_half(x) sin on a transposed x, with any tables") {
    manual_seed(43);
    Tensor base = randn({2, 5, 3, 8}, TensorOptions(kFloat64));              // (B,T,NH,HS)
    Tensor x = transpose(base, 1, 2).requires_grad_(true);                   // (B,NH,T,HS), not contiguous
    Tensor cos = randn({5, 8}, TensorOptions(kFloat64)), sin = randn({5, 8}, TensorOptions(kFloat64));
    Tensor y = F::apply_rotary_emb(x, cos, sin);
    CHECK(y.is_contiguous());
    Tensor expected = x * cos + rotate_half(x) * sin;
    CHECK_CLOSE(y, expected, tol_for(kFloat64));
    Tensor dy = randn(y.sizes(), TensorOptions(kFloat64));
    CHECK_CLOSE(autograd::grad({y}, {x}, {dy})[0], autograd::grad({expected}, {x}, {dy})[0], tol_for(kFloat64));
}

TEST_CASE("apply_rotary_emb in f16/bf16 stays within dtype tolerance of f64, and promotes like x * cos") {
    manual_seed(47);
    for (DType dt : {kFloat16, kBFloat16}) {
        CAPTURE(dtype_name(dt));
        Tensor x = randn({2, 4, 8}).to(dt).requires_grad_(true);
        Tensor cos = randn({4, 8}).to(dt), sin = randn({4, 8}).to(dt);
        Tensor x64 = x.detach().to(kFloat64).requires_grad_(true);
        Tensor y = F::apply_rotary_emb(x, cos, sin, dt == kBFloat16);
        Tensor y64 = F::apply_rotary_emb(x64, cos.to(kFloat64), sin.to(kFloat64), dt == kBFloat16);
        CHECK(y.dtype() == dt);
        Tensor dy = randn(y.sizes()).to(dt);
        y.backward(dy);
        y64.backward(dy.to(kFloat64));
        CHECK_CLOSE(y, y64, tol_for(dt, 2));                 // two products and a sum in f32, one rounding
        CHECK_CLOSE(x.grad(), x64.grad(), tol_for(dt, 2));
    }
    Tensor h = randn({4, 8}).to(kBFloat16), c = randn({4, 8});
    CHECK(F::apply_rotary_emb(h, c, c).dtype() == kFloat32);                  // as bf16 * f32
    amp::AutocastGuard guard(kCPU, kBFloat16);
    CHECK(F::apply_rotary_emb(h, h, h).dtype() == kBFloat16);                // never cast by autocast
}

TEST_CASE("apply_rotary_emb: an infinite x reaches only the gradients it touches (difftest regression)") {
    // sin's gradient is g * rotate_half(x): an inf in x[1] is inf at position 3 only, finite elsewhere
    Tensor x = tensor<float>({-0.75f, INFINITY, -0.25f, -1.0f}, {1, 4});
    Tensor cos = randn({1, 4}).requires_grad_(true), sin = randn({1, 4}).requires_grad_(true);
    Tensor y = F::apply_rotary_emb(x, cos, sin);
    y.backward(ones({1, 4}));
    std::vector<float> dsin = sin.grad().to_vector<float>();
    CHECK(dsin[0] == 0.25f);                                   // -x[2]
    CHECK(dsin[1] == 1.0f);                                    // -x[3]
    CHECK(dsin[2] == -0.75f);                                  // x[0]
    CHECK(std::isinf(dsin[3]));                                // x[1]
}

TEST_CASE("apply_rotary_emb rejects bad input with typed errors naming the op") {
    Tensor x = randn({2, 4, 8});
    CHECK_THROWS_WITH_AS(F::apply_rotary_emb(randn({2, 4, 7}), randn({4, 7}), randn({4, 7})),
                         doctest::Contains("apply_rotary_emb"), ShapeError);                  // odd HS
    CHECK_THROWS_AS(F::apply_rotary_emb(x, randn({4, 4}), randn({4, 4})), ShapeError);       // HS/2 values
    CHECK_THROWS_AS(F::apply_rotary_emb(x, randn({3, 4, 8}), randn({3, 4, 8})), ShapeError);  // would grow x
    CHECK_THROWS_AS(F::apply_rotary_emb(x, randn({4, 8}), randn({4, 8}).to(kFloat64)), DTypeError);
    CHECK_THROWS_AS(F::apply_rotary_emb(tensor<int64_t>({1, 2}), randn({2}), randn({2})), DTypeError);
    CHECK_THROWS_AS(F::apply_rotary_emb(Tensor(), randn({2}), randn({2})), ValueError);
}

// rms_norm_test.cpp: F::rms_norm: PyTorch fixtures (with and without weight, the
// default eps, two normalized dims, small values where eps matters; first and second order), f64
// gradcheck and gradgradcheck, fused backward vs the create_graph form, f16/bf16 against f64,
// autocast (f32, as PyTorch's policy), and bad input. nn::RMSNorm: tests/nn/rms_norm_test.cpp.
#include <doctest/doctest.h>

#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

// y, dx (and dweight), and the double-backward value ddx = d(sum(dx * v))/dx
void check_rms_norm_fixture(const std::string& name, const Shape& normalized_shape, std::optional<double> eps) {
    CAPTURE(name);
    Fixture fx = load_fixture(name);
    Tensor x = fx.at("x").clone().requires_grad_(true);
    bool has_weight = fx.tensors.count("weight") != 0;
    Tensor w = has_weight ? fx.at("weight").clone().requires_grad_(true) : Tensor();
    Tensor y = F::rms_norm(x, normalized_shape, w, eps);
    CHECK_CLOSE(y, fx.at("y"), tol_for(kFloat32));
    tensor_list inputs = has_weight ? tensor_list{x, w} : tensor_list{x};
    for (bool create_graph : {false, true}) {                     // the fused kernel, then the composite form
        CAPTURE(create_graph);
        tensor_list grads = autograd::grad({y}, inputs, {fx.at("dy")}, true, create_graph);
        CHECK_CLOSE(grads[0], fx.at("dx"), tol_for(kFloat32));
        if (has_weight) CHECK_CLOSE(grads[1], fx.at("dweight"), tol_for(kFloat32, 8));
    }
    tensor_list grads = autograd::grad({y}, inputs, {fx.at("dy")}, true, true);
    Tensor ddx = autograd::grad({sum(grads[0] * fx.at("v"))}, {x})[0];
    CHECK_CLOSE(ddx, fx.at("ddx"), tol_for(kFloat32, 16));
}

}  // namespace

TEST_CASE("rms_norm matches PyTorch to second order") {
    check_rms_norm_fixture("rms_norm_weight", {8}, 1e-5);
    check_rms_norm_fixture("rms_norm_no_weight_default_eps", {8}, std::nullopt);
    check_rms_norm_fixture("rms_norm_two_dims", {3, 8}, 1e-6);
    check_rms_norm_fixture("rms_norm_small_values", {8}, 1e-5);
}

TEST_CASE("rms_norm passes float64 gradcheck and gradgradcheck") {
    manual_seed(17);
    auto opts = TensorOptions(kFloat64).requires_grad(true);
    Tensor x = randn({2, 3, 5}, opts), w = randn({5}, opts);
    auto f = [](const tensor_list& in) { return tensor_list{F::rms_norm(in[0], {5}, in[1], 1e-3)}; };
    CHECK(autograd::gradcheck(f, {x, w}));
    CHECK(autograd::gradgradcheck(f, {x, w}));
    auto g = [](const tensor_list& in) { return tensor_list{F::rms_norm(in[0], {3, 5})}; };
    CHECK(autograd::gradcheck(g, {x}));
}

TEST_CASE("rms_norm fused backward equals the create_graph form and computes only needed grads") {
    manual_seed(19);
    Tensor x = randn({6, 40}, TensorOptions(kFloat64).requires_grad(true));
    Tensor w = randn({40}, TensorOptions(kFloat64).requires_grad(true));
    Tensor dy = randn({6, 40}, TensorOptions(kFloat64));
    Tensor y = F::rms_norm(x, {40}, w, 1e-6);
    tensor_list fused = autograd::grad({y}, {x, w}, {dy}, true);
    tensor_list graph = autograd::grad({y}, {x, w}, {dy}, true, true);
    for (size_t i = 0; i < 2; ++i) CHECK_CLOSE(fused[i], graph[i], tol_for(kFloat64));
    CHECK_CLOSE(autograd::grad({y}, {w}, {dy}, true)[0], fused[1], tol_for(kFloat64));
    CHECK_CLOSE(autograd::grad({y}, {x}, {dy})[0], fused[0], tol_for(kFloat64));
    // and the composite definition itself: x / sqrt(mean(x^2) + eps) * w
    Tensor composite = x * rsqrt(mean(x * x, {1}, true) + 1e-6) * w;
    CHECK_CLOSE(y, composite, tol_for(kFloat64));
}

TEST_CASE("rms_norm in f16/bf16 stays within dtype tolerance of f64") {
    manual_seed(23);
    for (DType dt : {kFloat16, kBFloat16}) {
        CAPTURE(dtype_name(dt));
        Tensor x = (randn({4, 64}) * 3.0).to(dt).requires_grad_(true);
        Tensor w = randn({64}).to(dt).requires_grad_(true);
        Tensor x64 = x.detach().to(kFloat64).requires_grad_(true), w64 = w.detach().to(kFloat64).requires_grad_(true);
        Tensor y = F::rms_norm(x, {64}, w, 1e-5), y64 = F::rms_norm(x64, {64}, w64, 1e-5);
        CHECK(y.dtype() == dt);
        Tensor dy = randn({4, 64}).to(dt);
        y.backward(dy);
        y64.backward(dy.to(kFloat64));
        CHECK_CLOSE(y, y64, tol_for(dt, 2));                     // f32 statistics, one rounding on store
        CHECK_CLOSE(x.grad(), x64.grad(), tol_for(dt, 4));
        CHECK_CLOSE(w.grad(), w64.grad(), tol_for(dt, 4));       // a sum over 4 rows in f32, rounded once
    }
}

TEST_CASE("rms_norm's bf16 double backward computes in f32 (difftest regression)") {
    // one value per row: y = x / sqrt(x^2 + eps) is nearly sign(x), and its derivatives are the small
    // differences 1 - xhat^2 that bf16 arithmetic cancels to nothing (it gave 4.0 where f64 gives -0.4)
    Tensor x = tensor<float>({1.6484375f, 0.431640625f, 0.020751953125f}, {3, 1}).to(kBFloat16).requires_grad_(true);
    Tensor x64 = x.detach().to(kFloat64).requires_grad_(true);
    Tensor v = tensor<double>({0.5, -1.0, 2.0}, {3, 1});
    auto second = [&](const Tensor& in, double eps) {
        Tensor dx = autograd::grad({F::rms_norm(in, {1}, {}, eps)}, {in}, {ones_like(in)}, true, true)[0];
        return autograd::grad({sum(dx * v.to(in.dtype()))}, {in})[0];
    };
    Tensor low = second(x, 1.1920928955078125e-07), wide = second(x64, 1.1920928955078125e-07);
    CHECK_CLOSE(low.to(kFloat64), wide, tol_for(kBFloat16, 4));
}

TEST_CASE("rms_norm computes in f32 under autocast, and its default eps is the compute type's epsilon") {
    manual_seed(29);
    Tensor x = randn({3, 8}).to(kBFloat16), w = ones({8}).to(kBFloat16);
    {
        amp::AutocastGuard guard(kCPU, kBFloat16);
        Tensor y = F::rms_norm(x, {8}, w);
        CHECK(y.dtype() == kFloat32);
        CHECK_CLOSE(y, F::rms_norm(x.to(kFloat32), {8}, w.to(kFloat32), 1.1920928955078125e-07), tol_for(kFloat32));
    }
    // a bf16 row of 0.01s: f32's eps (PyTorch's kernel) gives 1.0; bf16's 2^-7 would give 0.75
    Tensor tiny = full({1, 4}, 0.01).to(kBFloat16);
    CHECK(F::rms_norm(tiny, {4}).to(kFloat64).to_vector<double>()[0] == 1.0);
    Tensor tiny64 = full({1, 4}, 1e-9, TensorOptions(kFloat64));             // f64: f64's eps, 2.2e-16
    CHECK(F::rms_norm(tiny64, {4}).to_vector<double>()[0] == doctest::Approx(1e-9 / std::sqrt(1e-18 + 2.220446049250313e-16)));
}

TEST_CASE("rms_norm rejects bad input with typed errors naming the op") {
    Tensor x = randn({2, 8});
    CHECK_THROWS_WITH_AS(F::rms_norm(x, {4}), doctest::Contains("rms_norm"), ShapeError);
    CHECK_THROWS_AS(F::rms_norm(x, {8}, randn({4})), ShapeError);
    CHECK_THROWS_AS(F::rms_norm(x, {8}, randn({8}).to(kFloat64)), DTypeError);
    CHECK_THROWS_AS(F::rms_norm(tensor<int64_t>({1, 2}), {2}), DTypeError);
    CHECK_THROWS_AS(F::rms_norm(Tensor(), {2}), ValueError);
}

// softmax_test.cpp: softmax and log_softmax along any dim: PyTorch fixtures (forward, backward and
// double backward), f64 gradcheck/gradgradcheck, fused backward vs the create_graph form, f16/bf16
// against f64, numerical stability and bad input.
#include <doctest/doctest.h>

#include <cmath>

#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {
using SoftmaxFn = Tensor (*)(const Tensor&, int64_t);
struct SoftmaxCase {
    const char* fixture;
    SoftmaxFn fn;
};
}  // namespace

TEST_CASE("softmax and log_softmax match PyTorch forward, backward and double backward") {
    for (SoftmaxCase c : {SoftmaxCase{"nnf_softmax_last", F::softmax}, SoftmaxCase{"nnf_softmax_dim0", F::softmax},
                          SoftmaxCase{"nnf_log_softmax_last", F::log_softmax},
                          SoftmaxCase{"nnf_log_softmax_mid", F::log_softmax}}) {
        CAPTURE(c.fixture);
        Fixture fx = load_fixture(c.fixture);
        auto dim = static_cast<int64_t>(fx.param("dim"));
        Tensor x = fx.at("x").clone().requires_grad_(true);
        Tensor y = c.fn(x, dim);
        CHECK_CLOSE(y, fx.at("y"), tol_for(kFloat32));
        Tensor dx = autograd::grad({y}, {x}, {fx.at("dy")}, true)[0];              // fused kernel
        CHECK_CLOSE(dx, fx.at("dx"), tol_for(kFloat32));
        Tensor dx_graph = autograd::grad({y}, {x}, {fx.at("dy")}, true, true)[0];  // differentiable form
        CHECK_CLOSE(dx_graph, fx.at("dx"), tol_for(kFloat32));
        Tensor ddx = autograd::grad({(dx_graph * fx.at("v")).sum()}, {x})[0];
        CHECK_CLOSE(ddx, fx.at("ddx"), tol_for(kFloat32));
    }
}

TEST_CASE("softmax and log_softmax pass float64 gradcheck and gradgradcheck along every dim") {
    manual_seed(3);
    Tensor x = randn({2, 3, 4}, TensorOptions(kFloat64).requires_grad(true));
    for (int64_t dim : {0, 1, 2, -1}) {
        CAPTURE(dim);
        for (SoftmaxFn fn : {F::softmax, F::log_softmax}) {
            auto f = [&](const tensor_list& in) { return tensor_list{fn(in[0], dim)}; };
            CHECK(autograd::gradcheck(f, {x}));
            CHECK(autograd::gradgradcheck(f, {x}));
        }
    }
}

TEST_CASE("softmax of a non-contiguous input and a strided gradient") {
    manual_seed(5);
    Tensor base = randn({5, 3}, TensorOptions(kFloat64));
    Tensor xt = base.t().detach().requires_grad_(true);                        // (3,5), strides (1,3)
    Tensor xc = xt.detach().contiguous().requires_grad_(true);
    Tensor dy = randn({5}, TensorOptions(kFloat64)).expand({3, 5});                   // stride 0 rows
    Tensor y1 = F::softmax(xt, 1), y2 = F::softmax(xc, 1);
    CHECK(y1.is_contiguous());
    CHECK_CLOSE(y1, y2, tol_for(kFloat64));
    y1.backward(dy);
    y2.backward(dy);
    CHECK_CLOSE(xt.grad(), xc.grad(), tol_for(kFloat64));
}

TEST_CASE("softmax rows sum to one, log_softmax is stable for huge logits") {
    Tensor x = tensor<float>({1000.0f, 0.0f, -1000.0f, 1.0f, 2.0f, 3.0f}, {2, 3});
    std::vector<float> y = F::softmax(x, -1).to_vector<float>();
    CHECK(y[0] == 1.0f);
    CHECK(y[1] == 0.0f);
    CHECK(y[3] + y[4] + y[5] == doctest::Approx(1.0).epsilon(1e-6));
    std::vector<float> ly = F::log_softmax(x, -1).to_vector<float>();
    CHECK(ly[0] == 0.0f);
    CHECK(ly[2] == -2000.0f);
    // an all -inf row gives nan like PyTorch; one -inf entry gives probability 0
    Tensor masked = tensor<float>({-INFINITY, -INFINITY, 0.0f, -INFINITY}, {2, 2});
    std::vector<float> m = F::softmax(masked, -1).to_vector<float>();
    CHECK(std::isnan(m[0]));
    CHECK(m[2] == 1.0f);
    CHECK(m[3] == 0.0f);
    CHECK(F::softmax(full({}, 3.0), 0).item<float>() == 1.0f);                  // 0-dim
}

TEST_CASE("softmax and log_softmax in f16/bf16 stay within dtype tolerance of f64") {
    manual_seed(7);
    for (DType dt : {kFloat16, kBFloat16}) {
        for (SoftmaxFn fn : {F::softmax, F::log_softmax}) {
            CAPTURE(dtype_name(dt));
            Tensor x = (randn({4, 33}) * 3.0).to(dt).requires_grad_(true);
            Tensor x64 = x.detach().to(kFloat64).requires_grad_(true);
            Tensor dy = randn({4, 33}).to(dt);
            Tensor y = fn(x, 1), y64 = fn(x64, 1);
            CHECK(y.dtype() == dt);
            y.backward(dy);
            y64.backward(dy.to(kFloat64));
            CHECK(x.grad().dtype() == dt);
            // fp32 math on the rounded inputs, one rounding on store (log_softmax values reach ~10)
            CHECK_CLOSE(y, y64, tol_for(dt, 2));
            // backward reads the rounded y, so its error is a few roundings
            CHECK_CLOSE(x.grad(), x64.grad(), tol_for(dt, 8));
        }
    }
}

TEST_CASE("softmax rejects bad input") {
    CHECK_THROWS_WITH_AS(F::softmax(zeros({2, 3}), 2), doctest::Contains("softmax: dimension 2 is out of range"),
                         IndexError);
    CHECK_THROWS_WITH_AS(F::log_softmax(zeros({2}, TensorOptions(kInt64)), 0),
                         doctest::Contains("log_softmax: expected a floating tensor but got (2) i64 cpu"), DTypeError);
    CHECK_THROWS_AS(F::softmax(Tensor(), 0), ValueError);
}

TEST_CASE("softmax and log_softmax compute in f32 under autocast") {
    Tensor x = randn({2, 5}).to(kBFloat16).requires_grad_(true);
    amp::AutocastGuard guard(kCPU, kBFloat16);
    Tensor y = F::softmax(x, -1), ly = F::log_softmax(x, -1);
    CHECK(y.dtype() == kFloat32);
    CHECK(ly.dtype() == kFloat32);
    y.sum().backward();
    CHECK(x.grad().dtype() == kBFloat16);                 // the gradient comes back in the input's dtype
}

// softmax and log_softmax save their output (PyTorch's _softmax_backward_data(grad, result, ...)):
// writing into the output before backward is an error; writing into the input is not.
TEST_CASE("softmax and log_softmax save their output: the version counter both ways") {
    for (SoftmaxFn fn : {static_cast<SoftmaxFn>(F::softmax), static_cast<SoftmaxFn>(F::log_softmax)}) {
        manual_seed(11);
        Tensor a = randn({2, 4}, TensorOptions(kFloat64)).requires_grad_(true);
        Tensor w = randn({2, 4}, TensorOptions(kFloat64));
        Tensor y = fn(a * 1.0, -1);
        y.mul_(2.0);
        CHECK_THROWS_WITH_AS((y * w).sum().backward(), doctest::Contains("modified by an inplace operation"),
                             AutogradError);
        Tensor x = a * 1.0;
        Tensor z = fn(x, -1);
        x.add_(1.0);
        (z * w).sum().backward();
        CHECK_CLOSE(a.grad(), autograd::grad({(fn(a, -1) * w).sum()}, {a})[0], tol_for(kFloat64));
    }
}

// inplace_test.cpp: add_, mul_, zero_, fill_, copy_, clamp_ (autograd/ops/inplace.cpp): values,
// version counter bumps (shared with views), the leaf-requires-grad error, the saved-tensor version
// error at backward, and history rebasing on non-leaves (gradients equal the out-of-place ones).
#include <doctest/doctest.h>

#include "tests/support/check_close.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {
std::vector<double> values(const Tensor& t) { return t.to(kFloat64).to_vector<double>(); }
TensorOptions f64_grad() { return TensorOptions(kFloat64).requires_grad(true); }
}  // namespace

TEST_CASE("in-place ops write the right values and bump the version counter") {
    Tensor t = tensor<float>({1, -2, 3});
    uint32_t v = t._version();
    t.add_(tensor<float>({1, 1, 1}), 2.0);
    CHECK(values(t) == std::vector<double>{3, 0, 5});
    CHECK(t._version() == ++v);
    t.add_(1.0);
    CHECK(values(t) == std::vector<double>{4, 1, 6});
    CHECK(t._version() == ++v);
    t.mul_(tensor<float>({2}));                                   // broadcast other
    CHECK(values(t) == std::vector<double>{8, 2, 12});
    CHECK(t._version() == ++v);
    t.mul_(0.5);
    CHECK(values(t) == std::vector<double>{4, 1, 6});
    CHECK(t._version() == ++v);
    t.clamp_(2.0, 5.0);
    CHECK(values(t) == std::vector<double>{4, 2, 5});
    CHECK(t._version() == ++v);
    t.copy_(tensor<double>({7, 8, 9}, {3}));                      // casts f64 -> f32
    CHECK(values(t) == std::vector<double>{7, 8, 9});
    CHECK(t.dtype() == kFloat32);
    CHECK(t._version() == ++v);
    t.fill_(3.0);
    CHECK(values(t) == std::vector<double>{3, 3, 3});
    CHECK(t._version() == ++v);
    t.zero_();
    CHECK(values(t) == std::vector<double>{0, 0, 0});
    CHECK(t._version() == ++v);
    Tensor h = ones({2}, TensorOptions(kFloat16));
    h.add_(ones({2}), 0.5);                                       // f32 other into an f16 tensor
    CHECK(h.dtype() == kFloat16);
    CHECK(values(h) == std::vector<double>{1.5, 1.5});
}

TEST_CASE("a view and its base share one version counter") {
    Tensor base = zeros({2, 3});
    Tensor row = base.select(0, 1);
    uint32_t v = base._version();
    row.fill_(5.0);
    CHECK(base._version() == v + 1);
    CHECK(row._version() == v + 1);
    CHECK(values(base) == std::vector<double>{0, 0, 0, 5, 5, 5});
    base.add_(1.0);
    CHECK(row._version() == v + 2);
}

TEST_CASE("in-place on a leaf that requires grad is an error unless grad mode is off") {
    Tensor w = ones({3}, TensorOptions().requires_grad(true));
    CHECK_THROWS_WITH_AS(w.add_(1.0),
                         doctest::Contains("a leaf Variable that requires grad is being used in an in-place operation."),
                         AutogradError);
    CHECK_THROWS_AS(w.mul_(2.0), AutogradError);
    CHECK_THROWS_AS(w.zero_(), AutogradError);
    CHECK_THROWS_AS(w.fill_(1.0), AutogradError);
    CHECK_THROWS_AS(w.copy_(zeros({3})), AutogradError);
    CHECK_THROWS_AS(w.clamp_(0.0, 1.0), AutogradError);
    {
        NoGradGuard no_grad;                                      // how optimizers update parameters
        w.mul_(0.5).add_(ones({3}), -0.25);
    }
    CHECK(values(w) == std::vector<double>{0.25, 0.25, 0.25});
    CHECK(w.is_leaf());
    CHECK(w.requires_grad());
    CHECK_FALSE(w.grad_fn());
}

TEST_CASE("modifying a tensor saved for backward raises the version error at backward") {
    Tensor x = randn({3}, f64_grad());
    Tensor h = x * 2.0;
    Tensor y = gelu(h);                                           // gelu saves its input h
    h.add_(1.0);
    CHECK_THROWS_WITH_AS(y.sum().backward(),
                         doctest::Contains("one of the variables needed for gradient computation has been modified by "
                                           "an inplace operation"),
                         AutogradError);
    // an op that saves its output: exp saves y, and y is then scaled in place
    Tensor x2 = randn({3}, f64_grad());
    Tensor e = exp(x2 * 1.0);
    Tensor z = e * 1.0;
    e.mul_(2.0);
    CHECK_THROWS_AS(z.sum().backward(), AutogradError);
    // modifying a tensor that nothing saved is fine
    Tensor x3 = randn({3}, f64_grad());
    Tensor s = x3 + 1.0;                                          // add saves nothing
    Tensor t = s * 3.0;                                           // mul by a scalar saves nothing
    s.add_(1.0);
    t.sum().backward();
    CHECK(values(x3.grad()) == std::vector<double>{3, 3, 3});
}

TEST_CASE("in-place ops on non-leaves rebase history: gradients equal the out-of-place ones") {
    manual_seed(61);
    Tensor x0 = randn({2, 3}, TensorOptions(kFloat64)), o0 = randn({3}, TensorOptions(kFloat64));
    // in place
    Tensor x = x0.clone().requires_grad_(true), o = o0.clone().requires_grad_(true);
    Tensor h = x * 2.0;
    h.mul_(x);                                                    // 2x^2
    h.add_(o, 3.0);                                               // + 3o
    h.clamp_(-1.0, 1.5);
    h.mul_(o);
    CHECK_FALSE(h.is_leaf());
    CHECK(h.grad_fn());
    h.sum().backward();
    // out of place
    Tensor x2 = x0.clone().requires_grad_(true), o2 = o0.clone().requires_grad_(true);
    Tensor h2 = clamp(x2 * 2.0 * x2 + o2 * 3.0, -1.0, 1.5) * o2;
    h2.sum().backward();
    CHECK_CLOSE(h, h2, tol_for(kFloat64));
    CHECK_CLOSE(x.grad(), x2.grad(), tol_for(kFloat64));
    CHECK_CLOSE(o.grad(), o2.grad(), tol_for(kFloat64));
}

TEST_CASE("fill_, zero_ and copy_ on a non-leaf cut the old value's gradient") {
    Tensor x = tensor<double>({1, 2}, {2}, f64_grad());
    Tensor src = tensor<double>({5, 6}, {2}, f64_grad());
    Tensor h = x * 3.0;
    h.copy_(src);
    (h * h).sum().backward();
    CHECK(values(h) == std::vector<double>{5, 6});
    CHECK(values(x.grad()) == std::vector<double>{0, 0});
    CHECK(values(src.grad()) == std::vector<double>{10, 12});
    Tensor x2 = tensor<double>({1, 2}, {2}, f64_grad());
    Tensor h2 = x2 * 3.0;
    h2.fill_(4.0);
    (h2 * x2).sum().backward();                                   // d/dx2 = 4 (through the product only)
    CHECK(values(x2.grad()) == std::vector<double>{4, 4});
    Tensor x3 = tensor<double>({1, 2}, {2}, f64_grad());
    Tensor h3 = x3 * 3.0;
    h3.zero_();
    (h3 + x3).sum().backward();
    CHECK(values(x3.grad()) == std::vector<double>{1, 1});
}

TEST_CASE("in-place with a grad-requiring operand gives a plain tensor history") {
    Tensor acc = zeros({3}, TensorOptions(kFloat64));
    Tensor x = tensor<double>({1, 2, 3}, {3}, f64_grad());
    acc.add_(x, 2.0);
    CHECK(acc.requires_grad());
    CHECK_FALSE(acc.is_leaf());
    acc.mul_(x);
    acc.sum().backward();                                         // acc = 2x^2: d/dx = 4x
    CHECK(values(x.grad()) == std::vector<double>{4, 8, 12});
    Tensor dst = zeros({2, 3}, TensorOptions(kFloat64));
    Tensor row = tensor<double>({1, 2, 3}, {3}, f64_grad());
    dst.copy_(row);                                               // broadcast source
    dst.sum().backward();
    CHECK(values(row.grad()) == std::vector<double>{2, 2, 2});
}

TEST_CASE("in-place ops reject shapes that would need to grow self") {
    Tensor t = zeros({3});
    CHECK_THROWS_WITH_AS(t.add_(ones({2, 3})),
                         doctest::Contains("add_: output with shape (3) doesn't match the broadcast shape (2,3)"),
                         ShapeError);
    CHECK_THROWS_AS(t.mul_(ones({4})), ShapeError);
    CHECK_THROWS_WITH_AS(t.copy_(ones({2, 3})), doctest::Contains("copy_: source (2,3) f32 cpu cannot be broadcast"),
                         ShapeError);
    Tensor undefined;
    CHECK_THROWS_AS(zero_(undefined), ValueError);
}

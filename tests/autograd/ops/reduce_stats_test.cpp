// reduce_stats_test.cpp: amin/min/argmin, prod (with zeros), var/std with a correction over
// several dims, logsumexp over several dims, and the vector p-norm: PyTorch fixtures (forward,
// backward and double backward), f64 gradcheck and gradgradcheck, f16/bf16 against f64, edge
// cases and bad input.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {
using UnaryFn = std::function<Tensor(const Tensor&)>;

// forward, backward, and ddx = d(sum(dx * v))/dx through create_graph, against PyTorch
void check_fixture(const std::string& name, const UnaryFn& fn) {
    CAPTURE(name);
    Fixture fx = load_fixture(name);
    Tensor x = fx.at("x").clone().requires_grad_(true);
    Tensor y = fn(x);
    CHECK_CLOSE(y, fx.at("y"), tol_for(kFloat32));
    Tensor dx = autograd::grad({y}, {x}, {fx.at("dy")}, true, true)[0];
    CHECK_CLOSE(dx, fx.at("dx"), tol_for(kFloat32));
    if (!dx.requires_grad()) {
        CHECK(equal(fx.at("ddx"), zeros_like(fx.at("ddx"))));
        return;
    }
    Tensor ddx = autograd::grad({(dx * fx.at("v")).sum()}, {x}, {}, std::nullopt, false, true)[0];
    if (!ddx.defined()) ddx = zeros_like(x);
    CHECK_CLOSE(ddx, fx.at("ddx"), tol_for(kFloat32, 16));
}

void check_grads(const UnaryFn& fn, const Tensor& x) {
    auto f = [&](const tensor_list& in) { return tensor_list{fn(in[0])}; };
    CHECK(autograd::gradcheck(f, {x}));
    CHECK(autograd::gradgradcheck(f, {x}));
}

Tensor random64(const Shape& shape, uint64_t seed) {
    manual_seed(seed);
    return randn(shape, TensorOptions(kFloat64).requires_grad(true));
}

void check_low_precision(const UnaryFn& fn, const Shape& shape, double ops = 8) {
    manual_seed(11);
    for (DType dt : {kFloat16, kBFloat16}) {
        CAPTURE(dtype_name(dt));
        Tensor x = (randn(shape) * 0.5 + 1.0).to(dt);
        Tensor ref = fn(x.to(kFloat64));
        Tensor got = fn(x);
        CHECK(got.dtype() == dt);
        CHECK_CLOSE(got, ref, tol_for(dt, ops));
    }
}
}  // namespace

TEST_CASE("amin, min, prod, var, std, logsumexp and norm match PyTorch to second order") {
    check_fixture("reduce_amin_dims", [](const Tensor& t) { return t.amin({0, 2}); });
    check_fixture("reduce_min_dim", [](const Tensor& t) { return t.min(1).first; });
    check_fixture("reduce_amin_ties", [](const Tensor& t) { return t.amin({1}); });
    check_fixture("reduce_prod_dim", [](const Tensor& t) { return t.prod(1); });
    check_fixture("reduce_prod_zeros", [](const Tensor& t) { return t.prod(1); });
    check_fixture("reduce_prod_all", [](const Tensor& t) { return t.prod().reshape({1}); });
    check_fixture("reduce_var_dims", [](const Tensor& t) { return t.var(Shape{0, 2}, 0.0); });
    check_fixture("reduce_var_keepdim", [](const Tensor& t) { return t.var(Shape{1}, 2.0, true); });
    check_fixture("reduce_std_dims", [](const Tensor& t) { return t.std({1, 2}); });
    check_fixture("reduce_std_all", [](const Tensor& t) { return t.std().reshape({1}); });
    check_fixture("reduce_logsumexp_dims", [](const Tensor& t) { return t.logsumexp(Shape{0, 2}); });
    for (auto [p, tag] : {std::pair{2.0, "2"}, {1.0, "1"}, {3.0, "3"}, {1.5, "1p5"}, {0.5, "0p5"},
                          {INFINITY, "inf"}, {-INFINITY, "ninf"}}) {
        double order = p;
        check_fixture(std::string("reduce_norm_p") + tag, [order](const Tensor& t) { return t.norm(order, {1, 2}); });
    }
    check_fixture("reduce_norm_keepdim", [](const Tensor& t) { return t.norm(2.0, {0}, true); });
}

TEST_CASE("the new reductions pass float64 gradcheck and gradgradcheck") {
    Tensor x = random64({3, 4}, 5);
    check_grads([](const Tensor& t) { return t.amin({1}); }, x);
    check_grads([](const Tensor& t) { return t.min(0, true).first; }, x);
    check_grads([](const Tensor& t) { return t.prod(1); }, x);
    check_grads([](const Tensor& t) { return t.prod(); }, x);
    check_grads([](const Tensor& t) { return t.var(Shape{0, 1}, 1.0); }, x);
    check_grads([](const Tensor& t) { return t.std({1}, 0.0, true); }, x);
    check_grads([](const Tensor& t) { return t.logsumexp(Shape{0, 1}, true); }, x);
    for (double p : {1.0, 2.0, 3.0, 1.5, 0.7, static_cast<double>(INFINITY), -static_cast<double>(INFINITY)}) {
        CAPTURE(p);
        check_grads([p](const Tensor& t) { return t.norm(p, {0}); }, x);
    }
}

TEST_CASE("prod's gradient with zeros: one zero gets the product of the others, two zeros give 0") {
    Tensor x = tensor<double>({2, 0, 3, 0, 0, 5}, {2, 3}).requires_grad_(true);
    x.prod(1).sum().backward();
    CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 6, 0, 0, 0, 0});
    // second order at a zero: d/dx_j (prod of the others of x_i) is exact under create_graph
    Tensor z = tensor<double>({0, 2, 3}).requires_grad_(true);
    Tensor g = autograd::grad({z.prod()}, {z}, {}, true, true)[0];          // (6, 0, 0)
    CHECK(g.to_vector<double>() == std::vector<double>{6, 0, 0});
    Tensor h = autograd::grad({g.select(0, 1)}, {z})[0];                    // d(x0*x2)/dz = (3, 0, 0)
    CHECK(h.to_vector<double>() == std::vector<double>{3, 0, 0});
    CHECK(tensor<int32_t>({2, 3, 4}).prod().dtype() == kInt64);
    CHECK(tensor<int32_t>({2, 3, 4}).prod().item<int64_t>() == 24);
    CHECK(zeros({0, 3}).prod().item<float>() == 1.0f);
}

// The products of the others come from prefix and suffix products (O(n log n)), not an (n,n) table:
// 200,000 elements (a table would hold 4e10) with one zero, in f64 and f32.
TEST_CASE("prod's gradient at a zero of a long vector is the product of the others, without an (n,n) table") {
    const int64_t n = 200000, z = 123457;
    for (DType dt : {kFloat64, kFloat32}) {
        CAPTURE(dtype_name(dt));
        Tensor base = 1.0 + (rand({n}, TensorOptions(kFloat64)) - 0.5) * 1e-3;             // product near 1
        Tensor x = base.clone();
        x.narrow(0, z, 1).fill_(0.0);
        x = x.to(dt).requires_grad_(true);
        x.prod().backward();
        Tensor others = cat({base.narrow(0, 0, z), base.narrow(0, z + 1, n - z - 1)}).to(dt).to(kFloat64).prod();
        Tensor at_zero = x.grad().narrow(0, z, 1).to(kFloat64).sum();
        CHECK(at_zero.item<double>() == doctest::Approx(others.item<double>()).epsilon(dt == kFloat64 ? 1e-12 : 1e-4));
        CHECK(x.grad().abs().sum().item<double>() == doctest::Approx(std::abs(others.item<double>())).epsilon(1e-4));
    }
}

TEST_CASE("min(dim) picks the first minimum and the first nan; argmin agrees") {
    Tensor x = tensor<float>({3, 1, 1, 2, 5, NAN, 0, NAN}, {2, 4});
    auto [v, i] = x.min(1);
    CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{1, 1});
    CHECK(v.to_vector<float>()[0] == 1.0f);
    CHECK(std::isnan(v.to_vector<float>()[1]));
    CHECK(tensor<int64_t>({4, std::numeric_limits<int64_t>::min(), 7}).argmin(0).item<int64_t>() == 1);
    CHECK(x.amin({0}).sizes() == Shape{4});
}

TEST_CASE("std is 0 with a zero gradient on constant rows; var with correction >= n is inf or nan") {
    Tensor x = full({2, 3}, 4.0, TensorOptions(kFloat64).requires_grad(true));
    Tensor s = x.std({1});
    CHECK(s.to_vector<double>() == std::vector<double>{0, 0});
    s.sum().backward();
    CHECK(equal(x.grad(), zeros({2, 3}, TensorOptions(kFloat64))));
    CHECK(std::isnan(tensor<double>({1.0}).var(Shape{0}, 1.0).item<double>()));
    CHECK(std::isinf(tensor<double>({1.0, 2.0}).var(Shape{0}, 2.0).item<double>()));
}

TEST_CASE("norm: p = 0 counts non-zeros with a zero gradient; p = 2 of zeros has a zero gradient") {
    Tensor x = tensor<double>({0, 2, -3, 0}).requires_grad_(true);
    Tensor n0 = x.norm(0.0);
    CHECK(n0.item<double>() == 2.0);
    n0.backward();
    CHECK(equal(x.grad(), zeros({4}, TensorOptions(kFloat64))));
    Tensor z = zeros({3}, TensorOptions(kFloat64).requires_grad(true));
    z.norm(2.0).backward();
    CHECK(equal(z.grad(), zeros({3}, TensorOptions(kFloat64))));
    CHECK(x.norm(INFINITY).item<double>() == 3.0);
    CHECK(x.norm(-INFINITY).item<double>() == 0.0);
}

TEST_CASE("logsumexp over several dims: empty reductions give -inf, -inf rows stay -inf") {
    CHECK(zeros({2, 0, 3}).logsumexp(Shape{1, 2}).to_vector<float>() == std::vector<float>{-INFINITY, -INFINITY});
    for (float v : full({2, 3, 2}, -INFINITY).logsumexp(Shape{0, 2}).to_vector<float>()) CHECK(v == -INFINITY);
}

TEST_CASE("the new reductions in f16/bf16 stay within dtype tolerance of f64") {
    check_low_precision([](const Tensor& t) { return t.amin({1}); }, {8, 64}, 1);
    check_low_precision([](const Tensor& t) { return t.prod(1); }, {8, 8}, 16);
    check_low_precision([](const Tensor& t) { return t.var(Shape{0, 1}, 1.0); }, {8, 64}, 16);
    check_low_precision([](const Tensor& t) { return t.std({1}); }, {8, 64}, 16);
    check_low_precision([](const Tensor& t) { return t.logsumexp(Shape{0, 1}); }, {8, 64}, 16);
    check_low_precision([](const Tensor& t) { return t.norm(3.0, {1}); }, {8, 64}, 16);
    check_low_precision([](const Tensor& t) { return t.norm(INFINITY, {0}); }, {8, 64}, 1);
}

TEST_CASE("the new reductions reject bad input with the op's name") {
    Tensor x = zeros({2, 3});
    CHECK_THROWS_WITH_AS(x.amin({2}), doctest::Contains("amin: dimension 2 is out of range"), IndexError);
    CHECK_THROWS_WITH_AS(x.std({1, -1}), doctest::Contains("std: dim 1 appears multiple times"), ValueError);
    CHECK_THROWS_WITH_AS(tensor<int64_t>({1, 2}).var(Shape{0}, 1.0), doctest::Contains("var:"), DTypeError);
    CHECK_THROWS_WITH_AS(tensor<int64_t>({1, 2}).norm(2.0), doctest::Contains("norm:"), DTypeError);
    CHECK_THROWS_WITH_AS(zeros({2, 0}).min(1), doctest::Contains("min: cannot take the min over empty dimension"),
                         IndexError);
    CHECK_THROWS_AS(zeros({0}).amin({0}), IndexError);   // PyTorch: TORCH_CHECK_INDEX (issue 23; was ValueError)
    CHECK_THROWS_AS(x.norm(NAN), ValueError);
}

// found by tools/difftest: the max/min kernels started from the lowest finite value, so a row of
// -inf reduced to -FLT_MAX (and a row of +inf to FLT_MAX for min)
TEST_CASE("amax of a row of -inf is -inf and amin of a row of +inf is +inf, in every float dtype") {
    for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
        CAPTURE(dtype_name(dt));
        CHECK(full({2, 3}, -INFINITY, TensorOptions(dt)).amax({1}).to(kFloat64).to_vector<double>() ==
              std::vector<double>{-INFINITY, -INFINITY});
        CHECK(full({2, 3}, INFINITY, TensorOptions(dt)).amin({1}).to(kFloat64).to_vector<double>() ==
              std::vector<double>{INFINITY, INFINITY});
        CHECK(full({3}, -INFINITY, TensorOptions(dt)).max().to(kFloat64).item<double>() == -INFINITY);
    }
    CHECK(tensor<int64_t>({std::numeric_limits<int64_t>::max()}).amin({0}).item<int64_t>() ==
          std::numeric_limits<int64_t>::max());
}

namespace {
// first order only: PyTorch fixture with inf/nan values (check_close matches nan with nan)
void check_first_order(const std::string& name, const UnaryFn& fn) {
    CAPTURE(name);
    Fixture fx = load_fixture(name);
    Tensor x = fx.at("x").clone().requires_grad_(true);
    Tensor y = fn(x);
    CHECK_CLOSE(y, fx.at("y"), tol_for(kFloat32));
    y.backward(fx.at("dy"));
    CHECK_CLOSE(x.grad(), fx.at("dx"), tol_for(kFloat32));
}
}  // namespace

// found by tools/difftest: var's composite backward let one inf make every gradient of its row
// nan (and divided by max(0, n - correction) instead of n - correction), logsumexp of a 0-dim inf
// passed the gradient through, and prod's products of the others skipped 0 * inf; all now follow
// PyTorch's formulas
TEST_CASE("var, std and logsumexp with inf inputs match PyTorch's gradients") {
    check_first_order("reduce_var_inf", [](const Tensor& t) { return t.var(Shape{1}, 1.0); });
    check_first_order("reduce_std_inf", [](const Tensor& t) { return t.std({1}, 0.0); });
    check_first_order("reduce_logsumexp_inf", [](const Tensor& t) { return t.logsumexp(Shape{1}); });
    check_first_order("reduce_prod_zero_inf", [](const Tensor& t) { return t.prod(1); });
    check_first_order("reduce_var_small_n", [](const Tensor& t) { return t.var(Shape{1}, 2.0); });
    check_first_order("reduce_logsumexp_0d_inf", [](const Tensor& t) { return t.logsumexp(Shape{0}).reshape({1}); });
}

// found by tools/difftest: the max/min kernels refused an empty input even when the output is
// empty too (a kept dim of size 0), which PyTorch allows
TEST_CASE("amin and min(dim) over a non-empty dim of an empty tensor give empty results") {
    Tensor x = zeros({0, 3});
    CHECK(x.amin({1}).sizes() == Shape{0});
    auto [v, i] = x.min(1, true);
    CHECK(v.sizes() == Shape{0, 1});
    CHECK(i.sizes() == Shape{0, 1});
    CHECK(x.amax({1}).sizes() == Shape{0});
}

// found by tools/difftest: min(dim) of a 0-dim nan routed no gradient (0/0 from the tie count)
TEST_CASE("min(dim) of a 0-dim tensor passes the gradient through, even for nan") {
    Tensor x = full({}, NAN, TensorOptions(kFloat64).requires_grad(true));
    auto [v, i] = x.min(0);
    CHECK(std::isnan(v.item<double>()));
    CHECK(i.item<int64_t>() == 0);
    v.backward();
    CHECK(x.grad().item<double>() == 1.0);
}

// Three equal values whose sum / 3 misses them by an ulp left a variance of 1e-34 (std 1e-17), and the
// gradient (x - mean) / (n std) came out O(1); PyTorch's Welford gives std 0 and gradient 0. The
// forward now centres with the corrected two-pass mean (difftest seed 98).
TEST_CASE("std and var of equal values are exactly 0, and std's gradient there is 0, as PyTorch") {
    Tensor base = tensor<double>({0.03849685744544619, -1.984899762140905, 1.5904721270984608, 1.7530789688384307,
                                  -4.03113575217934}, {1, 5, 1}).requires_grad_(true);
    Tensor x = base.expand({3, 5, 1});                                     // each column: 3 equal values
    Tensor s = ampgrad::std(x, {2, 0}, 0.0, true);                        // (1,5,1)
    CHECK(s.abs().max().item<double>() == 0.0);
    CHECK(var(x, {2, 0}, 0.0, true).abs().max().item<double>() == 0.0);
    s.sum().backward();
    CHECK(base.grad().abs().max().item<double>() == 0.0);
}

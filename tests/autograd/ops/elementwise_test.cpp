// elementwise_test.cpp: arithmetic with broadcasting and scalars, pow/exp/log family, abs, square,
// clamp, where, maximum/minimum, comparisons and logic, type promotion. PyTorch fixtures (forward +
// backward), f64 gradcheck and gradgradcheck, f16/bf16 against f64, PyTorch edge cases, bad input.
#include <doctest/doctest.h>

#include <cmath>

#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

using UnaryFn = std::function<Tensor(const Tensor&)>;
using BinaryFn = std::function<Tensor(const Tensor&, const Tensor&)>;

// Fixture with the named inputs: check y and every input gradient.
void check_fixture(const std::string& name, const std::vector<std::string>& inputs,
                   const std::function<Tensor(const tensor_list&)>& fn) {
    CAPTURE(name);
    Fixture fx = load_fixture(name);
    tensor_list leaves;
    for (const std::string& in : inputs) leaves.push_back(fx.at(in).clone().requires_grad_(true));
    Tensor y = fn(leaves);
    y.backward(fx.at("dy"));
    CHECK_CLOSE(y, fx.at("y"), tol_for(kFloat32));
    for (size_t i = 0; i < inputs.size(); ++i) {
        CAPTURE(inputs[i]);
        CHECK_CLOSE(leaves[i].grad(), fx.at("d" + inputs[i]), tol_for(kFloat32));
    }
}
void check_unary_fixture(const std::string& name, const UnaryFn& fn) {
    check_fixture(name, {"x"}, [&](const tensor_list& in) { return fn(in[0]); });
}
void check_binary_fixture(const std::string& name, const BinaryFn& fn) {
    check_fixture(name, {"a", "b"}, [&](const tensor_list& in) { return fn(in[0], in[1]); });
}

// x^2 + 0.5: a smooth positive input for log, sqrt, pow...
Tensor positive(const Tensor& x) { return square(x) + 0.5; }

void check_gradcheck(const std::function<Tensor(const tensor_list&)>& fn, const std::vector<Shape>& shapes,
                     bool second_order = true) {
    manual_seed(53);
    tensor_list in;
    for (const Shape& s : shapes) in.push_back(randn(s, TensorOptions(kFloat64).requires_grad(true)));
    auto f = [&](const tensor_list& t) { return tensor_list{fn(t)}; };
    CHECK(autograd::gradcheck(f, in));
    if (second_order) CHECK(autograd::gradgradcheck(f, in));
}

// Forward (and backward) in f16/bf16 against f64 on the same rounded inputs.
void check_low_precision(const std::string& name, const BinaryFn& fn) {
    manual_seed(59);
    for (DType dt : {kFloat16, kBFloat16}) {
        CAPTURE(name);
        CAPTURE(dtype_name(dt));
        Tensor a = (abs(randn({3, 1, 4})) + 1.0).to(dt).requires_grad_(true);     // positive, for log/pow/sqrt
        Tensor b = (abs(randn({2, 4})) + 1.0).to(dt).requires_grad_(true);
        Tensor a64 = a.detach().to(kFloat64).requires_grad_(true), b64 = b.detach().to(kFloat64).requires_grad_(true);
        Tensor y = fn(a, b), y64 = fn(a64, b64);
        CHECK(y.dtype() == dt);
        Tensor dy = randn(y.sizes()).to(dt);
        y.backward(dy);
        y64.backward(dy.to(kFloat64));
        CHECK_CLOSE(y, y64, tol_for(dt, 2));                 // one op, rounded once
        // backward: a few rounded ops, then a broadcast sum over up to 3 elements
        CHECK_CLOSE(a.grad(), a64.grad(), tol_for(dt, 16));
        if (b.grad().defined()) CHECK_CLOSE(b.grad(), b64.grad(), tol_for(dt, 16));
    }
}

std::vector<double> values(const Tensor& t) { return t.to(kFloat64).to_vector<double>(); }

}  // namespace

TEST_CASE("elementwise ops match PyTorch forward and backward") {
    check_binary_fixture("elementwise_add", [](const Tensor& a, const Tensor& b) { return add(a, b, 2.5); });
    check_binary_fixture("elementwise_sub", [](const Tensor& a, const Tensor& b) { return a - b; });
    check_binary_fixture("elementwise_mul", [](const Tensor& a, const Tensor& b) { return a * b; });
    check_binary_fixture("elementwise_div", [](const Tensor& a, const Tensor& b) { return a / b; });
    check_binary_fixture("elementwise_pow_tensor", [](const Tensor& a, const Tensor& b) { return pow(a, b); });
    check_binary_fixture("elementwise_maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); });
    check_binary_fixture("elementwise_minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); });
    check_binary_fixture("elementwise_where", [](const Tensor& a, const Tensor& b) {
        return where(tensor<bool>({true, false, true, false}, {1, 4}), a, b);
    });
    check_unary_fixture("elementwise_pow_scalar", [](const Tensor& x) { return x.pow(2.5); });
    check_unary_fixture("elementwise_rpow", [](const Tensor& x) { return pow(2.5, x); });
    check_unary_fixture("elementwise_neg", [](const Tensor& x) { return -x; });
    check_unary_fixture("elementwise_exp", [](const Tensor& x) { return exp(x); });
    check_unary_fixture("elementwise_log", [](const Tensor& x) { return log(x); });
    check_unary_fixture("elementwise_sqrt", [](const Tensor& x) { return sqrt(x); });
    check_unary_fixture("elementwise_rsqrt", [](const Tensor& x) { return rsqrt(x); });
    check_unary_fixture("elementwise_abs", [](const Tensor& x) { return abs(x); });
    check_unary_fixture("elementwise_square", [](const Tensor& x) { return square(x); });
    check_unary_fixture("elementwise_reciprocal", [](const Tensor& x) { return reciprocal(x); });
    check_unary_fixture("elementwise_clamp", [](const Tensor& x) { return clamp(x, -0.5, 0.7); });
}

TEST_CASE("elementwise ops pass float64 gradcheck and gradgradcheck") {
    check_gradcheck([](const tensor_list& t) { return add(t[0], t[1], -1.5); }, {{3, 1, 4}, {2, 4}});
    check_gradcheck([](const tensor_list& t) { return t[0] - t[1]; }, {{3, 4}, {4}});
    check_gradcheck([](const tensor_list& t) { return t[0] * t[1]; }, {{3, 1, 4}, {2, 4}});
    check_gradcheck([](const tensor_list& t) { return t[0] / positive(t[1]); }, {{3, 1, 4}, {2, 4}});
    check_gradcheck([](const tensor_list& t) { return pow(positive(t[0]), t[1]); }, {{3, 4}, {3, 4}});
    check_gradcheck([](const tensor_list& t) { return pow(positive(t[0]), 2.5); }, {{3, 4}});
    check_gradcheck([](const tensor_list& t) { return pow(1.7, t[0]); }, {{3, 4}});
    check_gradcheck([](const tensor_list& t) { return exp(t[0]); }, {{3, 4}});
    check_gradcheck([](const tensor_list& t) { return log(positive(t[0])); }, {{3, 4}});
    check_gradcheck([](const tensor_list& t) { return sqrt(positive(t[0])); }, {{3, 4}});
    check_gradcheck([](const tensor_list& t) { return rsqrt(positive(t[0])); }, {{3, 4}});
    check_gradcheck([](const tensor_list& t) { return reciprocal(positive(t[0])); }, {{3, 4}});
    check_gradcheck([](const tensor_list& t) { return square(t[0]) * t[0]; }, {{3, 4}});
    check_gradcheck([](const tensor_list& t) { return -t[0] * 3.0 + 1.0; }, {{3, 4}});
    check_gradcheck([](const tensor_list& t) { return 2.0 / positive(t[0]) - 1.0; }, {{3, 4}});
    check_gradcheck([](const tensor_list& t) { return abs(t[0]) * t[0]; }, {{3, 4}});
    check_gradcheck([](const tensor_list& t) { return clamp(t[0], -0.5, 0.5) * t[0]; }, {{3, 4}});
    check_gradcheck([](const tensor_list& t) { return where(t[0] > 0.0, t[0] * t[1], t[1]); }, {{3, 4}, {4}});
    check_gradcheck([](const tensor_list& t) { return maximum(t[0], t[1]) * t[0]; }, {{3, 4}, {3, 4}});
    check_gradcheck([](const tensor_list& t) { return minimum(t[0], t[1]) * t[1]; }, {{3, 4}, {3, 4}});
}

TEST_CASE("elementwise ops in f16/bf16 stay within dtype tolerance of f64") {
    check_low_precision("add", [](const Tensor& a, const Tensor& b) { return add(a, b, 0.5); });
    check_low_precision("mul", [](const Tensor& a, const Tensor& b) { return a * b; });
    check_low_precision("div", [](const Tensor& a, const Tensor& b) { return a / b; });
    check_low_precision("pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); });
    check_low_precision("maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); });
    check_low_precision("exp", [](const Tensor& a, const Tensor&) { return exp(a); });
    check_low_precision("log", [](const Tensor& a, const Tensor&) { return log(a); });
    check_low_precision("sqrt", [](const Tensor& a, const Tensor&) { return sqrt(a); });
    check_low_precision("rsqrt", [](const Tensor& a, const Tensor&) { return rsqrt(a); });
    check_low_precision("reciprocal", [](const Tensor& a, const Tensor&) { return reciprocal(a); });
    check_low_precision("pow scalar", [](const Tensor& a, const Tensor&) { return pow(a, 1.5); });
    check_low_precision("clamp", [](const Tensor& a, const Tensor&) { return clamp(a, 1.5, 2.5); });
}

TEST_CASE("type promotion follows PyTorch, and wrapped scalars keep f16") {
    Tensor h = ones({2}, TensorOptions(kFloat16)), f = ones({2}), i = tensor<int64_t>({3, 4});
    CHECK((h + f).dtype() == kFloat32);
    CHECK((h * ones({2}, TensorOptions(kBFloat16))).dtype() == kFloat32);
    CHECK((h * 2.0).dtype() == kFloat16);
    CHECK((2.0 - h).dtype() == kFloat16);
    CHECK((h / 3.0).dtype() == kFloat16);
    CHECK((h + scalar_tensor(1.0, TensorOptions(kFloat64))).dtype() == kFloat16);   // 0-dim tensors don't promote
    CHECK((h + ones({2}, TensorOptions(kFloat64))).dtype() == kFloat64);
    CHECK((i + i).dtype() == kInt64);
    CHECK((i * 2.0).dtype() == kInt64);     // integral: acts like libtorch's `i * 2` (a double can't tell 2 from 2.0)
    CHECK((i * 2.5).dtype() == kFloat32);
    CHECK(values(i * 2.5) == std::vector<double>{7.5, 10});
    CHECK((i + f).dtype() == kFloat32);
    CHECK((i / i).dtype() == kFloat32);                                               // true division
    CHECK(values(tensor<int64_t>({7, -7}) / tensor<int64_t>({2, 2})) == std::vector<double>{3.5, -3.5});
    CHECK((i + tensor<int32_t>({1, 1})).dtype() == kInt64);
    CHECK(exp(i).dtype() == kFloat32);
    CHECK(log(i).dtype() == kFloat32);
    CHECK(pow(i, 2.0).dtype() == kFloat32);                                           // as i.pow(2.0)
    CHECK(pow(2.5, i).dtype() == kFloat32);
    CHECK(values(pow(i, tensor<int64_t>({2, 3}))) == std::vector<double>{9, 64});
    CHECK(values(-i) == std::vector<double>{-3, -4});
    CHECK(values(abs(tensor<int32_t>({-3, 4}))) == std::vector<double>{3, 4});
    CHECK((h > f).dtype() == kBool);
}

TEST_CASE("comparisons and logic return kBool") {
    Tensor a = tensor<float>({1, 2, 3, NAN}), b = tensor<float>({3, 2, 1, NAN});
    auto bools = [](const Tensor& t) {
        CHECK(t.dtype() == kBool);
        return t.to(kInt64).to_vector<int64_t>();
    };
    CHECK(bools(eq(a, b)) == std::vector<int64_t>{0, 1, 0, 0});
    CHECK(bools(ne(a, b)) == std::vector<int64_t>{1, 0, 1, 1});
    CHECK(bools(a < b) == std::vector<int64_t>{1, 0, 0, 0});
    CHECK(bools(a <= b) == std::vector<int64_t>{1, 1, 0, 0});
    CHECK(bools(a > b) == std::vector<int64_t>{0, 0, 1, 0});
    CHECK(bools(a >= b) == std::vector<int64_t>{0, 1, 1, 0});
    CHECK(bools(a > 1.5) == std::vector<int64_t>{0, 1, 1, 0});
    CHECK(bools(a < tensor<int64_t>({2})) == std::vector<int64_t>{1, 0, 0, 0});      // promotes to f32
    CHECK(bools((a > 1.5) & (a < 2.5)) == std::vector<int64_t>{0, 1, 0, 0});
    CHECK(bools((a > 2.5) | (a < 1.5)) == std::vector<int64_t>{1, 0, 1, 0});
    CHECK(bools(logical_not(a > 1.5)) == std::vector<int64_t>{1, 0, 0, 1});
    CHECK(bools(isfinite(tensor<float>({1, INFINITY, -INFINITY, NAN}))) == std::vector<int64_t>{1, 0, 0, 0});
    CHECK_FALSE((a > b).requires_grad());
    Tensor x = randn({4}, TensorOptions(kFloat64).requires_grad(true));
    CHECK_FALSE((x > 0.0).requires_grad());
    CHECK(equal(a, a));                                                                // NaN equals NaN here
    CHECK_FALSE(equal(a, b));
    CHECK(allclose(tensor<float>({1, 2}), tensor<float>({1, 2.000001f})));
    CHECK_FALSE(allclose(tensor<float>({1, NAN}), tensor<float>({1, NAN})));          // as torch.allclose
    CHECK(allclose(tensor<float>({INFINITY}), tensor<float>({INFINITY})));
    CHECK_FALSE(allclose(tensor<float>({INFINITY}), tensor<float>({-INFINITY})));
    CHECK_FALSE(allclose(tensor<float>({1}), tensor<float>({INFINITY})));
}

TEST_CASE("maximum/minimum split ties in half and propagate NaN like PyTorch") {
    Tensor a = tensor<double>({1, 2, 3}, {3}, TensorOptions(kFloat64).requires_grad(true));
    Tensor b = tensor<double>({1, 3, 2}, {3}, TensorOptions(kFloat64).requires_grad(true));
    maximum(a, b).sum().backward();
    CHECK(values(a.grad()) == std::vector<double>{0.5, 0, 1});
    CHECK(values(b.grad()) == std::vector<double>{0.5, 1, 0});
    Tensor n = tensor<double>({NAN, 1}, {2}, TensorOptions(kFloat64).requires_grad(true));
    Tensor m = tensor<double>({1, NAN}, {2}, TensorOptions(kFloat64).requires_grad(true));
    Tensor y = minimum(n, m);
    CHECK(std::isnan(values(y)[0]));
    CHECK(std::isnan(values(y)[1]));
    y.sum().backward();
    CHECK(values(n.grad()) == std::vector<double>{1, 1});                              // neither side is masked
    CHECK(values(m.grad()) == std::vector<double>{1, 1});
}

TEST_CASE("pow, clamp and where follow PyTorch at the edges") {
    // d(x^e)/dx at e == 0 is 0 (not 0 * 0^-1 = nan); d(x^e)/de at x == 0, e >= 0 is 0
    Tensor x = tensor<double>({0, 1, 2}, {3}, TensorOptions(kFloat64).requires_grad(true));
    Tensor e = tensor<double>({0, 0, 1}, {3}, TensorOptions(kFloat64).requires_grad(true));
    pow(x, e).sum().backward();
    CHECK(values(x.grad()) == std::vector<double>{0, 0, 1});
    CHECK(values(e.grad())[0] == 0.0);
    CHECK(values(e.grad())[1] == 0.0);
    CHECK(values(e.grad())[2] == doctest::Approx(2 * std::log(2.0)));
    Tensor z = tensor<double>({0}, {1}, TensorOptions(kFloat64).requires_grad(true));
    pow(z, 0.0).sum().backward();
    CHECK(values(z.grad()) == std::vector<double>{0});
    // clamp: grad passes strictly inside the bounds, 0 at them (torch 2.x; docs/edge_cases.md);
    // lo > hi gives hi everywhere (and no grad); NaN stays NaN
    Tensor c = tensor<double>({-1, -0.5, 0, 0.5, 1}, {5}, TensorOptions(kFloat64).requires_grad(true));
    clamp(c, -0.5, 0.5).sum().backward();
    CHECK(values(c.grad()) == std::vector<double>{0, 0, 1, 0, 0});
    CHECK(values(clamp(tensor<float>({1, 5, 10}), 6.0, 3.0)) == std::vector<double>{3, 3, 3});
    CHECK(values(clamp(tensor<float>({1, 5}), std::nullopt, 3.0)) == std::vector<double>{1, 3});
    CHECK(values(clamp(tensor<int64_t>({-4, 5}), -2.0, std::nullopt)) == std::vector<double>{-2, 5});
    CHECK(std::isnan(clamp(tensor<float>({NAN}), 0.0, 1.0).item<float>()));
    // where broadcasts the condition and both branches; grads go to the branch taken
    Tensor wa = ones({2, 3}, TensorOptions(kFloat64).requires_grad(true));
    Tensor wb = zeros({3}, TensorOptions(kFloat64).requires_grad(true));
    Tensor cond = tensor<bool>({true, false}, {2, 1});
    Tensor w = where(cond, wa, wb);
    CHECK(w.sizes() == Shape{2, 3});
    CHECK(values(w) == std::vector<double>{1, 1, 1, 0, 0, 0});
    w.sum().backward();
    CHECK(values(wa.grad()) == std::vector<double>{1, 1, 1, 0, 0, 0});
    CHECK(values(wb.grad()) == std::vector<double>{1, 1, 1});
    CHECK(values(where(cond, wa, 7.0).detach()) == std::vector<double>{1, 1, 1, 7, 7, 7});
}

TEST_CASE("scalar operators and broadcasting") {
    Tensor x = tensor<double>({1, 2, 4}, {3}, TensorOptions(kFloat64).requires_grad(true));
    CHECK(values(x + 1.0) == std::vector<double>{2, 3, 5});
    CHECK(values(1.0 + x) == std::vector<double>{2, 3, 5});
    CHECK(values(x - 1.0) == std::vector<double>{0, 1, 3});
    CHECK(values(1.0 - x) == std::vector<double>{0, -1, -3});
    CHECK(values(x * 2.0) == std::vector<double>{2, 4, 8});
    CHECK(values(x / 2.0) == std::vector<double>{0.5, 1, 2});
    CHECK(values(4.0 / x) == std::vector<double>{4, 2, 1});
    CHECK(values(sub(x, x, 0.5)) == std::vector<double>{0.5, 1, 2});
    Tensor y = (1.0 - x) * 3.0 + 4.0 / x;
    y.sum().backward();
    CHECK(values(x.grad()) == std::vector<double>{-7, -4, -3.25});                     // -3 - 4/x^2
    Tensor col = ones({3, 1}), row = ones({4});
    CHECK((col + row).sizes() == Shape{3, 4});
    CHECK((ones({2, 1, 5}) * ones({3, 1})).sizes() == Shape{2, 3, 5});
    CHECK((ones({}) + ones({2})).sizes() == Shape{2});
}

// Values from PyTorch 2.15 (pip, CPU): `a * 0.1` etc. on a = [0.1, 1000, 3] in f16/bf16. PyTorch keeps
// a second-operand scalar in fp32 (its "opmath" type) for + - * /, so 3 * 0.1 gives 0.30005 in f16,
// where rounding 0.1 to f16 first would give 0.29980. `0.1 - a` does round 0.1 to f16 first (so
// 0.1 - 0.1_f16 is exactly 0), and `0.1 / a` is reciprocal(a) * 0.1.
TEST_CASE("tensor-scalar arithmetic in f16/bf16 keeps the scalar in fp32, as PyTorch does") {
    struct Expected { DType dtype; std::vector<double> mul, div, add, rsub, rdiv; };
    const std::vector<Expected> cases = {
        {kFloat16, {0.0099945068359375, 100.0, 0.300048828125}, {1.0, 10000.0, 30.0},
         {0.199951171875, 1000.0, 3.099609375}, {0.0, -1000.0, -2.900390625},
         {1.0, 0.00010001659393310547, 0.0333251953125}},
        {kBFloat16, {0.010009765625, 100.0, 0.30078125}, {1.0, 9984.0, 30.0}, {0.2001953125, 1000.0, 3.09375},
         {0.0, -1000.0, -2.90625}, {1.0, 0.00010013580322265625, 0.033447265625}},
    };
    for (const Expected& e : cases) {
        CAPTURE(dtype_name(e.dtype));
        Tensor a = tensor<double>({0.1, 1000.0, 3.0}).to(e.dtype);
        CHECK((a * 0.1).dtype() == e.dtype);
        CHECK(values(a * 0.1) == e.mul);
        CHECK(values(a / 0.1) == e.div);
        CHECK(values(a + 0.1) == e.add);
        CHECK(values(0.1 - a) == e.rsub);
        CHECK(values(0.1 / a) == e.rdiv);
    }
    // The old way (scalar rounded to f16 first) gives a different, less accurate product.
    Tensor h = tensor<double>({3.0}).to(kFloat16);
    CHECK(values(h * scalar_tensor(0.1, TensorOptions(kFloat16)))[0] == 0.2998046875);
    // Gradients of the scalar forms (f64 gradcheck) and in f16.
    check_gradcheck([](const tensor_list& t) { return 0.3 / positive(t[0]) + t[0] / 0.7 - (2.0 - t[0]); }, {{3, 4}});
    Tensor x = tensor<double>({0.5, 2.0}).to(kFloat16).requires_grad_(true);
    (1.0 / x + x / 4.0 + (1.0 - x)).sum().backward();
    CHECK(values(x.grad()) == std::vector<double>{-4.0 + 0.25 - 1.0, -0.25 + 0.25 - 1.0});
}

TEST_CASE("elementwise ops reject bad input with typed errors") {
    CHECK_THROWS_WITH_AS(ones({2, 3}) + ones({4}),
                         doctest::Contains("add: shapes cannot be broadcast: a is (2,3) f32 cpu, b is (4) f32 cpu"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(ones({2, 3}) * ones({2}), doctest::Contains("mul: shapes cannot be broadcast"), ShapeError);
    CHECK_THROWS_WITH_AS(maximum(ones({2}), ones({3})), doctest::Contains("maximum: shapes cannot be broadcast"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(add(Tensor(), ones({2})), doctest::Contains("add: argument 'a' is an undefined tensor"),
                         ValueError);
    CHECK_THROWS_WITH_AS(where(ones({2}), ones({2}), ones({2})),
                         doctest::Contains("where: condition must be bool but got (2) f32 cpu"), DTypeError);
    CHECK_THROWS_WITH_AS(where(ones({2}) > 0.0, ones({2}), Tensor()),
                         doctest::Contains("where: argument 'b' is an undefined tensor"), ValueError);
    CHECK_THROWS_WITH_AS(clamp(ones({2}), std::nullopt, std::nullopt),
                         doctest::Contains("clamp: at least one of min or max must be given"), ValueError);
    CHECK_THROWS_AS(-tensor<bool>({true}), DTypeError);
}

// exp, sqrt, rsqrt and reciprocal save their output, as PyTorch's derivatives.yaml has them use
// `result`; log, abs and square save their input. The version counter shows which, both ways.
TEST_CASE("unary ops save what PyTorch saves: output for exp/sqrt/rsqrt/reciprocal, input for log/abs/square") {
    struct Case {
        const char* name;
        UnaryFn fn;
        bool saves_output;
    };
    std::vector<Case> cases = {{"exp", [](const Tensor& x) { return exp(x); }, true},
                               {"sqrt", [](const Tensor& x) { return sqrt(x); }, true},
                               {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, true},
                               {"reciprocal", [](const Tensor& x) { return reciprocal(x); }, true},
                               {"log", [](const Tensor& x) { return log(x); }, false},
                               {"abs", [](const Tensor& x) { return abs(x); }, false},
                               {"square", [](const Tensor& x) { return square(x); }, false}};
    for (const Case& c : cases) {
        CAPTURE(c.name);
        Tensor a = (rand({5}, TensorOptions(kFloat64)) + 0.5).requires_grad_(true);   // positive: sqrt, log
        Tensor out_modified = c.fn(a * 1.0);
        out_modified.mul_(2.0);
        Tensor x = a * 1.0;
        Tensor in_modified = c.fn(x);
        x.mul_(2.0);
        if (c.saves_output) {
            CHECK_THROWS_WITH_AS(out_modified.sum().backward(), doctest::Contains("modified by an inplace operation"),
                                 AutogradError);
            in_modified.sum().backward();
            CHECK_CLOSE(a.grad(), autograd::grad({c.fn(a).sum()}, {a})[0], tol_for(kFloat64));
        } else {
            CHECK_NOTHROW(out_modified.sum().backward());
            CHECK_THROWS_WITH_AS(in_modified.sum().backward(), doctest::Contains("modified by an inplace operation"),
                                 AutogradError);
        }
    }
}

// math_test.cpp: autograd/ops/math.cpp: sin, cos, exp2, log1p, expm1, erf, sign, floor, ceil, round,
// trunc, fmod, remainder, atan2, lerp, logical and/or/xor. PyTorch fixtures (forward, backward and,
// for the smooth ops, double backward; special values; integer and bool inputs), f64 gradcheck and
// gradgradcheck, f16/bf16 against f64 on the same rounded inputs, autocast, and bad input.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

using Fn = std::function<Tensor(const tensor_list&)>;
using UnaryFn = Tensor (*)(const Tensor&);
using BinaryFn = Tensor (*)(const Tensor&, const Tensor&);

// Fixture with the named inputs: y and every input gradient; with second_order, also the
// double-backward value ddx = d(sum(dx * v))/dx of a one-input op.
void check_fixture(const std::string& name, const std::vector<std::string>& inputs, const Fn& fn,
                   bool second_order = false) {
    CAPTURE(name);
    Fixture fx = load_fixture(name);
    tensor_list leaves;
    for (const std::string& in : inputs) leaves.push_back(fx.at(in).clone().requires_grad_(true));
    Tensor y = fn(leaves);
    CHECK_CLOSE(y, fx.at("y"), tol_for(kFloat32));
    tensor_list grads = autograd::grad({y}, leaves, {fx.at("dy")}, std::nullopt, second_order);
    for (size_t i = 0; i < inputs.size(); ++i) {
        CAPTURE(inputs[i]);
        CHECK_CLOSE(grads[i], fx.at("d" + inputs[i]), tol_for(kFloat32));
    }
    if (!second_order) return;
    tensor_list dd = autograd::grad({sum(grads[0] * fx.at("v"))}, {leaves[0]});
    CHECK_CLOSE(dd[0], fx.at("ddx"), tol_for(kFloat32, 8));
}

// Forward-only fixture: same dtype, and the values (exact for integer and bool results).
void check_forward_fixture(const std::string& name, const std::vector<std::string>& inputs, const Fn& fn) {
    CAPTURE(name);
    Fixture fx = load_fixture(name);
    tensor_list in;
    for (const std::string& n : inputs) in.push_back(fx.at(n));
    Tensor y = fn(in);
    CHECK(y.dtype() == fx.at("y").dtype());
    Tolerance tol = is_floating(y.dtype()) ? tol_for(kFloat32) : Tolerance{0, 0};
    CHECK_CLOSE(y.to(kFloat64), fx.at("y").to(kFloat64), tol);
}

void check_gradcheck(const Fn& fn, const std::vector<Shape>& shapes, bool second_order = true) {
    manual_seed(71);
    tensor_list in;
    for (const Shape& s : shapes) in.push_back(randn(s, TensorOptions(kFloat64).requires_grad(true)));
    auto f = [&](const tensor_list& t) { return tensor_list{fn(t)}; };
    CHECK(autograd::gradcheck(f, in));
    if (second_order) CHECK(autograd::gradgradcheck(f, in));
}

// In f16/bf16 against f64 on the same rounded inputs: the value rounds once; gradients pass
// through a few rounded ops.
void check_low_precision(const std::string& name, const Fn& fn, int n_inputs, double scale = 1.0) {
    manual_seed(73);
    for (DType dt : {kFloat16, kBFloat16}) {
        CAPTURE(name);
        CAPTURE(dtype_name(dt));
        tensor_list low, wide;
        for (int i = 0; i < n_inputs; ++i) {
            Tensor t = (randn({3, 4}) * scale).to(dt).requires_grad_(true);
            low.push_back(t);
            wide.push_back(t.detach().to(kFloat64).requires_grad_(true));
        }
        Tensor y = fn(low), y64 = fn(wide);
        CHECK(y.dtype() == dt);
        Tensor dy = randn(y.sizes()).to(dt);
        y.backward(dy);
        y64.backward(dy.to(kFloat64));
        CHECK_CLOSE(y, y64, tol_for(dt, 2));
        for (int i = 0; i < n_inputs; ++i) CHECK_CLOSE(low[i].grad(), wide[i].grad(), tol_for(dt, 8));
    }
}

Fn unary(UnaryFn op) { return [op](const tensor_list& t) { return op(t[0]); }; }
Fn binary(BinaryFn op) {
    return [op](const tensor_list& t) { return op(t[0], t[1]); };
}

}  // namespace

TEST_CASE("sin, cos, exp2, log1p, expm1, erf match PyTorch to second order") {
    check_fixture("math_sin", {"x"}, unary(sin), true);
    check_fixture("math_cos", {"x"}, unary(cos), true);
    check_fixture("math_exp2", {"x"}, unary(exp2), true);
    check_fixture("math_log1p", {"x"}, unary(log1p), true);
    check_fixture("math_log1p_small", {"x"}, unary(log1p), true);
    check_fixture("math_expm1", {"x"}, unary(expm1), true);
    check_fixture("math_expm1_small", {"x"}, unary(expm1), true);
    check_fixture("math_erf", {"x"}, unary(erf), true);
}

TEST_CASE("sign, floor, ceil, round (half to even), trunc match PyTorch, with zero gradients") {
    check_fixture("math_sign", {"x"}, unary(sign));
    check_fixture("math_floor", {"x"}, unary(floor));
    check_fixture("math_ceil", {"x"}, unary(ceil));
    check_fixture("math_round", {"x"}, unary(round));
    check_fixture("math_trunc", {"x"}, unary(trunc));
    CHECK(round(tensor<float>({2.5f, 3.5f, -2.5f})).to_vector<float>() == std::vector<float>{2, 4, -2});
}

TEST_CASE("the unary ops at nan, inf, signed zeros and subnormals, and on integers, match PyTorch") {
    const std::vector<std::pair<const char*, UnaryFn>> specials = {
        {"sign", sign}, {"floor", floor}, {"ceil", ceil}, {"round", round}, {"trunc", trunc},
        {"sin", sin},   {"exp2", exp2},   {"log1p", log1p}, {"expm1", expm1}, {"erf", erf}};
    for (auto [name, op] : specials)
        check_forward_fixture(fmt::format("math_{}_special", name), {"x"}, unary(op));
    check_forward_fixture("math_sign_int", {"x"}, unary(sign));                // stays int64
    check_forward_fixture("math_sin_int", {"x"}, unary(sin));                  // f32
    Tensor i = tensor<int64_t>({-3, 4});
    for (UnaryFn op : std::vector<UnaryFn>{floor, ceil, round, trunc}) {
        Tensor y = op(i);
        CHECK(y.dtype() == kInt64);
        CHECK(y.to_vector<int64_t>() == std::vector<int64_t>{-3, 4});
    }
    // -0.0 keeps its sign through floor/round/trunc/ceil
    CHECK(std::signbit(floor(tensor<float>({-0.0f})).item<float>()));
    CHECK(std::signbit(ceil(tensor<float>({-0.5f})).item<float>()));
}

TEST_CASE("fmod, remainder, atan2, lerp match PyTorch forward and backward") {
    check_fixture("math_fmod", {"a", "b"}, binary(fmod));
    check_fixture("math_remainder", {"a", "b"}, binary(remainder));
    check_fixture("math_fmod_scalar", {"a"}, [](const tensor_list& t) { return fmod(t[0], -1.5); });
    check_fixture("math_remainder_scalar", {"a"}, [](const tensor_list& t) { return remainder(t[0], -1.5); });
    check_fixture("math_atan2", {"a", "b"}, binary(atan2));
    check_fixture("math_lerp", {"start", "end", "weight"}, [](const tensor_list& t) { return lerp(t[0], t[1], t[2]); });
    check_fixture("math_lerp_scalar_small", {"start", "end"}, [](const tensor_list& t) { return lerp(t[0], t[1], 0.3); });
    check_fixture("math_lerp_scalar_large", {"start", "end"}, [](const tensor_list& t) { return lerp(t[0], t[1], 0.7); });
    check_forward_fixture("math_fmod_int", {"a", "b"}, binary(fmod));
    check_forward_fixture("math_remainder_int", {"a", "b"}, binary(remainder));
    check_forward_fixture("math_atan2_int", {"a", "b"}, binary(atan2));
    // lerp at w = 1 is exactly end (the two-sided formula)
    Tensor a = tensor<float>({0.1f, -3.0f}), b = tensor<float>({1e8f, 0.3f});
    CHECK(lerp(a, b, 1.0).to_vector<float>() == b.to_vector<float>());
}

TEST_CASE("fmod/remainder gradients at the edges follow PyTorch's rounded division (difftest regressions)") {
    // remainder's d/db = -g floor(a / b) with PyTorch's floor division, computed from fmod: NaN at a = inf
    Tensor a = tensor<float>({INFINITY, 7.0f}).requires_grad_(true), b = tensor<float>({0.5f, -2.0f}).requires_grad_(true);
    remainder(a, b).backward(ones({2}));
    std::vector<float> db = b.grad().to_vector<float>();
    CHECK(std::isnan(db[0]));
    CHECK(db[1] == 4.0f);                                      // -floor(7 / -2) = 4
    // the rounded quotient is a constant: double backward through d/db is 0, not 0 * (1 / 0) = NaN
    for (bool is_fmod : {true, false}) {
        CAPTURE(is_fmod);
        Tensor x = tensor<double>({0.05, -1.4}).requires_grad_(true), y = tensor<double>({0.0, -0.5}).requires_grad_(true);
        Tensor out = is_fmod ? fmod(x, y) : remainder(x, y);
        Tensor dy = autograd::grad({out}, {y}, {ones({2}, TensorOptions(kFloat64))}, true, true)[0];
        CHECK_FALSE(dy.requires_grad());                       // -g * quotient, the quotient a constant
    }
}

TEST_CASE("logical_and, logical_or, logical_xor take any dtypes and return kBool") {
    check_forward_fixture("math_logical_and", {"a", "b"}, binary(logical_and));
    check_forward_fixture("math_logical_or", {"a", "b"}, binary(logical_or));
    check_forward_fixture("math_logical_xor", {"a", "b"}, binary(logical_xor));
    check_forward_fixture("math_logical_xor_int_bool", {"a", "b"}, binary(logical_xor));
    Tensor x = randn({3}, TensorOptions(kFloat64).requires_grad(true));
    CHECK_FALSE(logical_xor(x, x).requires_grad());
}

TEST_CASE("the math ops pass float64 gradcheck and gradgradcheck") {
    check_gradcheck(unary(sin), {{3, 4}});
    check_gradcheck(unary(cos), {{3, 4}});
    check_gradcheck(unary(exp2), {{3, 4}});
    check_gradcheck([](const tensor_list& t) { return log1p(square(t[0])); }, {{3, 4}});
    check_gradcheck(unary(expm1), {{3, 4}});
    check_gradcheck(unary(erf), {{3, 4}});
    check_gradcheck([](const tensor_list& t) { return floor(t[0] * 3.0) * t[0] + round(t[0]) + sign(t[0]); }, {{3, 4}});
    check_gradcheck([](const tensor_list& t) { return ceil(t[0]) * t[0] + trunc(t[0] * 2.0); }, {{3, 4}});
    check_gradcheck([](const tensor_list& t) { return fmod(t[0] * 3.0, t[1] * t[1] + 0.5); }, {{3, 1, 4}, {2, 4}});
    check_gradcheck([](const tensor_list& t) { return remainder(t[0] * 3.0, t[1] - 3.0); }, {{3, 1, 4}, {2, 4}});
    check_gradcheck(binary(atan2), {{3, 1, 4}, {2, 4}});
    check_gradcheck([](const tensor_list& t) { return lerp(t[0], t[1], t[2]); }, {{3, 1, 4}, {2, 4}, {4}});
    check_gradcheck([](const tensor_list& t) { return lerp(t[0], t[1], 0.8); }, {{3, 4}, {4}});
}

TEST_CASE("the math ops in f16/bf16 stay within dtype tolerance of f64") {
    check_low_precision("sin", unary(sin), 1, 3.0);
    check_low_precision("cos", unary(cos), 1, 3.0);
    check_low_precision("exp2", unary(exp2), 1, 2.0);
    check_low_precision("log1p", [](const tensor_list& t) { return log1p(abs(t[0])); }, 1);
    check_low_precision("expm1", unary(expm1), 1);
    check_low_precision("erf", unary(erf), 1);
    check_low_precision("floor", unary(floor), 1, 4.0);
    check_low_precision("round", unary(round), 1, 4.0);
    check_low_precision("atan2", binary(atan2), 2);
    check_low_precision("lerp", [](const tensor_list& t) { return lerp(t[0], t[1], t[2]); }, 3);
    check_low_precision("lerp scalar", [](const tensor_list& t) { return lerp(t[0], t[1], 0.3); }, 2);
}

TEST_CASE("autocast: expm1, log1p in f32; atan2 promotes; sin, lerp keep their dtype") {
    Tensor h = randn({4}).to(kBFloat16), f = randn({4});
    amp::AutocastGuard guard(kCPU, kBFloat16);
    CHECK(expm1(h).dtype() == kFloat32);
    CHECK(log1p(abs(h)).dtype() == kFloat32);
    CHECK(atan2(h, f).dtype() == kFloat32);
    CHECK(sin(h).dtype() == kBFloat16);
    CHECK(floor(h).dtype() == kBFloat16);
    CHECK(lerp(h, h, 0.5).dtype() == kBFloat16);
}

TEST_CASE("the math ops reject bad input with typed errors naming the op") {
    Tensor b = tensor<bool>({true, false});
    CHECK_THROWS_AS(floor(b), DTypeError);
    CHECK_THROWS_WITH_AS(fmod(tensor<int64_t>({3, 4}), tensor<int64_t>({2, 0})), doctest::Contains("fmod"), ValueError);
    CHECK_THROWS_AS(remainder(tensor<int64_t>({3}), 0.0), ValueError);
    CHECK_THROWS_WITH_AS(lerp(randn({2}), randn({2}).to(kFloat64), 0.5), doctest::Contains("lerp"), DTypeError);
    CHECK_THROWS_AS(lerp(tensor<int64_t>({1}), tensor<int64_t>({2}), 0.5), DTypeError);
    CHECK_THROWS_AS(lerp(randn({2}), randn({3}), randn({2})), ShapeError);
    CHECK_THROWS_AS(atan2(randn({2}), randn({3})), ShapeError);
    CHECK_THROWS_AS(sin(Tensor()), ValueError);
}

TEST_CASE("the math ops are Tensor methods too, with the free functions' results") {
    manual_seed(31);
    Tensor x = randn({3, 4}), y = randn({3, 4}) + 3.0, w = rand({3, 4});
    const std::vector<std::pair<Tensor, Tensor>> pairs = {
        {x.sin(), sin(x)},       {x.cos(), cos(x)},         {x.exp2(), exp2(x)},
        {y.log1p(), log1p(y)},   {x.expm1(), expm1(x)},     {x.erf(), erf(x)},
        {x.sign(), sign(x)},     {x.floor(), floor(x)},     {x.ceil(), ceil(x)},
        {x.round(), round(x)},   {x.trunc(), trunc(x)},     {x.fmod(y), fmod(x, y)},
        {x.fmod(0.7), fmod(x, 0.7)}, {x.remainder(y), remainder(x, y)}, {x.remainder(0.7), remainder(x, 0.7)},
        {x.atan2(y), atan2(x, y)}, {x.lerp(y, w), lerp(x, y, w)}, {x.lerp(y, 0.3), lerp(x, y, 0.3)},
        {x.logical_and(y), logical_and(x, y)}, {x.logical_or(w), logical_or(x, w)},
        {x.logical_xor(y), logical_xor(x, y)}, {x.logical_not(), logical_not(x)},
    };
    for (size_t i = 0; i < pairs.size(); ++i) {
        CAPTURE(i);
        CHECK(equal(pairs[i].first, pairs[i].second));
    }
}

// PyTorch 2.15's values: where a^2 + b^2 is 0 (the origin, or f32 squares that underflow) the
// gradients are 0 signed as g b and -g a; an inf argument still gives NaN where PyTorch's does.
TEST_CASE("atan2's gradient at the origin is 0 with PyTorch's signs, not 0/0") {
    const float inf = std::numeric_limits<float>::infinity();
    const std::vector<float> a = {0.0f, -0.0f, 0.0f, 1e-30f, inf, 3.0f};
    const std::vector<float> b = {0.0f, -0.0f, -0.0f, 1e-30f, 1.0f, 4.0f};
    Tensor ta = tensor(a, {6}).requires_grad_(true), tb = tensor(b, {6}).requires_grad_(true);
    atan2(ta, tb).sum().backward();
    const std::vector<float> da = ta.grad().to_vector<float>(), db = tb.grad().to_vector<float>();
    const std::vector<float> want_da = {0.0f, -0.0f, -0.0f, 0.0f, 0.0f, 0.16f};
    const std::vector<float> want_db = {-0.0f, 0.0f, -0.0f, -0.0f, NAN, -0.12f};
    for (size_t i = 0; i < a.size(); ++i) {
        CAPTURE(i);
        CHECK(da[i] == doctest::Approx(want_da[i]));
        CHECK(std::signbit(da[i]) == std::signbit(want_da[i]));
        if (std::isnan(want_db[i])) {
            CHECK(std::isnan(db[i]));
            continue;
        }
        CHECK(db[i] == doctest::Approx(want_db[i]));
        CHECK(std::signbit(db[i]) == std::signbit(want_db[i]));
    }
}

// PyTorch 2.15's values: the divisor's gradient is -g trunc(a / b) (fmod) or -g floor(a / b)
// (remainder), with the quotient rounded once after the trunc/floor; an f16 a over an f32 0-d b of
// -1.19070518 (a quotient of 0.9998) truncates to 0, where rounding to f16 first gave 1.
TEST_CASE("fmod and remainder: the divisor's gradient takes the f16 quotient in f32, as PyTorch") {
    Tensor a = tensor(std::vector<float>{-1.1904296875f, 2.5f}, {2}).to(kFloat16).requires_grad_(true);
    Tensor b = full({}, -1.1907051801681519, TensorOptions(kFloat32)).requires_grad_(true);
    fmod(a, b).sum().backward();
    CHECK(b.grad().item<float>() == 2.0f);
    Tensor c = full({}, 1.1907051801681519, TensorOptions(kFloat32)).requires_grad_(true);
    remainder(a.detach().requires_grad_(true), c).sum().backward();
    CHECK(c.grad().item<float>() == -1.0f);
}

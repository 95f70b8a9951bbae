// edge_semantics_test.cpp: the PyTorch semantics matched for issue 11 section 2 (docs/edge_cases.md):
// clamp's gradient at a bound, NaN gradients of max()/amax/relu, in-place scalar rounding, pow's
// exponent gradient with a low-precision base, and binary_cross_entropy's argument errors. Expected
// values come from fixtures written by tools/fixtures/edge_cases.py (torch 2.15.0).
#include <doctest/doctest.h>

#include <cmath>
#include <optional>

#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;
namespace F = ampgrad::nn::functional;

namespace {
// Bitwise-style equality that treats NaN == NaN (the fixtures hold NaN on purpose).
bool same_values(const Tensor& a, const Tensor& b) {
    if (a.sizes() != b.sizes()) return false;
    std::vector<double> x = a.to(kFloat64).to_vector<double>(), y = b.to(kFloat64).to_vector<double>();
    for (size_t i = 0; i < x.size(); ++i)
        if (!(x[i] == y[i] || (std::isnan(x[i]) && std::isnan(y[i])))) return false;
    return true;
}
}  // namespace

TEST_CASE("clamp: values and the gradient at, inside and outside the bounds match torch 2.15") {
    for (const char* name : {"f64", "f32", "bf16", "f16"}) {
        CAPTURE(name);
        Fixture f = load_fixture(std::string("edge_clamp_at_bound_") + name);
        const double lo = f.param("lo"), hi = f.param("hi");
        struct Config { const char* tag; std::optional<double> lo, hi; };
        for (Config c : {Config{"both", lo, hi}, Config{"lo", lo, std::nullopt}, Config{"hi", std::nullopt, hi},
                         Config{"crossed", hi, lo}}) {
            CAPTURE(c.tag);
            Tensor x = f.at("x").clone().requires_grad_(true);
            Tensor y = clamp(x, c.lo, c.hi);
            y.sum().backward();
            CHECK(same_values(y, f.at(std::string("y_") + c.tag)));
            CHECK(same_values(x.grad(), f.at(std::string("dx_") + c.tag)));
            Tensor w = f.at("x").clone().requires_grad_(true);        // clamp_ shares the rule
            Tensor z = w * 1.0;
            z.clamp_(c.lo, c.hi);
            z.sum().backward();
            CHECK(same_values(z, f.at(std::string("y_") + c.tag)));
            CHECK(same_values(w.grad(), f.at(std::string("dx_") + c.tag)));
        }
    }
}

TEST_CASE("NaN gradients: max() shares g among NaN elements, amax gives NaN, relu passes NaN") {
    Fixture f = load_fixture("edge_nan_grads");
    Tensor x = f.at("x").clone().requires_grad_(true);
    max(x).backward();
    CHECK(same_values(x.grad(), f.at("dmax")));                        // [0, .5, 0, .5, 0]
    Tensor x2 = f.at("x").clone().requires_grad_(true);
    amax(x2.view({1, 5}), {1}).sum().backward();
    CHECK(same_values(x2.grad(), f.at("damax")));                      // all NaN, as torch
    Tensor x3 = f.at("x").clone().requires_grad_(true);
    relu(x3).backward(full({5}, 2.0, TensorOptions(kFloat64)));
    CHECK(same_values(x3.grad(), f.at("drelu")));                      // [2, 2, 2, 2, 0]
    Tensor x4 = f.at("x").clone().requires_grad_(true);                // relu's create_graph path
    tensor_list g = autograd::grad({relu(x4).sum()}, {x4}, {}, true, true);
    CHECK(same_values(g[0] * 2.0, f.at("drelu")));
    Tensor t = tensor<double>({1, 3, 3, 2}, {4}, TensorOptions(kFloat64).requires_grad(true));
    max(t).backward();                                                 // no NaN: ties share, as before
    CHECK(t.grad().to_vector<double>() == std::vector<double>{0, 0.5, 0.5, 0});
}

TEST_CASE("in-place scalar add_/mul_ keep the scalar in the compute type, like x * s") {
    Fixture f = load_fixture("edge_inplace_scalar");
    const double s = f.param("s");
    for (DType dt : {kBFloat16, kFloat16}) {
        const std::string suffix = dt == kBFloat16 ? "_bf16" : "_f16";
        Tensor x = f.at("x").to(dt);
        Tensor m = x.clone(), a = x.clone();
        m.mul_(s);
        a.add_(s);
        CHECK(same_values(m, f.at("mul" + suffix)));                   // bf16 3 * 0.3 -> 0.8984
        CHECK(same_values(a, f.at("add" + suffix)));
        CHECK(same_values(x * s, f.at("mul" + suffix)));               // the out-of-place form agrees
        Tensor leaf = x.clone().requires_grad_(true);
        Tensor h = leaf * 1.0;
        h.mul_(s);                                                     // autograd path: same value
        CHECK(same_values(h, f.at("mul" + suffix)));
        h.sum().backward();
        CHECK(same_values(leaf.grad(), full({4}, s, TensorOptions(dt))));
    }
    Tensor i = tensor<int64_t>({1, 2});
    i.mul_(3.0);
    CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{3, 6});
    CHECK_THROWS_AS(i.mul_(0.5), DTypeError);                          // torch: Float can't be cast to Long
    CHECK_THROWS_AS(i.add_(0.5), DTypeError);
}

TEST_CASE("pow(bf16 base, f64 exponent): the exponent's gradient takes log in f64") {
    Fixture f = load_fixture("edge_pow_bf16_f64");
    Tensor base = f.at("base").clone().requires_grad_(true);
    Tensor expo = f.at("expo").clone().requires_grad_(true);
    Tensor y = pow(base, expo);
    CHECK(y.dtype() == kFloat64);
    CHECK_CLOSE(y, f.at("y"), tol_for(kFloat64));
    y.sum().backward();
    CHECK_CLOSE(expo.grad(), f.at("dexpo"), tol_for(kFloat64));        // a bf16 log is ~3 digits off
    CHECK_CLOSE(base.grad(), f.at("dbase"), tol_for(kBFloat16));
}

TEST_CASE("binary_cross_entropy rejects a NaN input and a target outside [0, 1], as torch") {
    Tensor p = tensor<float>({0.2f, 0.7f}), y = tensor<float>({0.0f, 1.0f});
    CHECK(std::isfinite(F::binary_cross_entropy(p, y).item<double>()));
    CHECK_THROWS_AS(F::binary_cross_entropy(tensor<float>({0.2f, NAN}), y), ValueError);
    CHECK_THROWS_AS(F::binary_cross_entropy(tensor<float>({0.2f, 1.5f}), y), ValueError);
    CHECK_THROWS_AS(F::binary_cross_entropy(p, tensor<float>({0.0f, 1.5f})), ValueError);
    CHECK_THROWS_AS(F::binary_cross_entropy(p, tensor<float>({-0.1f, 1.0f})), ValueError);
    CHECK_THROWS_AS(F::binary_cross_entropy(p, tensor<float>({NAN, 1.0f})), ValueError);
}

TEST_CASE("in-place arithmetic refuses a result of a higher category than self, as torch's canCast") {
    Tensor i = tensor<int64_t>({1, 2});
    CHECK_THROWS_AS(i.add_(scalar_tensor(0.5, TensorOptions(kFloat64))), DTypeError);   // Double -> Long
    CHECK_THROWS_AS(i.add_(tensor<float>({0.5f, 1.0f})), DTypeError);
    CHECK_THROWS_AS(i.mul_(tensor<float>({2.0f, 2.0f})), DTypeError);
    CHECK_THROWS_AS(ones({2}, TensorOptions(kBool)).add_(tensor<int64_t>({1, 1})), DTypeError);
    CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{1, 2});                      // untouched
    Tensor h = tensor<double>({1, 2}, {2}, TensorOptions(kFloat64)).to(kFloat16);
    h.add_(tensor<double>({0.5, 1.0}));                                                // f64 into f16: same category
    CHECK(h.to(kFloat64).to_vector<double>() == std::vector<double>{1.5, 3.0});
    i.add_(tensor<int32_t>({1, 1}));
    CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{2, 3});
}

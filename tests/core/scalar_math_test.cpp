// scalar_math_test.cpp: core/scalar_math.hpp, the one definition of each elementwise formula.
// Every activation's grad() agrees with a central difference of its value() in double (fed the
// output y for the formulas with kGradFromOutput, the input x for the others), the GELU
// constants are what their names say, and the integer-capable ops stay in the integer type.
#include <doctest/doctest.h>

#include <cmath>
#include <string_view>

#include "core/kernels.hpp"
#include "core/scalar_math.hpp"

using namespace ampgrad;

namespace {
template <class F>
void check_grad_matches_value(std::string_view name) {
    for (double x : {-3.0, -1.2, -0.3, 0.2, 0.7, 1.9, 4.0}) {
        const double h = 1e-6;
        double numeric = (F::value(x + h) - F::value(x - h)) / (2 * h);
        double dy = 1.5;
        CAPTURE(name);
        CAPTURE(x);
        double saved = F::kGradFromOutput ? F::value(x) : x;             // what the op saves
        CHECK(F::grad(saved, dy) == doctest::Approx(dy * numeric).epsilon(1e-6));
    }
}
}  // namespace

TEST_CASE("every activation's grad is the derivative of its value") {
#define AMPGRAD_CHECK_GRAD(e, name, F) check_grad_matches_value<formulas::F>(name);
    AMPGRAD_ACTIVATION_GRADS(AMPGRAD_CHECK_GRAD)
#undef AMPGRAD_CHECK_GRAD
}

TEST_CASE("the GELU constants and the erf form match their definitions") {
    const double pi = std::acos(-1.0);
    CHECK(formulas::kSqrt2OverPi == doctest::Approx(std::sqrt(2.0 / pi)).epsilon(1e-15));
    CHECK(formulas::kInvSqrt2 == doctest::Approx(1.0 / std::sqrt(2.0)).epsilon(1e-15));
    CHECK(formulas::kInvSqrt2Pi == doctest::Approx(1.0 / std::sqrt(2.0 * pi)).epsilon(1e-15));
    // gelu(x) = x Phi(x); at x = 1, Phi(1) = 0.8413447460685429
    CHECK(formulas::GeluErf::value(1.0) == doctest::Approx(0.8413447460685429).epsilon(1e-14));
    // the tanh approximation is within 1e-3 of the exact form on [-4, 4]
    for (double x = -4.0; x <= 4.0; x += 0.25)
        CHECK(std::abs(formulas::GeluTanh::value(x) - formulas::GeluErf::value(x)) < 1e-3);
}

TEST_CASE("float formulas compute in float; integer-capable ops stay integers") {
    static_assert(std::is_same_v<decltype(formulas::Exp::value(1.0f)), float>);
    static_assert(std::is_same_v<decltype(formulas::Abs::value(int64_t{-3})), int64_t>);
    CHECK(formulas::Abs::value(int64_t{-3}) == 3);
    CHECK(formulas::Sign::value(int32_t{-7}) == -1);
    CHECK(formulas::Square::value(int32_t{-7}) == 49);
    CHECK(formulas::Neg::value(int64_t{5}) == -5);
    CHECK(std::signbit(formulas::Abs::value(-0.0f)) == false);               // abs(-0) is +0, as std::abs
    CHECK(std::isnan(formulas::Relu::value(NAN)));                            // NaN stays NaN
    CHECK(std::isnan(formulas::Maximum::value(double(NAN), 1.0)));
    CHECK(formulas::clamp(5.0, 2.0, 1.0) == 1.0);                             // lo > hi: all hi, as PyTorch
    CHECK(std::isnan(formulas::clamp(double(NAN), 0.0, 1.0)));
}

// scalar_math_test.cpp: kernels/scalar_math.hpp, the one definition of each elementwise formula.
// Every activation's grad() agrees with a central difference of its value() in double (fed the
// output y for the formulas with kGradFromOutput, the input x for the others), the GELU
// constants are what their names say, and the integer-capable ops stay in the integer type.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string_view>

#include "kernels/kernels.hpp"
#include "kernels/scalar_math.hpp"

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

TEST_CASE("issue 25's formulas: rounding, remainders, lerp, the rotary pair and its transpose") {
    using namespace formulas;
    CHECK(Round::value(2.5) == 2.0);                              // half to even
    CHECK(Round::value(-3.5) == -4.0);
    CHECK(Trunc::value(-2.7) == -2.0);
    CHECK(Fmod::value(-7.0, 3.0) == -1.0);                        // the sign of a
    CHECK(Remainder::value(-7.0, 3.0) == 2.0);                    // the sign of b
    CHECK(Remainder::value(7.0, -3.0) == -2.0);
    CHECK(Remainder::value(int64_t{-7}, int64_t{3}) == 2);
    CHECK(Fmod::value(int32_t{-7}, int32_t{3}) == -1);
    CHECK(Fmod::value(int64_t{5}, int64_t{0}) == 0);              // no trap: the op layer refuses it first
    // the type's minimum by -1 overflows in C++'s %: the formulas give 0 without dividing (no SIGFPE)
    CHECK(Fmod::value(std::numeric_limits<int64_t>::min(), int64_t{-1}) == 0);
    CHECK(Remainder::value(std::numeric_limits<int32_t>::min(), int32_t{-1}) == 0);
    CHECK(Fmod::value(int32_t{-7}, int32_t{-1}) == 0);
    CHECK(Remainder::value(int64_t{7}, int64_t{-1}) == 0);
    CHECK(Lerp::value(0.1, 1e8, 1.0) == 1e8);                     // exact at both ends
    CHECK(Lerp::value(0.1, 1e8, 0.0) == 0.1);
    CHECK(Lerp::value(1.0, 3.0, 0.25) == 1.5);
    CHECK(Atan2::value(1.0, -1.0) == doctest::Approx(3 * M_PI / 4));
    // the transpose is the adjoint: <g, forward(x)> = <transpose(g), x> for any c1, c2, s1, s2
    const double x1 = 0.3, x2 = -1.2, g1 = 0.7, g2 = 2.1, c1 = 0.4, c2 = -0.9, s1 = 1.3, s2 = 0.2;
    double o1, o2, t1, t2;
    Rotary::forward(x1, x2, c1, c2, s1, s2, o1, o2);
    Rotary::transpose(g1, g2, c1, c2, s1, s2, t1, t2);
    CHECK(g1 * o1 + g2 * o2 == doctest::Approx(t1 * x1 + t2 * x2));
    // rms_norm's dx is the derivative of sum_c g_c x_c rstd(x) for a row of two
    auto loss = [](double a, double b) { return (0.5 * a - 2.0 * b) / std::sqrt((a * a + b * b) / 2 + 1e-3); };
    const double a = 0.8, b = -0.3, h = 1e-6;
    const double rstd = RmsNorm::rstd(a * a + b * b, 2.0, 1e-3);
    const double mean_g_xhat = (0.5 * a * rstd - 2.0 * b * rstd) / 2;
    CHECK(RmsNorm::dx(0.5, a * rstd, rstd, mean_g_xhat) == doctest::Approx((loss(a + h, b) - loss(a - h, b)) / (2 * h)));
}

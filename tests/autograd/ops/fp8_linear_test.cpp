// fp8_linear_test.cpp: F::fp8_linear (autograd/ops/fp8_linear.cpp), the op alone:
//  - the gradient check fp8 allows: with operands exactly representable in fp8 and unit scales, the
//    forward, dgrad and wgrad equal the float64 products exactly (so every transpose is right);
//  - f16 and bf16 inputs against float64 within the fp8 rounding bound of each operand;
//  - each recipe's amax bookkeeping, and misuse as typed errors naming the op.
// The recipes step by step against the PyTorch oracle: tests/amp/fp8_recipe_test.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <memory>

#include "ampgrad/ampgrad.h"
#include "tests/support/check_close.hpp"

using namespace ampgrad;

namespace {

// Small integers in [-3, 3] (exact in e4m3fn and e5m2; every partial sum exact in f32), as `dtype`.
Tensor integers(const Shape& shape, DType dtype) { return (floor(rand(shape) * 7.0) - 3.0).to(dtype); }

std::shared_ptr<Fp8LinearState> state_for(Fp8Scaling scaling) {
    return std::make_shared<Fp8LinearState>(Fp8LinearState::make(scaling, kCPU));
}

}  // namespace

TEST_CASE("fp8_linear: exact operands give the exact forward, dgrad and wgrad (delayed and rowwise)") {
    manual_seed(38);
    // Unit delayed scales and rowwise power-of-two scales keep small integers exact; tensorwise scales
    // (448 / amax) do not, and are checked against the oracle (tests/amp/fp8_recipe_test.cpp).
    for (Fp8Scaling scaling : {Fp8Scaling::kDelayed, Fp8Scaling::kRowwise}) {
        CAPTURE(std::string(fp8_scaling_name(scaling)));
        const int64_t M = 32, K = 16, N = 48;
        Tensor x = integers({M, K}, kBFloat16).requires_grad_(true);              // (M,K)
        Tensor w = integers({N, K}, kFloat32).requires_grad_(true);               // (N,K)
        Tensor g = integers({M, N}, kBFloat16);                                   // (M,N)
        auto state = state_for(scaling);
        Tensor y = F::fp8_linear(x, w, state, kBFloat16);                         // (M,N)
        y.backward(g);
        const Tensor xd = x.detach().to(kFloat64), wd = w.detach().to(kFloat64), gd = g.to(kFloat64);
        const testing::Tolerance tol{0.0, 0.0};
        CHECK_CLOSE(y.to(kFloat64), matmul(xd, wd.t()), tol);
        CHECK_CLOSE(x.grad().to(kFloat64), matmul(gd, wd), tol);                 // dgrad (M,K)
        CHECK_CLOSE(w.grad().to(kFloat64), matmul(gd.t(), xd), tol);             // wgrad (N,K)
        CHECK(x.grad().dtype() == kBFloat16);
        CHECK(w.grad().dtype() == kFloat32);
        // amax of each role: 3 (the integers reach ±3 with these sizes)
        CHECK(state->amax.to_vector<float>() == std::vector<float>{3.0f, 3.0f, 3.0f});
    }
}

TEST_CASE("fp8_linear: f16 and bf16 inputs stay within the fp8 rounding bound of float64") {
    manual_seed(7);
    for (DType dtype : {kFloat16, kBFloat16}) {
        for (Fp8Scaling scaling : {Fp8Scaling::kTensorwise, Fp8Scaling::kRowwise}) {
            CAPTURE(dtype_name(dtype));
            CAPTURE(std::string(fp8_scaling_name(scaling)));
            Tensor x = randn({16, 64}).to(dtype), w = (randn({32, 64}) * 0.1).to(dtype);
            Tensor y = F::fp8_linear(x, w, state_for(scaling), kBFloat16).to(kFloat64);   // (16,32)
            // Each e4m3 operand is within 2^-4 relative of its value (3 mantissa bits, round to
            // nearest), so |y - x w^T| <= sum |x||w| (2^-4 + 2^-4 + 2^-8), plus the bf16 output rounding.
            const Tensor xd = x.to(kFloat64), wd = w.to(kFloat64);
            const Tensor exact = matmul(xd, wd.t());
            const Tensor bound = matmul(abs(xd), abs(wd).t()) * (2 * 0.0625 + 0.00390625) + abs(exact) * 0.00390625;
            CHECK(max(abs(y - exact) - bound).item<double>() <= 0.0);
            CHECK(max(abs(y - exact)).item<double>() > 0.0);                      // it is lossy: not a bf16 matmul in disguise
        }
    }
}

TEST_CASE("fp8_linear: delayed scaling quantises with the state's scales and records running amaxes in training") {
    auto state = state_for(Fp8Scaling::kDelayed);
    state->scale.copy_(tensor(std::vector<float>{0.5f, 2.0f, 1.0f}, {3}));
    Tensor x = full({16, 16}, 3.0), w = full({16, 16}, 0.25);
    Tensor y = F::fp8_linear(x, w, state, kFloat32);                              // 16 * 3 * 0.25 = 12
    CHECK(y.to_vector<float>()[0] == doctest::Approx(12.0));
    F::fp8_linear(full({16, 16}, -5.0), w, state, kFloat32);                      // a larger |x| later
    CHECK(state->amax.to_vector<float>() == std::vector<float>{5.0f, 0.25f, 0.0f});
    {
        NoGradGuard evaluation;                                                   // no_grad: nothing recorded
        F::fp8_linear(full({16, 16}, -9.0), full({16, 16}, 2.0), state, kFloat32);
    }
    CHECK(state->amax.to_vector<float>() == std::vector<float>{5.0f, 0.25f, 0.0f});
    // Scale 1000 for the input: 3 * 1000 saturates to 448, so y = 16 * 448/1000 * 0.25.
    state->scale.copy_(tensor(std::vector<float>{1000.0f, 1.0f, 1.0f}, {3}));
    Tensor y_sat = F::fp8_linear(x, w, state, kFloat32);
    CHECK(y_sat.to_vector<float>()[0] == doctest::Approx(16 * 0.448 * 0.25).epsilon(1e-5));
}

TEST_CASE("fp8_linear: misuse is a typed error naming the op and the facts") {
    auto state = state_for(Fp8Scaling::kDelayed);
    CHECK_THROWS_WITH_AS(F::fp8_linear(zeros({16, 24}), zeros({16, 24}), state, kBFloat16),
                         doctest::Contains("fp8_linear: M, K and N must be multiples of 16"), ShapeError);
    CHECK_THROWS_WITH_AS(F::fp8_linear(zeros({16, 16}), zeros({16, 32}), state, kBFloat16),
                         doctest::Contains("fp8_linear: expected x (M,K) and w (N,K)"), ShapeError);
    CHECK_THROWS_WITH_AS(F::fp8_linear(zeros({16, 16}), zeros({16, 16}), nullptr, kBFloat16),
                         doctest::Contains("fp8_linear: the Fp8LinearState is missing"), ValueError);
    CHECK_THROWS_WITH_AS(F::fp8_linear(zeros({16, 16}, TensorOptions(kInt64)), zeros({16, 16}), state, kBFloat16),
                         doctest::Contains("fp8_linear: x and w must be f32, f64, f16 or bf16"), DTypeError);
    CHECK_THROWS_WITH_AS(F::fp8_linear(zeros({16, 16}), zeros({16, 16}), state_for(Fp8Scaling::kRowwise), kFloat32),
                         doctest::Contains("rowwise scaling gives a bf16 output only"), DTypeError);
    CHECK(F::fp8_linear_supports(32, 16, 48));
    CHECK_FALSE(F::fp8_linear_supports(8, 16, 48));
}

// clip_grad_test.cpp: nn::utils::clip_grad_norm_ against torch (L2, L1, p=3, inf, no clipping),
// its edge cases (no grads, non-finite norm) and reduced-precision grads.
// (Lives in tests/nn/ because the nn test suite globs only this folder.)
#include <doctest/doctest.h>

#include <cmath>

#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

std::vector<Tensor> params_with_grads(const Fixture& fx, DType dtype = kFloat32) {
    std::vector<Tensor> params;
    for (int i = 0; i < 3; ++i) {
        const Tensor& g = fx.at(fmt::format("g{}", i));
        Tensor p = zeros(g.sizes(), TensorOptions(dtype)).requires_grad_(true);
        p.set_grad(g.to(dtype));
        params.push_back(p);
    }
    return params;
}

double norm_type_of(const Fixture& fx) {
    const auto& n = fx.params.at("norm_type");
    return n.is_string() ? nn::utils::kInfNorm : n.get<double>();
}

}  // namespace

TEST_CASE("clip_grad_norm_ matches PyTorch: total norm before clipping and the clipped grads") {
    for (const char* name : {"clip_grad_norm_l2", "clip_grad_norm_no_clip", "clip_grad_norm_inf", "clip_grad_norm_l1",
                             "clip_grad_norm_p3"}) {
        CAPTURE(name);
        Fixture fx = load_fixture(name);
        std::vector<Tensor> params = params_with_grads(fx);
        Tensor total = nn::utils::clip_grad_norm_(params, fx.param("max_norm"), norm_type_of(fx));
        CHECK(total.dim() == 0);
        CHECK(total.dtype() == kFloat32);
        CHECK_CLOSE(total, fx.at("total_norm"), tol_for(kFloat32));
        for (int i = 0; i < 3; ++i) CHECK_CLOSE(params[i].grad(), fx.at(fmt::format("clipped{}", i)), tol_for(kFloat32));
    }
}

TEST_CASE("clip_grad_norm_ on f16 and bf16 grads is within their tolerance of the f64 result") {
    Fixture fx = load_fixture("clip_grad_norm_p3");           // grads ~10: f16 squares would overflow a naive sum
    for (DType dt : {kFloat16, kBFloat16}) {
        CAPTURE(dtype_name(dt));
        std::vector<Tensor> p64 = params_with_grads(fx, kFloat64), low = params_with_grads(fx, dt);
        Tensor t64 = nn::utils::clip_grad_norm_(p64, 1.0, 2.0);
        Tensor tlow = nn::utils::clip_grad_norm_(low, 1.0, 2.0);
        CHECK(tlow.dtype() == dt);
        CHECK_CLOSE(tlow, t64, tol_for(dt));
        for (int i = 0; i < 3; ++i) CHECK_CLOSE(low[i].grad(), p64[i].grad(), tol_for(dt));
    }
}

TEST_CASE("clip_grad_norm_ skips parameters without grads; no grads gives a zero norm") {
    Tensor a = zeros({2}).requires_grad_(true), b = zeros({2}).requires_grad_(true);
    a.set_grad(full({2}, 3.0));                                // norm sqrt(18)
    double total = nn::utils::clip_grad_norm({a, b}, 1.0);
    CHECK(total == doctest::Approx(std::sqrt(18.0)));
    CHECK(a.grad().to_vector<float>()[0] == doctest::Approx(3.0 / (std::sqrt(18.0) + 1e-6)));
    CHECK(!b.grad().defined());
    Tensor none = nn::utils::clip_grad_norm_({b}, 1.0);
    CHECK(none.item<float>() == 0.0f);
}

TEST_CASE("clip_grad_norm_ with error_if_nonfinite raises torch's error; without it, grads go non-finite") {
    Tensor a = zeros({2}).requires_grad_(true);
    a.set_grad(tensor(std::vector<float>{1.0f, INFINITY}));
    CHECK_THROWS_WITH_AS(nn::utils::clip_grad_norm_({a}, 1.0, 2.0, true),
                         doctest::Contains("The total norm of order 2 for gradients from `parameters` is non-finite"),
                         ValueError);
    Tensor total = nn::utils::clip_grad_norm_({a}, 1.0);
    CHECK(std::isinf(total.item<float>()));
    CHECK(a.grad().to_vector<float>()[0] == 0.0f);             // scaled by 1/(inf): torch does the same
    CHECK_THROWS_AS(nn::utils::clip_grad_norm_({a}, 1.0, -1.0), ValueError);
}

TEST_CASE("get_total_norm with an f32 result: f16 tensors whose norm passes f16's range stay finite") {
    // 4096 elements of 2048 each: squares 2^22 (an f16 overflows at 65504), norm 2048 * 64 = 131072.
    Tensor big = full({4096}, 2048.0, TensorOptions(kFloat16));
    Tensor half = nn::utils::get_total_norm({big});
    CHECK(half.dtype() == kFloat16);
    CHECK(std::isinf(half.item<double>()));
    Tensor f32 = nn::utils::get_total_norm({big, big}, 2.0, false, kFloat32);
    CHECK(f32.dtype() == kFloat32);
    CHECK(f32.item<double>() == doctest::Approx(131072.0 * std::sqrt(2.0)));
    CHECK(nn::utils::get_total_norm({}, 2.0, false, kFloat64).dtype() == kFloat64);
}

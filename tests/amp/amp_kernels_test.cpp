// amp_kernels_test.cpp: the CPU GradScaler kernels (cpu/amp.cpp): one pass over many grads of
// mixed dtypes and layouts, PyTorch's unscale values, every branch of update_scale, bad input.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {
Tensor scalar_f32(double v) { return full({}, v); }
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
}  // namespace

TEST_CASE("non_finite_check_and_unscale: matches PyTorch's _amp_foreach_non_finite_check_and_unscale_") {
    for (std::string name : {"amp_unscale_f32", "amp_unscale_bf16"}) {
        CAPTURE(name);
        Fixture fx = load_fixture(name);
        std::vector<Tensor> grads{fx.at("g").clone()};
        Tensor found = scalar_f32(0.0), inv = scalar_f32(fx.param("inv_scale"));
        kernels::non_finite_check_and_unscale(grads, found, inv);
        std::vector<float> got = grads[0].to_vector<float>(), want = fx.at("unscaled").to_vector<float>();
        for (size_t i = 0; i < got.size(); ++i) {
            CAPTURE(i);
            if (std::isnan(want[i])) CHECK(std::isnan(got[i]));
            else CHECK(got[i] == want[i]);                // bit-exact: one multiply, one rounding
        }
        CHECK(found.item<float>() == 1.0f);
    }
}

TEST_CASE("non_finite_check_and_unscale: one pass over many grads of every float dtype and layout") {
    manual_seed(9);
    std::vector<Tensor> grads;
    std::vector<Tensor> expected;
    for (DType d : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
        for (Shape s : {Shape{7}, Shape{300, 301}, Shape{1}, Shape{0}}) {
            Tensor g = (randn(s) * 8.0).to(d);
            expected.push_back(g.to(kFloat64) * 0.125);
            grads.push_back(g);
        }
    }
    Tensor base = randn({6, 8});                           // a strided (non-contiguous) grad
    grads.push_back(base.transpose(0, 1));
    expected.push_back(base.transpose(0, 1).to(kFloat64) * 0.125);
    grads.push_back(Tensor());                             // undefined grads are skipped
    Tensor found = scalar_f32(0.0);
    kernels::non_finite_check_and_unscale(grads, found, scalar_f32(0.125));
    CHECK(found.item<float>() == 0.0f);
    for (size_t i = 0; i + 1 < grads.size(); ++i) {
        CAPTURE(i);
        CHECK_CLOSE(grads[i].to(kFloat64), expected[i], tol_for(grads[i].dtype(), 1));
    }
}

TEST_CASE("non_finite_check_and_unscale: flags inf and NaN anywhere, never clears the flag, unscales anyway") {
    for (DType d : {kFloat32, kFloat16, kBFloat16, kFloat64}) {
        CAPTURE(dtype_name(d));
        Tensor big = ones({100000}, TensorOptions(d));       // several threads
        Tensor bad = tensor<float>({1.0f, 2.0f, 4.0f}).to(d);
        {
            NoGradGuard no_grad;
            big.narrow(0, 77777, 1).fill_(kNaN);
        }
        std::vector<Tensor> grads{bad, big};
        Tensor found = scalar_f32(0.0);
        kernels::non_finite_check_and_unscale(grads, found, scalar_f32(0.5));
        CHECK(found.item<float>() == 1.0f);
        CHECK(bad.to_vector<float>() == std::vector<float>{0.5f, 1.0f, 2.0f});
        std::vector<Tensor> clean{tensor<float>({3.0f}).to(d)};
        kernels::non_finite_check_and_unscale(clean, found, scalar_f32(1.0));
        CHECK(found.item<float>() == 1.0f);                 // accumulates across calls
        CHECK(clean[0].to_vector<float>()[0] == 3.0f);
    }
    Tensor inf_grad = tensor<float>({1.0f, std::numeric_limits<float>::infinity()});
    std::vector<Tensor> one{inf_grad};
    Tensor found = scalar_f32(0.0);
    kernels::non_finite_check_and_unscale(one, found, scalar_f32(1.0));
    CHECK(found.item<float>() == 1.0f);
}

TEST_CASE("update_scale: backoff, growth, `>=` interval, f32-overflow cap, min/max bounds, i32 and i64 trackers") {
    auto run = [&](double scale, int64_t tracker, bool found_inf, int64_t interval, DType tracker_dtype,
                   double min_scale = 0.0, double max_scale = 1e300) {
        Tensor s = scalar_f32(scale), t = full({}, static_cast<double>(tracker), TensorOptions(tracker_dtype));
        kernels::update_scale(s, t, scalar_f32(found_inf ? 1.0 : 0.0), 2.0, 0.5, interval, min_scale,
                              max_scale);
        return std::pair<double, int64_t>{s.item<double>(), t.item<int64_t>()};
    };
    for (DType td : {kInt32, kInt64}) {
        CAPTURE(dtype_name(td));
        CHECK(run(1024, 5, true, 10, td) == std::pair<double, int64_t>{512, 0});
        CHECK(run(1024, 5, false, 10, td) == std::pair<double, int64_t>{1024, 6});
        CHECK(run(1024, 9, false, 10, td) == std::pair<double, int64_t>{2048, 0});
        CHECK(run(1024, 50, false, 10, td) == std::pair<double, int64_t>{2048, 0});   // PyTorch: tracker 51 forever
        CHECK(run(3e38, 9, false, 10, td) == std::pair<double, int64_t>{static_cast<float>(3e38), 0});  // x2 = inf: kept
        CHECK(run(1024, 9, false, 10, td, 0.0, 1500.0) == std::pair<double, int64_t>{1500, 0});
        CHECK(run(1.0, 3, true, 10, td, 1.0) == std::pair<double, int64_t>{1.0, 0});
    }
}

TEST_CASE("amp kernels: bad input gives typed errors") {
    std::vector<Tensor> grads{ones({2})};
    CHECK_THROWS_WITH_AS(kernels::non_finite_check_and_unscale(grads, full({2}, 0.0), scalar_f32(1.0)),
                         doctest::Contains("found_inf must be a 1-element f32 cpu tensor"), DTypeError);
    CHECK_THROWS_AS(kernels::non_finite_check_and_unscale(grads, scalar_f32(0.0), full({}, 1.0, kFloat64)),
                    DTypeError);
    std::vector<Tensor> ints{ones({2}, TensorOptions(kInt64))};
    CHECK_THROWS_AS(kernels::non_finite_check_and_unscale(ints, scalar_f32(0.0), scalar_f32(1.0)), DTypeError);
    CHECK_THROWS_WITH_AS(kernels::update_scale(scalar_f32(1.0), scalar_f32(0.0), scalar_f32(0.0), 2, 0.5, 10, 0,
                                               1e9),
                         doctest::Contains("growth_tracker must be a 1-element i32 or i64"), DTypeError);
}

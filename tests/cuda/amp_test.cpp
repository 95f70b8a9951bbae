// amp_test.cpp: cuda/amp.cu, the GradScaler kernels, against values worked out by hand from
// PyTorch's _amp_foreach_non_finite_check_and_unscale_ / _amp_update_scale_ (with our `>=`
// growth check and [min_scale, max_scale] bounds).
#include "tests/cuda/cuda_test_util.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

Tensor gpu_scalar(double v, DType dtype = kFloat32) { return to_gpu(full({}, v, TensorOptions(dtype))); }
double value_of(const Tensor& t) { return host_values(t)[0]; }

struct ScalerState {
    Tensor scale = gpu_scalar(65536.0);
    Tensor tracker = gpu_scalar(0.0, kInt32);
};

// One update with growth 2, backoff 0.5, interval 2 and the given bounds.
void update(ScalerState& s, bool found_inf, double min_scale = 0.0, double max_scale = INFINITY) {
    kernels::update_scale(s.scale, s.tracker, gpu_scalar(found_inf ? 1.0 : 0.0), 2.0, 0.5, 2, min_scale,
                          max_scale);
}

}  // namespace

TEST_CASE("cuda non_finite_check_and_unscale: unscales every grad and flags inf/NaN" * skip_without_gpu()) {
    Tensor g32 = to_gpu(tensor(std::vector<float>{2.0f, -4.0f, 8.0f, 1.0f}, {2, 2}));
    Tensor g16 = to_gpu(copy_to(tensor(std::vector<float>{6.0f, -2.0f}, {2}), kHost, kFloat16));
    Tensor found = gpu_scalar(0.0), inv = gpu_scalar(0.5);
    std::vector<Tensor> grads = {g32, Tensor(), g16};                   // an undefined grad is skipped
    kernels::non_finite_check_and_unscale(grads, found, inv);
    CHECK(value_of(found) == 0.0);
    CHECK(host_values(g32) == std::vector<double>{1.0, -2.0, 4.0, 0.5});
    CHECK(host_values(g16) == std::vector<double>{3.0, -1.0});

    Tensor bad = to_gpu(tensor(std::vector<float>{1.0f, INFINITY, 4.0f, NAN}, {4}));
    Tensor strided = make_view(bad, {2}, {2}, 0);                          // elements 0 and 2: finite
    std::vector<Tensor> only_finite = {strided};
    kernels::non_finite_check_and_unscale(only_finite, found, inv);
    CHECK(value_of(found) == 0.0);
    std::vector<Tensor> all = {bad};
    kernels::non_finite_check_and_unscale(all, found, gpu_scalar(1.0));
    CHECK(value_of(found) == 1.0);
    std::vector<double> v = host_values(bad);                              // unscaled even with inf found
    CHECK(v[0] == 0.5);
    CHECK(std::isinf(v[1]));
    CHECK(v[2] == 2.0);
    CHECK(std::isnan(v[3]));
}

TEST_CASE("cuda update_scale: growth after `interval` clean steps, backoff on inf, bounds" * skip_without_gpu()) {
    ScalerState s;
    update(s, false);
    CHECK(value_of(s.scale) == 65536.0);
    CHECK(value_of(s.tracker) == 1.0);
    update(s, false);                                                      // tracker reaches 2: grow
    CHECK(value_of(s.scale) == 131072.0);
    CHECK(value_of(s.tracker) == 0.0);
    update(s, true);
    CHECK(value_of(s.scale) == 65536.0);
    CHECK(value_of(s.tracker) == 0.0);

    ScalerState low{gpu_scalar(1.0), gpu_scalar(1.0, kInt64)};             // i64 tracker works too
    update(low, true, /*min_scale=*/1.0);
    CHECK(value_of(low.scale) == 1.0);                                     // backoff stops at min_scale

    ScalerState high{gpu_scalar(3.0), gpu_scalar(1.0, kInt32)};
    update(high, false, 0.0, /*max_scale=*/4.0);
    CHECK(value_of(high.scale) == 4.0);                                    // growth stops at max_scale

    ScalerState huge{gpu_scalar(3.0e38), gpu_scalar(1.0, kInt32)};
    update(huge, false);
    CHECK(value_of(huge.scale) == doctest::Approx(3.0e38));               // 6e38 is not finite in f32: kept
    CHECK(value_of(huge.tracker) == 0.0);

    ScalerState late{gpu_scalar(8.0), gpu_scalar(5.0, kInt32)};            // tracker already past the interval
    update(late, false);
    CHECK(value_of(late.scale) == 16.0);                                   // `>=`: grows (PyTorch's `==` never would)
}

TEST_CASE("cuda amp kernels reject scalars of the wrong dtype" * skip_without_gpu()) {
    ScalerState s;
    CHECK_THROWS_AS(kernels::update_scale(s.scale, gpu_scalar(0.0), gpu_scalar(0.0), 2.0, 0.5, 2, 0.0, 1e9),
                    DTypeError);
    std::vector<Tensor> none;
    CHECK_THROWS_AS(kernels::non_finite_check_and_unscale(none, gpu_scalar(0.0, kFloat64), gpu_scalar(1.0)),
                    DTypeError);
}

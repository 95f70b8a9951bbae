// layer_norm_test.cpp: cuda/layer_norm.cu against cpu/layer_norm.cpp: y, the saved mean/rstd, and
// dx/dweight/dbias, with and without weight and bias, on the warp path (short rows), the block path
// (long rows), 2^20+3 values (one long row; many short rows, whose dweight/dbias sum over chunk
// partials), large |mean| rows, empty inputs, and run twice to check the backward is bitwise
// deterministic. The kernels take contiguous (N,C) tensors only, so a strided x is refused.
// dweight/dbias sum N rows in the compute type in a different order than the CPU, so their f32
// tolerance grows with sqrt(N).
#include "tests/cuda/cuda_test_util.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

DType stat_dtype(DType dtype) { return dtype == kFloat64 ? kFloat64 : kFloat32; }

struct Grads {
    Tensor dx, dweight, dbias;
};

// Backward on `device` from host inputs; gradients left undefined where not wanted.
Grads backward_on(Device device, const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                  const Tensor& weight, bool want_dx, bool want_dbias) {
    const int64_t C = x.size(1);
    auto on = [&](const Tensor& t) { return t.defined() ? copy_to(t, device) : Tensor(); };
    Grads g{want_dx ? make_empty(x.sizes(), x.dtype(), device) : Tensor(),
            weight.defined() ? make_empty({C}, x.dtype(), device) : Tensor(),
            want_dbias ? make_empty({C}, x.dtype(), device) : Tensor()};
    kernels::layer_norm_backward(g.dx, g.dweight, g.dbias, on(dy), on(x), on(mean), on(rstd), on(weight));
    return g;
}

void check_grads(const Grads& gpu, const Grads& cpu, DType dtype, int64_t N) {
    if (cpu.dx.defined()) CHECK_GPU_CLOSE(gpu.dx, cpu.dx, tol_for(dtype));
    // f16/bf16: the fp32 sums differ in their last bits, so the one rounding to T differs by an ulp at most
    Tolerance sum_tol = tol_for(dtype, 8.0);
    if (dtype == kFloat32) sum_tol = {1e-5 * std::sqrt(static_cast<double>(N)), 1e-4};
    if (cpu.dweight.defined()) CHECK_GPU_CLOSE(gpu.dweight, cpu.dweight, sum_tol);
    if (cpu.dbias.defined()) CHECK_GPU_CLOSE(gpu.dbias, cpu.dbias, sum_tol);
}

// Forward and backward on both backends for x (N,C) with optional weight/bias.
void check_layer_norm(const Tensor& x, bool affine, uint64_t seed) {
    CAPTURE(x.describe());
    CAPTURE(affine);
    const DType dtype = x.dtype();
    const int64_t N = x.size(0), C = x.size(1);
    Tensor w = affine ? sample({C}, dtype, seed) : Tensor(), b = affine ? sample({C}, dtype, seed + 1) : Tensor();
    Tensor y = make_empty(x.sizes(), dtype, kHost);
    Tensor mean = make_empty({N}, stat_dtype(dtype), kHost), rstd = make_empty({N}, stat_dtype(dtype), kHost);
    kernels::layer_norm(y, mean, rstd, x, w, b, 1e-5);
    Tensor y_gpu = make_empty(x.sizes(), dtype, kGpu);
    Tensor mean_gpu = make_empty({N}, stat_dtype(dtype), kGpu), rstd_gpu = make_empty({N}, stat_dtype(dtype), kGpu);
    auto on_gpu = [](const Tensor& t) { return t.defined() ? to_gpu(t) : Tensor(); };
    kernels::layer_norm(y_gpu, mean_gpu, rstd_gpu, to_gpu(x), on_gpu(w), on_gpu(b), 1e-5);
    CHECK_GPU_CLOSE(y_gpu, y, tol_for(dtype));
    CHECK_GPU_CLOSE(mean_gpu, mean, tol_for(stat_dtype(dtype)));
    CHECK_GPU_CLOSE(rstd_gpu, rstd, tol_for(stat_dtype(dtype)));

    Tensor dy = sample(x.sizes(), dtype, seed + 2);
    for (bool want_dx : {true, false}) {
        CAPTURE(want_dx);
        Grads cpu = backward_on(kHost, dy, x, mean, rstd, w, want_dx, affine);
        Grads gpu = backward_on(kGpu, dy, x, mean, rstd, w, want_dx, affine);
        check_grads(gpu, cpu, dtype, N);
    }
}

}  // namespace

TEST_CASE("cuda layer_norm: forward and backward match the CPU, warp and block rows" * skip_without_gpu()) {
    const std::vector<Shape> shapes = {{7, 13}, {16, 768}, {5, 3000}, {1, 1}, {300, 40}};
    for (DType dtype : kFloatDTypes) {
        CAPTURE(dtype_name(dtype));
        uint64_t seed = 300;
        for (const Shape& shape : shapes)
            for (bool affine : {true, false}) {
                check_layer_norm(sample(shape, dtype, seed), affine, seed + 1);
                seed += 4;
            }
    }
}

TEST_CASE("cuda layer_norm: 2^20+3 values as one row and as 2^15+1 rows of 32" * skip_without_gpu()) {
    for (DType dtype : kFloatDTypes) {
        CAPTURE(dtype_name(dtype));
        check_layer_norm(sample({1, (int64_t{1} << 20) + 3}, dtype, 320), true, 321);
        check_layer_norm(sample({(int64_t{1} << 15) + 1, 32}, dtype, 322), true, 323);
    }
}

TEST_CASE("cuda layer_norm: rows with a large mean, and a constant row (corrected two-pass variance)" * skip_without_gpu()) {
    // |mean| / std = 100 (f32) or 1e6 (f64): a one-pass E[x^2] - E[x]^2 would lose 4 (f32) or 12 (f64)
    // digits of the variance; the mean's own rounding moves xhat by about eps * |mean| / std.
    for (DType dtype : {kFloat32, kFloat64}) {
        CAPTURE(dtype_name(dtype));
        std::vector<double> v = sample({4, 100}, kFloat64, 330).to_vector<double>();
        for (double& e : v) e += dtype == kFloat32 ? 100.0 : 1e6;
        for (int64_t c = 0; c < 100; ++c) v[static_cast<size_t>(c)] = 0.1;   // row 0 constant: xhat exactly 0, y = b
        check_layer_norm(copy_to(tensor(v, {4, 100}), kHost, dtype), true, 331);
    }
}

TEST_CASE("cuda layer_norm: backward is bitwise deterministic" * skip_without_gpu()) {
    Tensor x = sample({4097, 96}, kFloat32, 340), dy = sample({4097, 96}, kFloat32, 341);
    Tensor w = sample({96}, kFloat32, 342);
    Tensor mean = make_empty({4097}, kFloat32, kHost), rstd = make_empty({4097}, kFloat32, kHost);
    kernels::layer_norm(make_empty(x.sizes(), kFloat32, kHost), mean, rstd, x, w, Tensor(), 1e-5);
    Grads first = backward_on(kGpu, dy, x, mean, rstd, w, true, true);
    Grads second = backward_on(kGpu, dy, x, mean, rstd, w, true, true);
    CHECK_EXACT(first.dx, second.dx);
    CHECK_EXACT(first.dweight, second.dweight);
    CHECK_EXACT(first.dbias, second.dbias);
}

TEST_CASE("cuda layer_norm: empty inputs; no rows gives zero dweight/dbias; strided x is refused" * skip_without_gpu()) {
    for (DType dtype : kFloatDTypes) {
        CAPTURE(dtype_name(dtype));
        Tensor x = make_empty({0, 6}, dtype, kHost), w = sample({6}, dtype, 350);
        Tensor mean = make_empty({0}, stat_dtype(dtype), kHost), rstd = make_empty({0}, stat_dtype(dtype), kHost);
        Grads cpu = backward_on(kHost, x, x, mean, rstd, w, true, true);
        Grads gpu = backward_on(kGpu, x, x, mean, rstd, w, true, true);
        CHECK_EXACT(gpu.dweight, cpu.dweight);                             // zeros
        CHECK_EXACT(gpu.dbias, cpu.dbias);
        Tensor x0 = make_empty({3, 0}, dtype, kGpu);
        Tensor m3 = make_empty({3}, stat_dtype(dtype), kGpu), r3 = make_empty({3}, stat_dtype(dtype), kGpu);
        CHECK_NOTHROW(kernels::layer_norm(make_empty({3, 0}, dtype, kGpu), m3, r3, x0, Tensor(), Tensor(), 1e-5));
    }
    Tensor base = to_gpu(sample({6, 4}, kFloat32, 351));
    Tensor xt = make_view(base, {4, 6}, {1, 4}, 0);
    Tensor m = make_empty({4}, kFloat32, kGpu), r = make_empty({4}, kFloat32, kGpu);
    CHECK_THROWS_AS(kernels::layer_norm(make_empty({4, 6}, kFloat32, kGpu), m, r, xt, Tensor(), Tensor(), 1e-5),
                    InternalError);
}

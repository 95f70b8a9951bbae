// rms_norm_test.cpp: cuda/rms_norm.cu against cpu/rms_norm.cpp: y, the saved rstd, and dx/dweight,
// with and without weight, on the warp path (short rows) and the block path (long rows), many rows
// (dweight sums over chunk partials), and empty inputs. dweight sums N rows in a different order than
// the CPU, so its f32 tolerance grows with sqrt(N). Skipped without a GPU.
#include "tests/cuda/cuda_test_util.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

DType stat_dtype(DType dtype) { return dtype == kFloat64 ? kFloat64 : kFloat32; }
Tensor on(const Tensor& t, Device device) { return t.defined() ? copy_to(t, device) : Tensor(); }

void check_rms_norm(const Tensor& x, bool weighted, uint64_t seed) {
    CAPTURE(x.describe());
    CAPTURE(weighted);
    const DType dtype = x.dtype();
    const int64_t N = x.size(0), C = x.size(1);
    Tensor w = weighted ? sample({C}, dtype, seed) : Tensor();
    Tensor y = make_empty(x.sizes(), dtype, kHost), rstd = make_empty({N}, stat_dtype(dtype), kHost);
    kernels::rms_norm(y, rstd, x, w, 1e-5);
    Tensor y_gpu = make_empty(x.sizes(), dtype, kGpu), rstd_gpu = make_empty({N}, stat_dtype(dtype), kGpu);
    kernels::rms_norm(y_gpu, rstd_gpu, to_gpu(x), on(w, kGpu), 1e-5);
    CHECK_GPU_CLOSE(y_gpu, y, tol_for(dtype));
    CHECK_GPU_CLOSE(rstd_gpu, rstd, tol_for(stat_dtype(dtype)));

    Tensor dy = sample(x.sizes(), dtype, seed + 1);
    auto backward_on = [&](Device device) {
        std::pair<Tensor, Tensor> g{make_empty(x.sizes(), dtype, device),
                                    weighted ? make_empty({C}, dtype, device) : Tensor()};
        kernels::rms_norm_backward(g.first, g.second, on(dy, device), on(x, device), on(rstd, device), on(w, device));
        return g;
    };
    auto cpu = backward_on(kHost), gpu = backward_on(kGpu);
    CHECK_GPU_CLOSE(gpu.first, cpu.first, tol_for(dtype));
    Tolerance sum_tol = dtype == kFloat32 ? Tolerance{1e-5 * std::sqrt(static_cast<double>(N)), 1e-4} : tol_for(dtype, 8.0);
    if (weighted) CHECK_GPU_CLOSE(gpu.second, cpu.second, sum_tol);
}

}  // namespace

TEST_CASE("cuda rms_norm: forward and backward match the CPU, warp and block rows" * skip_without_gpu()) {
    const std::vector<Shape> shapes = {{7, 13}, {16, 768}, {5, 3000}, {1, 1}, {300, 40}};
    for (DType dtype : kFloatDTypes) {
        CAPTURE(dtype_name(dtype));
        uint64_t seed = 500;
        for (const Shape& shape : shapes)
            for (bool weighted : {true, false}) {
                check_rms_norm(sample(shape, dtype, seed), weighted, seed + 1);
                seed += 3;
            }
    }
}

TEST_CASE("cuda rms_norm: no rows gives a zero weight gradient" * skip_without_gpu()) {
    Tensor x = make_empty({0, 8}, kFloat32, kGpu), rstd = make_empty({0}, kFloat32, kGpu);
    Tensor dw = make_empty({8}, kFloat32, kGpu);
    kernels::rms_norm_backward(Tensor(), dw, x, x, rstd, to_gpu(sample({8}, kFloat32, 1)));
    CHECK(host_values(dw) == std::vector<double>(8, 0.0));
}

// softmax_test.cpp: cuda/softmax.cu against cpu/softmax.cpp: softmax and log_softmax forward and
// backward on the warp path (short rows), the block path (long rows), a single 2^20+3-value row,
// 2^15+1 short rows, 0-d/1-d/3-d shapes, empty inputs, and the edge rows (all -inf, a NaN, a +inf,
// large magnitudes). The kernels take contiguous (N,C) tensors only (the ops make views contiguous
// first), so a strided input must be refused by both backends. Results within tol_for(dtype).
#include "tests/cuda/cuda_test_util.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

// Forward on both backends, then backward on both from the CPU's y and a random dy.
void check_softmax(const Tensor& x, bool log, uint64_t seed) {
    CAPTURE(x.describe());
    CAPTURE(log);
    const DType dtype = x.dtype();
    Tensor y = make_empty(x.sizes(), dtype, kHost);
    kernels::softmax(y, x, log);
    Tensor y_gpu = make_empty(x.sizes(), dtype, kGpu);
    kernels::softmax(y_gpu, to_gpu(x), log);
    CHECK_GPU_CLOSE(y_gpu, y, tol_for(dtype));

    Tensor dy = sample(x.sizes(), dtype, seed);
    Tensor dx = make_empty(x.sizes(), dtype, kHost);
    kernels::softmax_backward(dx, y, dy, log);
    Tensor dx_gpu = make_empty(x.sizes(), dtype, kGpu);
    kernels::softmax_backward(dx_gpu, to_gpu(y), to_gpu(dy), log);
    CHECK_GPU_CLOSE(dx_gpu, dx, tol_for(dtype));
}

}  // namespace

TEST_CASE("cuda softmax: forward and backward match the CPU on short and long rows" * skip_without_gpu()) {
    const std::vector<Shape> shapes = {{7, 13}, {4, 1024}, {5, 3000}, {2, 3, 17}, {33}, {}};
    for (DType dtype : kFloatDTypes) {
        CAPTURE(dtype_name(dtype));
        uint64_t seed = 200;
        for (const Shape& shape : shapes)
            for (bool log : {false, true}) {
                check_softmax(sample(shape, dtype, seed), log, seed + 1);
                seed += 2;
            }
    }
}

TEST_CASE("cuda softmax: one row of 2^20+3 values and 2^15+1 rows of 33" * skip_without_gpu()) {
    for (DType dtype : kFloatDTypes) {
        CAPTURE(dtype_name(dtype));
        for (bool log : {false, true}) {
            check_softmax(sample({1, (int64_t{1} << 20) + 3}, dtype, 211), log, 212);
            check_softmax(sample({(int64_t{1} << 15) + 1, 33}, dtype, 213), log, 214);
        }
    }
}

TEST_CASE("cuda softmax: all -inf rows, NaN and +inf give NaN rows as on the CPU" * skip_without_gpu()) {
    const double inf = INFINITY;
    for (int64_t C : {5, 2000}) {                                        // warp path, block path
        CAPTURE(C);
        std::vector<double> v = sample({5, C}, kFloat64, 220).to_vector<double>();
        for (int64_t c = 0; c < C; ++c) v[static_cast<size_t>(c)] = -inf;  // row 0: all -inf
        v[static_cast<size_t>(C + 2)] = NAN;                               // row 1: one NaN
        v[static_cast<size_t>(2 * C + 1)] = inf;                           // row 2: one +inf
        v[static_cast<size_t>(3 * C + 3)] = -inf;                          // row 3: one -inf (finite result)
        for (int64_t c = 0; c < C; ++c) v[static_cast<size_t>(4 * C + c)] *= 300.0;   // row 4: large spread
        for (DType dtype : kFloatDTypes) {
            CAPTURE(dtype_name(dtype));
            for (bool log : {false, true}) check_softmax(copy_to(tensor(v, {5, C}), kHost, dtype), log, 221);
        }
    }
}

TEST_CASE("cuda softmax: empty inputs write nothing; strided inputs are refused" * skip_without_gpu()) {
    for (const Shape& shape : {Shape{0, 5}, Shape{4, 0}}) {
        Tensor x = make_empty(shape, kFloat32, kGpu), y = make_empty(shape, kFloat32, kGpu);
        CHECK_NOTHROW(kernels::softmax(y, x, false));
        CHECK_NOTHROW(kernels::softmax_backward(y, y, x, true));
    }
    Tensor base = sample({6, 4}, kFloat32, 230);
    Tensor xt = make_view(base, {4, 6}, {1, 4}, 0), xt_gpu = make_view(to_gpu(base), {4, 6}, {1, 4}, 0);
    CHECK_THROWS_AS(kernels::softmax(make_empty({4, 6}, kFloat32, kHost), xt, false), InternalError);
    CHECK_THROWS_AS(kernels::softmax(make_empty({4, 6}, kFloat32, kGpu), xt_gpu, false), InternalError);
    Tensor y = make_empty({4, 6}, kFloat64, kGpu);                       // dtype mismatch
    CHECK_THROWS_AS(kernels::softmax(y, to_gpu(sample({4, 6}, kFloat32, 231)), false), InternalError);
}

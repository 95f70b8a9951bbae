// lerp_test.cpp: cuda/lerp.cu against cpu/lerp.cpp in every float dtype, with a tensor weight on
// both sides of |w| = 1/2 (the two-sided formula), broadcast operands and a transposed view, and with
// a scalar weight kept in the compute type. Skipped without a GPU.
#include "tests/cuda/cuda_test_util.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

TEST_CASE("cuda lerp: tensor and scalar weights match the CPU in every float dtype" * skip_without_gpu()) {
    for (DType dtype : kFloatDTypes) {
        CAPTURE(dtype_name(dtype));
        Tensor a = sample({6, 5}, dtype, 61), b = sample({5, 6}, dtype, 62), w = sample({5}, dtype, 63);
        Tensor bt = make_view(b, {6, 5}, {1, 6}, 0);                          // transposed
        Tensor wb = make_view(w, {6, 5}, {0, 1}, 0);                          // broadcast over rows
        Tensor expected = make_empty({6, 5}, dtype, kHost);
        kernels::lerp(expected, a, bt, wb, 0.0);
        Tensor out = make_empty({6, 5}, dtype, kGpu);
        kernels::lerp(out, to_gpu(a), make_view(to_gpu(b), {6, 5}, {1, 6}, 0), make_view(to_gpu(w), {6, 5}, {0, 1}, 0),
                      0.0);
        CHECK_GPU_CLOSE(out, expected, tol_for(dtype));
        for (double weight : {0.3, 0.7, -1.25}) {
            CAPTURE(weight);
            kernels::lerp(expected, a, bt, Tensor(), weight);
            kernels::lerp(out, to_gpu(a), make_view(to_gpu(b), {6, 5}, {1, 6}, 0), Tensor(), weight);
            CHECK_GPU_CLOSE(out, expected, tol_for(dtype));
        }
    }
}

TEST_CASE("cuda lerp over many blocks: a broadcast weight row, and a scalar weight" * skip_without_gpu()) {
    Tensor a = sample({129, 67}, kFloat32, 64), b = sample({129, 67}, kFloat32, 65), w = sample({67}, kFloat32, 66);
    Tensor expected = make_empty({129, 67}, kFloat32, kHost), out = make_empty({129, 67}, kFloat32, kGpu);
    kernels::lerp(expected, a, b, make_view(w, {129, 67}, {0, 1}, 0), 0.0);
    kernels::lerp(out, to_gpu(a), to_gpu(b), make_view(to_gpu(w), {129, 67}, {0, 1}, 0), 0.0);
    CHECK_GPU_CLOSE(out, expected, tol_for(kFloat32));
    kernels::lerp(expected, a, b, Tensor(), 0.6);
    kernels::lerp(out, to_gpu(a), to_gpu(b), Tensor(), 0.6);
    CHECK_GPU_CLOSE(out, expected, tol_for(kFloat32));
}

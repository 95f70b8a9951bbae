// random_test.cpp: cuda/random.cu draws the same numbers as cpu/random.cpp for the same seed and
// offset. Uniforms are bit-identical in every dtype; normals too in f32/f16/bf16, while f64
// normals may differ in the last ulp (CUDA's log/sin/cos vs glibc's), so those get a tolerance
// of a few ulp.
#include "tests/cuda/cuda_test_util.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

struct Draw {
    uint64_t seed;
    uint64_t offset;
    int64_t n;
};
// Odd sizes (a last half-used pair) and offsets that are not multiples of 4.
const Draw kDraws[] = {{0, 0, 1}, {42, 0, 1001}, {67280421310721ULL, 6, 257}, {7, 4096 + 2, 4097}};

}  // namespace

TEST_CASE("cuda random_uniform: identical to the CPU for every dtype, seed and offset" * skip_without_gpu()) {
    for (DType dtype : kFloatDTypes) {
        for (const Draw& d : kDraws) {
            CAPTURE(dtype_name(dtype));
            CAPTURE(d.seed);
            CAPTURE(d.offset);
            Tensor expected = make_empty({d.n}, dtype, kHost);
            kernels::random_uniform(expected, d.seed, d.offset, -2.0, 3.0);
            Tensor out = make_empty({d.n}, dtype, kGpu);
            kernels::random_uniform(out, d.seed, d.offset, -2.0, 3.0);
            CHECK_EXACT(out, expected);
            if (dtype == kFloat64) {
                for (double v : host_values(out)) CHECK((v >= -2.0 && v < 3.0));
            }
        }
    }
}

TEST_CASE("cuda random_normal: identical to the CPU (f64 within a few ulp)" * skip_without_gpu()) {
    for (DType dtype : kFloatDTypes) {
        for (const Draw& d : kDraws) {
            CAPTURE(dtype_name(dtype));
            CAPTURE(d.seed);
            CAPTURE(d.offset);
            Tensor expected = make_empty({d.n}, dtype, kHost);
            kernels::random_normal(expected, d.seed, d.offset, 1.5, 0.5);
            Tensor out = make_empty({d.n}, dtype, kGpu);
            kernels::random_normal(out, d.seed, d.offset, 1.5, 0.5);
            if (dtype == kFloat64) CHECK_GPU_CLOSE(out, expected, (Tolerance{4e-15, 4e-15}));   // CUDA log/cos/sin: up to 2 ulp each
            else CHECK_EXACT(out, expected);
        }
    }
}

TEST_CASE("cuda random: a non-contiguous output is rejected" * skip_without_gpu()) {
    Tensor base = make_empty({4, 4}, kFloat32, kGpu);
    CHECK_THROWS_AS(kernels::random_uniform(make_view(base, {4, 4}, {1, 4}, 0), 1, 0, 0.0, 1.0),
                    InternalError);
}

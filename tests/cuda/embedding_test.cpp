// embedding_test.cpp: cuda/embedding.cu against cpu/embedding.cpp on fresh random tables and
// indices: int64 and int32 indices (contiguous and strided), every float dtype, repeated indices
// (the backward's groups), no indices at all, and one large backward. Both backends sum each
// group in the original index order, so an f32/f64 backward is compared exactly, which also
// checks the GPU's sort is stable; f16/bf16 within their tolerance.
#include "tests/cuda/cuda_test_util.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

// N indices in [0, V) (seeded; V small enough that many repeat), in `dtype`.
Tensor indices(int64_t N, int64_t V, DType dtype, uint64_t seed) {
    manual_seed(seed);
    return copy_to(randint(0, V, {N}, TensorOptions(kInt64)), kHost, dtype);
}

Tolerance embedding_tol(DType dtype) {
    return dtype == kFloat16 || dtype == kBFloat16 ? tol_for(dtype, 8) : Tolerance{0.0, 0.0};
}

// Forward and backward on both backends with the same inputs; dweight starts from `dweight0`.
// idx_gpu holds idx's values on the GPU (a contiguous copy unless the caller passes a strided view).
void check_embedding(const Tensor& idx, const Tensor& idx_gpu, const Tensor& weight, const Tensor& dout,
                     const Tensor& dweight0) {
    const int64_t N = idx.numel(), C = weight.size(1);
    Tensor out_cpu = make_empty({N, C}, weight.dtype(), kHost), out_gpu = make_empty({N, C}, weight.dtype(), kGpu);
    kernels::embedding(out_cpu, idx, weight);
    kernels::embedding(out_gpu, idx_gpu, to_gpu(weight));
    CHECK_EXACT(out_gpu, out_cpu);                                          // a gather: no rounding

    Tensor dw_cpu = copy_to(dweight0, kHost), dw_gpu = to_gpu(dweight0);
    kernels::embedding_backward(dw_cpu, idx, dout);
    kernels::embedding_backward(dw_gpu, idx_gpu, to_gpu(dout));
    CHECK_GPU_CLOSE(dw_gpu, dw_cpu, embedding_tol(weight.dtype()));
}

void check_embedding(const Tensor& idx, const Tensor& weight, const Tensor& dout, const Tensor& dweight0) {
    check_embedding(idx, to_gpu(idx), weight, dout, dweight0);
}

}  // namespace

TEST_CASE("cuda embedding forward and backward match the CPU: every float dtype, int64 and int32 indices"
          * skip_without_gpu()) {
    const int64_t V = 11, C = 37, N = 64;
    for (DType dtype : kFloatDTypes) {
        for (DType index_dtype : {kInt64, kInt32}) {
            CAPTURE(dtype_name(dtype));
            CAPTURE(dtype_name(index_dtype));
            Tensor weight = sample({V, C}, dtype, 1);
            Tensor dout = sample({N, C}, dtype, 2);
            Tensor dweight0 = sample({V, C}, dtype, 3);                    // the backward accumulates into it
            check_embedding(indices(N, V, index_dtype, 4), weight, dout, dweight0);
        }
    }
}

TEST_CASE("cuda embedding: strided indices, a single row, no indices" * skip_without_gpu()) {
    const int64_t V = 9, C = 5;
    Tensor weight = sample({V, C}, kFloat32, 5);
    Tensor zeros_dw = zeros({V, C}, TensorOptions(kFloat32));
    SUBCASE("every other index of a longer tensor, on both backends") {
        for (DType index_dtype : {kInt64, kInt32}) {
            CAPTURE(dtype_name(index_dtype));
            Tensor all = indices(40, V, index_dtype, 6), all_gpu = to_gpu(all);
            Tensor idx = make_view(all, {20}, {2}, 1), idx_gpu = make_view(all_gpu, {20}, {2}, 1);
            check_embedding(idx, idx_gpu, weight, sample({20, C}, kFloat32, 7), zeros_dw);
        }
    }
    SUBCASE("one index, one row") {
        check_embedding(indices(1, V, kInt32, 8), weight, sample({1, C}, kFloat32, 9), zeros_dw);
    }
    SUBCASE("no indices: out is empty and dweight is unchanged") {
        check_embedding(indices(0, V, kInt64, 10), weight, sample({0, C}, kFloat32, 11), sample({V, C}, kFloat32, 12));
    }
    SUBCASE("C == 0") {
        Tensor empty_table = make_empty({V, 0}, kFloat32, kHost);
        check_embedding(indices(6, V, kInt64, 13), empty_table, make_empty({6, 0}, kFloat32, kHost),
                        make_empty({V, 0}, kFloat32, kHost));
    }
}

TEST_CASE("cuda embedding backward on a large input is deterministic and matches the CPU" * skip_without_gpu()) {
    const int64_t V = 1000, C = 96, N = 1 << 16;                           // ~65 repeats of each index
    Tensor idx = indices(N, V, kInt64, 14);
    Tensor dout = sample({N, C}, kFloat32, 15);
    Tensor dweight0 = zeros({V, C}, TensorOptions(kFloat32));
    check_embedding(idx, sample({V, C}, kFloat32, 16), dout, dweight0);
    Tensor first = to_gpu(dweight0), second = to_gpu(dweight0);            // run twice: bit-identical
    kernels::embedding_backward(first, to_gpu(idx), to_gpu(dout));
    kernels::embedding_backward(second, to_gpu(idx), to_gpu(dout));
    CHECK_EXACT(first, second);
}

TEST_CASE("cuda embedding rejects bad index dtypes and shapes before launching" * skip_without_gpu()) {
    Tensor weight = to_gpu(sample({4, 3}, kFloat32, 17));
    Tensor out = make_empty({2, 3}, kFloat32, kGpu);
    Tensor float_idx = to_gpu(sample({2}, kFloat32, 18));
    CHECK_THROWS_AS(kernels::embedding(out, float_idx, weight), DTypeError);
    Tensor idx_2d = to_gpu(zeros({1, 2}, TensorOptions(kInt64)));
    CHECK_THROWS_AS(kernels::embedding(out, idx_2d, weight), Error);
    Tensor host_idx = zeros({2}, TensorOptions(kInt64));
    CHECK_THROWS_AS(kernels::embedding(out, host_idx, weight), DeviceError);
}

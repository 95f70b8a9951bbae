// sort_test.cpp: cuda/sort.cu and cuda/cumsum.cu against the CPU kernels, and the ops built on them
// (sort, argsort, topk, flip, roll, repeat, cumsum, slice) on cuda:0 against the CPU: the same values
// and indices (both sorts are stable, so ties and NaN give the same order), and gradients within a
// rounding; rows past the rank sort's limit through the merge sort. Skipped without a GPU.
#include <cmath>

#include "tests/cuda/cuda_test_util.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

TEST_CASE("cuda sort kernel: values and indices equal the CPU's in every dtype, ties and NaN included" *
          skip_without_gpu()) {
    for (DType dtype : kAllDTypes) {
        CAPTURE(dtype_name(dtype));
        Tensor x = (sample({5, 37}, kFloat32, 71) * 3.0).round().to(dtype);        // (5,37) with ties
        if (is_floating(dtype)) x = where(x > 2.5, full({}, std::nan(""), TensorOptions(dtype)), x);
        for (bool desc : {false, true}) {
            CAPTURE(desc);
            Tensor v = make_empty({5, 37}, dtype, kHost), i = make_empty({5, 37}, kInt64, kHost);
            kernels::sort(v, i, x, desc);
            Tensor vg = make_empty({5, 37}, dtype, kGpu), ig = make_empty({5, 37}, kInt64, kGpu);
            kernels::sort(vg, ig, to_gpu(x), desc);
            CHECK_EXACT(vg, v);
            CHECK_EXACT(ig, i);
        }
    }
}

TEST_CASE("cuda cumsum, take_along_last, put_along_last kernels equal the CPU's" * skip_without_gpu()) {
    for (DType dtype : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32}) {
        CAPTURE(dtype_name(dtype));
        Tensor x = (sample({4, 33}, kFloat32, 72) * 4.0).to(dtype);
        Tensor sums = make_empty({4, 33}, dtype, kHost), sums_g = make_empty({4, 33}, dtype, kGpu);
        kernels::cumsum(sums, x);
        kernels::cumsum(sums_g, to_gpu(x));
        CHECK_EXACT(sums_g, sums);                                          // the same sequential order
        Tensor index = tensor<int64_t>({32, 0, 5, 7, 1}, {1, 5});           // shared by every row
        Tensor taken = make_empty({4, 5}, dtype, kHost), taken_g = make_empty({4, 5}, dtype, kGpu);
        kernels::take_along_last(taken, x, index);
        kernels::take_along_last(taken_g, to_gpu(x), to_gpu(index));
        CHECK_EXACT(taken_g, taken);
        Tensor put = zeros({4, 33}, TensorOptions(dtype)), put_g = zeros({4, 33}, TensorOptions(dtype).device(kGpu));
        kernels::put_along_last(put, taken, index);
        kernels::put_along_last(put_g, taken_g, to_gpu(index));
        CHECK_EXACT(put_g, put);
    }
}

TEST_CASE("cuda sort, topk, flip, roll, repeat, cumsum, slice: the CPU's values and gradients" * skip_without_gpu()) {
    const std::vector<std::function<Tensor(const Tensor&)>> ops = {
        [](const Tensor& x) { return sort(x, 1, true).first; },
        [](const Tensor& x) { return topk(x, 3, -1, false).first; },
        [](const Tensor& x) { return flip(x, {0, 2}); },
        [](const Tensor& x) { return roll(x, {2, -1}, {2, 1}); },
        [](const Tensor& x) { return x.repeat({2, 1, 1, 2}); },
        [](const Tensor& x) { return cumsum(x, 1); },
        [](const Tensor& x) { return x.slice(2, 1, std::nullopt, 2); },
    };
    for (DType dtype : kFloatDTypes) {
        CAPTURE(dtype_name(dtype));
        Tensor x = sample({2, 6, 5}, dtype, 93);
        for (size_t i = 0; i < ops.size(); ++i) {
            CAPTURE(i);
            Tensor xh = x.clone().requires_grad_(true), xg = to_gpu(x).requires_grad_(true);
            Tensor yh = ops[i](xh), yg = ops[i](xg);
            CHECK_GPU_CLOSE(yg, yh, tol_for(dtype));                           // exact except cumsum's f16 store
            Tensor dy = sample(yh.sizes(), dtype, 94);
            yh.backward(dy);
            yg.backward(to_gpu(dy));
            CHECK_GPU_CLOSE(xg.grad(), xh.grad(), tol_for(dtype));
        }
        CHECK(argsort(to_gpu(x), 1).to(kHost).to_vector<int64_t>() == argsort(x, 1).to_vector<int64_t>());
    }
}

// More elements than one block of threads (sort: a thread per element; cumsum: a thread per row), so
// every block's first_index / grid stride is exercised, with rows of one NaN-free dtype and of f16.
TEST_CASE("cuda sort, cumsum, take/put_along_last kernels over many blocks equal the CPU's" * skip_without_gpu()) {
    for (DType dtype : {kFloat32, kFloat16, kInt32}) {
        CAPTURE(dtype_name(dtype));
        Tensor x = (sample({300, 61}, kFloat32, 75) * 4.0).to(dtype);                 // (300,61): 72 blocks
        Tensor v = make_empty({300, 61}, dtype, kHost), i = make_empty({300, 61}, kInt64, kHost);
        Tensor vg = make_empty({300, 61}, dtype, kGpu), ig = make_empty({300, 61}, kInt64, kGpu);
        kernels::sort(v, i, x, true);
        kernels::sort(vg, ig, to_gpu(x), true);
        CHECK_EXACT(vg, v);
        CHECK_EXACT(ig, i);
        Tensor sums = make_empty({300, 61}, dtype, kHost), sums_g = make_empty({300, 61}, dtype, kGpu);
        kernels::cumsum(sums, x);
        kernels::cumsum(sums_g, to_gpu(x));
        CHECK_EXACT(sums_g, sums);
        Tensor back = zeros({300, 61}, TensorOptions(dtype)), back_g = zeros({300, 61}, TensorOptions(dtype).device(kGpu));
        kernels::put_along_last(back, v, i);                                            // un-sorts: back == x
        kernels::put_along_last(back_g, vg, ig);
        CHECK_EXACT(back_g, x);
        CHECK_EXACT(back, x);
        Tensor taken = make_empty({300, 61}, dtype, kGpu);
        kernels::take_along_last(taken, to_gpu(x), ig);                                 // per-row index (R,K)
        CHECK_EXACT(taken, v);
    }
}

// Rows longer than the rank sort's limit (cuda/sort.cu's kRankSortMax) take CUB's stable merge sort:
// the same values and indices as the CPU, with ties, NaN and signed zeros (equal, so kept in index
// order) in every dtype, and a vocabulary-sized row through topk.
TEST_CASE("cuda sort kernel on long rows (merge sort): values and indices equal the CPU's" * skip_without_gpu()) {
    for (DType dtype : kAllDTypes) {
        CAPTURE(dtype_name(dtype));
        Tensor x = (sample({3, 5000}, kFloat32, 76) * 40.0).round();               // (3,5000): many ties
        if (is_floating(dtype)) {
            x = where(x > 70.0, full({}, std::nan(""), TensorOptions(kFloat32)), x);
            const TensorOptions f32(kFloat32);
            x = where(eq(x, full({}, 3.0, f32)), full({}, -0.0, f32), x);          // -0 among the +0
        }
        x = x.to(dtype);
        for (bool desc : {false, true}) {
            CAPTURE(desc);
            Tensor v = make_empty({3, 5000}, dtype, kHost), i = make_empty({3, 5000}, kInt64, kHost);
            kernels::sort(v, i, x, desc);
            Tensor vg = make_empty({3, 5000}, dtype, kGpu), ig = make_empty({3, 5000}, kInt64, kGpu);
            kernels::sort(vg, ig, to_gpu(x), desc);
            CHECK_EXACT(vg, v);
            CHECK_EXACT(ig, i);
        }
    }
    Tensor logits = sample({2, 50257}, kFloat32, 77);                               // (2,V) GPT-2's vocabulary
    auto [values, indices] = topk(to_gpu(logits), 50, -1, true);
    auto [values_cpu, indices_cpu] = topk(logits, 50, -1, true);
    CHECK_EXACT(values, values_cpu);
    CHECK_EXACT(indices, indices_cpu);
}

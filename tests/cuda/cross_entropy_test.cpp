// cross_entropy_test.cpp: cuda/cross_entropy.cu against cpu/cross_entropy.cpp on fresh random
// logits: every float dtype, ignore_index rows, a strided dloss, rows with NaN, +inf and all -inf
// logits (the NaN propagation of both backends), no rows, and one large vocabulary
// (a GPT-sized row, so the block reductions run over many strides). Rows up to 1024 values take
// the warp path, longer ones the block path: both are covered.
#include "tests/cuda/cuda_test_util.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

constexpr int64_t kIgnore = -100;

DType stat_dtype(DType dtype) { return dtype == kFloat64 ? kFloat64 : kFloat32; }

// N targets in [0, V), every third one replaced by kIgnore when `with_ignored`.
Tensor targets_for(int64_t N, int64_t V, bool with_ignored, uint64_t seed) {
    manual_seed(seed);
    std::vector<int64_t> t = randint(0, V, {N}, TensorOptions(kInt64)).to_vector<int64_t>();
    if (with_ignored)
        for (size_t n = 0; n < t.size(); n += 3) t[n] = kIgnore;
    return tensor(t, {N});
}

// Runs forward and backward on both backends and compares loss, lse and dlogits. dloss is read
// with stride 2 (every other element of a longer tensor, as a sliced gradient) and with stride 0
// (one value for every row, as the op's mean reduction passes it).
void check_cross_entropy(const Tensor& logits, const Tensor& targets, Tolerance tol) {
    const int64_t N = logits.size(0);
    const DType stat = stat_dtype(logits.dtype());
    Tensor loss_c = make_empty({N}, stat, kHost), lse_c = make_empty({N}, stat, kHost);
    Tensor loss_g = make_empty({N}, stat, kGpu), lse_g = make_empty({N}, stat, kGpu);
    Tensor logits_g = to_gpu(logits), targets_g = to_gpu(targets);
    kernels::cross_entropy(loss_c, lse_c, logits, targets, kIgnore);
    kernels::cross_entropy(loss_g, lse_g, logits_g, targets_g, kIgnore);
    CHECK_GPU_CLOSE(loss_g, loss_c, tol);
    CHECK_GPU_CLOSE(lse_g, lse_c, tol);

    Tensor dloss_long = sample({2 * N + 1}, stat, 99), dloss_long_g = to_gpu(dloss_long);
    for (int64_t stride : {2, 0}) {
        CAPTURE(stride);
        Tensor dloss_c = make_view(dloss_long, {N}, {stride}, 0), dloss_g = make_view(dloss_long_g, {N}, {stride}, 0);
        Tensor d_c = make_empty(logits.sizes(), logits.dtype(), kHost);
        Tensor d_g = make_empty(logits.sizes(), logits.dtype(), kGpu);
        kernels::cross_entropy_backward(d_c, dloss_c, logits, lse_c, targets, kIgnore);
        kernels::cross_entropy_backward(d_g, dloss_g, logits_g, to_gpu(lse_c), targets_g, kIgnore);   // the same lse
        CHECK_GPU_CLOSE(d_g, d_c, tol);
    }
}

}  // namespace

TEST_CASE("cuda cross_entropy matches the CPU: every float dtype, with and without ignored rows"
          * skip_without_gpu()) {
    for (DType dtype : kFloatDTypes) {
        for (bool with_ignored : {false, true}) {
            CAPTURE(dtype_name(dtype));
            CAPTURE(with_ignored);
            const int64_t N = 13, V = 301;                                  // V not a multiple of the block
            Tensor logits = sample({N, V}, dtype, 1) * 3.0;
            check_cross_entropy(logits, targets_for(N, V, with_ignored, 2), tol_for(dtype, 8));
        }
    }
}

TEST_CASE("cuda cross_entropy: NaN, +inf and all -inf rows propagate as on the CPU" * skip_without_gpu()) {
    for (int64_t V : {40, 2000}) {                                          // warp path, block path
        CAPTURE(V);
        const int64_t N = 6;
        std::vector<float> x = sample({N, V}, kFloat32, 3).to_vector<float>();
        x[0 * V + 5] = NAN;                                                 // row 0: a NaN logit
        x[1 * V + 7] = INFINITY;                                            // row 1: a +inf logit
        for (int64_t c = 0; c < V; ++c) x[2 * V + c] = -INFINITY;           // row 2: all -inf
        x[3 * V + 1] = NAN;                                                 // row 3: a NaN logit, ignored
        x[4 * V + 2] = -INFINITY;                                           // row 4: one -inf logit: finite
        Tensor logits = tensor(x, {N, V});
        Tensor targets = tensor(std::vector<int64_t>{1, 2, 3, kIgnore, 2, kIgnore}, {N});
        check_cross_entropy(logits, targets, tol_for(kFloat32, 8));
    }
}

TEST_CASE("cuda cross_entropy: no rows, and one GPT-sized vocabulary" * skip_without_gpu()) {
    SUBCASE("N == 0") {
        check_cross_entropy(make_empty({0, 7}, kFloat32, kHost), make_empty({0}, kInt64, kHost), tol_for(kFloat32));
    }
    SUBCASE("V = 50257, f32 and bf16") {
        for (DType dtype : {kFloat32, kBFloat16}) {
            CAPTURE(dtype_name(dtype));
            const int64_t N = 8, V = 50257;
            Tensor logits = sample({N, V}, dtype, 4) * 4.0;
            check_cross_entropy(logits, targets_for(N, V, true, 5), tol_for(dtype, 16));
        }
    }
}

TEST_CASE("cuda cross_entropy rejects int32 targets and mismatched per-row tensors" * skip_without_gpu()) {
    Tensor logits = to_gpu(sample({3, 4}, kFloat32, 6));
    Tensor loss = make_empty({3}, kFloat32, kGpu), lse = make_empty({3}, kFloat32, kGpu);
    Tensor t32 = to_gpu(copy_to(zeros({3}, TensorOptions(kInt64)), kHost, kInt32));
    CHECK_THROWS_AS(kernels::cross_entropy(loss, lse, logits, t32, kIgnore), DTypeError);
    Tensor lse64 = make_empty({3}, kFloat64, kGpu);
    Tensor t64 = to_gpu(zeros({3}, TensorOptions(kInt64)));
    CHECK_THROWS_AS(kernels::cross_entropy(loss, lse64, logits, t64, kIgnore), Error);
}

// gemm_test.cpp: the CPU gemm kernel (cpu/gemm.cpp) against a float64 loop over the same values:
// every trans_a/trans_b pair, alpha/beta (beta = 0 never reads out), batch broadcast (stride 0),
// column-major, column-strided and stride-0 operands, 2-d operands, K == 0, and the
// batch-parallel path (many small products). Every check runs once per library (oneDNN where
// built, and Eigen pinned: cpu/gemm_select.hpp), so each path meets the same cases. Also f16/bf16
// operands into an f32 out, and out written in place with row and batch strides (tiles and heads).
#include <doctest/doctest.h>

#include <cmath>

#include "cpu/gemm_select.hpp"
#include "tests/support/check_close.hpp"

using namespace ampgrad;
using namespace ampgrad::cpu;   // GemmPath, cpu_gemm_path (cpu/gemm_select.hpp)
using namespace ampgrad::testing;

namespace {

// op(t)[bi, i, j] as double, reading t through its strides (2-d t is shared by every batch entry).
double element(const Tensor& t, const std::vector<double>& storage, int64_t bi, int64_t i, int64_t j, bool trans) {
    if (trans) std::swap(i, j);
    int64_t d = t.dim();
    int64_t off = (d == 3 && t.size(0) > 1 ? bi * t.stride(0) : 0) + i * t.stride(d - 2) + j * t.stride(d - 1);
    return storage[static_cast<size_t>(off)];
}

// The values reachable from t's data pointer, as doubles, indexed by element offset.
std::vector<double> strided_storage(const Tensor& t) {
    int64_t span = 1;
    for (int64_t d = 0; d < t.dim(); ++d) span += (t.size(d) - 1) * t.stride(d);
    Tensor flat = make_view(t, {span}, {1}, t.storage_offset());
    return flat.to(kFloat64).to_vector<double>();
}

Tensor reference(const Tensor& out0, const Tensor& a, const Tensor& b, bool ta, bool tb, double alpha, double beta) {
    int64_t d = out0.dim(), batch = d == 3 ? out0.size(0) : 1, m = out0.size(d - 2), n = out0.size(d - 1);
    int64_t k = ta ? a.size(-2) : a.size(-1);
    std::vector<double> av = strided_storage(a), bv = strided_storage(b), c = out0.to(kFloat64).to_vector<double>();
    for (int64_t bi = 0; bi < batch; ++bi)
        for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
                double acc = 0;
                for (int64_t kk = 0; kk < k; ++kk) acc += element(a, av, bi, i, kk, ta) * element(b, bv, bi, kk, j, tb);
                double& o = c[static_cast<size_t>((bi * m + i) * n + j)];
                o = alpha * acc + (beta == 0.0 ? 0.0 : beta * o);
            }
    return tensor(c, out0.sizes());
}

void check_gemm(const Tensor& out, const Tensor& a, const Tensor& b, bool ta, bool tb, double alpha, double beta,
                DType dt) {
    CAPTURE(a.describe());
    CAPTURE(b.describe());
    CAPTURE(ta);
    CAPTURE(tb);
    CAPTURE(beta);
    Tensor expected = reference(out, a, b, ta, tb, alpha, beta);
    Tolerance tol = dt == kFloat64 ? tol_for(kFloat64) : dt == kFloat32 ? Tolerance{1e-5, 1e-5} : tol_for(dt, 2);
    const Tensor out0 = out.clone();
    for (GemmLibrary library : {GemmLibrary::kBest, GemmLibrary::kEigen}) {
        set_cpu_gemm_library(library);
        CAPTURE(gemm_path_name(cpu_gemm_path(a.dtype())));
        Tensor result = out0.clone();
        kernels::gemm(result, a, b, ta, tb, alpha, beta);
        CHECK_CLOSE(result, expected, tol);
    }
    set_cpu_gemm_library(GemmLibrary::kBest);
    kernels::gemm(out, a, b, ta, tb, alpha, beta);
}

}  // namespace

TEST_CASE("cpu gemm: every dtype, trans flag pair and beta") {
    manual_seed(31);
    const int64_t B = 3, M = 5, K = 7, N = 4;
    for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
        CAPTURE(dtype_name(dt));
        TensorOptions o(dt);
        for (bool ta : {false, true})
            for (bool tb : {false, true})
                for (double beta : {0.0, 1.0, -0.5}) {
                    Tensor a = randn(ta ? Shape{B, K, M} : Shape{B, M, K}, o);
                    Tensor b = randn(tb ? Shape{B, N, K} : Shape{B, K, N}, o);
                    Tensor out = randn({B, M, N}, o);
                    check_gemm(out, a, b, ta, tb, 0.75, beta, dt);
                }
    }
}

// The attention GEMM path's scores (kernels/attention_gemm.cpp): f16/bf16 operands, f32 accumulation
// and an f32 out. Held to f32's tolerance against the exact product, so a rounding to f16/bf16
// anywhere would fail it.
TEST_CASE("cpu gemm: f16/bf16 operands write an f32 out without rounding; other dtype mixes are refused") {
    manual_seed(37);
    const int64_t B = 2, M = 6, K = 9, N = 5;
    for (DType dt : {kFloat16, kBFloat16}) {
        CAPTURE(dtype_name(dt));
        for (bool ta : {false, true})
            for (bool tb : {false, true})
                for (double beta : {0.0, 1.0}) {
                    Tensor a = randn(ta ? Shape{B, K, M} : Shape{B, M, K}).to(dt);
                    Tensor b = randn(tb ? Shape{B, N, K} : Shape{B, K, N}).to(dt);
                    Tensor out = randn({B, M, N});
                    check_gemm(out, a, b, ta, tb, 0.75, beta, kFloat32);
                }
    }
    Tensor a32 = randn({2, 3}), b32 = randn({3, 4});
    CHECK_THROWS(kernels::gemm(empty({2, 4}, kFloat16), a32, b32, false, false, 1.0, 0.0));      // f32 into f16
    CHECK_THROWS(kernels::gemm(empty({2, 4}, kFloat32), a32.to(kFloat16), b32.to(kBFloat16), false, false, 1.0, 0.0));
    CHECK_THROWS(kernels::gemm(empty({2, 4}, kFloat64), a32.to(kFloat16), b32.to(kFloat16), false, false, 1.0, 0.0));
}

TEST_CASE("cpu gemm: beta = 0 overwrites NaN garbage in out") {
    Tensor out = full({2, 2}, NAN);
    kernels::gemm(out, ones({2, 3}), ones({3, 2}), false, false, 1.0, 0.0);
    CHECK(out.to_vector<float>() == std::vector<float>{3, 3, 3, 3});
}

TEST_CASE("cpu gemm: strided operands and batch broadcast") {
    manual_seed(37);
    for (DType dt : {kFloat32, kFloat64, kFloat16}) {
        CAPTURE(dtype_name(dt));
        TensorOptions o(dt);
        Tensor store = randn({3, 7, 5}, o);                                       // (B,K,M) storage
        Tensor col_major = make_view(store, {3, 5, 7}, {35, 1, 5}, 0);            // (B,M,K), column-major
        Tensor shared = randn({7, 4}, o);
        Tensor broadcast = make_view(shared, {3, 7, 4}, {0, 4, 1}, 0);            // (B,K,N), batch stride 0
        check_gemm(randn({3, 5, 4}, o), col_major, broadcast, false, false, 1.0, 0.0, dt);
        Tensor wide = randn({3, 5, 14}, o);
        Tensor every_other = make_view(wide, {3, 5, 7}, {70, 14, 2}, 0);          // column stride 2: packed
        check_gemm(randn({3, 5, 4}, o), every_other, shared, false, false, 1.0, 0.5, dt);
        Tensor row = randn({1, 7}, o);
        Tensor same_rows = make_view(row, {5, 7}, {0, 1}, 0);                     // row stride 0: packed
        check_gemm(randn({5, 4}, o), same_rows, shared, false, false, 2.0, 0.0, dt);
        Tensor one_batch = randn({1, 5, 7}, o);                                   // batch of 1 broadcasts
        check_gemm(randn({3, 5, 4}, o), one_batch, broadcast, false, false, 1.0, 0.0, dt);
    }
}

TEST_CASE("cpu gemm: 2-d operands, vectors, K == 0 and many small products") {
    manual_seed(41);
    check_gemm(randn({6, 1}), randn({6, 9}), randn({9, 1}), false, false, 1.0, 0.0, kFloat32);      // gemv
    check_gemm(randn({1, 6}), randn({9, 1}), randn({6, 9}), true, true, 1.0, 0.0, kFloat32);        // row vector
    check_gemm(randn({4, 3}), randn({4, 0}), randn({0, 3}), false, false, 1.0, 0.5, kFloat32);      // out = beta*out
    check_gemm(randn({64, 4, 3}), randn({64, 4, 5}), randn({64, 5, 3}), false, false, 1.0, 0.0, kFloat32);
    check_gemm(randn({64, 4, 3}, TensorOptions(kBFloat16)), randn({64, 5, 4}, TensorOptions(kBFloat16)),
               randn({5, 3}, TensorOptions(kBFloat16)), true, false, 1.0, 1.0, kBFloat16);
    check_gemm(randn({2, 130, 140}), randn({2, 130, 150}), randn({2, 140, 150}), false, true, 1.0, 0.0, kFloat32);
}

// The attention GEMM path (kernels/attention_gemm.cpp) writes tiles of its scores and the heads of
// (B,T,NH,HS) tensors in place: out with dense rows and any row and batch strides
// (kernels/kernels.hpp). Every library and dtype, beta 0 and not; the storage around out stays as it was.
TEST_CASE("cpu gemm: out with dense rows at any row and batch stride, the storage around it untouched") {
    manual_seed(43);
    const int64_t NH = 3, T = 5, HS = 4, K = 6;
    for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
        for (GemmLibrary library : {GemmLibrary::kBest, GemmLibrary::kEigen}) {
            set_cpu_gemm_library(library);
            CAPTURE(gemm_path_name(cpu_gemm_path(dt)));
            const TensorOptions o(dt);
            const Tolerance tol = dt == kFloat64 ? tol_for(kFloat64) : dt == kFloat32 ? Tolerance{1e-5, 1e-5} : tol_for(dt, 2);
            for (double beta : {0.0, 0.5}) {
                CAPTURE(beta);
                Tensor store = randn({T, NH, HS}, o);                                   // (T,NH,HS)
                Tensor heads = make_view(store, {NH, T, HS}, {HS, NH * HS, 1}, 0);      // (NH,T,HS), rows interleaved
                Tensor a = randn({NH, T, K}, o), b = randn({NH, K, HS}, o);
                Tensor want = reference(heads.contiguous(), a, b, false, false, 0.75, beta);
                kernels::gemm(heads, a, b, false, false, 0.75, beta);
                CHECK_CLOSE(heads, want, tol);

                Tensor buffer = randn({2, 8, 7}, o);
                const Tensor before = buffer.clone();
                Tensor tile = make_view(buffer, {2, 4, 3}, {56, 7, 1}, 2 * 7 + 1);      // rows 2..5, columns 1..3
                Tensor a2 = randn({2, K, 4}, o), b2 = randn({2, 3, K}, o);
                want = reference(tile.contiguous(), a2, b2, true, true, 1.0, beta);
                kernels::gemm(tile, a2, b2, true, true, 1.0, beta);
                CHECK_CLOSE(tile, want, tol);
                kernels::fill(tile, 0.0);
                kernels::fill(make_view(before, {2, 4, 3}, {56, 7, 1}, 2 * 7 + 1), 0.0);
                CHECK(equal(buffer, before));
            }
            if (dt == kFloat16 || dt == kBFloat16) {                                    // f32 scores from halves
                Tensor scores = randn({2, 6, 9});
                Tensor tile = make_view(scores, {2, 3, 4}, {54, 9, 1}, 9 * 3);           // rows 3..5, columns 0..3
                Tensor a = randn({2, 3, K}, o), b = randn({2, 4, K}, o);
                const Tensor want = reference(tile.contiguous(), a, b, false, true, 1.0, 0.0);
                kernels::gemm(tile, a, b, false, true, 1.0, 0.0);
                const Tolerance f32_tol{1e-5, 1e-5};
                CHECK_CLOSE(tile, want, f32_tol);
            }
        }
    }
    set_cpu_gemm_library(GemmLibrary::kBest);
    Tensor a = randn({2, 3}), b = randn({3, 4});
    CHECK_THROWS_WITH_AS(kernels::gemm(empty({4, 2}).transpose(0, 1), a, b, false, false, 1.0, 0.0),   // column stride 4
                         doctest::Contains("gemm: out is"), Error);
    CHECK_THROWS_WITH_AS(kernels::gemm(make_view(empty({2, 4}), {3, 2, 4}, {0, 4, 1}, 0), randn({3, 2, 3}),
                                       randn({3, 3, 4}), false, false, 1.0, 0.0),                      // batch stride 0
                         doctest::Contains("gemm: out is"), Error);
}

// gemm_epilogue_test.cpp: the CPU GEMM with a bias / bias + tanh-GELU epilogue
// (kernels::gemm_epilogue, cpu/gemm_epilogue.cpp) against the unfused composition matmul + bias, then gelu,
// computed in f64: every trans_a/trans_b pair, more rows than one epilogue block, no bias, the
// pre-activation (aux) output, and f32/f16/bf16 within dtype tolerances. Each layout runs on every
// GEMM library (oneDNN where built, and Eigen pinned: cpu/gemm_select.hpp).
#include <doctest/doctest.h>

#include "kernels/fused_kernels.hpp"
#include "cpu/gemm_select.hpp"
#include "tests/support/check_close.hpp"

using namespace ampgrad;
using namespace ampgrad::cpu;   // GemmPath, cpu_gemm_path (cpu/gemm_select.hpp)
using namespace ampgrad::testing;

namespace {

// a (M,K) stored as (K,M) when trans; b (K,N) stored as (N,K) when trans
Tensor stored(const Tensor& logical, bool trans) { return trans ? logical.t().contiguous() : logical; }

}  // namespace

TEST_CASE("gemm_epilogue bias and bias+gelu equal matmul + bias (+ gelu) for every layout") {
    manual_seed(211);
    const int64_t M = 300, K = 17, N = 9;                                  // 300 rows: two row blocks
    for (DType dt : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
        Tensor a = randn({M, K}).to(dt), b = randn({K, N}).to(dt), bias = randn({N}).to(dt);
        Tensor pre = (matmul(a.to(kFloat64), b.to(kFloat64)) + bias.to(kFloat64));   // (M,N) f64 reference
        Tensor act = F::gelu(pre, true);
        for (bool ta : {false, true}) {
            for (auto [tb, library] : {std::pair{false, GemmLibrary::kBest}, std::pair{true, GemmLibrary::kBest},
                                       std::pair{false, GemmLibrary::kEigen}, std::pair{true, GemmLibrary::kEigen}}) {
                set_cpu_gemm_library(library);
                CAPTURE(gemm_path_name(cpu_gemm_path(dt)));
                CAPTURE(dtype_name(dt));
                CAPTURE(ta);
                CAPTURE(tb);
                Tensor out = empty({M, N}, dt), aux = empty({M, N}, dt);
                kernels::gemm_epilogue(out, Tensor(), stored(a, ta), stored(b, tb), ta, tb, bias, GemmEpilogue::kBias);
                CHECK_CLOSE(out, pre.to(dt), tol_for(dt, 8));
                kernels::gemm_epilogue(out, aux, stored(a, ta), stored(b, tb), ta, tb, bias, GemmEpilogue::kBiasGeluTanh);
                CHECK_CLOSE(aux, pre.to(dt), tol_for(dt, 8));
                CHECK_CLOSE(out, act.to(dt), tol_for(dt, 8));
            }
        }
    }
    set_cpu_gemm_library(GemmLibrary::kBest);
}

TEST_CASE("gemm_epilogue without a bias is a plain product; gelu without aux keeps only the activation") {
    manual_seed(223);
    Tensor a = randn({5, 4}, kFloat64), b = randn({4, 3}, kFloat64);
    Tensor out = empty({5, 3}, kFloat64);
    kernels::gemm_epilogue(out, Tensor(), a, b, false, false, Tensor(), GemmEpilogue::kBias);
    CHECK_CLOSE(out, matmul(a, b), tol_for(kFloat64));
    kernels::gemm_epilogue(out, Tensor(), a, b, false, false, Tensor(), GemmEpilogue::kBiasGeluTanh);
    CHECK_CLOSE(out, F::gelu(matmul(a, b), true), tol_for(kFloat64));
}

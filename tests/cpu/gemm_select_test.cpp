// gemm_select_test.cpp: which library the CPU GEMM runs per dtype (cpu/gemm_select.hpp,
// cpu/gemm_select.cpp), checked against the build and the CPU's own feature flags, and every path
// against a float64 product on shapes that cross the libraries' blocking: odd sizes, transposes,
// a column-major view, batch broadcasting, a batch split over threads, zero-size dims and K == 0
// (out = beta * out).
#include <doctest/doctest.h>

#include <limits>

#include "ampgrad_config.h"
#include "core/determinism.hpp"
#include "cpu/gemm_select.hpp"
#include "kernels/capabilities.hpp"
#include "tests/support/check_close.hpp"

using namespace ampgrad;
using namespace ampgrad::cpu;   // GemmPath, cpu_gemm_path (cpu/gemm_select.hpp)
using namespace ampgrad::testing;

namespace {

// Restores the default library when a test case ends, pass or fail.
struct LibraryGuard {
    explicit LibraryGuard(GemmLibrary library) { set_cpu_gemm_library(library); }
    ~LibraryGuard() { set_cpu_gemm_library(GemmLibrary::kBest); }
};

bool cpu_has_avx512_bf16() {
#if defined(__x86_64__)
    return __builtin_cpu_supports("avx512bf16");
#else
    return false;
#endif
}

// The f64 product of stored operands (batched (B,M,K) @ (B,K,N) after op()) rounded to dt.
Tensor reference(const Tensor& a, const Tensor& b, bool ta, bool tb, DType dt) {
    Tensor a64 = a.to(kFloat64), b64 = b.to(kFloat64);
    return matmul(ta ? a64.transpose(-2, -1) : a64, tb ? b64.transpose(-2, -1) : b64).to(dt);
}

// Dtype-derived tolerance for a K-term f32-accumulated sum rounded once to dt.
Tolerance product_tolerance(DType dt, int64_t k) {
    if (dt == kFloat64) return tol_for(kFloat64);
    if (dt == kFloat32) return {static_cast<double>(k) * dtype_eps(kFloat32), static_cast<double>(k) * dtype_eps(kFloat32)};
    return tol_for(dt, 2);
}

}  // namespace

TEST_CASE("cpu gemm paths: the library per dtype follows the build and the CPU") {
    LibraryGuard guard(GemmLibrary::kBest);
    if (AMPGRAD_WITH_ONEDNN) {
        CHECK(cpu_gemm_path(kFloat32) == GemmPath::kOneDnnSgemm);
        CHECK(cpu_gemm_path(kBFloat16) ==
              (cpu_has_avx512_bf16() ? GemmPath::kOneDnnMatmul : GemmPath::kWidenedOneDnnSgemm));
        CHECK(cpu_gemm_path(kFloat16) == GemmPath::kWidenedOneDnnSgemm);
    } else {
        CHECK(cpu_gemm_path(kFloat32) == GemmPath::kEigen);
        CHECK(cpu_gemm_path(kBFloat16) == GemmPath::kWidenedEigen);
        CHECK(cpu_gemm_path(kFloat16) == GemmPath::kWidenedEigen);
    }
    CHECK(cpu_gemm_path(kFloat64) == GemmPath::kEigen);
    CHECK_THROWS_AS(cpu_gemm_path(kInt64), DTypeError);

    set_cpu_gemm_library(GemmLibrary::kEigen);
    CHECK(cpu_gemm_library() == GemmLibrary::kEigen);
    CHECK(cpu_gemm_path(kFloat32) == GemmPath::kEigen);
    CHECK(cpu_gemm_path(kFloat64) == GemmPath::kEigen);
    CHECK(cpu_gemm_path(kBFloat16) == GemmPath::kWidenedEigen);
    CHECK(cpu_gemm_path(kFloat16) == GemmPath::kWidenedEigen);
    CHECK(std::string(gemm_path_name(GemmPath::kOneDnnMatmul)).find("onednn") != std::string::npos);
}

TEST_CASE("cpu gemm paths: the weight gradient's layout leaves oneDNN only without AVX-512 and outside the "
          "deterministic mode, and the route that `ampgrad info` prints says so") {
    LibraryGuard guard(GemmLibrary::kBest);
    const bool avx512 = __builtin_cpu_supports("avx512f");
    CHECK(prefer_eigen_for(true, false) == !avx512);
    CHECK_FALSE(prefer_eigen_for(false, false));
    CHECK_FALSE(prefer_eigen_for(false, true));
    CHECK_FALSE(prefer_eigen_for(true, true));
    const std::string route = backend_capabilities(kCPU).gemm_route(kFloat32);
    CAPTURE(route);
    CHECK((route.find("weight gradients: eigen") != std::string::npos) == (AMPGRAD_WITH_ONEDNN && !avx512));
    {
        DeterministicGuard deterministic(true);
        CHECK_FALSE(prefer_eigen_for(true, false));
    }
}

TEST_CASE("cpu gemm paths: every path agrees with f64 on odd shapes, transposes and broadcast batches") {
    manual_seed(2024);
    const int64_t B = 3, M = 67, K = 129, N = 45;          // odd sizes: partial tiles in every library
    for (GemmLibrary library : {GemmLibrary::kBest, GemmLibrary::kEigen}) {
        LibraryGuard guard(library);
        for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
            CAPTURE(gemm_path_name(cpu_gemm_path(dt)));
            TensorOptions o(dt);
            for (bool ta : {false, true})
                for (bool tb : {false, true}) {
                    CAPTURE(ta);
                    CAPTURE(tb);
                    Tensor a = randn(ta ? Shape{B, K, M} : Shape{B, M, K}, o);
                    Tensor b = randn(tb ? Shape{N, K} : Shape{K, N}, o);                     // shared by the batch
                    Tensor b_batch = make_view(b, {B, b.size(0), b.size(1)}, {0, b.stride(0), 1}, 0);
                    Tensor out = empty({B, M, N}, o);
                    kernels::gemm(out, a, b_batch, ta, tb, 1.0, 0.0);
                    CHECK_CLOSE(out, reference(a, b_batch, ta, tb, dt), product_tolerance(dt, K));
                }
        }
    }
}

TEST_CASE("cpu gemm paths: a batch of small products split over threads, on every path") {
    manual_seed(2026);
    const int64_t B = 24, M = 33, K = 31, N = 35;           // B*M*N*K above the split threshold, each product small
    for (GemmLibrary library : {GemmLibrary::kBest, GemmLibrary::kEigen}) {
        LibraryGuard guard(library);
        for (DType dt : {kFloat32, kBFloat16}) {
            CAPTURE(gemm_path_name(cpu_gemm_path(dt)));
            TensorOptions o(dt);
            Tensor a = randn({B, M, K}, o), b = randn({B, N, K}, o), out = empty({B, M, N}, o);
            kernels::gemm(out, a, b, false, true, 1.0, 0.0);
            CHECK_CLOSE(out, reference(a, b, false, true, dt), product_tolerance(dt, K));
        }
    }
}

TEST_CASE("cpu gemm paths: column-major views, alpha and beta on every path") {
    manual_seed(2025);
    const int64_t M = 33, K = 70, N = 19;
    for (GemmLibrary library : {GemmLibrary::kBest, GemmLibrary::kEigen}) {
        LibraryGuard guard(library);
        for (DType dt : {kFloat32, kBFloat16}) {
            CAPTURE(gemm_path_name(cpu_gemm_path(dt)));
            TensorOptions o(dt);
            Tensor a = randn({K, M}, o).t();                          // (M,K) column-major, read in place
            Tensor b = randn({K, N}, o);
            Tensor out0 = randn({M, N}, o), out = out0.clone();
            kernels::gemm(out, a, b, false, false, 0.5, -1.0);
            Tensor expected = (reference(a, b, false, false, kFloat64) * 0.5 - out0.to(kFloat64)).to(dt);
            CHECK_CLOSE(out, expected, product_tolerance(dt, K));
        }
    }
}

TEST_CASE("cpu gemm paths: zero-size dims and K == 0") {
    for (GemmLibrary library : {GemmLibrary::kBest, GemmLibrary::kEigen}) {
        LibraryGuard guard(library);
        for (DType dt : {kFloat32, kBFloat16, kFloat16, kFloat64}) {
            CAPTURE(gemm_path_name(cpu_gemm_path(dt)));
            TensorOptions o(dt);
            Tensor empty_batch = empty({0, 4, 3}, o);
            kernels::gemm(empty_batch, randn({0, 4, 5}, o), randn({0, 5, 3}, o), false, false, 1.0, 0.0);
            Tensor no_rows = empty({0, 3}, o);
            kernels::gemm(no_rows, randn({0, 5}, o), randn({5, 3}, o), false, false, 1.0, 0.0);
            Tensor out = full({2, 4, 3}, 2.0, o);                     // K == 0: out = beta * out
            kernels::gemm(out, randn({2, 4, 0}, o), randn({2, 0, 3}, o), false, false, 1.0, 0.5);
            CHECK_CLOSE(out, full({2, 4, 3}, 1.0, o), tol_for(dt));
            kernels::gemm(out, randn({2, 0, 4}, o), randn({2, 0, 3}, o), true, false, 1.0, 0.0);
            CHECK_CLOSE(out, zeros({2, 4, 3}, o), tol_for(dt));
        }
    }
}

// K = 1 with a strided row (every other element): oneDNN's bf16 matmul read it as a 1 x N
// column-major matrix with a leading dimension of 2 and gave NaN where an inf met it; the row is now
// copied densely first. Every path must give inf * b exactly (PyTorch's -inf, inf).
TEST_CASE("cpu gemm paths: K == 1 with a strided row and an inf gives +-inf, not NaN") {
    const float inf = std::numeric_limits<float>::infinity();
    for (GemmLibrary library : {GemmLibrary::kBest, GemmLibrary::kEigen}) {
        LibraryGuard guard(library);
        for (DType dt : {kFloat32, kBFloat16, kFloat16}) {
            CAPTURE(gemm_path_name(cpu_gemm_path(dt)));
            Tensor a = tensor(std::vector<float>{0.5f, inf, 2.0f}, {3, 1}).to(dt);
            Tensor b = tensor(std::vector<float>{-3.0f, 7.0f, 1.0f, -0.0f}, {1, 4}).to(dt).view({1, 2, 2}).select(-1, 0);
            Tensor out = empty({3, 2}, TensorOptions(dt));
            kernels::gemm(out, a, b, false, false, 1.0, 0.0);
            const std::vector<float> got = out.to(kFloat32).to_vector<float>();
            CHECK(got == std::vector<float>{-1.5f, 0.5f, -inf, inf, -6.0f, 2.0f});
        }
    }
}

// Both operands expanded over the batch (stride 0): oneDNN's bf16 matmul could not create a
// descriptor for a destination batch that neither input has (difftest seed 115).
TEST_CASE("cpu gemm paths: a batch whose operands are both broadcast, with beta") {
    for (GemmLibrary library : {GemmLibrary::kBest, GemmLibrary::kEigen}) {
        LibraryGuard guard(library);
        for (DType dt : {kFloat32, kBFloat16, kFloat16}) {
            CAPTURE(gemm_path_name(cpu_gemm_path(dt)));
            TensorOptions o(dt);
            Tensor a = randn({1, 5, 4}, o).expand({3, 5, 4}), b = randn({1, 4, 2}, o).expand({3, 4, 2});
            Tensor out0 = randn({3, 5, 2}, o), out = out0.clone();
            kernels::gemm(out, a, b, false, false, 1.0, 0.5);
            Tensor expected = (reference(a, b, false, false, kFloat64) + out0.to(kFloat64) * 0.5).to(dt);
            CHECK_CLOSE(out, expected, product_tolerance(dt, 4));
        }
    }
}

// capabilities_test.cpp: the per-device capability table (kernels/capabilities.hpp): the CPU backend
// fills its row at load time (cpu/capabilities.cpp), a build without CUDA has no CUDA row (a typed
// error naming the device), the GEMM route follows the library preference, and the attention path
// under kAuto is the backend's answer.
#include <doctest/doctest.h>

#include <string>

#include "ampgrad_config.h"
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"
#include "kernels/attention_gemm.hpp"
#include "kernels/capabilities.hpp"

using namespace ampgrad;

namespace {
struct LibraryGuard {
    explicit LibraryGuard(GemmLibrary library) { set_cpu_gemm_library(library); }
    ~LibraryGuard() { set_cpu_gemm_library(GemmLibrary::kBest); }
};
}  // namespace

TEST_CASE("the CPU backend registers its capabilities; a backend not built has none") {
    REQUIRE(has_backend_capabilities(kCPU));
    const BackendCapabilities& cpu = backend_capabilities(kCPU);
    CHECK(bool(cpu.gemm_route));
    CHECK(bool(cpu.attention_prefers_gemm));
    CHECK(cpu.attention_workspace_bytes == (int64_t(64) << 20));
    CHECK(has_backend_capabilities(kCUDA) == bool(AMPGRAD_WITH_CUDA));
    if (!AMPGRAD_WITH_CUDA) {
        CHECK_THROWS_AS(backend_capabilities(kCUDA), NotImplementedError);
        try {
            backend_capabilities(kCUDA);
        } catch (const NotImplementedError& e) {
            CHECK(std::string(e.what()).find("cuda") != std::string::npos);
        }
    }
}

TEST_CASE("gemm_route names the CPU library under each preference; non-floating dtypes are refused") {
    {
        LibraryGuard reference(GemmLibrary::kReference);
        CHECK(gemm_route(kCPU, kFloat32) == "eigen");
        CHECK(gemm_route(kCPU, kFloat64) == "eigen");
        CHECK(gemm_route(kCPU, kBFloat16) == "widened to f32, eigen");
    }
    LibraryGuard best(GemmLibrary::kBest);
    CHECK(gemm_route(kCPU, kFloat64) == "eigen");                         // oneDNN has no f64 GEMM
    const std::string f32 = gemm_route(kCPU, kFloat32);
    CHECK((AMPGRAD_WITH_ONEDNN ? f32.starts_with("onednn sgemm") : f32 == "eigen"));
    // Without AVX-512 the weight gradients' layout goes to Eigen (cpu/gemm_select.cpp), and the route says so.
    const bool tn_note = f32.find("weight gradients: eigen") != std::string::npos;
    CHECK(tn_note == (AMPGRAD_WITH_ONEDNN && !__builtin_cpu_supports("avx512f")));
    CHECK(GemmLibrary::kEigen == GemmLibrary::kReference);               // the old spelling still works
    CHECK_THROWS_AS(gemm_route(kCPU, kInt64), DTypeError);
}

TEST_CASE("attention under kAuto takes the path the backend's row prefers") {
    set_attention_path(AttentionPath::kAuto);
    const BackendCapabilities& cpu = backend_capabilities(kCPU);
    for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
        for (int64_t T : {8, 16, 32}) {
            CAPTURE(dtype_name(dt));
            CAPTURE(T);
            Tensor q = zeros({1, 2, T, 8}, dt), k = zeros({1, 2, T, 8}, dt);
            CHECK(attention_uses_gemm(q, k) == cpu.attention_prefers_gemm(dt, T * T));
        }
    }
    CHECK(cpu.attention_prefers_gemm(kFloat32, 256));
    CHECK_FALSE(cpu.attention_prefers_gemm(kFloat32, 255));
    CHECK_FALSE(cpu.attention_prefers_gemm(kFloat64, 1 << 20));
}

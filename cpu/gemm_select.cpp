// gemm_select.cpp: which library runs the CPU's GEMM for each dtype (cpu/gemm_select.hpp), and the
// f32 product every path that ends in f32 goes through. Chosen by measurement on the GPT's shapes
// (docs/benchmarks.md, "CPU GEMM"): oneDNN's sgemm ran f32 at about twice Eigen's rate, and its
// bf16 matmul at twice that again on a CPU with avx512_bf16. f64 has no oneDNN kernel and stays
// on Eigen. Without oneDNN in the build (Meson option `onednn`), everything runs on Eigen.
#include "cpu/gemm_select.hpp"

#include <fmt/format.h>

#include "ampgrad_config.h"
#include "core/error.hpp"
#include "core/determinism.hpp"
#include "cpu/gemm.hpp"

namespace ampgrad::cpu {

namespace {

GemmPath choose_gemm_path(DType dtype, GemmLibrary library) {
    const bool onednn = AMPGRAD_WITH_ONEDNN && library == GemmLibrary::kBest;
    switch (dtype) {
        case kFloat64: return GemmPath::kEigen;
        case kFloat32: return onednn ? GemmPath::kOneDnnSgemm : GemmPath::kEigen;
        case kBFloat16:
            if (onednn && onednn_has_bf16()) return GemmPath::kOneDnnMatmul;
            [[fallthrough]];
        default: return onednn ? GemmPath::kWidenedOneDnnSgemm : GemmPath::kWidenedEigen;
    }
}

}  // namespace

const char* gemm_path_name(GemmPath path) {
    switch (path) {
        case GemmPath::kEigen: return "eigen";
        case GemmPath::kWidenedEigen: return "widened to f32, eigen";
        case GemmPath::kOneDnnSgemm: return "onednn sgemm";
        case GemmPath::kWidenedOneDnnSgemm: return "widened to f32, onednn sgemm";
        case GemmPath::kOneDnnMatmul: return "onednn matmul (f32 accumulation)";
    }
    return "?";
}

GemmPath cpu_gemm_path(DType dtype) {
    if (!is_floating(dtype))
        throw DTypeError(fmt::format("cpu_gemm_path: expected a floating dtype, got {}", dtype_name(dtype)));
    return choose_gemm_path(dtype, cpu_gemm_library());
}

// oneDNN's sgemm with a transposed first operand and a plain second ("TN": the weight gradient
// x^T . g of a Linear) ran at 38-72% of the FMA peak on an AVX2 Zen 3 (bench/gemm_kernels.cpp, GPT
// `small`'s shapes: 79 GFLOP/s for fc's dW where Eigen made 159), while Eigen made 73-86%: on a CPU
// without AVX-512, where it was measured, that layout goes to Eigen. Not in the deterministic mode:
// Eigen's sums over K change with the thread count there (tests/cpu/deterministic_kernels_test.cpp),
// and oneDNN's fixed row tiles (cpu/gemm_onednn.cpp) do not.
bool prefer_eigen_for(bool trans_a, bool trans_b) {
    static const bool avx512 = __builtin_cpu_supports("avx512f");
    return trans_a && !trans_b && !avx512 && !deterministic();
}

void gemm_f32(float* out, int64_t batch, int64_t m, int64_t n, const MatrixBatch<float>& a, bool trans_a,
              const MatrixBatch<float>& b, bool trans_b, float alpha, float beta, OutStrides os) {
    if (cpu_gemm_path(kFloat32) == GemmPath::kOneDnnSgemm && !prefer_eigen_for(trans_a, trans_b))
        gemm_onednn_sgemm(out, batch, m, n, a, trans_a, b, trans_b, alpha, beta, os);
    else
        gemm_eigen<float>(out, batch, m, n, a, trans_a, b, trans_b, alpha, beta, os);
}

#if !AMPGRAD_WITH_ONEDNN
// Built without oneDNN: choose_gemm_path never names these paths.
void gemm_onednn_sgemm(float*, int64_t, int64_t, int64_t, const MatrixBatch<float>&, bool, const MatrixBatch<float>&,
                       bool, float, float, OutStrides) {
    AMPGRAD_CHECK(false, "gemm: built without oneDNN");
}
void gemm_onednn_bf16(void*, DType, int64_t, int64_t, int64_t, const MatrixBatch<BFloat16>&, bool,
                      const MatrixBatch<BFloat16>&, bool, float, float, OutStrides) {
    AMPGRAD_CHECK(false, "gemm: built without oneDNN");
}
bool onednn_has_bf16() { return false; }
#endif

}  // namespace ampgrad::cpu

// gemm_select.hpp: which library multiplies matrices on the CPU, per dtype (the CPU backend's own
// business: the layers above see it only as the capability table's gemm_route, kernels/capabilities.hpp).
// oneDNN (when the build found it) runs f32 through its sgemm and bf16 through its matmul primitive
// (bf16 operands, f32 accumulation) on CPUs with avx512_bf16; Eigen runs f64, and is the fallback
// for everything. f16, and bf16 on CPUs without avx512_bf16, are widened to f32 first and take the
// f32 path. set_cpu_gemm_library(GemmLibrary::kReference) pins Eigen (tests and bench/gemm_kernels.cpp).
#pragma once
#include "core/dtype.hpp"
#include "kernels/capabilities.hpp"

namespace ampgrad::cpu {

enum class GemmPath {
    kEigen,                // f32/f64 multiplied by Eigen in place
    kWidenedEigen,         // f16/bf16 widened to f32, multiplied by Eigen, rounded once
    kOneDnnSgemm,          // f32 through oneDNN's dnnl_sgemm
    kWidenedOneDnnSgemm,   // f16/bf16 widened to f32, multiplied by dnnl_sgemm, rounded once
    kOneDnnMatmul,         // bf16 operands through oneDNN's matmul primitive, f32 accumulation
};
const char* gemm_path_name(GemmPath path);

// The path the CPU gemm kernels take for a floating dtype under the current library preference.
// Throws DTypeError for other dtypes.
GemmPath cpu_gemm_path(DType dtype);

// Whether an f32 product of this layout leaves the oneDNN sgemm path for Eigen: a transposed first
// operand and a plain second (a Linear's weight gradient) on a CPU without AVX-512, outside the
// deterministic mode (cpu/gemm_select.cpp says why).
bool prefer_eigen_for(bool trans_a, bool trans_b);

}  // namespace ampgrad::cpu

// gemm_paths.hpp: which library multiplies matrices on the CPU, per dtype. oneDNN (when the build
// found it) runs f32 through its sgemm and bf16 through its matmul primitive (bf16 operands, f32
// accumulation) on CPUs with avx512_bf16; Eigen runs f64, and is the fallback for everything. f16,
// and bf16 on CPUs without avx512_bf16, are widened to f32 first and take the f32 path.
// `ampgrad info` prints the table; tests and bench/gemm_kernels.cpp pin Eigen to compare the two.
// The CPU backend answers (cpu/gemm_select.cpp registers the chooser at load time).
#pragma once
#include "core/dtype.hpp"

namespace ampgrad {

enum class GemmPath {
    kEigen,                // f32/f64 multiplied by Eigen in place
    kWidenedEigen,         // f16/bf16 widened to f32, multiplied by Eigen, rounded once
    kOneDnnSgemm,          // f32 through oneDNN's dnnl_sgemm
    kWidenedOneDnnSgemm,   // f16/bf16 widened to f32, multiplied by dnnl_sgemm, rounded once
    kOneDnnMatmul,         // bf16 operands through oneDNN's matmul primitive, f32 accumulation
};
const char* gemm_path_name(GemmPath path);

enum class GemmLibrary {
    kBest,    // the default: oneDNN where built and supported, else Eigen
    kEigen,   // Eigen only (tests and benchmarks compare against it)
};
void set_cpu_gemm_library(GemmLibrary library);   // process-wide; starts as AMPGRAD_CPU_GEMM says (best|eigen)
GemmLibrary cpu_gemm_library();

// The path the CPU gemm kernels take for a floating dtype under the current library setting.
// Throws DTypeError for other dtypes.
GemmPath cpu_gemm_path(DType dtype);

// Filled in by the CPU backend at load time.
using GemmPathChooser = GemmPath (*)(DType dtype, GemmLibrary library);
void register_cpu_gemm_chooser(GemmPathChooser chooser);

}  // namespace ampgrad

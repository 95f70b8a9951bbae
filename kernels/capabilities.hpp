// capabilities.hpp: what each backend can do and how it does it, in one table per device type that
// the backend fills at load time (cpu/capabilities.cpp, cuda/capabilities.cu). The layers above ask
// the table instead of naming a library or a device: `ampgrad info` and the GEMM benchmark print
// gemm_route(kCPU, kFloat32) ("onednn sgemm" or "eigen"), and the attention op asks
// attention_prefers_gemm (kernels/attention_gemm.hpp) to choose between the fused kernels and the
// batched-GEMM path.
//
//   register_backend_capabilities(kCPU, {.gemm_route = &route_name, .attention_prefers_gemm = &prefers});
//   backend_capabilities(kCUDA).attention_workspace_bytes   // 1 GiB
//
// The one knob here, the GEMM library preference, is device-neutral: kBest lets a backend take its
// fastest library (oneDNN on the CPU where the build found it), kReference its plain reference one
// (Eigen on the CPU). It starts as AMPGRAD_CPU_GEMM says ("best", the default, or "eigen"), so a
// benchmark can run the same binary both ways.
#pragma once
#include <cstdint>
#include <string>

#include "core/device.hpp"
#include "core/dtype.hpp"

namespace ampgrad {

struct BackendCapabilities {
    // How the backend's GEMM multiplies `dtype` under the current library preference, in words
    // ("onednn sgemm", "widened to f32, eigen", "cublas"). Floating dtypes only.
    std::string (*gemm_route)(DType dtype) = nullptr;
    // Whether scaled-dot-product attention in `dtype`, with `scores_per_head` = T*S, runs faster as
    // batched GEMMs around row kernels (kernels/attention_gemm.hpp) than in the fused kernels.
    bool (*attention_prefers_gemm)(DType dtype, int64_t scores_per_head) = nullptr;
    // The GEMM attention path's workspace bound per chunk, in bytes.
    int64_t attention_workspace_bytes = int64_t(64) << 20;
    // Whether the GEMM attention path should copy head-strided q, k, v (and outputs) to dense
    // (B,H,X,cols) tensors first, instead of multiplying them in place: where the backend's GEMM
    // for `dtype` runs much slower on strided operands. nullptr: never.
    bool (*attention_dense_heads)(DType dtype) = nullptr;
};

// Called once per device type by its backend (a static initializer in the backend's own file).
void register_backend_capabilities(DeviceType device, const BackendCapabilities& capabilities);
bool has_backend_capabilities(DeviceType device);
// NotImplementedError naming the device when its backend registered none (a build without it).
const BackendCapabilities& backend_capabilities(DeviceType device);

// backend_capabilities(device).gemm_route(dtype), with a DTypeError for a non-floating dtype.
std::string gemm_route(DeviceType device, DType dtype);

enum class GemmLibrary {
    kBest,                   // each backend's fastest library (the default)
    kReference,              // each backend's reference library: Eigen on the CPU
    kEigen = kReference,     // the spelling before the capability table (CHANGELOG)
};
void set_cpu_gemm_library(GemmLibrary library);   // process-wide
GemmLibrary cpu_gemm_library();

}  // namespace ampgrad

// capabilities.cpp: the CPU backend's row of the capability table (kernels/capabilities.hpp): its
// GEMM route per dtype (cpu/gemm_select.hpp) and when attention is faster as batched GEMMs.
// Measured on the GPT's shapes (docs/benchmarks.md, "Attention"): in f32, oneDNN's GEMMs and the
// vectorised rows beat the fused loops once a head has 256 scores (T*S) or more (below that the
// GEMM path's copies and calls cost more: 1.2x slower for nano's 8x8 heads, bench/llama_ops.cpp); in f16/bf16 the
// fused loops keep P and dS in f32 at no cost in speed, and f64 has no fast GEMM. (bf16 through oneDNN's
// native matmul was faster on the GEMM path, 137 against 159 ms for GPT `small` on a Xeon with AMX, but
// rounding P and dS to bf16 moved results past what the fp8 recipe's PyTorch oracle and the bf16
// accumulation test allow, so the fused loops stay.)
#include "cpu/gemm_select.hpp"
#include "kernels/capabilities.hpp"

namespace ampgrad::cpu {
namespace {

constexpr int64_t kGemmAttentionMinScores = 256;

// The route's name; where oneDNN's sgemm would take the weight gradients and this CPU sends them to
// Eigen instead (prefer_eigen_for), it says so.
std::string gemm_route(DType dtype) {
    const GemmPath path = cpu_gemm_path(dtype);
    std::string route = gemm_path_name(path);
    const bool sgemm = path == GemmPath::kOneDnnSgemm || path == GemmPath::kWidenedOneDnnSgemm;
    if (sgemm && prefer_eigen_for(/*trans_a=*/true, /*trans_b=*/false)) route += " (x^T g, the weight gradients: eigen)";
    return route;
}

bool attention_prefers_gemm(DType dtype, int64_t scores_per_head) {
    return dtype == kFloat32 && scores_per_head >= kGemmAttentionMinScores;
}

// oneDNN's bf16 matmul runs its AMX/avx512_bf16 kernels on dense operands only: on the heads of a
// (B,T,NH,HS) tensor it fell back to a generic JIT at about a tenth of the rate (ONEDNN_VERBOSE:
// gemm:jit instead of brgemm; GPT `small`'s bf16 step under AMPGRAD_ATTENTION=gemm took 180 ms, 137
// with the copies). Its f32 sgemm reads strided operands at full speed.
bool attention_dense_heads(DType dtype) { return cpu_gemm_path(dtype) == GemmPath::kOneDnnMatmul; }

[[maybe_unused]] const bool registered = [] {
    register_backend_capabilities(kCPU, {.gemm_route = &gemm_route,
                                         .attention_prefers_gemm = &attention_prefers_gemm,
                                         .attention_workspace_bytes = int64_t(64) << 20,
                                         .attention_dense_heads = &attention_dense_heads});
    return true;
}();

}  // namespace
}  // namespace ampgrad::cpu

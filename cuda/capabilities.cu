// capabilities.cu: the CUDA backend's row of the capability table (kernels/capabilities.hpp), the
// mirror of cpu/capabilities.cpp: its GEMM route per dtype (cuda/gemm.cu) and when attention is
// faster as batched GEMMs: for every dtype but f64, whose products cuBLAS runs on tensor cores
// (f16/bf16) or in fp32 where the fused kernel computes them one FMA at a time.
#include "kernels/capabilities.hpp"

namespace ampgrad::cuda {
namespace {

std::string gemm_route(DType dtype) {
    return dtype == kFloat64 ? "cublas dgemm" : "cublas gemm_ex (fp32 compute, no tf32)";
}

bool attention_prefers_gemm(DType dtype, int64_t /*scores_per_head*/) { return dtype != kFloat64; }
// Dense heads: one batched cuBLAS call per product over the whole chunk (a few launches per layer),
// where multiplying head-strided tensors in place would take one call per batch entry and causal tile.
bool attention_dense_heads(DType /*dtype*/) { return true; }

[[maybe_unused]] const bool registered = [] {
    register_backend_capabilities(kCUDA, {.gemm_route = &gemm_route,
                                          .attention_prefers_gemm = &attention_prefers_gemm,
                                          .attention_workspace_bytes = int64_t(1) << 30,
                                          .attention_dense_heads = &attention_dense_heads});
    return true;
}();

}  // namespace
}  // namespace ampgrad::cuda

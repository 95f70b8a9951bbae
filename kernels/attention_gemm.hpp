// attention_gemm.hpp: scaled-dot-product attention as batched GEMMs around two row kernels (the
// GEMM path), and the choice between it and the fused flash-style kernels. It meets the contract of
// kernels::attention_forward / attention_backward (kernels/fused_kernels.hpp) with any backend's
// kernels::gemm, so on a GPU the four products of the backward and the two of the forward run on
// cuBLAS (tensor cores for f16/bf16), where the fused CUDA kernel computes them one FMA at a time.
// The price is memory: it holds the (T,S) scores of a chunk of heads at a time (a workspace bound,
// not the whole batch) and, like FlashAttention, rounds P and dS to the inputs' dtype before
// multiplying them (exact for f32 and f64). docs/ops/attention.md derives both paths.
//
// Which path runs is chosen once, by the attention op (autograd/ops/attention_fused.cpp), with
// attention_uses_gemm: under AttentionPath::kAuto each backend's measurement decides (its row of
// kernels/capabilities.hpp: this path for f32/f16/bf16 on a GPU, and for f32 on the CPU unless a head
// has fewer than 256 scores; the fused kernels for f64, and for f16/bf16 on the CPU, where they keep P
// and dS in f32 at no cost in speed). The backends register only their fused kernels under
// kernels::attention_forward / attention_backward. AMPGRAD_ATTENTION=auto|fused|gemm or
// set_attention_path() overrides the choice, process-wide; the tests run the attention cases on both
// paths with it.
#pragma once
#include <cstdint>

#include "core/tensor.hpp"

namespace ampgrad {

enum class AttentionPath {
    kAuto,    // GEMM path for f32 (CPU: 256 scores per head or more), f16/bf16 off the CPU; else fused
    kFused,   // the flash-style kernels (cpu/attention.cpp, cuda/attention.cu)
    kGemm,    // this file's path, on every device and dtype
};
void set_attention_path(AttentionPath path);
AttentionPath attention_path();                   // starts as AMPGRAD_ATTENTION says (default auto)
const char* attention_path_name(AttentionPath path);

// Whether attention of q (B,NH,T,HS) against k (B,NKV,S,HS) takes the GEMM path now.
bool attention_uses_gemm(const Tensor& q, const Tensor& k);

// The workspace bound of one chunk (scores and probabilities of as many kv heads as fit, at least
// one), in bytes: 1 GiB on a GPU, 64 MiB on the CPU, when `workspace_bytes` is 0.
int64_t attention_workspace_bytes(const Tensor& q, int64_t workspace_bytes = 0);

// kernels::attention_forward's contract: out (B,NH,T,HSv), lse (B,NH,T) = attention(q, k, v).
void attention_forward_gemm(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                            double scale, bool causal, int64_t workspace_bytes = 0);
// kernels::attention_backward's contract: dq, dk, dv (each may be undefined) from dout, out, lse.
void attention_backward_gemm(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                             const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                             double scale, bool causal, int64_t workspace_bytes = 0);

}  // namespace ampgrad

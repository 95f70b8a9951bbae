// fused_kernels.hpp: the fused kernels (GEMM epilogues, flash-style attention, one-pass optimizer
// steps), registry entries like those of core/kernels.hpp (same Kernel objects, same
// AMPGRAD_REGISTER_KERNEL, listed by kernels::all() and kernels::missing()), kept apart from the
// primitives because each is an optimisation with a composed fallback: a caller asks
// `kernels::x.has(device)` and otherwise builds the same result from primitives or ops. The CPU
// implementations are cpu/gemm.cpp, cpu/attention.cpp and cpu/optim.cpp; CUDA has none yet, so
// kernels::missing(kCUDA) lists them all.
#pragma once
#include <cstdint>

#include "core/kernels.hpp"

namespace ampgrad {

// GEMM epilogues (kernels::gemm_epilogue)
enum class GemmEpilogue : uint8_t {
    kBias,           // out = op(a) @ op(b) + bias
    kBiasGeluTanh,   // aux = op(a) @ op(b) + bias (pre-activation, for the backward); out = gelu_tanh(aux)
};

// The scalars of one optimizer step (kernels::sgd_step, kernels::adam_step)
struct SgdScalars {
    double lr, momentum, dampening, weight_decay;
    bool nesterov, maximize;
    bool first_step;      // the momentum buffer is initialised to the gradient (PyTorch's rule)
};
struct AdamScalars {
    double lr, beta1, beta2, eps, weight_decay;
    bool amsgrad, maximize, decoupled_weight_decay;
    double step;          // this step's count, already incremented (1 on the first step)
};

namespace kernels {

// out (M,N) = epilogue(op(a) @ op(b) + bias), the epilogue run while the product is in cache.
// out contiguous; a (M,K) or (K,M) if trans_a; b (K,N) or (N,K) if trans_b; bias (N) contiguous or
// undefined; aux (M,N) contiguous or undefined (kBiasGeluTanh only). One floating dtype.
extern constinit Kernel<void(const Tensor& out, const Tensor& aux, const Tensor& a, const Tensor& b, bool trans_a,
                             bool trans_b, const Tensor& bias, GemmEpilogue epilogue)> gemm_epilogue;

// Flash-style attention: scores = scale * q k^T, P = softmax(scores) (causal: query i sees keys
// 0..i, top-left aligned, applied by index: no mask tensor), out = P v. The forward saves the row
// log-sum-exp, never P; the backward recomputes P from q, k and lse (docs/ops/attention.md).
// q (B,NH,T,HS), k (B,NH,S,HS), v (B,NH,S,HSv), out (B,NH,T,HSv): any strides, one floating dtype,
// S > 0; lse (B,NH,T) contiguous, f32 (f64 for f64 inputs).
extern constinit Kernel<void(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                             double scale, bool causal)> attention_forward;
// dq, dk, dv (shapes of q, k, v; any strides) are written when defined; out and lse as the forward
// wrote them; dout (B,NH,T,HSv).
extern constinit Kernel<void(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                             const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                             double scale, bool causal)> attention_backward;

// One-pass optimizer steps on one parameter, PyTorch's single-tensor formulas. Every defined tensor
// contiguous, of the parameter's shape, one dtype (the CPU loops take f32 and f64;
// optim/fused_step.hpp checks before calling); the scalars are rounded to that dtype.
// param -= lr * update; momentum_buffer is undefined when momentum == 0.
extern constinit Kernel<void(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                             const SgdScalars& s)> sgd_step;
// Adam, or AdamW when decoupled_weight_decay; max_exp_avg_sq is undefined unless amsgrad.
extern constinit Kernel<void(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                             const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, const AdamScalars& s)>
    adam_step;

// Every kernel above, once (core/kernels.cpp defines them; kernels::all() lists them after
// AMPGRAD_KERNELS; tests/layering_test.py checks that this list and the declarations agree).
#define AMPGRAD_FUSED_KERNELS(X) \
    X(gemm_epilogue) X(attention_forward) X(attention_backward) X(sgd_step) X(adam_step)

}  // namespace kernels

}  // namespace ampgrad

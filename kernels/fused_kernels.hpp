// fused_kernels.hpp: the fused kernels (GEMM epilogues, flash-style attention, one-pass optimizer
// steps), registry entries like those of kernels/kernels.hpp (same Kernel objects, same
// AMPGRAD_REGISTER_KERNEL, listed by kernels::all() and kernels::missing()), kept apart from the
// primitives because each is an optimisation with a composed fallback: a caller asks
// `kernels::x.has(device)` and otherwise builds the same result from primitives or ops. The CPU
// implementations are cpu/gemm_epilogue.cpp, cpu/attention.cpp, cpu/attention_rows.cpp and
// cpu/optim.cpp; their CUDA twins are in cuda/ under the same names (.cu).
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/kernels.hpp"

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
    bool first_step;      // the momentum buffers are initialised to the gradients (PyTorch's rule)
};
struct AdamScalars {
    double lr, beta1, beta2, eps, weight_decay;
    bool amsgrad, maximize, decoupled_weight_decay;
};

// The tensors of one multi-tensor optimizer step: entry i of every list belongs to parameter i.
struct SgdTensors {
    std::vector<Tensor> params, grads;
    std::vector<Tensor> momentum_buffers;   // empty when momentum == 0
};
struct AdamTensors {
    std::vector<Tensor> params, grads, exp_avgs, exp_avg_sqs;
    std::vector<Tensor> max_exp_avg_sqs;    // empty unless amsgrad
    std::vector<Tensor> steps;              // () f32 on the CPU, PyTorch's "step"; the kernel adds 1
};

// What GradScaler hands a step whose gradients are still multiplied by the loss scale (PyTorch's
// grad_scale / found_inf arguments of its fused optimizers). Both are () f32 on the parameters'
// device, or undefined. The kernel reads each gradient as grad * inv_scale and stores that back into
// .grad (as PyTorch's fused kernels do: after the step .grad is unscaled), and when found_inf is nonzero it changes nothing at all, step counts included: the skip is
// decided where the flag lives, with no host read.
struct StepScaling {
    Tensor inv_scale;     // undefined: 1 (the gradients were unscaled already, or never scaled)
    Tensor found_inf;     // undefined: 0
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
// q (B,NH,T,HS), k (B,NKV,S,HS), v (B,NKV,S,HSv), out (B,NH,T,HSv): any strides, one floating dtype,
// S > 0; lse (B,NH,T) contiguous, f32 (f64 for f64 inputs). NH is a multiple of NKV: query head h
// reads key/value head h / (NH / NKV) (grouped-query attention; NKV = NH is ordinary attention), and
// the backward's dk, dv (B,NKV,...) sum over the group's query heads. K/V are never copied per head.
extern constinit Kernel<void(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                             double scale, bool causal)> attention_forward;
// dq, dk, dv (shapes of q, k, v; any strides) are written when defined; out and lse as the forward
// wrote them; dout (B,NH,T,HSv).
extern constinit Kernel<void(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                             const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                             double scale, bool causal)> attention_backward;

// The GEMM path's two row steps (kernels/attention_gemm.cpp runs attention as batched GEMMs around
// them). Rows come in groups: row r of a group is query position r % T (a kv head's query heads are
// stacked, T rows each). scores, probs (G,R,S) contiguous: scores in the compute type (f32; f64 for
// f64), probs in the inputs' floating dtype; lse (G*R) contiguous, the compute type.
//   recompute false (forward): probs = softmax of each row's visible scores, 0 where masked; lse =
//     the row's log-sum-exp. A row whose visible scores are all -inf gets probs 0 and lse -inf.
//   recompute true (backward): probs = exp(scores - lse) from the given lse (0 where lse is -inf).
extern constinit Kernel<void(const Tensor& probs, const Tensor& lse, const Tensor& scores, int64_t T, bool causal,
                             bool recompute)> attention_probs;
// dscores (G,R,S) = probs * (dprobs - D), D_r = dout_r . out_r in the compute type, over each row's
// visible keys (row r is query position r % T, as above); masked keys get dscores 0 and their dprobs
// are never read (the causal GEMM path leaves them unwritten). dscores and probs share a dtype and may
// be one tensor (written in place); dprobs (G,R,S) in the compute type; dout, out (G,R,HSv)
// contiguous in the inputs' dtype.
extern constinit Kernel<void(const Tensor& dscores, const Tensor& probs, const Tensor& dprobs, const Tensor& dout,
                             const Tensor& out, int64_t T, bool causal)> attention_score_grad;

// One-pass multi-tensor optimizer steps, PyTorch's single-tensor formulas applied to each
// parameter in turn (one call per parameter group: no per-parameter dispatch). Every tensor
// contiguous, of its parameter's shape, one dtype per call (the CPU loops take f32 and f64;
// optim/fused_step.hpp checks before calling); the scalars are rounded to that dtype.
// param -= lr * update.
extern constinit Kernel<void(const SgdTensors& t, const SgdScalars& s, const StepScaling& scaling)> sgd_step;
// Adam, or AdamW when decoupled_weight_decay; each parameter's bias correction uses its own step.
extern constinit Kernel<void(const AdamTensors& t, const AdamScalars& s, const StepScaling& scaling)> adam_step;

// Every kernel above, once (kernels/kernels.cpp defines them; kernels::all() lists them after
// AMPGRAD_KERNELS; tests/layering_test.py checks that this list and the declarations agree).
#define AMPGRAD_FUSED_KERNELS(X) \
    X(gemm_epilogue) X(attention_forward) X(attention_backward) X(attention_probs) X(attention_score_grad) \
        X(sgd_step) X(adam_step)

}  // namespace kernels

}  // namespace ampgrad

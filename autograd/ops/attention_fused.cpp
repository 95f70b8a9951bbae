// attention_fused.cpp: scaled-dot-product attention as one node whose kernel saves the row
// log-sum-exp instead of the (T,S) probabilities (kernels::attention_forward/backward; the CPU
// implementation is cpu/attention.cpp). Derivation:
// docs/ops/attention.md.
//
// Double backward: the fused backward kernel is not itself differentiable. When the backward runs
// under create_graph (grad mode on), it instead computes the same gradients with differentiable
// ops (matmul, softmax, where), recomputing P from the saved q and k, so second derivatives are
// exact; only that rare path builds a causal mask tensor.
#include <cmath>

#include "autograd/ops/attention_fused.hpp"
#include "autograd/ops/op_utils.hpp"
#include "autograd/ops/ops.hpp"
#include "autograd/record.hpp"
#include "kernels/attention_gemm.hpp"
#include "kernels/fused_kernels.hpp"

namespace ampgrad::ops {

using autograd::BackwardContext;
using autograd::record;

namespace {

// (B,NH,R,X) view of a fresh (B,R,NH,X) buffer: the layout a head-merging transpose wants.
Tensor empty_heads_last(int64_t B, int64_t NH, int64_t R, int64_t X, DType dtype, Device device) {
    Tensor buf = make_empty({B, R, NH, X}, dtype, device);                       // (B,R,NH,X)
    return make_view(buf, {B, NH, R, X}, {R * NH * X, X, NH * X, 1}, 0);         // (B,NH,R,X)
}

// dq, dk, dv from differentiable ops (the create_graph path). g: (B,NH,T,HSv). Grouped k, v (B,NKV,S,*)
// are repeated to NH heads here, and their gradients summed back over each group.
tensor_list composed_backward(const Tensor& q, const Tensor& k_in, const Tensor& v_in, const Tensor& g, bool causal,
                              double scale) {
    const int64_t group = q.size(1) / k_in.size(1);
    Tensor k = group == 1 ? k_in : repeat_interleave(k_in, group, 1);           // (B,NH,S,HS)
    Tensor v = group == 1 ? v_in : repeat_interleave(v_in, group, 1);           // (B,NH,S,HSv)
    Tensor s = matmul(q, transpose(k, -2, -1)) * scale;                          // (B,NH,T,S)
    if (causal) {
        const int64_t T = q.size(2), S = k.size(2);
        Tensor rows = unsqueeze(arange(T, TensorOptions(kInt64).device(q.device())), 1);   // (T,1)
        Tensor cols = unsqueeze(arange(S, TensorOptions(kInt64).device(q.device())), 0);   // (1,S)
        s = where(ge(rows, cols), s, -INFINITY);                                 // keys j <= i
    }
    Tensor dead;                                                                 // rows of all -inf: P = 0
    {
        NoGradGuard no_grad;
        dead = eq(amax(s, {-1}, true), ops::wrapped_scalar(-INFINITY, s));
    }
    Tensor p = nn::functional::softmax(where(dead, zeros_like(s), s), -1);      // (B,NH,T,S)
    p = where(dead, zeros_like(p), p);
    Tensor dp = matmul(g, transpose(v, -2, -1));                                 // (B,NH,T,S)
    Tensor ds = p * (dp - sum(dp * p, {-1}, true));
    Tensor dk = matmul(transpose(ds, -2, -1), q) * scale, dv = matmul(transpose(p, -2, -1), g);   // (B,NH,S,*)
    if (group > 1) {                                                             // sum each group: (B,NKV,S,*)
        dk = sum(reshape(dk, {k_in.size(0), k_in.size(1), group, k_in.size(2), k_in.size(3)}), {2});
        dv = sum(reshape(dv, {v_in.size(0), v_in.size(1), group, v_in.size(2), v_in.size(3)}), {2});
    }
    return {matmul(ds, k) * scale, dk, dv};
}

}  // namespace

bool fused_attention_supported(const Tensor& q, const Tensor& k) {
    return kernels::attention_forward.has(q.device().type) && kernels::attention_backward.has(q.device().type) &&
           k.size(2) > 0;
}

Tensor fused_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale) {
    const int64_t B = q.size(0), NH = q.size(1), T = q.size(2), HSv = v.size(3);
    Tensor out = empty_heads_last(B, NH, T, HSv, q.dtype(), q.device());         // (B,NH,T,HSv)
    Tensor lse = make_empty({B, NH, T}, q.dtype() == kFloat64 ? kFloat64 : kFloat32, q.device());   // (B,NH,T)
    // The one place the path is chosen (kernels/attention_gemm.hpp): batched GEMMs or the fused kernels.
    const bool gemm_path = attention_uses_gemm(q, k);
    if (gemm_path) attention_forward_gemm(out, lse, q, k, v, scale, causal);
    else kernels::attention_forward(out, lse, q, k, v, scale, causal);

    return record("scaled_dot_product_attention", out, {q, k, v}, {q, k, v, out, lse},
                  [scale, causal, gemm_path](BackwardContext& ctx, const tensor_list& g) {
        Tensor q = ctx.saved(0), k = ctx.saved(1), v = ctx.saved(2);
        Tensor dout = g[0].dtype() == q.dtype() ? g[0] : g[0].to(q.dtype());      // (B,NH,T,HSv)
        if (GradMode::is_enabled()) return composed_backward(q, k, v, dout, causal, scale);
        tensor_list d(3);
        const int64_t B = q.size(0), NH = q.size(1), T = q.size(2), S = k.size(2), NKV = k.size(1);
        if (ctx.needs_input_grad(0)) d[0] = empty_heads_last(B, NH, T, q.size(3), q.dtype(), q.device());
        if (ctx.needs_input_grad(1)) d[1] = empty_heads_last(B, NKV, S, k.size(3), k.dtype(), k.device());
        if (ctx.needs_input_grad(2)) d[2] = empty_heads_last(B, NKV, S, v.size(3), v.dtype(), v.device());
        if (gemm_path) attention_backward_gemm(d[0], d[1], d[2], dout, ctx.saved(3), ctx.saved(4), q, k, v, scale, causal);
        else kernels::attention_backward(d[0], d[1], d[2], dout, ctx.saved(3), ctx.saved(4), q, k, v, scale, causal);
        return d;
    });
}

}  // namespace ampgrad::ops

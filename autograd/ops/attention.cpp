// attention.cpp: F.scaled_dot_product_attention. Two paths, one API (enable_gqa: query heads share
// key/value heads; the fused kernels read them in place, the other paths repeat K/V first):
//  - the fused path (no attn_mask, no dropout, 4-d q/k/v with equal (B,NH) and head size): one graph node whose
//    forward and backward are batched GEMMs around the softmax kernels, storing the (T,S)
//    probabilities (the "math" path, unlike flash attention). Under create_graph its backward is
//    rebuilt from differentiable ops, so double backward works.
//  - the general path (attn_mask bool/additive, dropout_p, any leading rank with broadcasting, v's
//    head size != q's): composed of differentiable ops, as PyTorch's _scaled_dot_product_attention_math
//    (in f32 for f16/bf16 inputs).
// Derivation: docs/ops/attention.md.
//   S = q k^T * scale (+ mask);  P = softmax(S);  O = dropout(P) v
//   dv = P^T dO;  dP = dO v^T;  dS = P * (dP - rowsum(dP * P));  dq = dS k * scale;  dk = dS^T q * scale
#include <array>
#include <cmath>

#include "autograd/ops/attention_fused.hpp"
#include "autograd/ops/autocast_hook.hpp"
#include "autograd/ops/op_utils.hpp"
#include "autograd/ops/ops.hpp"
#include "autograd/record.hpp"

namespace ampgrad::nn::functional {

using autograd::BackwardContext;
using autograd::record;

namespace {

constexpr const char* kOp = "scaled_dot_product_attention";

// group > 1: k and v hold NH / group heads (dim -3) that the fused kernel shares among query heads
void check_attention_args(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, bool is_causal,
                          double dropout_p, int64_t group) {
    ops::check_defined(kOp, q, "query");
    ops::check_defined(kOp, k, "key");
    ops::check_defined(kOp, v, "value");
    ops::check_same_device(kOp, {&q, &k, &v, &mask});
    ops::check_floating(kOp, q);
    if (k.dtype() != q.dtype() || v.dtype() != q.dtype())
        throw DTypeError(fmt::format("{}: dtypes differ: q is {}, k is {}, v is {}; expected one dtype", kOp,
                                     q.describe(), k.describe(), v.describe()));
    bool ok = q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2 && k.size(-1) == q.size(-1) && v.size(-2) == k.size(-2);
    if (!ok)
        throw ShapeError(fmt::format("{}: shapes do not fit: q is {}, k is {}, v is {}; expected q (*,T,HS), "
                                     "k (*,S,HS), v (*,S,HSv)", kOp, q.describe(), k.describe(), v.describe()));
    Shape qlead(q.sizes().begin(), q.sizes().end() - 2), klead(k.sizes().begin(), k.sizes().end() - 2),
        vlead(v.sizes().begin(), v.sizes().end() - 2);
    if (group > 1) {                                            // as if k and v were repeated per query head
        klead.back() *= group;
        vlead.back() *= group;
    }
    ops::broadcast_shapes(kOp, ops::broadcast_shapes(kOp, qlead, klead), vlead);
    if (mask.defined()) {
        if (is_causal)
            throw ValueError(fmt::format("{}: explicit attn_mask should not be set when is_causal=true (mask is {})",
                                         kOp, mask.describe()));
        if (mask.dtype() != kBool && mask.dtype() != q.dtype())
            throw DTypeError(fmt::format("{}: attn_mask must be bool or match the query dtype: mask is {}, q is {}",
                                         kOp, mask.describe(), q.describe()));
        Shape scores = ops::broadcast_shapes(kOp, qlead, klead);
        scores.push_back(q.size(-2));
        scores.push_back(k.size(-2));
        if (ops::broadcast_shapes(kOp, mask.sizes(), scores) != scores)
            throw ShapeError(fmt::format("{}: attn_mask {} does not broadcast to the scores' shape {}", kOp,
                                         mask.describe(), shape_str(scores)));
    }
    if (!(dropout_p >= 0.0 && dropout_p <= 1.0))
        throw ValueError(fmt::format("{}: dropout_p has to be between 0 and 1, but got {}", kOp, dropout_p));
}

// (B,NH,T,X) -> contiguous (B*NH,T,X), no autograd
Tensor fold_heads(const Tensor& t) {
    NoGradGuard no_grad;
    return t.contiguous().view({t.size(0) * t.size(1), t.size(2), t.size(3)});
}

// (T,S) bool: true where key j may be seen by query i (j <= i, top-left aligned)
Tensor causal_keep(int64_t T, int64_t S, Device device) {
    NoGradGuard no_grad;
    Tensor rows = arange(T, TensorOptions(kInt64).device(device)).view({T, 1});
    Tensor cols = arange(S, TensorOptions(kInt64).device(device)).view({1, S});
    return le(cols, rows);
}

// scores (BH,T,S) = -inf where key j comes after query i
void apply_causal_mask(const Tensor& scores) {
    Tensor keep = causal_keep(scores.size(1), scores.size(2), scores.device());
    Tensor minus_inf = ops::wrapped_scalar(-INFINITY, scores);
    kernels::where(scores, ops::expand_raw(keep, scores.sizes()), scores,
                   ops::expand_raw(minus_inf, scores.sizes()));
}

// PyTorch's _safe_softmax over the last dim: softmax, with 0 in rows whose scores are all -inf (a dead
// row: the forward zeroes those scores first, so no NaN is made). safe_softmax_values is the value
// alone (also the math node's, so its dead rows are 0 on any device); safe_softmax's backward is softmax's on the
// result, y * (dy - sum(dy * y)) (derivatives.yaml), so a dead row's gradient is 0 * (dy - 0): 0 for a
// finite dy, NaN where dy holds inf or NaN (e.g. dP = dO v^T with an inf in v), as in PyTorch.
Tensor safe_softmax_values(const Tensor& scores) {
    NoGradGuard no_grad;
    if (scores.numel() == 0) return softmax(scores, -1);
    Tensor dead = eq(amax(scores, {-1}, true), ops::wrapped_scalar(-INFINITY, scores));   // (*,T,1)
    Tensor probs = softmax(where(dead, zeros_like(scores), scores), -1);
    return where(dead, zeros_like(probs), probs);                              // (*,T,S)
}

Tensor safe_softmax(const Tensor& scores) {
    if (scores.numel() == 0) return softmax(scores, -1);
    Tensor out = safe_softmax_values(scores);                                  // (*,T,S)
    return record("safe_softmax", out, {scores}, {out}, [](BackwardContext& ctx, const tensor_list& g) {
        Tensor y = ctx.saved(0);
        Tensor dy = g[0].dtype() == y.dtype() ? g[0] : g[0].to(y.dtype());
        if (GradMode::is_enabled()) return tensor_list{y * (dy - sum(dy * y, {-1}, true))};   // create_graph
        Tensor dx = make_empty(y.sizes(), y.dtype(), y.device());
        kernels::softmax_backward(dx, y.contiguous(), dy.contiguous(), false);
        return tensor_list{dx};
    });
}

// softmax(q k^T * scale + causal) as differentiable ops (the math node's create_graph backward)
Tensor attention_probs(const Tensor& q, const Tensor& k, double scale, bool is_causal) {
    Tensor scores = matmul(q, transpose(k, -2, -1)) * scale;                  // (*,T,S)
    if (is_causal) scores = where(causal_keep(q.size(-2), k.size(-2), q.device()), scores, -INFINITY);
    return safe_softmax(scores);
}

// dq, dk, dv from differentiable ops; q (B,NH,T,HS), k (B,NH,S,HS), v (B,NH,S,HSv), dout (B,NH,T,HSv)
tensor_list attention_backward_composite(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout,
                                         double scale, bool is_causal, BackwardContext& ctx) {
    Tensor probs = attention_probs(q, k, scale, is_causal);                   // (B,NH,T,S)
    tensor_list d(3);
    if (ctx.needs_input_grad(2)) d[2] = matmul(transpose(probs, -2, -1), dout);
    if (ctx.needs_input_grad(0) || ctx.needs_input_grad(1)) {
        Tensor dprobs = matmul(dout, transpose(v, -2, -1));                   // (B,NH,T,S)
        Tensor dscores = probs * (dprobs - sum(dprobs * probs, {-1}, true));
        if (ctx.needs_input_grad(0)) d[0] = matmul(dscores, k) * scale;
        if (ctx.needs_input_grad(1)) d[1] = matmul(transpose(dscores, -2, -1), q) * scale;
    }
    return d;
}

// the math node: q (B,NH,T,HS), k (B,NH,S,HS), v (B,NH,S,HSv) -> (B,NH,T,HSv)
Tensor attention_math(const Tensor& q, const Tensor& k, const Tensor& v, bool is_causal, double scale) {
    const int64_t B = q.size(0), NH = q.size(1), T = q.size(2), S = k.size(2), HSv = v.size(3);
    Tensor qf = fold_heads(q), kf = fold_heads(k), vf = fold_heads(v);         // (BH,T,HS) (BH,S,HS) (BH,S,HSv)
    Tensor scores = make_empty({B * NH, T, S}, q.dtype(), q.device());          // (BH,T,S)
    kernels::gemm(scores, qf, kf, false, true, scale, 0.0);                   // q k^T * scale
    if (is_causal) apply_causal_mask(scores);
    Tensor probs = safe_softmax_values(scores);                                 // (BH,T,S), dead rows 0
    Tensor out = make_empty({B * NH, T, HSv}, q.dtype(), q.device());           // (BH,T,HSv)
    kernels::gemm(out, probs, vf, false, false, 1.0, 0.0);
    {
        NoGradGuard no_grad;
        out = out.view({B, NH, T, HSv});                                        // (B,NH,T,HSv)
    }

    return record(kOp, out, {q, k, v}, {q, k, v, probs}, [scale, is_causal](BackwardContext& ctx, const tensor_list& g) {
        if (GradMode::is_enabled())                                             // create_graph
            return attention_backward_composite(ctx.saved(0), ctx.saved(1), ctx.saved(2),
                                                g[0].to(ctx.saved(0).dtype()), scale, is_causal, ctx);
        Tensor qf = fold_heads(ctx.saved(0)), kf = fold_heads(ctx.saved(1)), vf = fold_heads(ctx.saved(2));
        Tensor probs = ctx.saved(3);                                            // (BH,T,S)
        Tensor dout = fold_heads(g[0].dtype() == qf.dtype() ? g[0] : g[0].to(qf.dtype()));   // (BH,T,HSv)
        tensor_list d(3);
        if (ctx.needs_input_grad(2)) {
            d[2] = make_empty(vf.sizes(), vf.dtype(), vf.device());             // (BH,S,HSv)
            kernels::gemm(d[2], probs, dout, true, false, 1.0, 0.0);           // dv = P^T dO
        }
        if (ctx.needs_input_grad(0) || ctx.needs_input_grad(1)) {
            Tensor dprobs = make_empty(probs.sizes(), probs.dtype(), probs.device());    // (BH,T,S)
            kernels::gemm(dprobs, dout, vf, false, true, 1.0, 0.0);            // dP = dO v^T
            Tensor dscores = make_empty(probs.sizes(), probs.dtype(), probs.device());   // (BH,T,S)
            kernels::softmax_backward(dscores, probs, dprobs, false);          // dS
            if (ctx.needs_input_grad(0)) {
                d[0] = make_empty(qf.sizes(), qf.dtype(), qf.device());         // (BH,T,HS)
                kernels::gemm(d[0], dscores, kf, false, false, scale, 0.0);    // dq = dS k * scale
            }
            if (ctx.needs_input_grad(1)) {
                d[1] = make_empty(kf.sizes(), kf.dtype(), kf.device());         // (BH,S,HS)
                kernels::gemm(d[1], dscores, qf, true, false, scale, 0.0);     // dk = dS^T q * scale
            }
        }
        for (size_t i = 0; i < 3; ++i)                                          // (BH,X,Y) -> (B,NH,X,Y)
            if (d[i].defined()) d[i] = d[i].view(ctx.input_meta(i).shape);
        return d;
    });
}

// the general path, as PyTorch's math path: q and k each scaled by sqrt(|scale|) before the GEMM. f16
// and bf16 inputs (and a floating mask) are computed in f32 and the output cast back, as
// _scaled_dot_product_attention_math does on CPU (aten/src/ATen/native/transformers/attention.cpp: it
// upcasts half inputs unless allow_fp16_bf16_reduction_math_sdp is set); the gradients are then f32
// values rounded once, through the casts.
Tensor attention_general(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, double dropout_p,
                         bool is_causal, double scale) {
    if (q.dtype() == kFloat16 || q.dtype() == kBFloat16) {
        Tensor wide_mask = mask.defined() && mask.dtype() != kBool ? mask.to(kFloat32) : mask;
        Tensor out = attention_general(q.to(kFloat32), k.to(kFloat32), v.to(kFloat32), wide_mask, dropout_p,
                                       is_causal, scale);
        return out.to(q.dtype());
    }
    const double root = std::sqrt(std::abs(scale));
    Tensor scores = matmul(q * (scale < 0 ? -root : root), transpose(k, -2, -1) * root);   // (*,T,S)
    if (is_causal) {
        scores = where(causal_keep(q.size(-2), k.size(-2), q.device()), scores, -INFINITY);
    } else if (mask.defined() && mask.dtype() == kBool) {
        Tensor additive = where(mask, zeros(mask.sizes(), scores.options()), -INFINITY);    // true = attend
        scores = scores + additive;
    } else if (mask.defined()) {
        scores = scores + mask;
    }
    Tensor probs = safe_softmax(scores);            // (*,T,S); as PyTorch's math path, masked or not
    if (dropout_p > 0.0) probs = dropout(probs, dropout_p, true);
    return matmul(probs, v);                                                  // (*,T,HSv)
}

// An empty output (T = 0, HSv = 0 or a zero batch) depends on nothing, and PyTorch's gradients to q, k
// and v are zeros there. The formulas would instead give dk = dS^T q = 0 * inf = NaN from an inf in q.
// So the output is re-recorded with a zero backward.
Tensor empty_output(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v) {
    if (!GradMode::is_enabled() || !(q.requires_grad() || k.requires_grad() || v.requires_grad())) return out;
    std::array<std::pair<Shape, TensorOptions>, 3> metas{{{q.sizes(), q.options()}, {k.sizes(), k.options()},
                                                          {v.sizes(), v.options()}}};
    return record(kOp, out.detach(), {q, k, v}, {}, [metas](BackwardContext& ctx, const tensor_list&) {
        tensor_list d(3);
        for (size_t i = 0; i < 3; ++i)
            if (ctx.needs_input_grad(i)) d[i] = zeros(metas[i].first, metas[i].second);
        return d;
    });
}

// enable_gqa: the number of query heads per key/value head (dim -3), 1 when the heads match. PyTorch's
// rule: q, k, v need a head dim, k and v one head count, and q's a multiple of it.
int64_t gqa_group(const Tensor& q, const Tensor& k, const Tensor& v) {
    if (q.dim() < 3 || k.dim() < 3 || v.dim() < 3 || k.size(-3) != v.size(-3) || k.size(-3) == 0 ||
        q.size(-3) % k.size(-3) != 0)
        throw ShapeError(fmt::format("{}: enable_gqa needs q (*,NH,T,HS), k (*,NKV,S,HS), v (*,NKV,S,HSv) with NH a "
                                     "multiple of NKV: q is {}, k is {}, v is {}", kOp, q.describe(), k.describe(),
                                     v.describe()));
    return q.size(-3) / k.size(-3);
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                   const Tensor& attn_mask_in, double dropout_p, bool is_causal,
                                   std::optional<double> scale_opt, bool enable_gqa) {
    Tensor q = q_in, k = k_in, v = v_in, mask = attn_mask_in;
    if (mask.defined() && mask.dtype() != kBool) AMPGRAD_AUTOCAST(kOp, &q, &k, &v, &mask);
    else AMPGRAD_AUTOCAST(kOp, &q, &k, &v);
    ops::check_defined(kOp, q, "query");
    ops::check_defined(kOp, k, "key");
    ops::check_defined(kOp, v, "value");
    const int64_t group = enable_gqa ? gqa_group(q, k, v) : 1;
    // the fused kernels read kv head h / group in place; the other paths repeat K/V, as PyTorch's math path
    bool fused = !mask.defined() && dropout_p == 0.0 && q.dim() == 4 && k.dim() == 4 && v.dim() == 4 &&
                 k.size(0) == q.size(0) && v.size(0) == q.size(0) && k.size(1) * group == q.size(1) &&
                 v.size(1) == k.size(1) && v.size(3) == q.size(3) && q.numel() > 0 && k.numel() > 0;
    if (group > 1 && !(fused && ops::fused_attention_supported(q, k))) {
        k = repeat_interleave(k, group, -3);                                     // (*,NH,S,HS)
        v = repeat_interleave(v, group, -3);                                     // (*,NH,S,HSv)
    }
    check_attention_args(q, k, v, mask, is_causal, dropout_p, group > 1 && k.size(-3) != q.size(-3) ? group : 1);
    const double scale = scale_opt ? *scale_opt : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
    // the cases PyTorch's CPU flash kernel takes (4-d, one batch shape, one head size); the others go
    // to the general path, as PyTorch's go to its math path
    Tensor out;
    if (fused && ops::fused_attention_supported(q, k)) out = ops::fused_attention(q, k, v, is_causal, scale);
    else if (fused) out = attention_math(q, k, v, is_causal, scale);
    else out = attention_general(q, k, v, mask, dropout_p, is_causal, scale);
    return out.numel() == 0 ? empty_output(out, q, k, v) : out;
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool is_causal) {
    return scaled_dot_product_attention(q, k, v, Tensor(), 0.0, is_causal, std::nullopt);
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, std::nullopt_t,
                                   double dropout_p, bool is_causal, std::optional<double> scale, bool enable_gqa) {
    return scaled_dot_product_attention(q, k, v, Tensor(), dropout_p, is_causal, scale, enable_gqa);
}

}  // namespace ampgrad::nn::functional

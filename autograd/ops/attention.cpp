// attention.cpp: scaled dot-product attention as one graph node (the "math" path: the (T,S)
// probabilities are stored, unlike flash attention). Forward and backward are batched GEMMs and
// the softmax kernels over B*NH heads. Derivation: docs/ops/attention.md.
//   S = q k^T / sqrt(HS) (+ causal mask);  P = softmax(S);  O = P v
//   dv = P^T dO;  dP = dO v^T;  dS = P * (dP - rowsum(dP * P));  dq = dS k / sqrt(HS);  dk = dS^T q / sqrt(HS)
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

void check_attention_args(const Tensor& q, const Tensor& k, const Tensor& v) {
    const char* op = "scaled_dot_product_attention";
    ops::check_defined(op, q, "query");
    ops::check_defined(op, k, "key");
    ops::check_defined(op, v, "value");
    ops::check_same_device(op, {&q, &k, &v});
    ops::check_floating(op, q);
    if (k.dtype() != q.dtype() || v.dtype() != q.dtype())
        throw DTypeError(fmt::format("{}: dtypes differ: q is {}, k is {}, v is {}; expected one dtype", op,
                                     q.describe(), k.describe(), v.describe()));
    bool ok = q.dim() == 4 && k.dim() == 4 && v.dim() == 4;
    ok = ok && k.size(0) == q.size(0) && v.size(0) == q.size(0) && k.size(1) == q.size(1) && v.size(1) == q.size(1);
    ok = ok && k.size(3) == q.size(3) && v.size(2) == k.size(2);
    if (!ok)
        throw ShapeError(fmt::format("{}: shapes do not fit: q is {}, k is {}, v is {}; expected q (B,NH,T,HS), "
                                     "k (B,NH,S,HS), v (B,NH,S,HSv)", op, q.describe(), k.describe(), v.describe()));
}

// (B,NH,T,X) -> contiguous (B*NH,T,X), no autograd
Tensor fold_heads(const Tensor& t) {
    NoGradGuard no_grad;
    return t.contiguous().view({t.size(0) * t.size(1), t.size(2), t.size(3)});
}

// scores (BH,T,S) = -inf where key j comes after query i (the top-left aligned causal mask)
void apply_causal_mask(const Tensor& scores) {
    const int64_t T = scores.size(1), S = scores.size(2);
    Tensor future = make_empty({T, S}, kBool, Device(kCPU));                    // (T,S)
    bool* f = future.data_ptr<bool>();
    for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < S; ++j) f[i * S + j] = j > i;
    if (!scores.device().is_cpu()) {
        NoGradGuard no_grad;
        future = future.to(scores.device());
    }
    Tensor minus_inf = ops::wrapped_scalar(-INFINITY, scores);
    backend_of(scores).where(scores, ops::expand_raw(future, scores.sizes()),
                             ops::expand_raw(minus_inf, scores.sizes()), scores);
}

}  // namespace

// q (B,NH,T,HS), k (B,NH,S,HS), v (B,NH,S,HSv) -> (B,NH,T,HSv)
Tensor scaled_dot_product_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, bool is_causal) {
    Tensor q = q_in, k = k_in, v = v_in;
    AMPGRAD_AUTOCAST("scaled_dot_product_attention", &q, &k, &v);
    check_attention_args(q, k, v);
    const int64_t B = q.size(0), NH = q.size(1), T = q.size(2), HS = q.size(3), S = k.size(2), HSv = v.size(3);
    const double scale = 1.0 / std::sqrt(static_cast<double>(HS));
    // Fast path: the fused kernel saves the log-sum-exp, not the probabilities, and builds no mask.
    if (ops::fused_attention_supported(q, k)) return ops::fused_attention(q, k, v, is_causal, scale);
    Backend& be = backend_of(q);

    Tensor qf = fold_heads(q), kf = fold_heads(k), vf = fold_heads(v);         // (BH,T,HS) (BH,S,HS) (BH,S,HSv)
    Tensor scores = make_empty({B * NH, T, S}, q.dtype(), q.device());          // (BH,T,S)
    be.gemm(scores, qf, kf, false, true, scale, 0.0);                          // q k^T / sqrt(HS)
    if (is_causal) apply_causal_mask(scores);
    Tensor probs = make_empty(scores.sizes(), q.dtype(), q.device());           // (BH,T,S)
    be.softmax(probs, scores, false);
    Tensor out = make_empty({B * NH, T, HSv}, q.dtype(), q.device());           // (BH,T,HSv)
    be.gemm(out, probs, vf, false, false, 1.0, 0.0);
    {
        NoGradGuard no_grad;
        out = out.view({B, NH, T, HSv});                                        // (B,NH,T,HSv)
    }

    return record("scaled_dot_product_attention", out, {q, k, v}, {q, k, v, probs},
                  [scale](BackwardContext& ctx, const tensor_list& g) {
        if (GradMode::is_enabled())
            throw AutogradError("scaled_dot_product_attention: double backward (create_graph=True) is not supported");
        Tensor qf = fold_heads(ctx.saved(0)), kf = fold_heads(ctx.saved(1)), vf = fold_heads(ctx.saved(2));
        Tensor probs = ctx.saved(3);                                            // (BH,T,S)
        Tensor dout = fold_heads(g[0].dtype() == qf.dtype() ? g[0] : g[0].to(qf.dtype()));   // (BH,T,HSv)
        Backend& be = backend_of(qf);
        tensor_list d(3);
        if (ctx.needs_input_grad(2)) {
            d[2] = make_empty(vf.sizes(), vf.dtype(), vf.device());             // (BH,S,HSv)
            be.gemm(d[2], probs, dout, true, false, 1.0, 0.0);                  // dv = P^T dO
        }
        if (ctx.needs_input_grad(0) || ctx.needs_input_grad(1)) {
            Tensor dprobs = make_empty(probs.sizes(), probs.dtype(), probs.device());    // (BH,T,S)
            be.gemm(dprobs, dout, vf, false, true, 1.0, 0.0);                   // dP = dO v^T
            Tensor dscores = make_empty(probs.sizes(), probs.dtype(), probs.device());   // (BH,T,S)
            be.softmax_backward(dscores, probs, dprobs, false);                 // dS
            if (ctx.needs_input_grad(0)) {
                d[0] = make_empty(qf.sizes(), qf.dtype(), qf.device());         // (BH,T,HS)
                be.gemm(d[0], dscores, kf, false, false, scale, 0.0);           // dq = dS k / sqrt(HS)
            }
            if (ctx.needs_input_grad(1)) {
                d[1] = make_empty(kf.sizes(), kf.dtype(), kf.device());         // (BH,S,HS)
                be.gemm(d[1], dscores, qf, true, false, scale, 0.0);            // dk = dS^T q / sqrt(HS)
            }
        }
        for (size_t i = 0; i < 3; ++i)                                          // (BH,X,Y) -> (B,NH,X,Y)
            if (d[i].defined()) d[i] = d[i].view(ctx.input_meta(i).shape);
        return d;
    });
}

}  // namespace ampgrad::nn::functional

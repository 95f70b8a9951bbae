// rotary.cpp: rotary position embeddings, F::apply_rotary_emb(x, cos, sin) = x cos + R(x) sin, fused
// into one kernel pass (kernels::rotary_embedding). R turns each pair (x1, x2) of a row into
// (-x2, x1): the pairs are (j, j + HS/2) in Hugging Face's rotate_half layout, (2i, 2i+1) in the
// interleaved one of Meta's original code. R is linear with R^T = -R, so the backward is the same
// kernel in its transpose form, and the transpose's backward is the forward again: one recursive
// function serves every order of derivative. Derivation: docs/ops/rotary.md.
#include "autograd/ops/autocast_hook.hpp"
#include "autograd/ops/op_utils.hpp"
#include "autograd/ops/ops.hpp"
#include "autograd/record.hpp"

namespace ampgrad::nn::functional {

using autograd::BackwardContext;
using autograd::record;

namespace {

void check_rotary_args(const Tensor& x, const Tensor& cos, const Tensor& sin) {
    ops::check_defined("apply_rotary_emb", x, "x");
    ops::check_defined("apply_rotary_emb", cos, "cos");
    ops::check_defined("apply_rotary_emb", sin, "sin");
    ops::check_same_device("apply_rotary_emb", {&x, &cos, &sin});
    for (const Tensor* t : {&x, &cos, &sin}) ops::check_floating("apply_rotary_emb", *t);
    if (x.dim() == 0 || x.size(-1) % 2 != 0)
        throw ShapeError(fmt::format("apply_rotary_emb: x must be (*,HS) with HS even, got {}", x.describe()));
    for (auto [t, arg] : {std::pair{&cos, "cos"}, std::pair{&sin, "sin"}}) {
        if (ops::broadcast_shapes("apply_rotary_emb", x, *t) != x.sizes() || t->dim() == 0 || t->size(-1) != x.size(-1))
            throw ShapeError(fmt::format("apply_rotary_emb: {} {} must broadcast to x {} and hold HS = {} values per "
                                         "position (for x (B,NH,T,HS), pass cos as (B,1,T,HS) or (T,HS))",
                                         arg, t->describe(), x.describe(), x.size(-1)));
    }
    if (cos.dtype() != sin.dtype())
        throw DTypeError(fmt::format("apply_rotary_emb: cos and sin must share a dtype: cos is {}, sin is {}",
                                     cos.describe(), sin.describe()));
}

// out = x cos + R(x) sin, or x cos + R^T(x sin) when `transpose`; x, cos, sin share one dtype.
Tensor rotary(const Tensor& x, const Tensor& cos, const Tensor& sin, bool interleaved, bool transpose);

// R(v): the pair rotation alone, from differentiable ops (only the tables' gradient needs it). Not the
// kernel with cos 0: that would multiply an infinite v by 0.
Tensor rotate(const Tensor& v, bool interleaved) {
    const int64_t half = v.size(-1) / 2;
    if (!interleaved) return cat({-narrow(v, -1, half, half), narrow(v, -1, 0, half)}, -1);   // (*,HS)
    Shape pairs = v.sizes();
    pairs.back() = half;
    pairs.push_back(2);
    Tensor p = reshape(v, pairs);                                                            // (*,HS/2,2)
    return reshape(stack({-select(p, -1, 1), select(p, -1, 0)}, -1), v.sizes());           // (*,HS)
}

Tensor rotary(const Tensor& x, const Tensor& cos, const Tensor& sin, bool interleaved, bool transpose) {
    Tensor out = make_empty(x.sizes(), x.dtype(), x.device());                                       // (*,HS)
    kernels::rotary_embedding(out, x, ops::expand_raw(cos, x.sizes()), ops::expand_raw(sin, x.sizes()), interleaved,
                              transpose);
    return record("apply_rotary_emb", out, {x, cos, sin}, {x, cos, sin},
                  [interleaved, transpose](BackwardContext& ctx, const tensor_list& g) {
        Tensor x = ctx.saved(0), cos = ctx.saved(1), sin = ctx.saved(2);
        tensor_list d(3);
        // <g, x c + R(x) s> = <g c - R(g s), x>: the transpose form, and the transpose's adjoint is the forward
        if (ctx.needs_input_grad(0)) d[0] = rotary(g[0], cos, sin, interleaved, !transpose);
        if (ctx.needs_input_grad(1)) d[1] = g[0] * x;                              // summed to cos's shape
        if (ctx.needs_input_grad(2))                                               // by the engine
            d[2] = transpose ? x * rotate(g[0], interleaved) : g[0] * rotate(x, interleaved);
        return d;
    });
}

}  // namespace

Tensor apply_rotary_emb(const Tensor& x_in, const Tensor& cos_in, const Tensor& sin_in, bool interleaved) {
    Tensor x = x_in, cos = cos_in, sin = sin_in;
    AMPGRAD_AUTOCAST("apply_rotary_emb", &x, &cos, &sin);
    check_rotary_args(x, cos, sin);
    DType dtype = ops::result_type(x, cos);                    // normal promotion, as x * cos would give
    return rotary(to_dtype(x, dtype), to_dtype(cos, dtype), to_dtype(sin, dtype), interleaved, false);
}

}  // namespace ampgrad::nn::functional

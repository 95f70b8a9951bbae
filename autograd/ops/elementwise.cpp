// elementwise.cpp: arithmetic, pow/exp/log family, clamp, where, maximum/minimum, comparisons.
// Each op's backward sits beside its forward. Broadcasting backward needs no code here: the
// engine sums a gradient down to its input's shape (and casts to its dtype) in validate_grads.
// Derivations: docs/ops/elementwise.md.
// Shapes: every op here returns the broadcast shape of its inputs, (*) op (*) -> (*), so lines carry
// no shape comments (docs/notation.md).
#include <cmath>

#include "autograd/ops/autocast_hook.hpp"
#include "autograd/ops/op_utils.hpp"
#include "autograd/ops/ops.hpp"
#include "autograd/record.hpp"

namespace ampgrad {

using autograd::BackwardContext;
using autograd::record;
using ops::binary_raw;
using ops::unary_raw;

namespace {

// tensor (op) scalar, or scalar (op) tensor, for a floating tensor: the scalar is kept in the
// compute type (fp32 for f16/bf16) instead of being rounded to the tensor's dtype first, as
// PyTorch's opmath scalars are (x_f16 * 0.1 rounds once). Integer tensors take the 0-dim path.
// Callers have checked that `a` is defined (they look at its dtype first).
Tensor scalar_raw(BinaryOp op, const Tensor& a, double s, bool scalar_first) {
    Tensor out = make_empty(a.sizes(), a.dtype(), a.device());
    kernels::binary_scalar(op, out, a, s, scalar_first);
    return out;
}

// Ops like exp/log on integer tensors compute in float32 (PyTorch's int -> float promotion).
Tensor float_input(const Tensor& x) { return is_floating(x.dtype()) ? x : to_dtype(x, kFloat32); }

}  // namespace

// ---- add / sub: d(a + alpha*b) = (g, alpha*g) ----
Tensor add(const Tensor& a, const Tensor& b, double alpha) {
    ops::check_defined("add", a, "a");
    ops::check_defined("add", b, "b");
    ops::check_same_device("add", {&a, &b});
    Shape shape = ops::broadcast_shapes("add", a, b);
    DType dt = ops::result_type(a, b);
    Tensor out = make_empty(shape, dt, a.device());
    kernels::add_scaled(out, ops::expand_raw(ops::cast_raw(a, dt), shape),
                        ops::expand_raw(ops::cast_raw(b, dt), shape), alpha);
    return record("add", out, {a, b}, {}, [alpha](BackwardContext& ctx, const tensor_list& g) {
        tensor_list d(2);
        if (ctx.needs_input_grad(0)) d[0] = g[0];
        if (ctx.needs_input_grad(1)) d[1] = alpha == 1.0 ? g[0] : g[0] * alpha;
        return d;
    });
}

Tensor sub(const Tensor& a, const Tensor& b, double alpha) { return add(a, b, -alpha); }
// x + s and x - s: PyTorch rounds s to x's dtype first (its add kernel reads the scalar after
// TensorIterator cast it to the common dtype; mul and div read the original, opmath scalar). So f16
// `x + 1e5` adds inf (NaN at x = -inf), and f16 `1 + 0.00048829` is 1 (s rounds to 2^-11, a tie).
Tensor add(const Tensor& a, double s) {
    ops::check_defined("add", a, "input");
    if (!is_floating(a.dtype())) return add(a, ops::wrapped_scalar(s, a));
    Tensor out = scalar_raw(BinaryOp::kAdd, a, round_to_dtype(s, a.dtype()), false);
    return record("add", out, {a}, {}, [](BackwardContext&, const tensor_list& g) { return tensor_list{g[0]}; });
}

// ---- mul: d(a*b) = (g*b, g*a) ----
Tensor mul(const Tensor& a, const Tensor& b) {
    Tensor out = binary_raw(BinaryOp::kMul, "mul", a, b);
    return record("mul", out, {a, b}, {a, b}, [](BackwardContext& ctx, const tensor_list& g) {
        tensor_list d(2);
        if (ctx.needs_input_grad(0)) d[0] = g[0] * ctx.saved(1);
        if (ctx.needs_input_grad(1)) d[1] = g[0] * ctx.saved(0);
        return d;
    });
}

Tensor mul(const Tensor& a, double s) {
    ops::check_defined("mul", a, "input");
    Tensor out = is_floating(a.dtype()) ? scalar_raw(BinaryOp::kMul, a, s, false)
                                        : binary_raw(BinaryOp::kMul, "mul", a, ops::wrapped_scalar(s, a));
    return record("mul", out, {a}, {}, [s](BackwardContext&, const tensor_list& g) {
        return tensor_list{g[0] * s};
    });
}

// ---- div: d(a/b) = (g/b, -g*a/b^2) ----
Tensor div(const Tensor& a, const Tensor& b) {
    Tensor out = binary_raw(BinaryOp::kDiv, "div", a, b);
    return record("div", out, {a, b}, {a, b}, [](BackwardContext& ctx, const tensor_list& g) {
        tensor_list d(2);
        Tensor b = ctx.saved(1);
        if (ctx.needs_input_grad(0)) d[0] = g[0] / b;
        // -g ((a / b) / b), PyTorch's div_tensor_other_backward (FunctionsManual.cpp), not -g a / b^2:
        // b * b overflows, and at b = +-0 or +-inf it turns the second derivative's 0 * inf into NaN
        // where PyTorch has a signed 0 or inf. Kept broadcast until the engine sums it, so an empty a
        // with a NaN b gives 0.
        if (ctx.needs_input_grad(1)) d[1] = -g[0] * ((ctx.saved(0) / b) / b);
        return d;
    });
}

// a / s (d: g / s) and s / a (d: -g * s / a^2 = -g * out / a)
Tensor div(const Tensor& a, double s) {
    ops::check_defined("div", a, "input");
    if (!is_floating(a.dtype())) return div(a, ops::wrapped_scalar(s, a));
    Tensor out = scalar_raw(BinaryOp::kDiv, a, s, false);
    return record("div", out, {a}, {}, [s](BackwardContext&, const tensor_list& g) { return tensor_list{g[0] / s}; });
}

// s / a is reciprocal(a) * s, as in libtorch (two roundings, like PyTorch's own results).
Tensor div(double s, const Tensor& a) { return reciprocal(a) * s; }

// s - a (d: -g). Here PyTorch does round s to a's dtype first (the scalar is the first operand,
// filled into a tensor of a's dtype), so `0.1 - x_f16` rounds 0.1 to f16: we do the same.
Tensor rsub(const Tensor& a, double s) {
    ops::check_defined("rsub", a, "input");
    if (!is_floating(a.dtype())) return add(neg(a), s);
    Tensor out = scalar_raw(BinaryOp::kSub, a, round_to_dtype(s, a.dtype()), true);
    return record("rsub", out, {a}, {}, [](BackwardContext&, const tensor_list& g) { return tensor_list{-g[0]}; });
}

Tensor neg(const Tensor& a) {
    Tensor out = unary_raw(UnaryOp::kNeg, a);
    return record("neg", out, {a}, {}, [](BackwardContext&, const tensor_list& g) { return tensor_list{-g[0]}; });
}

// ---- pow: d(a^e) = e * a^(e-1) * g ----
namespace {

// a^e for a floating tensor and a C++ double e, with PyTorch's CPU special cases (pow_tensor_scalar_kernel
// in aten/src/ATen/native/cpu/PowKernel.cpp): for f32, f64 and bf16, e = 0.5, -0.5 and -1 are sqrt,
// rsqrt and reciprocal, and e = 2, 3 and -2 (after rounding e to bf16 for bf16) are x*x, x*x*x and
// 1/(x*x). These differ from std::pow at the edges: pow(-inf, 0.5) is NaN, not inf, and
// pow(-0, -0.5) is -inf, not inf. f16 takes std::pow for every e, with e rounded to f16, as there.
Tensor pow_scalar_raw(const Tensor& x, double e) {
    DType dt = x.dtype();
    if (dt == kFloat32 || dt == kFloat64 || dt == kBFloat16) {
        if (e == 0.5) return unary_raw(UnaryOp::kSqrt, x);
        if (e == -0.5) return unary_raw(UnaryOp::kRsqrt, x);
        if (e == -1.0) return unary_raw(UnaryOp::kReciprocal, x);
        double rounded = round_to_dtype(e, dt);
        if (rounded == 2.0) return unary_raw(UnaryOp::kSquare, x);
        if (rounded == 3.0) return binary_raw(BinaryOp::kMul, "pow", unary_raw(UnaryOp::kSquare, x), x);
        if (rounded == -2.0) return unary_raw(UnaryOp::kReciprocal, unary_raw(UnaryOp::kSquare, x));
    }
    return binary_raw(BinaryOp::kPow, "pow", x, ops::wrapped_scalar(e, x));
}

}  // namespace

// d = g * (e * a^(e-1)), grouped as PyTorch's pow_backward (FunctionsManual.cpp) so that low-precision
// rounding and inf/NaN come out alike; a^(e-1) takes the same special cases as the forward.
Tensor pow(const Tensor& a_in, double e) {
    Tensor a = a_in;
    AMPGRAD_AUTOCAST("pow", &a);
    Tensor x = float_input(a);
    Tensor out = pow_scalar_raw(x, e);
    return record("pow", out, {x}, {x}, [e](BackwardContext& ctx, const tensor_list& g) {
        if (e == 0.0) return tensor_list{zeros_like(g[0])};
        return tensor_list{g[0] * (pow(ctx.saved(0), e - 1.0) * e)};
    });
}

// d(a^e)/da = e * a^(e-1), taken as 0 where e == 0 (so 0^0 has no inf*0 = nan)
// d(a^e)/de = a^e * log(a), taken as 0 where a == 0 and e >= 0 (PyTorch's convention); log(a) is
// taken in the result's dtype, so a bf16 base with an f64 exponent gets an f64 log, as in PyTorch.
// Both grouped as pow_backward_self / pow_backward_exponent: g * (e * a^(e-1)), g * (a^e log a).
Tensor pow(const Tensor& a_in, const Tensor& e_in) {
    Tensor a = a_in, e = e_in;
    AMPGRAD_AUTOCAST("pow", &a, &e);
    Tensor out = binary_raw(BinaryOp::kPow, "pow", a, e);
    return record("pow", out, {a, e}, {a, e, out}, [](BackwardContext& ctx, const tensor_list& g) {
        tensor_list d(2);
        Tensor base = ctx.saved(0), expo = ctx.saved(1);
        if (ctx.needs_input_grad(0))
            d[0] = where(ne(expo, ops::wrapped_scalar(0.0, expo)), g[0] * (expo * pow(base, expo - 1.0)), 0.0);
        if (ctx.needs_input_grad(1)) {                     // log in the promoted dtype (pow_backward_exponent)
            Tensor result = ctx.saved(2);
            Tensor term = result * log(base.dtype() == result.dtype() ? base : to_dtype(base, result.dtype()));
            Tensor zero_base = eq(base, zeros_like(base)) & ge(expo, zeros_like(expo));
            d[1] = g[0] * where(logical_not(zero_base), term, 0.0);
        }
        return d;
    });
}

// s^e for a double s: PyTorch's pow(Scalar, Tensor). The value rounds s to e's dtype (a wrapped
// scalar), but the gradient g * (s^e * log(s)) takes log(s) of the double s, as a Scalar, and
// multiplies by it in the compute type (pow_backward_exponent with a Scalar base); at s = 0 it is 0
// where e >= 0. s = 1 gives ones, as PyTorch's pow_out does.
Tensor pow(double base, const Tensor& e_in) {
    ops::check_defined("pow", e_in, "exponent");
    Tensor e = e_in;
    AMPGRAD_AUTOCAST("pow", &e);
    Tensor out = base == 1.0 ? ones_like(e, TensorOptions(ops::result_type(ops::wrapped_scalar(base, e), e)).device(e.device()))
                             : binary_raw(BinaryOp::kPow, "pow", ops::wrapped_scalar(base, e), e);
    return record("pow", out, {e}, {out, e}, [base](BackwardContext& ctx, const tensor_list& g) {
        Tensor term = ctx.saved(0) * std::log(base);
        if (base == 0.0) term = where(logical_not(ge(ctx.saved(1), zeros_like(ctx.saved(1)))), term, 0.0);
        return tensor_list{g[0] * term};
    });
}

// ---- exp / log / sqrt / rsqrt / abs / square / reciprocal ----
Tensor exp(const Tensor& a_in) {
    Tensor a = a_in;
    AMPGRAD_AUTOCAST("exp", &a);
    Tensor x = float_input(a);
    Tensor out = unary_raw(UnaryOp::kExp, x);
    return record("exp", out, {x}, {out}, [](BackwardContext& ctx, const tensor_list& g) {
        return tensor_list{g[0] * ctx.saved(0)};
    });
}

Tensor log(const Tensor& a_in) {
    Tensor a = a_in;
    AMPGRAD_AUTOCAST("log", &a);
    Tensor x = float_input(a);
    Tensor out = unary_raw(UnaryOp::kLog, x);
    return record("log", out, {x}, {x}, [](BackwardContext& ctx, const tensor_list& g) {
        return tensor_list{g[0] / ctx.saved(0)};
    });
}

Tensor sqrt(const Tensor& a) {
    Tensor x = float_input(a);
    Tensor out = unary_raw(UnaryOp::kSqrt, x);
    return record("sqrt", out, {x}, {out}, [](BackwardContext& ctx, const tensor_list& g) {
        return tensor_list{g[0] / (ctx.saved(0) * 2.0)};
    });
}

// d rsqrt(x) = -0.5 * x^(-3/2) = -0.5 * out^3
Tensor rsqrt(const Tensor& a_in) {
    Tensor a = a_in;
    AMPGRAD_AUTOCAST("rsqrt", &a);
    Tensor x = float_input(a);
    Tensor out = unary_raw(UnaryOp::kRsqrt, x);
    return record("rsqrt", out, {x}, {out}, [](BackwardContext& ctx, const tensor_list& g) {
        return tensor_list{(g[0] * -0.5) * pow(ctx.saved(0), 3.0)};   // derivatives.yaml's grouping
    });
}

Tensor abs(const Tensor& a) {
    Tensor out = unary_raw(UnaryOp::kAbs, a);
    return record("abs", out, {a}, {a}, [](BackwardContext& ctx, const tensor_list& g) {
        return tensor_list{g[0] * unary_raw(UnaryOp::kSign, ctx.saved(0))};
    });
}

Tensor square(const Tensor& a) {
    Tensor out = unary_raw(UnaryOp::kSquare, a);
    return record("square", out, {a}, {a}, [](BackwardContext& ctx, const tensor_list& g) {
        return tensor_list{g[0] * ctx.saved(0) * 2.0};
    });
}

Tensor reciprocal(const Tensor& a_in) {
    Tensor a = a_in;
    AMPGRAD_AUTOCAST("reciprocal", &a);
    Tensor x = float_input(a);
    Tensor out = unary_raw(UnaryOp::kReciprocal, x);
    return record("reciprocal", out, {x}, {out}, [](BackwardContext& ctx, const tensor_list& g) {
        Tensor y = ctx.saved(0);
        return tensor_list{-g[0] * (y * y)};                // PyTorch's grouping: y * y may overflow to inf
    });
}

// ---- clamp: min(max(x, lo), hi) ----
// Gradient: g where lo < x < hi strictly, else 0; so 0 exactly at a bound, at NaN, and everywhere
// if lo > hi. This is PyTorch 2.x's clamp_backward (tools/autograd/derivatives.yaml; checked
// against torch 2.15 by tests/fixtures/edge_clamp_at_bound.json). The bounds are compared in x's
// dtype, as a Python scalar would be. An integer x with a fractional bound computes in f32 (PyTorch's
// result_type of an int tensor and a float scalar); a missing bound is +-inf, not +-FLT_MAX.
Tensor clamp(const Tensor& a_in, std::optional<double> lo, std::optional<double> hi) {
    ops::check_defined("clamp", a_in, "input");
    if (!lo && !hi) throw ValueError(fmt::format("clamp: at least one of min or max must be given ({})", a_in.describe()));
    auto integral = [](std::optional<double> v) { return !v || *v == std::trunc(*v); };
    Tensor a = is_floating(a_in.dtype()) || (integral(lo) && integral(hi)) ? a_in : to_dtype(a_in, kFloat32);
    Tensor out = make_empty(a.sizes(), a.dtype(), a.device());
    kernels::clamp(out, a, lo, hi);
    return record("clamp", out, {a}, {a}, [lo, hi](BackwardContext& ctx, const tensor_list& g) {
        Tensor x = ctx.saved(0);
        Tensor keep = ones_like(x, TensorOptions(kBool).device(x.device()));
        if (lo) keep = keep & gt(x, ops::wrapped_scalar(*lo, x));
        if (hi) keep = keep & lt(x, ops::wrapped_scalar(*hi, x));
        return tensor_list{where(keep, g[0], 0.0)};
    });
}

// ---- where: gradient goes to the branch that was taken ----
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
    ops::check_defined("where", cond, "condition");
    ops::check_defined("where", a, "a");
    ops::check_defined("where", b, "b");
    ops::check_same_device("where", {&cond, &a, &b});
    if (cond.dtype() != kBool)
        throw DTypeError(fmt::format("where: condition must be bool but got {}", cond.describe()));
    Shape shape = ops::broadcast_shapes("where", ops::broadcast_shapes("where", cond, a), b.sizes());
    DType dt = ops::result_type(a, b);
    Tensor out = make_empty(shape, dt, a.device());
    kernels::where(out, ops::expand_raw(cond, shape), ops::expand_raw(ops::cast_raw(a, dt), shape),
                   ops::expand_raw(ops::cast_raw(b, dt), shape));
    return record("where", out, {a, b}, {cond}, [](BackwardContext& ctx, const tensor_list& g) {
        tensor_list d(2);
        Tensor c = ctx.saved(0);
        if (ctx.needs_input_grad(0)) d[0] = where(c, g[0], 0.0);
        if (ctx.needs_input_grad(1)) d[1] = where(c, zeros_like(g[0]), g[0]);
        return d;
    });
}

Tensor where(const Tensor& cond, const Tensor& a, double b) { return where(cond, a, ops::wrapped_scalar(b, a)); }

// ---- maximum / minimum: the winner gets the gradient, ties split it in half, as in PyTorch ----
// (Where either is NaN both "win": neither is masked out.)
namespace {
Tensor extremum(BinaryOp op, std::string_view name, const Tensor& a, const Tensor& b) {
    Tensor out = binary_raw(op, name, a, b);
    return record(name, out, {a, b}, {a, b}, [op](BackwardContext& ctx, const tensor_list& g) {
        Tensor x = ctx.saved(0), y = ctx.saved(1);
        Tensor shared = where(eq(x, y), g[0] * 0.5, g[0]);
        Tensor a_loses = op == BinaryOp::kMaximum ? lt(x, y) : gt(x, y);
        Tensor b_loses = op == BinaryOp::kMaximum ? gt(x, y) : lt(x, y);
        tensor_list d(2);
        if (ctx.needs_input_grad(0)) d[0] = where(logical_not(a_loses), shared, 0.0);
        if (ctx.needs_input_grad(1)) d[1] = where(logical_not(b_loses), shared, 0.0);
        return d;
    });
}
}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) { return extremum(BinaryOp::kMaximum, "maximum", a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return extremum(BinaryOp::kMinimum, "minimum", a, b); }

// ---- comparisons and logic (not differentiable) ----
Tensor eq(const Tensor& a, const Tensor& b) { return binary_raw(BinaryOp::kEq, "eq", a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return binary_raw(BinaryOp::kNe, "ne", a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return binary_raw(BinaryOp::kLt, "lt", a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return binary_raw(BinaryOp::kLe, "le", a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return binary_raw(BinaryOp::kGt, "gt", a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return binary_raw(BinaryOp::kGe, "ge", a, b); }
Tensor logical_not(const Tensor& a) {
    Tensor out = make_empty(a.sizes(), kBool, a.device());
    kernels::unary(UnaryOp::kLogicalNot, out, a);
    return out;
}
Tensor operator&(const Tensor& a, const Tensor& b) { return binary_raw(BinaryOp::kLogicalAnd, "logical_and", a, b); }
Tensor operator|(const Tensor& a, const Tensor& b) { return binary_raw(BinaryOp::kLogicalOr, "logical_or", a, b); }

Tensor isfinite(const Tensor& a) {
    if (!is_floating(a.dtype())) return ones_like(a, TensorOptions(kBool).device(a.device()));
    Tensor d = binary_raw(BinaryOp::kSub, "isfinite", a.detach(), a.detach());   // inf-inf and nan give nan
    return eq(d, d);
}

bool equal(const Tensor& a, const Tensor& b) {
    if (a.sizes() != b.sizes() || a.dtype() != b.dtype()) return false;
    NoGradGuard no_grad;
    Tensor same = eq(a, b) | (ne(a, a) & ne(b, b));                       // NaN == NaN here
    return logical_not(same).to(kFloat64).sum().item<double>() == 0.0;
}

// |a - b| <= atol + rtol |b| elementwise, as torch.allclose: NaN is never close; infinities only to themselves.
bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
    NoGradGuard no_grad;
    Tensor x = a.to(kFloat64), y = b.to(kFloat64);
    Tensor error = abs(x - y);
    Tensor close = eq(x, y) | (isfinite(error) & le(error, abs(y) * rtol + atol));
    return logical_not(close).to(kFloat64).sum().item<double>() == 0.0;
}

// ---- operators ----
Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& a) { return neg(a); }
Tensor operator+(const Tensor& a, double s) { return add(a, s); }
Tensor operator-(const Tensor& a, double s) { return add(a, -s); }
Tensor operator*(const Tensor& a, double s) { return mul(a, s); }
Tensor operator/(const Tensor& a, double s) { return div(a, s); }
Tensor operator+(double s, const Tensor& a) { return add(a, s); }
Tensor operator-(double s, const Tensor& a) { return rsub(a, s); }
Tensor operator*(double s, const Tensor& a) { return mul(a, s); }
Tensor operator/(double s, const Tensor& a) { return div(s, a); }
Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
// The tensor-scalar comparisons and compound assignments: scalar_forms.cpp.

}  // namespace ampgrad

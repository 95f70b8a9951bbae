// math.cpp: the elementwise math a model writer reaches for beyond elementwise.cpp: sin, cos, exp2,
// log1p, expm1, erf; the piecewise constant sign, floor, ceil, round, trunc; fmod, remainder, atan2,
// lerp; and logical and/or/xor. Each op's backward sits beside its forward, written with
// differentiable ops so that double backward needs no extra code; the gradients follow PyTorch's
// tools/autograd/derivatives.yaml. The formulas are kernels/scalar_math.hpp's. Derivations and the
// PyTorch rules: docs/ops/math.md.
// Shapes: every op here returns the broadcast shape of its inputs, (*) op (*) -> (*).
#include <cmath>
#include <numbers>

#include "autograd/grad_mode.hpp"
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

// Integer and bool tensors compute in f32 (PyTorch's int -> float promotion for these ops).
Tensor float_input(const Tensor& x) { return is_floating(x.dtype()) ? x : to_dtype(x, kFloat32); }

// One of the smooth unary ops: autocast, promote integers, the kernel, and record `backward`.
template <typename Backward>
Tensor smooth_unary(UnaryOp op, const Tensor& a_in, bool save_output, Backward backward) {
    Tensor a = a_in;
    ops::check_defined(op_name(op), a, "input");
    AMPGRAD_AUTOCAST(op_name(op), &a);
    Tensor x = float_input(a);
    Tensor out = unary_raw(op, x);
    return record(op_name(op), out, {x}, {save_output ? out : x}, backward);
}

// sign, floor, ceil, round, trunc: the gradient is 0 everywhere (PyTorch: zeros_like(grad)).
// Integer tensors are already whole: floor/ceil/round/trunc return a copy, sign keeps the dtype.
Tensor piecewise_constant(UnaryOp op, const Tensor& a_in) {
    Tensor a = a_in;
    ops::check_defined(op_name(op), a, "input");
    AMPGRAD_AUTOCAST(op_name(op), &a);
    if (a.dtype() == kBool)
        throw DTypeError(fmt::format("{}: not supported for bool tensor {}", op_name(op), a.describe()));
    Tensor out;
    if (is_floating(a.dtype()) || op == UnaryOp::kSign) {
        out = unary_raw(op, a);
    } else {
        out = make_empty(a.sizes(), a.dtype(), a.device());
        kernels::copy(out, a);
    }
    return record(op_name(op), out, {a}, {}, [](BackwardContext&, const tensor_list& g) {
        return tensor_list{zeros_like(g[0])};
    });
}

// An integer fmod/remainder by 0 has no value; PyTorch's CPU kernel raises ZeroDivisionError.
void check_integer_divisor(std::string_view op, const Tensor& a, const Tensor& b) {
    if (is_floating(ops::result_type(a, b))) return;
    NoGradGuard no_grad;
    Tensor zeros = eq(b, zeros_like(b));
    if (zeros.to(kInt64).sum().item<int64_t>() != 0)
        throw ValueError(fmt::format("{}: integer division by zero: the divisor {} holds a 0", op, b.describe()));
}

// a / b rounded down, as PyTorch's div(rounding_mode="floor") computes it (div_floor_floating in
// c10/util/generic_math.h): from fmod, so an infinite a gives NaN (where floor(a / b) would be inf).
Tensor floor_quotient(const Tensor& a, const Tensor& b) {
    Tensor mod = fmod(a, b);
    Tensor quotient = (a - mod) / b;
    Tensor signs_differ = ne(lt(b, zeros_like(b)), lt(mod, zeros_like(mod)));
    quotient = where(ne(mod, zeros_like(mod)) & signs_differ, quotient - 1.0, quotient);
    Tensor down = floor(quotient);
    down = where(gt(quotient - down, ops::wrapped_scalar(0.5, quotient)), down + 1.0, down);
    return where(eq(b, zeros_like(b)), a / b, down);
}

// fmod and remainder: d/da = g, d/db = -g * q with q the quotient a / b rounded (toward 0 for fmod,
// down for remainder), as derivatives.yaml's `-grad * self.div(other, rounding_mode=...)`. The rounded
// quotient is piecewise constant: its own derivative is 0 (PyTorch's div with a rounding mode), so it
// is taken without a graph, and double backward sees a constant.
Tensor remainder_op(BinaryOp op, const Tensor& a_in, const Tensor& b_in) {
    Tensor a = a_in, b = b_in;
    std::string_view name = op_name(op);
    ops::check_defined(name, a, "a");
    ops::check_defined(name, b, "b");
    AMPGRAD_AUTOCAST(name, &a, &b);
    if (a.dtype() == kBool && b.dtype() == kBool)
        throw DTypeError(fmt::format("{}: not supported for bool tensors ({}, {})", name, a.describe(), b.describe()));
    check_integer_divisor(name, a, b);
    Tensor out = binary_raw(op, name, a, b);
    return record(name, out, {a, b}, {a, b}, [op](BackwardContext& ctx, const tensor_list& g) {
        tensor_list d(2);
        if (ctx.needs_input_grad(0)) d[0] = g[0];
        if (ctx.needs_input_grad(1)) {
            Tensor quotient;
            {
                // f16/bf16 in f32, as PyTorch's div(rounding_mode=...) rounds once after the trunc or
                // floor: a quotient of 0.9998 rounded to the dtype first would truncate to 1, not 0.
                NoGradGuard no_grad;
                Tensor a = ctx.saved(0), b = ctx.saved(1);
                const DType dtype = ops::result_type(a, b);
                const bool half = dtype == kFloat16 || dtype == kBFloat16;
                if (half) a = a.to(kFloat32), b = b.to(kFloat32);
                quotient = op == BinaryOp::kFmod ? trunc(a / b) : floor_quotient(a, b);
                if (half) quotient = quotient.to(dtype);
            }
            d[1] = -g[0] * quotient;
        }
        return d;
    });
}

// logic: nonzero is true; any two dtypes meet in their promoted dtype first.
Tensor logical(BinaryOp op, const Tensor& a_in, const Tensor& b_in) {
    Tensor a = a_in, b = b_in;
    AMPGRAD_AUTOCAST(op_name(op), &a, &b);
    return binary_raw(op, op_name(op), a, b);
}

}  // namespace

// ---- smooth unary ops ----

// d sin = g cos(x)
Tensor sin(const Tensor& a) {
    return smooth_unary(UnaryOp::kSin, a, false, [](BackwardContext& ctx, const tensor_list& g) {
        return tensor_list{g[0] * cos(ctx.saved(0))};
    });
}

// d cos = g (-sin(x)), PyTorch's grouping
Tensor cos(const Tensor& a) {
    return smooth_unary(UnaryOp::kCos, a, false, [](BackwardContext& ctx, const tensor_list& g) {
        return tensor_list{g[0] * -sin(ctx.saved(0))};
    });
}

// d 2^x = g 2^x ln 2 = g * out * ln 2 (derivatives.yaml: grad * result * M_LN2)
Tensor exp2(const Tensor& a) {
    return smooth_unary(UnaryOp::kExp2, a, true, [](BackwardContext& ctx, const tensor_list& g) {
        return tensor_list{g[0] * ctx.saved(0) * std::numbers::ln2};
    });
}

// d log(1 + x) = g / (x + 1)
Tensor log1p(const Tensor& a) {
    return smooth_unary(UnaryOp::kLog1p, a, false, [](BackwardContext& ctx, const tensor_list& g) {
        return tensor_list{g[0] / (ctx.saved(0) + 1.0)};
    });
}

// d (e^x - 1) = g e^x = g (out + 1)
Tensor expm1(const Tensor& a) {
    return smooth_unary(UnaryOp::kExpm1, a, true, [](BackwardContext& ctx, const tensor_list& g) {
        return tensor_list{g[0] * (ctx.saved(0) + 1.0)};
    });
}

// d erf = g 2/sqrt(pi) exp(-x^2) (derivatives.yaml: 2.0 / sqrt(M_PI) * exp(-(self.pow(2))) * grad)
Tensor erf(const Tensor& a) {
    return smooth_unary(UnaryOp::kErf, a, false, [](BackwardContext& ctx, const tensor_list& g) {
        Tensor x = ctx.saved(0);
        return tensor_list{exp(-square(x)) * std::numbers::inv_sqrtpi * 2.0 * g[0]};
    });
}

// ---- piecewise constant ----
Tensor sign(const Tensor& a) { return piecewise_constant(UnaryOp::kSign, a); }
Tensor floor(const Tensor& a) { return piecewise_constant(UnaryOp::kFloor, a); }
Tensor ceil(const Tensor& a) { return piecewise_constant(UnaryOp::kCeil, a); }
Tensor round(const Tensor& a) { return piecewise_constant(UnaryOp::kRound, a); }
Tensor trunc(const Tensor& a) { return piecewise_constant(UnaryOp::kTrunc, a); }

// ---- remainders ----
Tensor fmod(const Tensor& a, const Tensor& b) { return remainder_op(BinaryOp::kFmod, a, b); }
Tensor remainder(const Tensor& a, const Tensor& b) { return remainder_op(BinaryOp::kRemainder, a, b); }
Tensor fmod(const Tensor& a, double b) {
    ops::check_defined("fmod", a, "a");
    return fmod(a, ops::wrapped_scalar(b, a));
}
Tensor remainder(const Tensor& a, double b) {
    ops::check_defined("remainder", a, "a");
    return remainder(a, ops::wrapped_scalar(b, a));
}

// ---- atan2(a, b): with r = a^2 + b^2, d/da = g b / r, d/db = -g a / r (PyTorch's atan2_backward);
// where r is 0 (the origin, or squares that underflow) 1/r counts as 0, as PyTorch 2.15 gives: 0
// with the signs of g b and -g a, not 0/0 = NaN ----
Tensor atan2(const Tensor& a_in, const Tensor& b_in) {
    Tensor a = a_in, b = b_in;
    ops::check_defined("atan2", a, "a");
    ops::check_defined("atan2", b, "b");
    AMPGRAD_AUTOCAST("atan2", &a, &b);
    if (!is_floating(ops::result_type(a, b))) {        // integers give f32, as in PyTorch
        a = to_dtype(a, kFloat32);
        b = to_dtype(b, kFloat32);
    }
    Tensor out = binary_raw(BinaryOp::kAtan2, "atan2", a, b);
    return record("atan2", out, {a, b}, {a, b}, [](BackwardContext& ctx, const tensor_list& g) {
        Tensor y = ctx.saved(0), x = ctx.saved(1);
        Tensor r = y * y + x * x;
        Tensor inv_r = where(ne(r, zeros_like(r)), reciprocal(r), 0.0);
        tensor_list d(2);
        if (ctx.needs_input_grad(0)) d[0] = g[0] * x * inv_r;
        if (ctx.needs_input_grad(1)) d[1] = g[0] * -y * inv_r;
        return d;
    });
}

// ---- lerp(a, b, w) = a + w (b - a): d/da = g (1 - w), d/db = g w, d/dw = g (b - a) ----
namespace {

void check_lerp_args(const Tensor& start, const Tensor& end, const Tensor& weight) {
    ops::check_defined("lerp", start, "start");
    ops::check_defined("lerp", end, "end");
    ops::check_same_device("lerp", {&start, &end, &weight});
    for (const Tensor* t : {&start, &end, &weight}) {
        if (!t->defined()) continue;
        if (t->dtype() != start.dtype() || !is_floating(t->dtype()))
            throw DTypeError(fmt::format("lerp: start, end and weight must share one floating dtype: start is {}, "
                                         "end is {}, weight is {}", start.describe(), end.describe(),
                                         weight.defined() ? weight.describe() : "a scalar"));
    }
}

// the kernel call; weight undefined means weight_scalar
Tensor lerp_raw(const Tensor& start, const Tensor& end, const Tensor& weight, double weight_scalar) {
    Shape shape = ops::broadcast_shapes("lerp", start, end);
    if (weight.defined()) shape = ops::broadcast_shapes("lerp", shape, weight.sizes());
    Tensor out = make_empty(shape, start.dtype(), start.device());
    kernels::lerp(out, ops::expand_raw(start, shape), ops::expand_raw(end, shape),
                  weight.defined() ? ops::expand_raw(weight, shape) : Tensor(), weight_scalar);
    return out;
}

}  // namespace

Tensor lerp(const Tensor& start_in, const Tensor& end_in, const Tensor& weight_in) {
    Tensor start = start_in, end = end_in, weight = weight_in;
    ops::check_defined("lerp", weight, "weight");
    AMPGRAD_AUTOCAST("lerp", &start, &end, &weight);
    check_lerp_args(start, end, weight);
    Tensor out = lerp_raw(start, end, weight, 0.0);
    return record("lerp", out, {start, end, weight}, {start, end, weight},
                  [](BackwardContext& ctx, const tensor_list& g) {
        Tensor a = ctx.saved(0), b = ctx.saved(1), w = ctx.saved(2);
        tensor_list d(3);
        if (ctx.needs_input_grad(0)) d[0] = g[0] * (1.0 - w);
        if (ctx.needs_input_grad(1)) d[1] = g[0] * w;
        if (ctx.needs_input_grad(2)) d[2] = g[0] * (b - a);
        return d;
    });
}

Tensor lerp(const Tensor& start_in, const Tensor& end_in, double weight) {
    Tensor start = start_in, end = end_in;
    AMPGRAD_AUTOCAST("lerp", &start, &end);
    check_lerp_args(start, end, Tensor());
    Tensor out = lerp_raw(start, end, Tensor(), weight);
    return record("lerp", out, {start, end}, {}, [weight](BackwardContext& ctx, const tensor_list& g) {
        tensor_list d(2);
        if (ctx.needs_input_grad(0)) d[0] = g[0] * (1.0 - weight);
        if (ctx.needs_input_grad(1)) d[1] = g[0] * weight;
        return d;
    });
}

// ---- logic (not differentiable) ----
Tensor logical_and(const Tensor& a, const Tensor& b) { return logical(BinaryOp::kLogicalAnd, a, b); }
Tensor logical_or(const Tensor& a, const Tensor& b) { return logical(BinaryOp::kLogicalOr, a, b); }
Tensor logical_xor(const Tensor& a, const Tensor& b) { return logical(BinaryOp::kLogicalXor, a, b); }

}  // namespace ampgrad

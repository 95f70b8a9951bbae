// scalar_forms.cpp: the libtorch spellings that take a scalar where ops.hpp's core ops take tensors
// (comparisons against a number on either side, where() with number branches, clamp_min/clamp_max)
// and the compound assignments (x += y is x.add_(y)). Each is a one-line forward: the ops and their
// gradients live in elementwise.cpp and inplace.cpp.
#include "autograd/ops/op_utils.hpp"
#include "autograd/ops/ops.hpp"

namespace ampgrad {

// The scalar is a wrapped number (ops::wrapped_scalar): it takes a's dtype and does not promote, so,
// as in PyTorch, an f16 tensor holding f16(0.1) == 0.1.
Tensor eq(const Tensor& a, double s) { return eq(a, ops::wrapped_scalar(s, a)); }
Tensor ne(const Tensor& a, double s) { return ne(a, ops::wrapped_scalar(s, a)); }
Tensor lt(const Tensor& a, double s) { return lt(a, ops::wrapped_scalar(s, a)); }
Tensor le(const Tensor& a, double s) { return le(a, ops::wrapped_scalar(s, a)); }
Tensor gt(const Tensor& a, double s) { return gt(a, ops::wrapped_scalar(s, a)); }
Tensor ge(const Tensor& a, double s) { return ge(a, ops::wrapped_scalar(s, a)); }

Tensor operator==(const Tensor& a, double s) { return eq(a, s); }
Tensor operator!=(const Tensor& a, double s) { return ne(a, s); }
Tensor operator<(const Tensor& a, double s) { return lt(a, s); }
Tensor operator<=(const Tensor& a, double s) { return le(a, s); }
Tensor operator>(const Tensor& a, double s) { return gt(a, s); }
Tensor operator>=(const Tensor& a, double s) { return ge(a, s); }
// s < a is a > s, and so on
Tensor operator==(double s, const Tensor& a) { return eq(a, s); }
Tensor operator!=(double s, const Tensor& a) { return ne(a, s); }
Tensor operator<(double s, const Tensor& a) { return gt(a, s); }
Tensor operator<=(double s, const Tensor& a) { return ge(a, s); }
Tensor operator>(double s, const Tensor& a) { return lt(a, s); }
Tensor operator>=(double s, const Tensor& a) { return le(a, s); }

Tensor& operator+=(Tensor& a, const Tensor& b) { return a.add_(b); }
Tensor& operator+=(Tensor& a, double s) { return a.add_(s); }
Tensor& operator-=(Tensor& a, const Tensor& b) { return a.sub_(b); }
Tensor& operator-=(Tensor& a, double s) { return a.sub_(s); }
Tensor& operator*=(Tensor& a, const Tensor& b) { return a.mul_(b); }
Tensor& operator*=(Tensor& a, double s) { return a.mul_(s); }
// a / s written back (one rounding, as libtorch's div_), not a * (1 / s)
Tensor& operator/=(Tensor& a, double s) {
    if (!is_floating(a.dtype()))
        throw DTypeError(fmt::format("operator/=: result type Float can't be cast to the desired output type {} ({})",
                                     dtype_name(a.dtype()), a.describe()));
    return a.copy_(a / s);
}

Tensor where(const Tensor& cond, double a, const Tensor& b) { return where(cond, ops::wrapped_scalar(a, b), b); }

// Two numbers: f32 (PyTorch's default dtype for Python floats), broadcast to cond's shape.
Tensor where(const Tensor& cond, double a, double b) {
    ops::check_defined("where", cond, "condition");
    const TensorOptions f32 = TensorOptions(kFloat32).device(cond.device());
    return where(cond, full({}, a, f32), full({}, b, f32));
}

Tensor clamp_min(const Tensor& a, double lo) { return clamp(a, lo, std::nullopt); }
Tensor clamp_max(const Tensor& a, double hi) { return clamp(a, std::nullopt, hi); }

}  // namespace ampgrad

// inplace.cpp: add_, mul_, zero_, fill_, copy_, clamp_, and the index ops' scatter_, scatter_add_,
// index_add_. Each writes into self's storage and
// bumps the version counter, so a tensor saved for backward before the write is detected.
//
// With grad mode off (optimizer steps, initialisation) these are plain kernels. With grad mode
// on and autograd involved, the op runs out of place on a clone of self, the result is copied
// into self, and self's history is rebased onto the result's node (docs/autograd.md §1).
// If self is a view, its base's history is rebased instead (CopySlices, view_history.hpp).
#include <cmath>

#include "autograd/autograd_meta.hpp"
#include "autograd/ops/op_utils.hpp"
#include "autograd/ops/ops.hpp"
#include "autograd/record.hpp"
#include "autograd/view_history.hpp"

namespace ampgrad {

using autograd::BackwardContext;
using autograd::record;

namespace {

void check_inplace_allowed(std::string_view op, const Tensor& self) {
    ops::check_defined(op, self, "self");
    if (!GradMode::is_enabled()) return;
    if (self.requires_grad() && self.is_leaf())
        throw AutogradError(fmt::format("{}: a leaf Variable that requires grad is being used in an in-place operation. "
                                        "({})", op, self.describe()));
}

bool needs_history(std::string_view op, const Tensor& self, const Tensor& other) {
    bool needed = GradMode::is_enabled() && (self.requires_grad() || (other.defined() && other.requires_grad()));
    if (needed) autograd::check_inplace_history(op, self);
    return needed;
}

// Write `result` (same shape as self) into self and make self the output of result's node.
Tensor& commit(Tensor& self, const Tensor& result) {
    kernels::copy(self, result);
    self.bump_version();
    if (result.requires_grad()) autograd::rebase_history(self, result);
    return self;
}

// PyTorch's canCast(result_type(self, other), self.dtype) for in-place arithmetic: the result may
// not move to a higher category than self's (bool < integer < floating). int64 += f64 0-d throws.
void check_can_cast(std::string_view op, const Tensor& self, const Tensor& other) {
    auto category = [](DType t) { return t == kBool ? 0 : (is_floating(t) ? 2 : 1); };
    DType result = ops::result_type(self, other);
    if (category(result) > category(self.dtype()))
        throw DTypeError(fmt::format("{}: result type {} can't be cast to the desired output type {} (self is {}, "
                                     "other is {})", op, dtype_name(result), dtype_name(self.dtype()),
                                     self.describe(), other.describe()));
}

void check_broadcasts_into(std::string_view op, const Tensor& self, const Tensor& other) {
    ops::check_same_device(op, {&self, &other});
    check_can_cast(op, self, other);
    Shape s = ops::broadcast_shapes(op, self, other);
    if (s != self.sizes())
        throw ShapeError(fmt::format("{}: output with shape {} doesn't match the broadcast shape {} (self is {}, other "
                                     "is {})", op, self.shape_str(), shape_str(s), self.describe(), other.describe()));
}

}  // namespace

Tensor& add_(Tensor& self, const Tensor& other, double alpha) {
    check_inplace_allowed("add_", self);
    check_broadcasts_into("add_", self, other);
    if (needs_history("add_", self, other)) return commit(self, add(self, other, alpha));
    kernels::add_scaled(self, self, ops::expand_raw(ops::cast_raw(other, self.dtype()), self.sizes()), alpha);
    self.bump_version();
    return self;
}

Tensor& mul_(Tensor& self, const Tensor& other) {
    check_inplace_allowed("mul_", self);
    check_broadcasts_into("mul_", self, other);
    if (needs_history("mul_", self, other)) return commit(self, mul(clone(self), other));
    kernels::binary(BinaryOp::kMul, self, self,
                    ops::expand_raw(ops::cast_raw(other, self.dtype()), self.sizes()));
    self.bump_version();
    return self;
}

// self += s and self *= s, as the out-of-place x + s and x * s. For a floating self, mul_'s scalar
// stays in the compute type (fp32 for f16/bf16), as PyTorch's opmath scalars: bf16 3 .mul_(0.3) is
// round(3 * 0.3f) = 0.8984, not 3 * round(0.3) = 0.9023; add_'s is rounded to self's dtype first, as
// PyTorch's add does (f16 1 .add_(0.00048829) is 1). An integer self takes only integral scalars:
// PyTorch's "result type Float can't be cast to the desired output type".
namespace {
void check_scalar_fits(std::string_view op, const Tensor& self, double s) {
    if (!is_floating(self.dtype()) && s != std::trunc(s))
        throw DTypeError(fmt::format("{}: result type Float can't be cast to the desired output type {} (scalar {}; "
                                     "self is {})", op, dtype_name(self.dtype()), s, self.describe()));
}

Tensor& scalar_inplace(std::string_view op, BinaryOp kind, Tensor& self, double s) {
    check_inplace_allowed(op, self);
    check_scalar_fits(op, self, s);
    if (needs_history(op, self, Tensor())) return commit(self, kind == BinaryOp::kAdd ? add(self, s) : mul(self, s));
    if (!is_floating(self.dtype())) {
        Tensor other = full({}, s, TensorOptions(self.dtype()).device(self.device()));
        return kind == BinaryOp::kAdd ? add_(self, other) : mul_(self, other);
    }
    kernels::binary_scalar(kind, self, self, kind == BinaryOp::kAdd ? round_to_dtype(s, self.dtype()) : s, false);
    self.bump_version();
    return self;
}
}  // namespace

Tensor& add_(Tensor& self, double s) { return scalar_inplace("add_", BinaryOp::kAdd, self, s); }
Tensor& mul_(Tensor& self, double s) { return scalar_inplace("mul_", BinaryOp::kMul, self, s); }

Tensor& zero_(Tensor& self) { return fill_(self, 0.0); }

// Under autograd, fill_ and copy_ write the new value itself (never `self*0 + value`: inf*0 and
// NaN*0 are NaN) and record a node whose gradient to the overwritten values is zero, as PyTorch's
// derivatives.yaml does for fill_ and copy_ (self: zeros_like(grad)).
Tensor& fill_(Tensor& self, double value) {
    check_inplace_allowed("fill_", self);
    if (needs_history("fill_", self, Tensor())) {
        Tensor result = make_empty(self.sizes(), self.dtype(), self.device());
        kernels::fill(result, value);
        return commit(self, record("fill_", result, {self}, {}, [](BackwardContext&, const tensor_list& g) {
            return tensor_list{zeros_like(g[0])};
        }));
    }
    kernels::fill(self, value);
    self.bump_version();
    return self;
}

Tensor& copy_(Tensor& self, const Tensor& src) {
    check_inplace_allowed("copy_", self);
    ops::check_defined("copy_", src, "src");
    Shape s = ops::broadcast_shapes("copy_", self, src);
    if (s != self.sizes())
        throw ShapeError(fmt::format("copy_: source {} cannot be broadcast to destination {}", src.describe(),
                                     self.describe()));
    if (needs_history("copy_", self, src)) {
        // value: src moved, cast and broadcast to self (differentiable, so its gradient returns to src)
        Tensor moved = src.device() == self.device() ? src : to_device(src, self.device());
        Tensor value = expand(to_dtype(moved, self.dtype()), self.sizes());
        Tensor result = make_empty(self.sizes(), self.dtype(), self.device());
        kernels::copy(result, value);
        return commit(self, record("copy_", result, {self, value}, {}, [](BackwardContext& ctx, const tensor_list& g) {
            tensor_list d(2);
            if (ctx.needs_input_grad(0)) d[0] = zeros_like(g[0]);
            if (ctx.needs_input_grad(1)) d[1] = g[0];
            return d;
        }));
    }
    kernels::copy(self, ops::expand_raw(src, self.sizes()));         // cross-device: the accelerator's copy
    self.bump_version();
    return self;
}

Tensor& clamp_(Tensor& self, std::optional<double> lo, std::optional<double> hi) {
    check_inplace_allowed("clamp_", self);
    for (std::optional<double> bound : {lo, hi})
        if (bound) check_scalar_fits("clamp_", self, *bound);       // clamp(int, 1.5) would be f32
    if (needs_history("clamp_", self, Tensor())) return commit(self, clamp(clone(self), lo, hi));
    kernels::clamp(self, self, lo, hi);
    self.bump_version();
    return self;
}

// scatter_, scatter_add_, index_add_: the out-of-place op (autograd/ops/index.cpp, which checks the
// arguments and writes into a copy of self) committed back into self. Its node does not save self,
// so self needs no clone; without autograd the copy back is the price of sharing those checks.
Tensor& scatter_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
    check_inplace_allowed("scatter_", self);
    needs_history("scatter_", self, src);
    return commit(self, scatter(self, dim, index, src));
}

Tensor& scatter_(Tensor& self, int64_t dim, const Tensor& index, double value) {
    check_inplace_allowed("scatter_", self);
    needs_history("scatter_", self, Tensor());
    return commit(self, scatter(self, dim, index, value));
}

Tensor& scatter_add_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
    check_inplace_allowed("scatter_add_", self);
    needs_history("scatter_add_", self, src);
    return commit(self, scatter_add(self, dim, index, src));
}

Tensor& index_add_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, double alpha) {
    check_inplace_allowed("index_add_", self);
    needs_history("index_add_", self, source);
    return commit(self, index_add(self, dim, index, source, alpha));
}

}  // namespace ampgrad

// extremum.cpp: max and min, written once with the op as a parameter (ReduceOp::kMax / kMin):
// amax/amin over dims, max()/min() over everything, max(dim)/min(dim) with indices, argmax/argmin.
// The gradients follow PyTorch (tools/autograd/derivatives.yaml, FunctionsManual.cpp):
//   amax/amin: shared equally by every element equal to the result (scale_grad_by_count);
//   max()/min(): the same, except that a NaN result shares it among the NaN elements
//                (evenly_distribute_backward), where amax's would be NaN everywhere;
//   max(dim)/min(dim): to the index that won (the first extremum, or the first NaN).
// Shapes: (*) -> (*) without the reduced dims, or with 1 there when keepdim.
#include <utility>

#include <fmt/format.h>

#include "autograd/ops/op_utils.hpp"
#include "autograd/ops/ops.hpp"
#include "autograd/ops/reduce_utils.hpp"
#include "autograd/record.hpp"
#include "core/error.hpp"

namespace ampgrad {

using autograd::BackwardContext;
using autograd::record;

namespace {

const char* name_of(ReduceOp op, const char* max_name, const char* min_name) {
    return op == ReduceOp::kMax ? max_name : min_name;
}

// amax / amin over `dims_in` (empty: every dim).
Tensor extremum_over(ReduceOp op, const Tensor& x, const Shape& dims_in, bool keepdim) {
    const char* name = name_of(op, "amax", "amin");
    ops::check_defined(name, x, "input");
    const std::vector<int64_t> dims = ops::reduce_dims(name, x, dims_in);
    ops::check_extremum_dims(name, x, dims);
    Tensor out = ops::reduce_raw(op, x, dims, keepdim, x.dtype());
    return record(name, out, {x}, {x, out}, [dims, keepdim](BackwardContext& ctx, const tensor_list& g) {
        Tensor xs = ctx.saved(0), y = ops::restore_dims(ctx.saved(1), dims, keepdim);
        Tensor gk = ops::restore_dims(g[0], dims, keepdim);
        Tensor is_extremum = eq(xs, y).to(g[0].dtype());
        Tensor count = sum(is_extremum, Shape(dims.begin(), dims.end()), true);
        return tensor_list{gk * is_extremum / count};
    });
}

// max() / min() over every element.
Tensor extremum_all(ReduceOp op, const Tensor& x) {
    const char* name = name_of(op, "max", "min");
    ops::check_defined(name, x, "input");
    const std::vector<int64_t> dims = ops::reduce_dims(name, x, {});
    ops::check_extremum_dims(name, x, dims);
    Tensor out = ops::reduce_raw(op, x, dims, false, x.dtype());
    return record(name, out, {x}, {x, out}, [](BackwardContext& ctx, const tensor_list& g) {
        Tensor xs = ctx.saved(0), y = ctx.saved(1);
        Tensor winner = eq(xs, y) | (ne(xs, xs) & ne(y, y));             // NaN result: the NaN elements
        Tensor mask = winner.to(g[0].dtype());
        return tensor_list{mask * (g[0] / sum(mask))};
    });
}

// The keepdim values and indices along `dim` (no autograd): max has its kernel; min takes the first
// position equal to the minimum (or holding a NaN) from two reductions.
std::pair<Tensor, Tensor> values_and_indices(ReduceOp op, const Tensor& x, int64_t dim) {
    NoGradGuard no_grad;
    if (op == ReduceOp::kMax) {
        Tensor values = make_empty(ops::kept_shape(x, {dim}), x.dtype(), x.device());
        Tensor indices = make_empty(ops::kept_shape(x, {dim}), kInt64, x.device());
        kernels::max_with_indices(values, indices, x, dim);
        return {values, indices};
    }
    const int64_t n = x.size(dim);
    Tensor values = ops::reduce_raw(ReduceOp::kMin, x, {dim}, true, x.dtype());
    Shape pos_shape(static_cast<size_t>(x.dim()), 1);
    pos_shape[static_cast<size_t>(dim)] = n;
    Tensor positions = arange(n, TensorOptions(kInt64).device(x.device())).view(pos_shape);
    Tensor hit = eq(x, values);
    if (is_floating(x.dtype())) hit = hit | (ne(x, x) & ne(values, values));
    Tensor candidates = where(hit, positions, ops::wrapped_scalar(static_cast<double>(n), positions));
    return {values, ops::reduce_raw(ReduceOp::kMin, candidates.contiguous(), {dim}, true, kInt64)};
}

// max(dim) / min(dim): values and indices; the gradient goes to the index that won.
std::pair<Tensor, Tensor> extremum_along(ReduceOp op, const Tensor& x, int64_t dim_in, bool keepdim) {
    const char* name = name_of(op, "max", "min");
    ops::check_defined(name, x, "input");
    const int64_t dim = ops::wrap_dim(name, dim_in, x.dim());
    // a 0-d input: the element itself, and the gradient passes (amax's would be NaN at NaN)
    if (x.dim() == 0) return {clone(x), zeros({}, TensorOptions(kInt64).device(x.device()))};
    if (x.size(dim) == 0)
        throw IndexError(fmt::format("{0}: cannot take the {0} over empty dimension {1} of {2}", name, dim, x.describe()));
    auto [values, indices] = values_and_indices(op, x, dim);              // keepdim
    if (!keepdim) {
        values = squeeze(values, dim);
        indices = squeeze(indices, dim);
    }
    const Shape in_shape = x.sizes();
    values = record(name, values, {x}, {indices}, [dim, keepdim, in_shape](BackwardContext& ctx, const tensor_list& g) {
        Tensor idx = ctx.saved(0), gk = g[0];
        if (!keepdim) { idx = unsqueeze(idx, dim); gk = unsqueeze(gk, dim); }
        Shape pos_shape(in_shape.size(), 1);
        pos_shape[static_cast<size_t>(dim)] = in_shape[static_cast<size_t>(dim)];
        Tensor positions = arange(in_shape[static_cast<size_t>(dim)], TensorOptions(kInt64).device(g[0].device()))
                               .view(pos_shape);
        return tensor_list{where(eq(positions, idx), expand(gk, in_shape), 0.0)};
    });
    return {values, indices};
}

}  // namespace

Tensor amax(const Tensor& x, const Shape& dims, bool keepdim) { return extremum_over(ReduceOp::kMax, x, dims, keepdim); }
Tensor amin(const Tensor& x, const Shape& dims, bool keepdim) { return extremum_over(ReduceOp::kMin, x, dims, keepdim); }
Tensor max(const Tensor& x) { return extremum_all(ReduceOp::kMax, x); }
Tensor min(const Tensor& x) { return extremum_all(ReduceOp::kMin, x); }

std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
    return extremum_along(ReduceOp::kMax, x, dim, keepdim);
}

std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
    return extremum_along(ReduceOp::kMin, x, dim, keepdim);
}

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
    NoGradGuard no_grad;
    return max(x, dim, keepdim).second;
}

Tensor argmin(const Tensor& x, int64_t dim, bool keepdim) {
    NoGradGuard no_grad;
    return min(x, dim, keepdim).second;
}

}  // namespace ampgrad

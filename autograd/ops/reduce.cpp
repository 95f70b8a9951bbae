// reduce.cpp: sum, mean, max, amax, argmax, logsumexp, norm, var and sum_to, with backward.
// Reductions produce the keepdim shape first (what the kernel writes), then drop the reduced
// dims if !keepdim. Integer/bool sums return int64, as in PyTorch.
// Shapes: (*) -> (*) without the reduced dims, or with 1 there when keepdim (docs/notation.md).
#include <algorithm>
#include <cmath>

#include "autograd/ops/autocast_hook.hpp"
#include "autograd/ops/op_utils.hpp"
#include "autograd/ops/ops.hpp"
#include "autograd/record.hpp"

namespace ampgrad {

using autograd::BackwardContext;
using autograd::record;

namespace {

// Normalise dims (negative, duplicates); empty means all dims. Every reduction goes through
// here. A 0-d tensor accepts dim 0 and -1 (as PyTorch's maybe_wrap_dim does) and has no dim to
// reduce: the result is the element itself, so the list comes back empty.
std::vector<int64_t> reduce_dims(std::string_view op, const Tensor& x, const Shape& dims) {
    std::vector<int64_t> out;
    if (dims.empty()) {
        for (int64_t d = 0; d < x.dim(); ++d) out.push_back(d);
        return out;
    }
    for (int64_t d : dims) {
        int64_t w = ops::wrap_dim(op, d, x.dim());
        if (std::find(out.begin(), out.end(), w) != out.end())
            throw ValueError(fmt::format("{}: dim {} appears multiple times in the list of dims", op, w));
        out.push_back(w);
    }
    if (x.dim() == 0) out.clear();                                 // checked; nothing to reduce
    std::sort(out.begin(), out.end());
    return out;
}

Shape keepdim_shape(const Tensor& x, const std::vector<int64_t>& dims) {
    Shape s = x.sizes();
    for (int64_t d : dims) s[static_cast<size_t>(d)] = 1;
    return s;
}

Shape squeezed_shape(const Tensor& x, const std::vector<int64_t>& dims) {
    Shape s;
    for (int64_t d = 0; d < x.dim(); ++d)
        if (std::find(dims.begin(), dims.end(), d) == dims.end()) s.push_back(x.sizes()[d]);
    return s;
}

// Raw reduction into a fresh keepdim-shaped tensor, reshaped to the final shape (no autograd).
// Empty input: sum 0, mean NaN (kernel), an empty result stays empty. max/min over a size-0 dim has
// no identity: their ops call ops::check_extremum_dims first, which throws as PyTorch does.
Tensor reduce_raw(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, DType out_dtype) {
    Tensor in = ops::cast_raw(x, out_dtype);
    Tensor out = make_empty(keepdim_shape(in, dims), out_dtype, x.device());
    if (out.numel() > 0) kernels::reduce(op, out, in, dims);
    return keepdim ? out : make_view(out, squeezed_shape(x, dims), contiguous_strides(squeezed_shape(x, dims)), 0);
}

DType sum_dtype(const Tensor& x) { return is_floating(x.dtype()) ? x.dtype() : kInt64; }

}  // namespace

// ---- sum: d/dx = g broadcast back ----
Tensor sum(const Tensor& x_in, const Shape& dims_in, bool keepdim) {
    Tensor x = x_in;
    AMPGRAD_AUTOCAST("sum", &x);
    ops::check_defined("sum", x, "input");
    std::vector<int64_t> dims = reduce_dims("sum", x, dims_in);
    Tensor out = reduce_raw(ReduceOp::kSum, x, dims, keepdim, sum_dtype(x));
    Shape in_shape = x.sizes();
    return record("sum", out, {x}, {}, [dims, keepdim, in_shape](BackwardContext&, const tensor_list& g) {
        Tensor gk = g[0];
        if (!keepdim) for (int64_t d : dims) gk = unsqueeze(gk, d);
        return tensor_list{expand(gk, in_shape)};
    });
}

Tensor sum(const Tensor& x) { return sum(x, Shape{}, false); }

// ---- mean: d/dx = g / count ----
Tensor mean(const Tensor& x, const Shape& dims_in, bool keepdim) {
    ops::check_defined("mean", x, "input");
    if (!is_floating(x.dtype()))
        throw DTypeError(fmt::format("mean: could not infer output dtype; input is {} (use a floating dtype)",
                                     x.describe()));
    std::vector<int64_t> dims = reduce_dims("mean", x, dims_in);
    Tensor out = reduce_raw(ReduceOp::kMean, x, dims, keepdim, x.dtype());
    Shape in_shape = x.sizes();
    int64_t count = 1;
    for (int64_t d : dims) count *= in_shape[static_cast<size_t>(d)];
    return record("mean", out, {x}, {}, [dims, keepdim, in_shape, count](BackwardContext&, const tensor_list& g) {
        Tensor gk = g[0];
        if (!keepdim) for (int64_t d : dims) gk = unsqueeze(gk, d);
        return tensor_list{expand(gk / static_cast<double>(count), in_shape)};
    });
}

Tensor mean(const Tensor& x) { return mean(x, Shape{}, false); }

// ---- amax / max(): the gradient is shared equally by all maximal elements (PyTorch) ----
Tensor amax(const Tensor& x, const Shape& dims_in, bool keepdim) {
    ops::check_defined("amax", x, "input");
    std::vector<int64_t> dims = reduce_dims("amax", x, dims_in);
    ops::check_extremum_dims("amax", x, dims);
    Tensor out = reduce_raw(ReduceOp::kMax, x, dims, keepdim, x.dtype());
    return record("amax", out, {x}, {x, out}, [dims, keepdim](BackwardContext& ctx, const tensor_list& g) {
        Tensor xs = ctx.saved(0), y = ctx.saved(1), gk = g[0];
        if (!keepdim) for (int64_t d : dims) { y = unsqueeze(y, d); gk = unsqueeze(gk, d); }
        Tensor is_max = eq(xs, y).to(g[0].dtype());
        Tensor count = sum(is_max, Shape(dims.begin(), dims.end()), true);
        return tensor_list{gk * is_max / count};
    });
}

// ---- max(): all elements. Its gradient differs from amax's only with a NaN: PyTorch's
// evenly_distribute_backward (torch/csrc/autograd/FunctionsManual.cpp) shares it among the NaN
// elements (the result is NaN), where amax's scale_grad_by_count gives NaN everywhere. ----
Tensor max(const Tensor& x) {
    ops::check_defined("max", x, "input");
    std::vector<int64_t> dims = reduce_dims("max", x, {});
    ops::check_extremum_dims("max", x, dims);
    Tensor out = reduce_raw(ReduceOp::kMax, x, dims, false, x.dtype());
    return record("max", out, {x}, {x, out}, [](BackwardContext& ctx, const tensor_list& g) {
        Tensor xs = ctx.saved(0), y = ctx.saved(1);
        Tensor winner = eq(xs, y) | (ne(xs, xs) & ne(y, y));             // NaN result: the NaN elements
        Tensor mask = winner.to(g[0].dtype());
        return tensor_list{mask * (g[0] / sum(mask))};
    });
}

// ---- max(dim): values + indices; the gradient goes to the index that won ----
std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim_in, bool keepdim) {
    ops::check_defined("max", x, "input");
    int64_t dim = ops::wrap_dim("max", dim_in, x.dim());
    // a 0-d input: the element itself, and the gradient passes (as min(dim); amax's would be NaN at NaN)
    if (x.dim() == 0) return {clone(x), zeros({}, TensorOptions(kInt64).device(x.device()))};
    ops::check_extremum_dims("max", x, {dim});
    Shape kshape = x.sizes();
    kshape[static_cast<size_t>(dim)] = 1;
    Tensor values = make_empty(kshape, x.dtype(), x.device());
    Tensor indices = make_empty(kshape, kInt64, x.device());
    kernels::max_with_indices(values, indices, x, dim);
    if (!keepdim) {
        Shape s = x.sizes();
        s.erase(s.begin() + dim);
        values = make_view(values, s, contiguous_strides(s), 0);
        indices = make_view(indices, s, contiguous_strides(s), 0);
    }
    Shape in_shape = x.sizes();
    values = record("max", values, {x}, {indices}, [dim, keepdim, in_shape](BackwardContext& ctx, const tensor_list& g) {
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

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
    NoGradGuard no_grad;
    return max(x, dim, keepdim).second;
}

// ---- logsumexp over one dim: the several-dims form (reduce_stats.cpp) ----
Tensor logsumexp(const Tensor& x, int64_t dim, bool keepdim) { return logsumexp(x, Shape{dim}, keepdim); }

// ---- norm: sqrt(sum x^2); gradient x / norm, and 0 where the norm is 0 ----
// f16/bf16 sum and take the root in f32 and round once, as PyTorch's linalg_vector_norm (opmath): an
// f16 sum of squares would lose a small norm to subnormals (f16 0.0010004 has 0.001007 as the root of
// its rounded square; found by the seed 16 run, norm_all:grads2).
Tensor norm(const Tensor& x_in) {
    Tensor x = x_in;
    AMPGRAD_AUTOCAST("norm", &x);
    ops::check_defined("norm", x, "input");
    ops::check_floating("norm", x);
    const DType acc = x.dtype() == kFloat16 || x.dtype() == kBFloat16 ? kFloat32 : x.dtype();
    Tensor sq = reduce_raw(ReduceOp::kSumSquares, x, reduce_dims("norm", x, {}), false, acc);
    Tensor root = make_empty({}, acc, x.device());
    kernels::unary(UnaryOp::kSqrt, root, sq);
    Tensor out = acc == x.dtype() ? root : ops::cast_raw(root, x.dtype());
    return record("norm", out, {x}, {x, out}, [](BackwardContext& ctx, const tensor_list& g) {
        Tensor xs = ctx.saved(0), n = ctx.saved(1);
        Tensor safe = where(eq(n, zeros_like(n)), ones_like(n), n);
        // g * (x / norm), PyTorch's grouping (linalg_vector_norm_backward): x * (g / norm) would
        // overflow f16 in the second derivative (g / norm^2) where x / norm^2 does not
        return tensor_list{where(eq(n, zeros_like(n)), zeros_like(xs), xs / safe) * g[0]};
    });
}

// ---- var over one dim: the several-dims form with correction 1 or 0 (reduce_stats.cpp) ----
Tensor var(const Tensor& x, int64_t dim, bool unbiased, bool keepdim) {
    return var(x, Shape{dim}, unbiased ? 1.0 : 0.0, keepdim);
}

// ---- sum_to: undo broadcasting (the engine calls this to fit a gradient to its input) ----
Tensor sum_to(const Tensor& x, const Shape& shape) {
    if (x.sizes() == shape) return x;
    const Shape& xs = x.sizes();
    if (shape.size() > xs.size())
        throw ShapeError(fmt::format("sum_to: cannot sum {} down to the larger rank shape {}", x.describe(),
                                     shape_str(shape)));
    size_t lead = xs.size() - shape.size();
    Shape dims;
    for (size_t i = 0; i < xs.size(); ++i) {
        if (i < lead) { dims.push_back(static_cast<int64_t>(i)); continue; }
        int64_t want = shape[i - lead];
        if (want == xs[i]) continue;
        if (want != 1)
            throw ShapeError(fmt::format("sum_to: {} is not broadcastable from shape {}", shape_str(shape),
                                         x.describe()));
        dims.push_back(static_cast<int64_t>(i));
    }
    Tensor r = dims.empty() ? x : sum(x, dims, true);
    return r.sizes() == shape ? r : reshape(r, shape);
}

}  // namespace ampgrad

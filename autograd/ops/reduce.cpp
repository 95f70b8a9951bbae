// reduce.cpp: sum, mean, logsumexp, norm, var and sum_to, with backward (max and min: extremum.cpp).
// Reductions produce the keepdim shape first (what the kernel writes), then drop the reduced
// dims if !keepdim. Integer/bool sums return int64, as in PyTorch.
// Shapes: (*) -> (*) without the reduced dims, or with 1 there when keepdim (docs/notation.md).
#include <algorithm>
#include <cmath>

#include "autograd/ops/autocast_hook.hpp"
#include "autograd/ops/op_utils.hpp"
#include "autograd/ops/ops.hpp"
#include "autograd/ops/reduce_utils.hpp"
#include "autograd/record.hpp"

namespace ampgrad {

using autograd::BackwardContext;
using autograd::record;

namespace {

DType sum_dtype(const Tensor& x) { return is_floating(x.dtype()) ? x.dtype() : kInt64; }

}  // namespace

// ---- sum: d/dx = g broadcast back ----
Tensor sum(const Tensor& x_in, const Shape& dims_in, bool keepdim) {
    Tensor x = x_in;
    AMPGRAD_AUTOCAST("sum", &x);
    ops::check_defined("sum", x, "input");
    std::vector<int64_t> dims = ops::reduce_dims("sum", x, dims_in);
    Tensor out = ops::reduce_raw(ReduceOp::kSum, x, dims, keepdim, sum_dtype(x));
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
    std::vector<int64_t> dims = ops::reduce_dims("mean", x, dims_in);
    Tensor out = ops::reduce_raw(ReduceOp::kMean, x, dims, keepdim, x.dtype());
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
    Tensor sq = ops::reduce_raw(ReduceOp::kSumSquares, x, ops::reduce_dims("norm", x, {}), false, acc);
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

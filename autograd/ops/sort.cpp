// sort.cpp: sort, argsort and topk along a dim, and the row gather/scatter (along_dim.hpp) they and
// flip/cumsum share. Each op moves its dim last, runs the stable row kernel kernels::sort on (R,N),
// and moves the result back. The order is core/scalar_math.hpp's SortBefore: NaN counts as the
// largest value, and equal values keep their index order (every sort here is stable, so
// `stable = false` gets the stable order too; PyTorch only promises some order then).
// Backward of the values scatters the gradient back through the indices (put_along_last), whose own
// backward is the gather (take_along_last): double backward works. Derivations: docs/ops/sort.md.
#include "autograd/grad_mode.hpp"
#include "autograd/ops/along_dim.hpp"
#include "autograd/ops/autocast_hook.hpp"
#include "autograd/ops/op_utils.hpp"
#include "autograd/ops/ops.hpp"
#include "autograd/record.hpp"
#include "core/kernels.hpp"

namespace ampgrad {

using autograd::BackwardContext;
using autograd::record;

namespace ops {

Tensor to_rows(const Tensor& x, int64_t dim, RowLayout& layout) {
    layout.dim = dim;
    layout.scalar = x.dim() == 0;
    Tensor moved = layout.scalar ? reshape(x, {1}) : transpose(x, dim, -1);       // (..., N)
    layout.moved = moved.sizes();
    const int64_t N = layout.moved.back();
    int64_t R = 1;
    for (size_t i = 0; i + 1 < layout.moved.size(); ++i) R *= layout.moved[i];
    return reshape(moved, {R, N});                                                  // (R,N)
}

Tensor from_rows(const Tensor& rows, const RowLayout& layout) {
    Shape moved = layout.moved;
    moved.back() = rows.size(1);
    Tensor x = reshape(rows, moved);                                                // (..., N')
    return layout.scalar ? reshape(x, {}) : transpose(x, layout.dim, -1);
}

Tensor take_along_last(const Tensor& rows, const Tensor& index) {
    Tensor out = make_empty({rows.size(0), index.size(1)}, rows.dtype(), rows.device());   // (R,K)
    {
        NoGradGuard no_grad;
        kernels::take_along_last(out, rows.detach().contiguous(), index.contiguous());
    }
    const int64_t n = rows.size(1);
    return record("take_along_last", out, {rows}, {index}, [n](BackwardContext& ctx, const tensor_list& g) {
        return tensor_list{put_along_last(g[0], ctx.saved(0), n)};                  // (R,N)
    });
}

Tensor put_along_last(const Tensor& src, const Tensor& index, int64_t n) {
    Tensor out = zeros({src.size(0), n}, src.options());                            // (R,N)
    {
        NoGradGuard no_grad;
        kernels::put_along_last(out, src.detach().contiguous(), index.contiguous());
    }
    return record("put_along_last", out, {src}, {index}, [](BackwardContext& ctx, const tensor_list& g) {
        return tensor_list{take_along_last(g[0], ctx.saved(0))};                    // (R,K)
    });
}

Tensor reversed_index(int64_t n, Device device) {
    TensorOptions index = TensorOptions(kInt64).device(device);
    return arange(static_cast<double>(n - 1), -1.0, -1.0, index).view({1, n});     // (1,N)
}

}  // namespace ops

std::pair<Tensor, Tensor> sort(const Tensor& x_in, int64_t dim_in, bool descending, bool stable) {
    (void)stable;                                       // always stable (see the file comment)
    Tensor x = x_in;
    ops::check_defined("sort", x, "input");
    AMPGRAD_AUTOCAST("sort", &x);
    ops::RowLayout layout;
    Tensor rows = ops::to_rows(x, ops::wrap_dim("sort", dim_in, x.dim()), layout);   // (R,N)
    Tensor values = make_empty(rows.sizes(), x.dtype(), x.device());                // (R,N)
    Tensor indices = make_empty(rows.sizes(), kInt64, x.device());                  // (R,N)
    {
        NoGradGuard no_grad;
        kernels::sort(values, indices, rows.detach().contiguous(), descending);
    }
    const int64_t n = rows.size(1);
    values = record("sort", values, {rows}, {indices}, [n](BackwardContext& ctx, const tensor_list& g) {
        return tensor_list{ops::put_along_last(g[0], ctx.saved(0), n)};             // (R,N)
    });
    return {ops::from_rows(values, layout), ops::from_rows(indices, layout)};
}

Tensor argsort(const Tensor& x, int64_t dim, bool descending, bool stable) {
    NoGradGuard no_grad;                                // indices only: nothing to differentiate
    return sort(x, dim, descending, stable).second;
}

// The first k of a stable sort, descending for the largest: NaN ranks above every number, and
// equal values keep their index order. `sorted = false` still returns them sorted (allowed).
std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim_in, bool largest, bool sorted) {
    (void)sorted;
    ops::check_defined("topk", x, "input");
    const int64_t dim = ops::wrap_dim("topk", dim_in, x.dim());
    const int64_t n = x.dim() == 0 ? 1 : x.size(dim);
    if (k < 0 || k > n)
        throw IndexError(fmt::format("topk: k = {} is out of range for dim {} of size {} ({})", k, dim, n, x.describe()));
    auto [values, indices] = sort(x, dim, largest, true);
    if (x.dim() == 0) return {values, indices};
    return {narrow(values, dim, 0, k), narrow(indices, dim, 0, k)};
}

}  // namespace ampgrad

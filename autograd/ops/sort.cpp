// sort.cpp: sort, argsort and topk along a dim, and the row gather/scatter (along_dim.hpp) they and
// flip/cumsum share. Each op moves its dim last, runs the stable row kernel kernels::sort on (R,N),
// and moves the result back; topk on the CPU selects with a host partial sort instead (O(N log k)).
// The order is kernels/scalar_math.hpp's SortBefore: NaN counts as the largest value, and equal values
// keep their index order (every sort here is stable, so `stable = false` gets the stable order too;
// PyTorch only promises some order then). Backward of the values scatters the gradient back through
// the indices (put_along_last), whose own backward is the gather (take_along_last): double backward
// works. Derivations: docs/ops/sort.md.
#include <algorithm>
#include <numeric>

#include "autograd/grad_mode.hpp"
#include "autograd/ops/along_dim.hpp"
#include "autograd/ops/autocast_hook.hpp"
#include "autograd/ops/op_utils.hpp"
#include "autograd/ops/ops.hpp"
#include "autograd/record.hpp"
#include "kernels/kernels.hpp"
#include "kernels/scalar_math.hpp"

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

namespace {

// The first k positions of each host row (R,N) in the sort's order (SortBefore, ties by index): a
// partial sort, O(N log k) per row, which gives the same k as the stable sort.
template <typename T>
std::vector<int64_t> first_k_rows(const std::vector<T>& v, int64_t R, int64_t N, int64_t k, bool descending) {
    std::vector<int64_t> out(static_cast<size_t>(R * k)), order(static_cast<size_t>(N));
    for (int64_t r = 0; r < R; ++r) {
        const T* row = v.data() + r * N;
        std::iota(order.begin(), order.end(), int64_t{0});
        std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
            if (formulas::SortBefore::value(row[a], row[b], descending)) return true;
            return !formulas::SortBefore::value(row[b], row[a], descending) && a < b;
        });
        std::copy(order.begin(), order.begin() + k, out.begin() + r * k);
    }
    return out;
}

// topk's CPU path for k < N: select on the host (a vocabulary row is long and k small), then gather
// the values through take_along_last, whose backward is the same scatter as sort's.
std::pair<Tensor, Tensor> topk_cpu(const Tensor& x, int64_t k, int64_t dim, bool largest) {
    ops::RowLayout layout;
    Tensor rows = ops::to_rows(x, dim, layout);                                     // (R,N)
    const int64_t R = rows.size(0), N = rows.size(1);
    Tensor host = rows.detach().contiguous();
    std::vector<int64_t> picked = x.dtype() == kInt64                              // int64 does not fit a double
                                      ? first_k_rows(host.to_vector<int64_t>(), R, N, k, largest)
                                      : first_k_rows(host.to_vector<double>(), R, N, k, largest);
    Tensor indices = tensor(picked, {R, k}, TensorOptions(kInt64));                 // (R,K)
    return {ops::from_rows(ops::take_along_last(rows, indices), layout), ops::from_rows(indices, layout)};
}

}  // namespace

// The first k of a stable sort, descending for the largest: NaN ranks above every number, and
// equal values keep their index order. `sorted = false` still returns them sorted (allowed).
std::pair<Tensor, Tensor> topk(const Tensor& x_in, int64_t k, int64_t dim_in, bool largest, bool sorted) {
    (void)sorted;
    Tensor x = x_in;
    ops::check_defined("topk", x, "input");
    AMPGRAD_AUTOCAST("sort", &x);
    const int64_t dim = ops::wrap_dim("topk", dim_in, x.dim());
    const int64_t n = x.dim() == 0 ? 1 : x.size(dim);
    if (k < 0 || k > n)
        throw IndexError(fmt::format("topk: k = {} is out of range for dim {} of size {} ({})", k, dim, n, x.describe()));
    if (x.device().is_cpu() && x.dim() > 0 && k < n) return topk_cpu(x, k, dim, largest);
    auto [values, indices] = sort(x, dim, largest, true);
    if (x.dim() == 0) return {values, indices};
    return {narrow(values, dim, 0, k), narrow(indices, dim, 0, k)};
}

}  // namespace ampgrad

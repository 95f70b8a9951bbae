// softmax.cpp: softmax and log_softmax along any dim. The kernels work on the last dim of a
// contiguous (N,C) tensor, so another dim is first swapped last (transpose + contiguous) and the
// result swapped back. Backward runs the fused kernel; under create_graph it is written with
// differentiable ops instead, so double backward works. Derivation: docs/ops/softmax.md.
//   softmax:     dx = y * (dy - sum(dy * y, dim))
//   log_softmax: dx = dy - exp(y) * sum(dy, dim)
#include "autograd/ops/autocast_hook.hpp"
#include "autograd/ops/op_utils.hpp"
#include "autograd/ops/ops.hpp"
#include "autograd/record.hpp"

namespace ampgrad::nn::functional {

using autograd::BackwardContext;
using autograd::record;

namespace {

// t with `dim` swapped with the last dim, made contiguous: rows for the kernels (no autograd).
// Swapping twice is the identity, so the same call also moves a result back.
Tensor swap_dim_last(const Tensor& t, int64_t dim) {
    NoGradGuard no_grad;
    if (t.dim() <= 1 || dim == t.dim() - 1) return t.contiguous();
    return t.transpose(dim, -1).contiguous();
}

Tensor softmax_op(std::string_view name, const Tensor& x_in, int64_t dim_in, bool log) {
    Tensor x = x_in;
    AMPGRAD_AUTOCAST(name, &x);
    ops::check_defined(name, x, "input");
    ops::check_floating(name, x);
    const int64_t dim = ops::wrap_dim(name, dim_in, x.dim());

    Tensor x_rows = swap_dim_last(x, dim);                                  // (N,C), C = x.size(dim)
    Tensor y_rows = make_empty(x_rows.sizes(), x.dtype(), x.device());      // (N,C)
    kernels::softmax(y_rows, x_rows, log);
    Tensor y = swap_dim_last(y_rows, dim);                                  // x's shape

    return record(name, y, {x}, {y}, [dim, log](BackwardContext& ctx, const tensor_list& g) {
        Tensor y = ctx.saved(0);
        Tensor dy = g[0].dtype() == y.dtype() ? g[0] : g[0].to(y.dtype());
        if (GradMode::is_enabled()) {                                       // create_graph
            if (log) return tensor_list{dy - exp(y) * sum(dy, {dim}, true)};
            return tensor_list{y * (dy - sum(dy * y, {dim}, true))};
        }
        Tensor y_rows = swap_dim_last(y, dim);                              // (N,C)
        Tensor dy_rows = swap_dim_last(dy, dim);                            // (N,C)
        Tensor dx_rows = make_empty(y_rows.sizes(), y.dtype(), y.device()); // (N,C)
        kernels::softmax_backward(dx_rows, y_rows, dy_rows, log);
        return tensor_list{swap_dim_last(dx_rows, dim)};
    });
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_op("softmax", x, dim, false); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_op("log_softmax", x, dim, true); }

}  // namespace ampgrad::nn::functional

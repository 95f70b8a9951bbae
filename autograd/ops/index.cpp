// index.cpp: the ops that index along one dim: gather, scatter (tensor and value forms), scatter_add,
// index_select and index_add, each with its backward beside it. Two kernels serve all five
// (kernels/kernels.hpp's gather and scatter, whose walk is kernels/index_layout.hpp): index_select is a
// gather whose 1-d index is broadcast along the other dims (stride 0), index_add a scatter-add of
// the same shape. The backwards are the ops' transposes, written with these same ops, so double
// backward comes for free:
//   gather       -> grad_x = scatter_add(zeros, dim, index, g)
//   scatter      -> grad_x = scatter(g, dim, index, 0), grad_src = gather(g, dim, index)
//   scatter_add  -> grad_x = g,                         grad_src = gather(g, dim, index)
//   index_select -> grad_x = index_add(zeros, dim, index, g)
//   index_add    -> grad_x = g,                         grad_source = alpha * index_select(g, dim, index)
// Shape and dtype rules and messages follow PyTorch 2.15 (docs/ops/index.md). Derived ops
// (take_along_dim, one_hot, repeat_interleave with a tensor of repeats): autograd/ops/index_derived.cpp.
#include "autograd/grad_mode.hpp"
#include "kernels/index_layout.hpp"
#include "autograd/ops/autocast_hook.hpp"
#include "autograd/ops/index_utils.hpp"
#include "autograd/ops/op_utils.hpp"
#include "autograd/ops/ops.hpp"
#include "autograd/record.hpp"

namespace ampgrad {

using autograd::BackwardContext;
using autograd::record;

namespace {

// x's dims counting a 0-d tensor as 1-d, the rank the index kernels see
int64_t index_rank(const Tensor& t) { return std::max<int64_t>(t.dim(), 1); }
int64_t size_at(const Tensor& t, int64_t d) { return t.dim() == 0 ? 1 : t.size(d); }

// gather/scatter's rules: index int64/int32 with x's (and src's) number of dims, no larger than x
// apart from dim and no larger than src anywhere; src of x's dtype. Returns dim wrapped. An empty
// index is only checked for dim and src's dtype (PyTorch skips the rest; the ops then skip the kernel).
int64_t check_along_dim(std::string_view op, const Tensor& x, int64_t dim_in, const Tensor& index, const Tensor* src) {
    ops::check_defined(op, x, "input");
    ops::check_defined(op, index, "index");
    if (src) ops::check_defined(op, *src, "src");
    ops::check_same_device(op, {&x, &index, src ? src : &x});
    const int64_t dim = ops::wrap_dim(op, dim_in, x.dim());
    if (src && src->dtype() != x.dtype())
        throw DTypeError(fmt::format("{}: src {} must have the input {}'s dtype", op, src->describe(), x.describe()));
    if (index.numel() == 0) return dim;
    ops::check_index_dtype(op, index);
    if (index_rank(index) != index_rank(x) || (src && index_rank(*src) != index_rank(x)))
        throw ShapeError(fmt::format("{}: index {} must have as many dims as the input {}{}{}", op, index.describe(),
                                     x.describe(), src ? " and src " : "", src ? src->describe() : ""));
    for (int64_t d = 0; d < index_rank(x); ++d)
        if ((d != dim && size_at(index, d) > size_at(x, d)) || (src && size_at(index, d) > size_at(*src, d)))
            throw ShapeError(fmt::format("{}: index {} must be no larger than the input {} apart from dimension {}{}{}"
                                         " (dimension {} differs)", op, index.describe(), x.describe(), dim,
                                         src ? " and no larger than src " : "", src ? src->describe() : "", d));
    return dim;
}

// A contiguous copy of x, no autograd: the tensor a scatter writes into.
Tensor copy_raw(const Tensor& x) {
    Tensor out = make_empty(x.sizes(), x.dtype(), x.device());
    kernels::copy(out, x);
    return out;
}

// grad_src of scatter/scatter_add: gather(g) has index's shape; where src is larger, its other
// elements got no gradient: zero-pad to src's shape (index_add of arange into zeros, differentiable)
Tensor gradient_for_src(const Tensor& g, int64_t dim, const Tensor& index, const Shape& src_shape) {
    if (index.numel() == 0) return zeros(src_shape, g.options());           // nothing was read from src
    Tensor grad = gather(g, dim, index);                                     // (I)
    if (grad.dim() == 0 && !src_shape.empty()) grad = reshape(grad, {1});    // a 0-d index counts as 1-d
    for (int64_t d = 0; d < static_cast<int64_t>(src_shape.size()); ++d) {
        if (grad.size(d) == src_shape[d]) continue;
        Shape padded = grad.sizes();
        padded[static_cast<size_t>(d)] = src_shape[static_cast<size_t>(d)];
        grad = index_add(zeros(padded, grad.options()), d, arange(grad.size(d), TensorOptions(kInt64).device(g.device())),
                         grad);
    }
    return grad;                                                              // (src)
}

// index (K) of index_select/index_add as a view of `shape` whose dim walks index and every other
// dim repeats it (stride 0): the index of an equivalent gather/scatter
Tensor broadcast_index(const Tensor& index, int64_t dim, const Shape& shape) {
    if (shape.empty()) return make_view(index, {}, {}, index.storage_offset());
    Shape strides(shape.size(), 0);
    strides[static_cast<size_t>(dim)] = index.dim() == 0 ? 0 : index.stride(0);
    return make_view(index, shape, strides, index.storage_offset());
}

// index_select/index_add's index: 0-d or 1-d, int64/int32; a 0-d x takes one index
void check_vector_index(std::string_view op, const Tensor& x, const Tensor& index) {
    ops::check_defined(op, x, "input");
    ops::check_defined(op, index, "index");
    ops::check_index_dtype(op, index);
    if (index.dim() > 1)
        throw IndexError(fmt::format("{}: index must be a vector (0-d or 1-d), got {}", op, index.describe()));
    if (x.dim() == 0 && index.numel() != 1)
        throw IndexError(fmt::format("{}: a 0-d input {} takes exactly one index, got {}", op, x.describe(),
                                     index.describe()));
}

// An empty output runs no kernel, but PyTorch's index_select still checks its indices: so do we,
// on the host (a rare case; on a GPU it costs a synchronisation).
void check_bounds_on_host(std::string_view op, const Tensor& index, int64_t dim, int64_t size) {
    for (int64_t k : index.to_vector<int64_t>())
        if (k < 0 || k >= size) throw IndexError(fmt::format("{}: {}", op, index_out_of_bounds_message(k, dim, size)));
}

}  // namespace

Tensor gather(const Tensor& x, int64_t dim_in, const Tensor& index) {
    const int64_t dim = check_along_dim("gather", x, dim_in, index, nullptr);
    Tensor out = ops::gather_raw("gather", x, dim, index);                   // (I)
    return record("gather", out, {x}, {index}, [dim, shape = x.sizes()](BackwardContext& ctx, const tensor_list& g) {
        return tensor_list{scatter_add(zeros(shape, g[0].options()), dim, ctx.saved(0), g[0])};
    });
}

Tensor scatter(const Tensor& x, int64_t dim_in, const Tensor& index, const Tensor& src) {
    const int64_t dim = check_along_dim("scatter", x, dim_in, index, &src);
    Tensor out = copy_raw(x);
    if (index.numel() > 0) ops::run_index_kernel("scatter", [&] { kernels::scatter(out, index, src, dim, false); });
    return record("scatter", out, {x, src}, {index},
                  [dim, src_shape = src.sizes()](BackwardContext& ctx, const tensor_list& g) {
                      const Tensor& idx = ctx.saved(0);
                      tensor_list d(2);
                      if (ctx.needs_input_grad(0)) d[0] = scatter(g[0], dim, idx, 0.0);
                      if (ctx.needs_input_grad(1)) d[1] = gradient_for_src(g[0], dim, idx, src_shape);
                      return d;
                  });
}

Tensor scatter(const Tensor& x, int64_t dim_in, const Tensor& index, double value) {
    const int64_t dim = check_along_dim("scatter", x, dim_in, index, nullptr);
    Tensor out = copy_raw(x);
    Tensor fill = ops::expand_raw(full({}, value, TensorOptions(x.dtype()).device(x.device())), index.sizes());
    if (index.numel() > 0) ops::run_index_kernel("scatter", [&] { kernels::scatter(out, index, fill, dim, false); });
    return record("scatter", out, {x}, {index}, [dim](BackwardContext& ctx, const tensor_list& g) {
        return tensor_list{scatter(g[0], dim, ctx.saved(0), 0.0)};
    });
}

Tensor scatter_add(const Tensor& x_in, int64_t dim_in, const Tensor& index, const Tensor& src_in) {
    Tensor x = x_in, src = src_in;
    AMPGRAD_AUTOCAST("scatter_add", &x, &src);
    const int64_t dim = check_along_dim("scatter_add", x, dim_in, index, &src);
    // f16/bf16 sum in f32 and round once, as PyTorch's CPU scatter_add (its index_add rounds per add)
    const bool low_precision = x.dtype() == kFloat16 || x.dtype() == kBFloat16;
    Tensor out = low_precision ? ops::cast_raw(x, kFloat32) : copy_raw(x);
    Tensor addend = low_precision ? ops::cast_raw(src, kFloat32) : src;
    if (index.numel() > 0) ops::run_index_kernel("scatter_add", [&] { kernels::scatter(out, index, addend, dim, true); });
    if (low_precision) out = ops::cast_raw(out, x.dtype());
    return record("scatter_add", out, {x, src}, {index},
                  [dim, src_shape = src.sizes()](BackwardContext& ctx, const tensor_list& g) {
                      if (!ctx.needs_input_grad(1)) return tensor_list{g[0], Tensor()};
                      return tensor_list{g[0], gradient_for_src(g[0], dim, ctx.saved(0), src_shape)};
                  });
}

Tensor index_select(const Tensor& x, int64_t dim_in, const Tensor& index) {
    check_vector_index("index_select", x, index);
    ops::check_same_device("index_select", {&x, &index});
    const int64_t dim = ops::wrap_dim("index_select", dim_in, x.dim());
    Shape shape = x.sizes();                                                   // (..., K, ...)
    if (!shape.empty()) shape[static_cast<size_t>(dim)] = index.numel();
    if (shape_numel(shape) == 0) check_bounds_on_host("index_select", index, dim, x.dim() == 0 ? 1 : x.size(dim));
    Tensor out = ops::gather_raw("index_select", x, dim, broadcast_index(index, dim, shape));
    return record("index_select", out, {x}, {index}, [dim, x_shape = x.sizes()](BackwardContext& ctx,
                                                                                const tensor_list& g) {
        return tensor_list{index_add(zeros(x_shape, g[0].options()), dim, ctx.saved(0), g[0])};
    });
}

Tensor index_add(const Tensor& x_in, int64_t dim_in, const Tensor& index, const Tensor& source_in, double alpha) {
    Tensor x = x_in, source = source_in;
    AMPGRAD_AUTOCAST("index_add", &x, &source);
    check_vector_index("index_add", x, index);
    ops::check_defined("index_add", source, "source");
    ops::check_same_device("index_add", {&x, &index, &source});
    const int64_t dim = ops::wrap_dim("index_add", dim_in, x.dim());
    if (source.dtype() != x.dtype())
        throw DTypeError(fmt::format("index_add: the input {} and source {} must have the same dtype", x.describe(),
                                     source.describe()));
    Shape expected = x.sizes();                                                // (..., K, ...)
    if (!expected.empty()) expected[static_cast<size_t>(dim)] = index.numel();
    if (source.sizes() != expected && !(x.dim() == 0 && source.numel() == 1))
        throw ShapeError(fmt::format("index_add: source {} must have the input {}'s shape with {} (the number of "
                                     "indices) at dimension {}", source.describe(), x.describe(), index.numel(), dim));
    Tensor out = copy_raw(x);
    Tensor scaled = ops::scale_raw(source.reshape(expected), alpha);
    if (index.numel() > 0 && x.numel() > 0)                                    // PyTorch: nothing checked into an empty x
        ops::run_index_kernel("index_add",
                              [&] { kernels::scatter(out, broadcast_index(index, dim, expected), scaled, dim, true); });
    return record("index_add", out, {x, source}, {index},
                  [dim, alpha, source_shape = source.sizes()](BackwardContext& ctx, const tensor_list& g) {
                      if (!ctx.needs_input_grad(1)) return tensor_list{g[0], Tensor()};
                      Tensor grad_source = index_select(g[0], dim, ctx.saved(0)).reshape(source_shape);
                      return tensor_list{g[0], alpha == 1.0 ? grad_source : grad_source * alpha};
                  });
}

}  // namespace ampgrad

// view.cpp: views (share storage and the version counter) and shape ops: view, reshape,
// transpose, permute, (un)squeeze, expand, narrow, slice, select, split, cat, stack, plus contiguous,
// clone and the differentiable dtype/device casts. Backward of a view maps the gradient back
// to the input's shape: reshape for reshape-like views, inverse permutation for permute, a
// sum for expand, zero padding (via cat) for narrow/select.
// Shapes: each op's output shape is what its arguments spell out (sizes, dims, lengths), so lines
// carry no shape comments (docs/notation.md).
#include <algorithm>
#include <numeric>

#include "autograd/autograd_meta.hpp"
#include "autograd/ops/autocast_hook.hpp"
#include "autograd/ops/op_utils.hpp"
#include "autograd/ops/ops.hpp"
#include "autograd/record.hpp"
#include "autograd/view_history.hpp"

namespace ampgrad {

using autograd::BackwardContext;
using autograd::record;

namespace {

// Record a view op and mark its output as a view of x's base, so an in-place write through it
// can rewrite the base's history (autograd/view_history.hpp).
template <typename F>
Tensor record_view(std::string_view op, Tensor out, const Tensor& x, F&& backward) {
    Tensor r = record(op, std::move(out), {x}, {}, std::forward<F>(backward));
    if (r.requires_grad()) autograd::meta_of(r).is_differentiable_view = true;
    autograd::mark_view(r, x);
    return r;
}

// Resolve one -1 and check the element count.
Shape infer_shape(std::string_view op, const Tensor& x, const Shape& shape) {
    Shape out = shape;
    int64_t known = 1, infer_at = -1;
    for (size_t i = 0; i < out.size(); ++i) {
        if (out[i] == -1) {
            if (infer_at >= 0) throw ShapeError(fmt::format("{}: only one dimension can be inferred in {}", op, shape_str(shape)));
            infer_at = static_cast<int64_t>(i);
        } else if (out[i] < 0) {
            throw ShapeError(fmt::format("{}: invalid shape dimension {} in {}", op, out[i], shape_str(shape)));
        } else {
            known *= out[i];
        }
    }
    if (infer_at >= 0) {
        if (known == 0 || x.numel() % known != 0)
            throw ShapeError(fmt::format("{}: shape {} is invalid for input of size {} ({})", op, shape_str(shape),
                                         x.numel(), x.describe()));
        out[static_cast<size_t>(infer_at)] = x.numel() / known;
    }
    if (shape_numel(out) != x.numel())
        throw ShapeError(fmt::format("{}: shape {} is invalid for input of size {} ({})", op, shape_str(shape),
                                     x.numel(), x.describe()));
    return out;
}

Tensor copy_raw(const Tensor& x, DType dtype, Device device) {
    Tensor out = make_empty(x.sizes(), dtype, device);
    kernels::copy(out, x);                         // H2D, D2H and D2D run on the accelerator's copy
    return out;
}

}  // namespace

Tensor view(const Tensor& x, const Shape& shape_in) {
    ops::check_defined("view", x, "input");
    Shape shape = infer_shape("view", x, shape_in);
    auto strides = view_strides(x, shape);
    if (!strides)
        throw ShapeError(fmt::format("view: size {} is not compatible with input tensor's size and stride ({}, "
                                     "strides {}); at least one dimension spans across two contiguous subspaces. Use "
                                     ".reshape(...) instead.", shape_str(shape), x.describe(), shape_str(x.strides())));
    Shape in_shape = x.sizes();
    return record_view("view", make_view(x, shape, *strides, x.storage_offset()), x,
                       [in_shape](BackwardContext&, const tensor_list& g) { return tensor_list{reshape(g[0], in_shape)}; });
}

Tensor reshape(const Tensor& x, const Shape& shape_in) {
    ops::check_defined("reshape", x, "input");
    Shape shape = infer_shape("reshape", x, shape_in);
    if (view_strides(x, shape)) return view(x, shape);
    return view(contiguous(x), shape);
}

Tensor permute(const Tensor& x, const Shape& dims) {
    ops::check_defined("permute", x, "input");
    if (static_cast<int64_t>(dims.size()) != x.dim())
        throw ShapeError(fmt::format("permute: number of dims {} doesn't match the tensor's {} ({})", dims.size(),
                                     x.dim(), x.describe()));
    Shape sizes(dims.size()), strides(dims.size()), inverse(dims.size());
    std::vector<bool> seen(dims.size(), false);
    for (size_t i = 0; i < dims.size(); ++i) {
        int64_t d = ops::wrap_dim("permute", dims[i], x.dim());
        if (seen[static_cast<size_t>(d)]) throw ValueError(fmt::format("permute: repeated dim {} in {}", d, shape_str(dims)));
        seen[static_cast<size_t>(d)] = true;
        sizes[i] = x.sizes()[d];
        strides[i] = x.strides()[d];
        inverse[static_cast<size_t>(d)] = static_cast<int64_t>(i);
    }
    return record_view("permute", make_view(x, sizes, strides, x.storage_offset()), x,
                       [inverse](BackwardContext&, const tensor_list& g) { return tensor_list{permute(g[0], inverse)}; });
}

Tensor transpose(const Tensor& x, int64_t d0, int64_t d1) {
    ops::check_defined("transpose", x, "input");
    int64_t w0 = ops::wrap_dim("transpose", d0, x.dim()), w1 = ops::wrap_dim("transpose", d1, x.dim());
    if (x.dim() == 0) return x;                            // dims 0/-1 only (checked above)
    Shape dims(static_cast<size_t>(x.dim()));
    std::iota(dims.begin(), dims.end(), 0);
    std::swap(dims[static_cast<size_t>(w0)], dims[static_cast<size_t>(w1)]);
    return permute(x, dims);
}

Tensor unsqueeze(const Tensor& x, int64_t d_in) {
    ops::check_defined("unsqueeze", x, "input");
    int64_t d = ops::wrap_dim("unsqueeze", d_in, x.dim() + 1);
    Shape sizes = x.sizes(), strides = x.strides();
    int64_t stride = d < x.dim() ? sizes[d] * strides[d] : 1;
    sizes.insert(sizes.begin() + d, 1);
    strides.insert(strides.begin() + d, stride);
    Shape in_shape = x.sizes();
    return record_view("unsqueeze", make_view(x, sizes, strides, x.storage_offset()), x,
                       [in_shape](BackwardContext&, const tensor_list& g) { return tensor_list{reshape(g[0], in_shape)}; });
}

Tensor squeeze(const Tensor& x, int64_t d_in) {
    ops::check_defined("squeeze", x, "input");
    int64_t d = ops::wrap_dim("squeeze", d_in, x.dim());
    if (x.dim() == 0) return x;                            // dims 0/-1 only (checked above)
    if (x.sizes()[d] != 1) return x;                       // PyTorch: squeezing a non-1 dim is a no-op
    Shape sizes = x.sizes(), strides = x.strides();
    sizes.erase(sizes.begin() + d);
    strides.erase(strides.begin() + d);
    Shape in_shape = x.sizes();
    return record_view("squeeze", make_view(x, sizes, strides, x.storage_offset()), x,
                       [in_shape](BackwardContext&, const tensor_list& g) { return tensor_list{reshape(g[0], in_shape)}; });
}

Tensor expand(const Tensor& x, const Shape& shape_in) {
    ops::check_defined("expand", x, "input");
    if (shape_in.size() < static_cast<size_t>(x.dim()))
        throw ShapeError(fmt::format("expand: the number of sizes provided ({}) must be greater or equal to the "
                                     "number of dimensions in the tensor ({})", shape_in.size(), x.describe()));
    Shape shape = shape_in;
    size_t lead = shape.size() - static_cast<size_t>(x.dim());
    for (size_t i = 0; i < shape.size(); ++i) {
        int64_t have = i < lead ? 1 : x.sizes()[i - lead];
        if (shape[i] == -1) {
            if (i < lead) throw ShapeError("expand: -1 is not allowed in a leading, non-existing dimension");
            shape[i] = have;
        }
        if (have != shape[i] && have != 1)
            throw ShapeError(fmt::format("expand: the expanded size {} must match the existing size {} at dimension "
                                         "{} ({} to {})", shape[i], have, i, x.describe(), shape_str(shape_in)));
    }
    if (shape == x.sizes()) return x;
    Shape in_shape = x.sizes();
    return record_view("expand", ops::expand_raw(x, shape), x,
                       [in_shape](BackwardContext&, const tensor_list& g) { return tensor_list{sum_to(g[0], in_shape)}; });
}

Tensor narrow(const Tensor& x, int64_t dim_in, int64_t start, int64_t length) {
    ops::check_defined("narrow", x, "input");
    if (x.dim() == 0) throw IndexError("narrow: cannot be applied to a 0-dim tensor");
    int64_t dim = ops::wrap_dim("narrow", dim_in, x.dim());
    int64_t size = x.sizes()[dim];
    if (start < 0) start += size;
    if (start < 0 || length < 0 || start + length > size)
        throw IndexError(fmt::format("narrow: start ({}) + length ({}) exceeds dimension size ({}) of {} at dim {}",
                                     start, length, size, x.describe(), dim));
    Shape sizes = x.sizes();
    sizes[dim] = length;
    Tensor out = make_view(x, sizes, x.strides(), x.storage_offset() + start * x.strides()[dim]);
    return record_view("narrow", out, x, [dim, start, length, size](BackwardContext&, const tensor_list& g) {
        tensor_list parts;
        Shape pad = g[0].sizes();
        if (start > 0) { pad[dim] = start; parts.push_back(zeros(pad, g[0].options())); }
        parts.push_back(g[0]);
        if (start + length < size) { pad[dim] = size - start - length; parts.push_back(zeros(pad, g[0].options())); }
        return tensor_list{parts.size() == 1 ? g[0] : cat(parts, dim)};
    });
}

namespace {

// slice's backward for step > 1: g (.., C, ..) placed at every step-th position of zeros (.., L, ..),
// composed of differentiable ops (so double backward is slice again): each element gets step - 1
// zeros after it, (.., C, step, ..) -> (.., C*step, ..), cut to L.
Tensor spread(const Tensor& g, int64_t dim, int64_t step, int64_t length) {
    Tensor column = unsqueeze(g, dim + 1);                                   // (.., C, 1, ..)
    Shape gap = column.sizes();
    gap[static_cast<size_t>(dim + 1)] = step - 1;                            // (.., C, step-1, ..)
    Tensor padded = cat({column, zeros(gap, g.options())}, dim + 1);         // (.., C, step, ..)
    Shape merged = g.sizes();
    merged[static_cast<size_t>(dim)] *= step;                                // (.., C*step, ..)
    return narrow(reshape(padded, merged), dim, 0, length);                  // (.., L, ..)
}

}  // namespace

// x[start:end:step] along dim: narrow to [start, end), then (step > 1) a strided view of that.
Tensor slice(const Tensor& x, int64_t dim_in, std::optional<int64_t> start_in, std::optional<int64_t> end_in,
             int64_t step) {
    ops::check_defined("slice", x, "input");
    if (x.dim() == 0) throw IndexError("slice: cannot be applied to a 0-dim tensor");
    const int64_t dim = ops::wrap_dim("slice", dim_in, x.dim());
    if (step <= 0) throw ValueError(fmt::format("slice: step must be positive, got {} for {}", step, x.describe()));
    const int64_t size = x.sizes()[dim];
    auto bound = [size](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + size : v, 0, size); };   // Python's rule
    const int64_t start = start_in ? bound(*start_in) : 0;
    const int64_t end = std::max(start, end_in ? bound(*end_in) : size);
    const int64_t length = end - start;
    Tensor span = narrow(x, dim, start, length);
    if (step == 1) return span;
    Shape sizes = span.sizes(), strides = span.strides();
    sizes[dim] = (length + step - 1) / step;
    strides[dim] *= step;
    return record_view("slice", make_view(span, sizes, strides, span.storage_offset()), span,
                       [dim, step, length](BackwardContext&, const tensor_list& g) {
        return tensor_list{spread(g[0], dim, step, length)};
    });
}

Tensor select(const Tensor& x, int64_t dim_in, int64_t index) {
    ops::check_defined("select", x, "input");
    if (x.dim() == 0) throw IndexError("select: cannot be applied to a 0-dim tensor");
    int64_t dim = ops::wrap_dim("select", dim_in, x.dim());
    int64_t size = x.sizes()[dim];
    if (index < -size || index >= size)
        throw IndexError(fmt::format("select: index {} out of range for dimension {} of size {} ({})", index, dim,
                                     size, x.describe()));
    if (index < 0) index += size;
    return squeeze(narrow(x, dim, index, 1), dim);
}

// One node for all the pieces, as PyTorch's SplitBackward0: the backward joins the pieces' gradients
// with one cat (a piece that got none contributes zeros), where a narrow per piece would pad each
// gradient to the whole input with zeros and then add the padded copies (for GPT's q/k/v split, three
// fills, three copies and two adds of the (B,T,3C) gradient instead of one copy). Each piece is a view
// of x, as narrow's are: an in-place write through one rewrites x's history (autograd/view_history.hpp).
tensor_list split(const Tensor& x, int64_t split_size, int64_t dim_in) {
    ops::check_defined("split", x, "input");
    if (x.dim() == 0) throw IndexError("split: expected at least a 1-dimensional tensor but got a 0-dim tensor");
    int64_t dim = ops::wrap_dim("split", dim_in, x.dim());
    if (split_size <= 0) throw ValueError(fmt::format("split: split_size must be positive, got {}", split_size));
    const int64_t size = x.sizes()[dim];
    if (size <= split_size) return {narrow(x, dim, 0, size)};   // one piece (or one empty piece, as PyTorch)
    tensor_list parts;
    for (int64_t start = 0; start < size; start += split_size) {
        Shape sizes = x.sizes();
        sizes[dim] = std::min(split_size, size - start);
        parts.push_back(make_view(x, sizes, x.strides(), x.storage_offset() + start * x.strides()[dim]));
    }
    parts = autograd::record_multi("split", std::move(parts), std::span<const Tensor>(&x, 1), {},
                                   [dim](BackwardContext&, const tensor_list& g) { return tensor_list{cat(g, dim)}; });
    for (Tensor& piece : parts) {
        if (piece.requires_grad()) autograd::meta_of(piece).is_differentiable_view = true;
        autograd::mark_view(piece, x);
    }
    return parts;
}

namespace {
// PyTorch's legacy rule: a 1-d tensor of size 0 (torch.empty(0)) is left out of cat's shape checks
// and output, whatever the dim, so `acc = cat({acc, x})` may start from an empty accumulator. It
// still takes part in the dtype promotion and gets an empty gradient.
bool legacy_empty(const Tensor& t) { return t.defined() && t.dim() == 1 && t.size(0) == 0; }
}  // namespace

// out = the tensors joined along dim; d/d(tensor i) = its slice of g
Tensor cat(const tensor_list& tensors, int64_t dim_in) {
    if (tensors.empty()) throw ValueError("cat: expected a non-empty list of Tensors");
    // Autocast policy for cat/stack is "widest type", which is what cat does anyway (promote_types).
    auto kept = std::find_if(tensors.begin(), tensors.end(), [](const Tensor& t) { return !legacy_empty(t); });
    const Tensor& first = kept == tensors.end() ? tensors[0] : *kept;
    const bool all_empty = kept == tensors.end();
    int64_t dim = all_empty ? 0 : ops::wrap_dim("cat", dim_in, first.dim());
    DType dt = first.dtype();
    int64_t total = 0;
    for (size_t i = 0; i < tensors.size(); ++i) {
        const Tensor& t = tensors[i];
        ops::check_defined("cat", t, "tensors");
        ops::check_same_device("cat", {&first, &t});
        dt = promote_types(dt, t.dtype());
        if (legacy_empty(t) && !all_empty) continue;
        if (t.dim() == 0)
            throw ShapeError(fmt::format("cat: zero-dimensional tensor (at position {}) cannot be concatenated ({})",
                                         i, t.describe()));
        if (t.dim() != first.dim())
            throw ShapeError(fmt::format("cat: tensors must have the same number of dimensions: tensor 0 is {}, "
                                         "tensor {} is {}", first.describe(), i, t.describe()));
        for (int64_t d = 0; d < t.dim(); ++d)
            if (d != dim && t.sizes()[d] != first.sizes()[d])
                throw ShapeError(fmt::format("cat: sizes of tensors must match except in dimension {}: tensor 0 is "
                                             "{}, tensor {} is {} (dimension {})", dim, first.describe(), i,
                                             t.describe(), d));
        total += t.sizes()[dim];
    }
    Shape shape = first.sizes();
    shape[dim] = total;
    Tensor out = make_empty(shape, dt, first.device());
    std::vector<int64_t> sizes;                                       // each input's length along dim; -1: skipped
    int64_t offset = 0;
    for (const Tensor& t : tensors) {
        if (legacy_empty(t) && !all_empty) {
            sizes.push_back(-1);
            continue;
        }
        Shape part = shape;
        part[dim] = t.sizes()[dim];
        kernels::copy(make_view(out, part, out.strides(), offset * out.strides()[dim]), t);
        offset += t.sizes()[dim];
        sizes.push_back(t.sizes()[dim]);
    }
    return autograd::record_multi("cat", {out}, std::span<const Tensor>(tensors), {},
                                  [dim, sizes](BackwardContext&, const tensor_list& g) {
        tensor_list d;
        int64_t start = 0;
        for (int64_t s : sizes) {
            d.push_back(s < 0 ? make_empty({0}, g[0].dtype(), g[0].device()) : narrow(g[0], dim, start, s));
            start += std::max<int64_t>(s, 0);
        }
        return d;
    })[0];
}

Tensor stack(const tensor_list& tensors, int64_t dim_in) {
    if (tensors.empty()) throw ValueError("stack: expected a non-empty list of Tensors");
    int64_t dim = ops::wrap_dim("stack", dim_in, tensors[0].dim() + 1);
    tensor_list parts;
    for (size_t i = 0; i < tensors.size(); ++i) {
        if (tensors[i].sizes() != tensors[0].sizes())
            throw ShapeError(fmt::format("stack: expects each tensor to be equal size, but got {} at entry 0 and {} at "
                                         "entry {}", tensors[0].describe(), tensors[i].describe(), i));
        parts.push_back(unsqueeze(tensors[i], dim));
    }
    return cat(parts, dim);
}

Tensor contiguous(const Tensor& x) {
    ops::check_defined("contiguous", x, "input");
    if (x.is_contiguous()) return x;
    return clone(x);
}

Tensor clone(const Tensor& x) {
    ops::check_defined("clone", x, "input");
    Tensor out = copy_raw(x, x.dtype(), x.device());
    return record("clone", out, {x}, {}, [](BackwardContext&, const tensor_list& g) { return tensor_list{g[0]}; });
}

Tensor to_dtype(const Tensor& x, DType dtype) {
    ops::check_defined("to", x, "input");
    if (x.dtype() == dtype) return x;
    Tensor out = copy_raw(x, dtype, x.device());
    if (!is_floating(dtype)) return out;                  // integer results carry no gradient
    DType src = x.dtype();
    return record("to_dtype", out, {x}, {}, [src](BackwardContext&, const tensor_list& g) {
        return tensor_list{to_dtype(g[0], src)};
    });
}

Tensor to_float8_saturated(const Tensor& x, DType fp8_dtype) {
    ops::check_defined("to_float8_saturated", x, "input");
    if (!is_float8(fp8_dtype))
        throw DTypeError(fmt::format("to_float8_saturated: the target must be float8_e4m3fn or float8_e5m2, got {}",
                                     dtype_name(fp8_dtype)));
    Tensor out = make_empty(x.sizes(), fp8_dtype, x.device());
    kernels::copy_saturating(out, x);
    DType src = x.dtype();
    return record("to_float8_saturated", out, {x}, {}, [src](BackwardContext&, const tensor_list& g) {
        return tensor_list{to_dtype(g[0], src)};
    });
}

// A copy from pinned host memory is queued without waiting (cuda/copy.cu); unless non_blocking, the
// host then waits for it, so the caller may reuse the pinned buffer at once (PyTorch's default).
Tensor to_device(const Tensor& x, Device device, bool non_blocking) {
    ops::check_defined("to", x, "input");
    if (x.device() == device) return x;
    Tensor out = copy_raw(x, x.dtype(), device);
    if (!non_blocking && x.is_pinned() && !device.is_cpu()) current_stream(device).synchronize();
    Device src = x.device();
    return record("to_device", out, {x}, {}, [src](BackwardContext&, const tensor_list& g) {
        return tensor_list{to_device(g[0], src)};
    });
}

}  // namespace ampgrad

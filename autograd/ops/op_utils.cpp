// op_utils.cpp: broadcasting, device/dtype checks and promotion shared by every op.
#include "autograd/ops/op_utils.hpp"

#include "autograd/grad_mode.hpp"

namespace ampgrad::ops {

Shape broadcast_shapes(std::string_view op, const Shape& a, const Shape& b) {
    size_t n = std::max(a.size(), b.size());
    Shape out(n);
    for (size_t i = 0; i < n; ++i) {
        int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
        int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
        if (da != db && da != 1 && db != 1)
            throw ShapeError(fmt::format("{}: shapes cannot be broadcast: {} and {} (dimension {}: {} vs {})", op,
                                         shape_str(a), shape_str(b), i, da, db));
        out[i] = da == 1 ? db : da;
    }
    return out;
}

Shape broadcast_shapes(std::string_view op, const Tensor& a, const Tensor& b) {
    try {
        return broadcast_shapes(op, a.sizes(), b.sizes());
    } catch (const ShapeError&) {
        throw ShapeError(fmt::format("{}: shapes cannot be broadcast: a is {}, b is {}", op, a.describe(),
                                     b.describe()));
    }
}

void check_defined(std::string_view op, const Tensor& t, std::string_view arg) {
    if (!t.defined()) throw ValueError(fmt::format("{}: argument '{}' is an undefined tensor", op, arg));
}

void check_same_device(std::string_view op, std::initializer_list<const Tensor*> ts) {
    const Tensor* first = nullptr;
    for (const Tensor* t : ts) {
        if (!t->defined()) continue;
        if (!first) { first = t; continue; }
        if (t->device() != first->device()) {
            std::string facts;
            char name = 'a';
            for (const Tensor* u : ts) {
                if (u->defined()) facts += fmt::format("{}{} is {}", facts.empty() ? "" : ", ", name, u->describe());
                ++name;
            }
            throw DeviceError(fmt::format("{}: devices differ: {}; move one operand with .to(device)", op, facts));
        }
    }
}

namespace {
// fp8 tensors are storage only (docs/fp8.md): arithmetic refuses them, naming the op.
void refuse_float8(std::string_view op, const Tensor& t) {
    if (t.defined() && is_float8(t.dtype()))
        throw DTypeError(fmt::format("{}: fp8 tensors support casts, copies and views only, got {}; cast with "
                                     ".to(kFloat32) or .to(kBFloat16) first (docs/fp8.md)", op, t.describe()));
}
}  // namespace

void check_floating(std::string_view op, const Tensor& t) {
    if (!is_floating(t.dtype()))
        throw DTypeError(fmt::format("{}: expected a floating tensor but got {}", op, t.describe()));
    refuse_float8(op, t);
}

int64_t wrap_dim(std::string_view op, int64_t dim, int64_t ndim) {
    int64_t n = std::max<int64_t>(ndim, 1);
    if (dim < -n || dim >= n)
        throw IndexError(fmt::format("{}: dimension {} is out of range for a tensor of {} dims (expected [{}, {}])",
                                     op, dim, ndim, -n, n - 1));
    return dim < 0 ? dim + n : dim;
}

void check_extremum_dims(std::string_view op, const Tensor& x, const std::vector<int64_t>& dims) {
    if (x.numel() != 0 || x.dim() == 0) return;
    for (int64_t d : dims)
        if (x.size(d) == 0)
            throw IndexError(fmt::format("{}: expected reduction dim {} to have non-zero size, but the input is {} "
                                         "(a max/min over no elements has no value); reduce over non-empty dims",
                                         op, d, x.describe()));
}

Tensor expand_raw(const Tensor& t, const Shape& shape) {
    if (t.sizes() == shape) return t;
    size_t lead = shape.size() - t.sizes().size();
    Shape strides(shape.size(), 0);
    for (size_t i = 0; i < t.sizes().size(); ++i)
        strides[lead + i] = t.sizes()[i] == 1 && shape[lead + i] != 1 ? 0 : t.strides()[i];
    return make_view(t, shape, strides, t.storage_offset());
}

Tensor cast_raw(const Tensor& t, DType dtype) {
    if (t.dtype() == dtype) return t;
    Tensor out = make_empty(t.sizes(), dtype, t.device());
    kernels::copy(out, t);
    return out;
}

namespace {
int category(DType t) { return t == kBool ? 0 : (is_floating(t) ? 2 : 1); }
}  // namespace

// PyTorch's rule (aten/src/ATen/native/TypeProperties.cpp, ResultTypeState): dimensioned tensors
// promote among themselves; a 0-dim tensor takes part only when its category (bool < int < float)
// is higher than theirs, and then with its own dtype: int64 tensor + f64 0-dim -> f64, int64 +
// f16 0-dim -> f16. (A Python float is a 0-dim tensor of the default dtype, f32: wrapped_scalar.)
DType result_type(const Tensor& a, const Tensor& b) {
    bool a_scalar = a.dim() == 0, b_scalar = b.dim() == 0;
    if (a_scalar != b_scalar) {
        const Tensor& dim_t = a_scalar ? b : a;
        const Tensor& zero_t = a_scalar ? a : b;
        return category(zero_t.dtype()) > category(dim_t.dtype()) ? zero_t.dtype() : dim_t.dtype();
    }
    return promote_types(a.dtype(), b.dtype());
}

Tensor wrapped_scalar(double value, const Tensor& like) {
    DType dt = is_floating(like.dtype()) ? like.dtype()
                                         : (value == static_cast<double>(static_cast<int64_t>(value)) ? like.dtype() : kFloat32);
    if (dt == kBool) dt = kInt64;
    Tensor s = make_empty({}, dt, like.device());
    kernels::fill(s, value);
    return s;
}

Tensor binary_raw(BinaryOp op, std::string_view name, const Tensor& a, const Tensor& b) {
    check_defined(name, a, "a");
    check_defined(name, b, "b");
    check_same_device(name, {&a, &b});
    refuse_float8(name, a);
    refuse_float8(name, b);
    Shape shape = broadcast_shapes(name, a, b);
    DType compute = result_type(a, b);
    if (op == BinaryOp::kDiv && !is_floating(compute)) compute = kFloat32;   // true division, as in PyTorch
    Tensor out = make_empty(shape, is_comparison(op) ? kBool : compute, a.device());
    kernels::binary(op, out, expand_raw(cast_raw(a, compute), shape), expand_raw(cast_raw(b, compute), shape));
    return out;
}

Tensor unary_raw(UnaryOp op, const Tensor& x) {
    check_defined(op_name(op), x, "input");
    refuse_float8(op_name(op), x);
    Tensor out = make_empty(x.sizes(), x.dtype(), x.device());
    kernels::unary(op, out, x);
    return out;
}

}  // namespace ampgrad::ops

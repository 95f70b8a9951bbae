// factory.cpp: tensor factories (zeros, ones, full, randn, rand, randint, arange, tensor, *_like).
// Values made on the host (tensor, arange) reach an accelerator from pinned memory, without a host
// wait. Random factories draw from the default Philox generator (core/philox.hpp), so a seed gives the
// same tensors on every run and every device.
#include <cmath>

#include "autograd/ops/op_utils.hpp"
#include "autograd/ops/ops.hpp"
#include "core/philox.hpp"

namespace ampgrad {

namespace {
Tensor finish(Tensor t, const TensorOptions& opts) {
    if (opts.requires_grad()) t.requires_grad_(true);
    return t;
}
}  // namespace

Tensor empty(const Shape& shape, TensorOptions opts) {
    return finish(make_empty(shape, opts.dtype(), opts.device()), opts);
}

Tensor full(const Shape& shape, double value, TensorOptions opts) {
    Tensor t = make_empty(shape, opts.dtype(), opts.device());
    kernels::fill(t, value);
    return finish(std::move(t), opts);
}

Tensor zeros(const Shape& shape, TensorOptions opts) { return full(shape, 0.0, opts); }
Tensor ones(const Shape& shape, TensorOptions opts) { return full(shape, 1.0, opts); }
Tensor scalar_tensor(double value, TensorOptions opts) { return full({}, value, opts); }

Tensor randn(const Shape& shape, TensorOptions opts) {
    if (!is_floating(opts.dtype()))
        throw DTypeError(fmt::format("randn: expected a floating dtype but got {}", dtype_name(opts.dtype())));
    Tensor t = make_empty(shape, opts.dtype(), opts.device());
    GeneratorState g = get_rng_state();
    uint64_t offset = generator_reserve_elements(t.numel());
    kernels::random_normal(t, g.seed, offset, 0.0, 1.0);
    return finish(std::move(t), opts);
}

Tensor rand(const Shape& shape, TensorOptions opts) {
    if (!is_floating(opts.dtype()))
        throw DTypeError(fmt::format("rand: expected a floating dtype but got {}", dtype_name(opts.dtype())));
    Tensor t = make_empty(shape, opts.dtype(), opts.device());
    GeneratorState g = get_rng_state();
    uint64_t offset = generator_reserve_elements(t.numel());
    kernels::random_uniform(t, g.seed, offset, 0.0, 1.0);
    return finish(std::move(t), opts);
}

// Uniform integers in [low, high): draw u in [0, high-low), truncate (= floor, u >= 0), add low.
Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions opts) {
    if (high <= low) throw ValueError(fmt::format("randint: expected low < high but got low={} high={}", low, high));
    Device dev = opts.device();
    Tensor u = make_empty(shape, kFloat64, dev);
    GeneratorState g = get_rng_state();
    uint64_t offset = generator_reserve_elements(u.numel());
    double span = static_cast<double>(high - low);
    kernels::random_uniform(u, g.seed, offset, 0.0, span);
    kernels::clamp(u, u, 0.0, span - 0.5);           // guard against u == span after rounding
    Tensor k = make_empty(shape, kInt64, dev);
    kernels::copy(k, u);
    Tensor lo = ops::expand_raw(full({}, static_cast<double>(low), TensorOptions(kInt64).device(dev)), shape);
    kernels::add_scaled(k, k, lo, 1.0);
    return finish(ops::cast_raw(k, opts.has_dtype() ? opts.dtype() : kInt64), opts);
}

Tensor randint(int64_t high, const Shape& shape, TensorOptions opts) { return randint(0, high, shape, opts); }

Tensor arange_values(double start, double end, double step, bool integral, TensorOptions opts) {
    if (!opts.has_dtype()) opts = opts.dtype(integral ? kInt64 : kFloat32);
    if (step == 0) throw ValueError("arange: step must be nonzero");
    int64_t n = static_cast<int64_t>(std::ceil((end - start) / step));
    if (n < 0) throw ValueError(fmt::format("arange: upper bound {} and step {} are inconsistent with start {}", end, step, start));
    std::vector<double> values(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) values[static_cast<size_t>(i)] = start + static_cast<double>(i) * step;
    return tensor(values, {n}, opts);
}

// The options given override t's field by field (zeros_like(t, requires_grad(true)) keeps t's dtype).
Tensor zeros_like(const Tensor& t, std::optional<TensorOptions> opts) {
    return zeros(t.sizes(), opts ? t.options().merge_in(*opts) : t.options());
}
Tensor ones_like(const Tensor& t, std::optional<TensorOptions> opts) {
    return ones(t.sizes(), opts ? t.options().merge_in(*opts) : t.options());
}
Tensor full_like(const Tensor& t, double value) { return full(t.sizes(), value, t.options()); }
Tensor empty_like(const Tensor& t) { return empty(t.sizes(), t.options()); }

template <typename T>
Tensor tensor(const std::vector<T>& values, const Shape& shape, TensorOptions opts) {
    if (static_cast<int64_t>(values.size()) != shape_numel(shape))
        throw ShapeError(fmt::format("tensor: {} values cannot fill shape {} ({} elements)", values.size(),
                                     shape_str(shape), shape_numel(shape)));
    Tensor host = make_empty(shape, dtype_of<T>(), Device(kCPU));
    T* p = host.data_ptr<T>();
    for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
    // For an accelerator the values go up from page-locked memory: that copy is only queued on the
    // stream (a pageable one makes the driver wait for the stream first), so tensor() and arange()
    // on a GPU, as a forward's position ids, make no host synchronisation (also when the dtype
    // changes, as arange's doubles going up as int64: cuda/copy.cu then converts on the GPU).
    if (!opts.device().is_cpu()) host = host.pin_memory(opts.device().type);
    Tensor t = make_empty(shape, opts.has_dtype() ? opts.dtype() : dtype_of<T>(), opts.device());
    kernels::copy(t, host);
    return finish(std::move(t), opts);
}

template <typename T>
Tensor tensor(const std::vector<T>& values, const Shape& shape) {
    return tensor(values, shape, TensorOptions(dtype_of<T>()));
}

template <typename T>
Tensor tensor(const std::vector<T>& values) {
    return tensor(values, {static_cast<int64_t>(values.size())}, TensorOptions(dtype_of<T>()));
}

#define AMPGRAD_INSTANTIATE(T)                                                         \
    template Tensor tensor<T>(const std::vector<T>&, const Shape&, TensorOptions);     \
    template Tensor tensor<T>(const std::vector<T>&, const Shape&);                    \
    template Tensor tensor<T>(const std::vector<T>&);
AMPGRAD_INSTANTIATE(float)
AMPGRAD_INSTANTIATE(double)
AMPGRAD_INSTANTIATE(int64_t)
AMPGRAD_INSTANTIATE(int32_t)
AMPGRAD_INSTANTIATE(Half)
AMPGRAD_INSTANTIATE(BFloat16)
AMPGRAD_INSTANTIATE(Float8_e4m3fn)
AMPGRAD_INSTANTIATE(Float8_e5m2)
AMPGRAD_INSTANTIATE(uint8_t)
#undef AMPGRAD_INSTANTIATE

template <>
Tensor tensor<bool>(const std::vector<bool>& values, const Shape& shape, TensorOptions opts) {
    std::vector<int32_t> ints(values.begin(), values.end());   // std::vector<bool> has no contiguous storage
    return tensor(ints, shape, opts.has_dtype() ? opts : opts.dtype(kBool));
}
template <>
Tensor tensor<bool>(const std::vector<bool>& values, const Shape& shape) {
    return tensor<bool>(values, shape, TensorOptions(kBool));
}
template <>
Tensor tensor<bool>(const std::vector<bool>& values) {
    return tensor<bool>(values, {static_cast<int64_t>(values.size())}, TensorOptions(kBool));
}

}  // namespace ampgrad

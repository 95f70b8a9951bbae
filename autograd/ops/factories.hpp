// factories.hpp: the tensor factories (part of autograd/ops/ops.hpp, which includes it; defined in
// autograd/ops/factory.cpp): empty, zeros, ones, full, randn, rand, randint, arange, the *_like
// forms and tensor() from values, with libtorch's dtype rules (below) and spellings.
#pragma once
#include <initializer_list>
#include <optional>
#include <type_traits>
#include <vector>

#include "core/tensor.hpp"

namespace ampgrad {

// ---- factories (autograd/ops/factory.cpp) ----
Tensor empty(const Shape& shape, TensorOptions opts = {});
Tensor zeros(const Shape& shape, TensorOptions opts = {});
Tensor ones(const Shape& shape, TensorOptions opts = {});
// Options with no dtype give f32, except where a factory's arguments say otherwise, as in libtorch:
// an integral fill value gives int64 (bool: kBool), randint int64, arange int64 when every bound is an
// integer, tensor(std::vector<T>) T's dtype, and the *_like factories the model tensor's.
Tensor full(const Shape& shape, double value, TensorOptions opts = {});
template <typename I> requires std::is_integral_v<I>
Tensor full(const Shape& shape, I value, TensorOptions opts = {}) {
    if (!opts.has_dtype()) opts = opts.dtype(std::is_same_v<I, bool> ? kBool : kInt64);
    return full(shape, static_cast<double>(value), opts);
}
Tensor randn(const Shape& shape, TensorOptions opts = {});
Tensor rand(const Shape& shape, TensorOptions opts = {});
Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions opts = {});
Tensor randint(int64_t high, const Shape& shape, TensorOptions opts = {});   // low = 0
// One integer is a 1-d size, as libtorch's IntArrayRef takes it: zeros(5) is zeros({5}). (A braced
// list, zeros({}) included, is the Shape overload.)
template <typename I>
concept SizeInteger = std::is_integral_v<I> && !std::is_same_v<I, bool>;
template <SizeInteger I> Tensor empty(I n, TensorOptions opts = {}) { return empty(Shape{static_cast<int64_t>(n)}, opts); }
template <SizeInteger I> Tensor zeros(I n, TensorOptions opts = {}) { return zeros(Shape{static_cast<int64_t>(n)}, opts); }
template <SizeInteger I> Tensor ones(I n, TensorOptions opts = {}) { return ones(Shape{static_cast<int64_t>(n)}, opts); }
template <SizeInteger I> Tensor randn(I n, TensorOptions opts = {}) { return randn(Shape{static_cast<int64_t>(n)}, opts); }
template <SizeInteger I> Tensor rand(I n, TensorOptions opts = {}) { return rand(Shape{static_cast<int64_t>(n)}, opts); }
// Values start, start + step, ... below end; `integral`: every bound was an integer (int64 by default).
Tensor arange_values(double start, double end, double step, bool integral, TensorOptions opts);
template <typename E> requires std::is_arithmetic_v<E>
Tensor arange(E end, TensorOptions opts = {}) {
    return arange_values(0.0, static_cast<double>(end), 1.0, std::is_integral_v<E>, opts);
}
template <typename S, typename E, typename St = int64_t>
    requires std::is_arithmetic_v<S> && std::is_arithmetic_v<E> && std::is_arithmetic_v<St>
Tensor arange(S start, E end, St step = 1, TensorOptions opts = {}) {
    constexpr bool integral = std::is_integral_v<S> && std::is_integral_v<E> && std::is_integral_v<St>;
    return arange_values(static_cast<double>(start), static_cast<double>(end), static_cast<double>(step), integral,
                         opts);
}
Tensor zeros_like(const Tensor& t, std::optional<TensorOptions> opts = std::nullopt);
Tensor ones_like(const Tensor& t, std::optional<TensorOptions> opts = std::nullopt);
Tensor full_like(const Tensor& t, double value);
Tensor empty_like(const Tensor& t);
Tensor scalar_tensor(double value, TensorOptions opts = {});
template <typename T> Tensor tensor(const std::vector<T>& values, const Shape& shape, TensorOptions opts);
template <typename T> Tensor tensor(const std::vector<T>& values, const Shape& shape);   // dtype from T
template <typename T> Tensor tensor(const std::vector<T>& values);                        // 1-d
// Options (a TensorOptions, a DType, requires_grad(true)) where a Shape could also go: a braced `{}`
// there stays the Shape overload's empty shape (a 0-dim tensor).
template <typename O>
concept OptionsArgument = std::is_convertible_v<O, TensorOptions> && !std::is_convertible_v<O, Shape>;
template <typename T, OptionsArgument O> Tensor tensor(const std::vector<T>& values, O opts) {   // 1-d
    return tensor(values, Shape{static_cast<int64_t>(values.size())}, TensorOptions(opts));
}
// Braced forms, libtorch's torch::tensor({1.5, 2.0}, {2}): the values are a std::vector<T>, so the
// dtype is T's as above (tensor<double>({1, 2}) and tensor({1.5, 2.0}) are f64, tensor({1, 2}) int32;
// libtorch would give f32 and int64), unless the options name one.
template <typename T>
Tensor tensor(std::initializer_list<T> values, const Shape& shape, TensorOptions opts = {}) {
    return tensor(std::vector<T>(values), shape, opts.has_dtype() ? opts : opts.dtype(dtype_of<T>()));
}
template <typename T>
Tensor tensor(std::initializer_list<T> values) {   // 1-d
    return tensor(values, Shape{static_cast<int64_t>(values.size())});
}
template <typename T, OptionsArgument O>
Tensor tensor(std::initializer_list<T> values, O opts) {   // 1-d
    return tensor(values, Shape{static_cast<int64_t>(values.size())}, TensorOptions(opts));
}
// A number, libtorch's torch::tensor(3.5): a 0-dim tensor, f32 for a floating value and int64 for an
// integer (bool: kBool), as libtorch's, unless the options name a dtype.
template <typename T> requires std::is_arithmetic_v<T>
Tensor tensor(T value, TensorOptions opts = {}) {
    if constexpr (std::is_same_v<T, bool>) {
        return tensor(std::vector<bool>{value}, Shape{}, opts.has_dtype() ? opts : opts.dtype(kBool));
    } else if constexpr (std::is_floating_point_v<T>) {
        return tensor(std::vector<double>{static_cast<double>(value)}, Shape{}, opts.has_dtype() ? opts : opts.dtype(kFloat32));
    } else {   // exact: an int64 value past 2^53 does not go through a double
        return tensor(std::vector<int64_t>{static_cast<int64_t>(value)}, Shape{}, opts.has_dtype() ? opts : opts.dtype(kInt64));
    }
}

}  // namespace ampgrad

// elementwise.cu: unary, binary, axpy, where, clamp and activation-gradient kernels, the GPU twins
// of cpu/elementwise.cpp. Both use kernels/scalar_math.hpp's formulas, so results agree to the math
// library's last bits, and the op lists of kernels/kernels.hpp expand into the switches below.
// Every kernel loads to device_compute_t<T> (fp32 for f16/bf16), applies the op, and rounds once
// on store. The op is a kernel argument, switched on per element: it is the same for every
// thread, so the branch costs nothing next to the memory traffic, and each dtype needs one kernel.
#include <limits>

#include "kernels/bounds.hpp"
#include "kernels/scalar_math.hpp"
#include "cuda/loops.cuh"

namespace ampgrad::cuda {

namespace {

// ---- kernels: the op lists of kernels/kernels.hpp expanded over kernels/scalar_math.hpp's formulas ----

// C is float or double
template <typename C>
__device__ C unary_float_value(UnaryOp op, C x) {
    switch (op) {
#define AMPGRAD_UNARY_CASE(e, name, F) \
        case UnaryOp::e: return static_cast<C>(formulas::F::value(x));
        AMPGRAD_UNARY_OPS(AMPGRAD_UNARY_CASE)
#undef AMPGRAD_UNARY_CASE
    }
    return x;
}

// T is int64_t or int32_t; the host only launches the ops integers support
template <typename T>
__device__ T unary_int_value(UnaryOp op, T x) {
    switch (op) {
#define AMPGRAD_UNARY_INT_CASE(e, name, F)                                          \
        case UnaryOp::e:                                                            \
            if constexpr (formulas::F::kIntegers) return static_cast<T>(formulas::F::value(x)); \
            else return x;
        AMPGRAD_UNARY_OPS(AMPGRAD_UNARY_INT_CASE)
#undef AMPGRAD_UNARY_INT_CASE
    }
    return x;
}

template <typename T>
__global__ void unary_kernel(int64_t n, UnaryOp op, OffsetCalc<2> calc, T* out, const T* in) {
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        Offsets<2> o = calc.get(i);
        if constexpr (std::is_integral_v<T>) out[o.at[0]] = unary_int_value(op, in[o.at[1]]);
        else out[o.at[0]] = store_compute<T>(unary_float_value(op, load_compute(in[o.at[1]])));
    }
}

// unary_kernel for contiguous, 16-byte-aligned float operands: one 128-bit load and store per vector.
template <typename T>
__global__ void unary_vec_kernel(int64_t n, UnaryOp op, T* out, const T* in) {
    using V = Vec16<T>;
    const int64_t vectors = n / kVecWidth<T>;
    for (int64_t i = first_index(); i < vectors; i += grid_stride()) {
        V x = reinterpret_cast<const V*>(in)[i];
#pragma unroll
        for (int k = 0; k < kVecWidth<T>; ++k) x.v[k] = store_compute<T>(unary_float_value(op, load_compute(x.v[k])));
        reinterpret_cast<V*>(out)[i] = x;
    }
    for (int64_t i = vectors * kVecWidth<T> + first_index(); i < n; i += grid_stride())   // the tail
        out[i] = store_compute<T>(unary_float_value(op, load_compute(in[i])));
}

template <typename T>
__global__ void logical_not_kernel(int64_t n, OffsetCalc<2> calc, bool* out, const T* in) {
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        Offsets<2> o = calc.get(i);
        out[o.at[0]] = formulas::LogicalNot::value(load_compute(in[o.at[1]]));
    }
}

// C is the compute type (float, double, int64_t, int32_t)
template <typename C>
__device__ C arithmetic_value(BinaryOp op, C x, C y) {
    switch (op) {
#define AMPGRAD_ARITHMETIC_CASE(e, name, F) \
        case BinaryOp::e: return formulas::F::value(x, y);
        AMPGRAD_ARITHMETIC_OPS(AMPGRAD_ARITHMETIC_CASE)
#undef AMPGRAD_ARITHMETIC_CASE
        default: return x;                                            // comparisons: compare_kernel
    }
}

template <typename C>
__device__ bool compare_value(BinaryOp op, C x, C y) {
    switch (op) {
#define AMPGRAD_COMPARISON_CASE(e, name, F) \
        case BinaryOp::e: return formulas::F::value(x, y);
        AMPGRAD_COMPARISON_OPS(AMPGRAD_COMPARISON_CASE)
#undef AMPGRAD_COMPARISON_CASE
        default: return false;
    }
}

template <typename T>
__global__ void arithmetic_kernel(int64_t n, BinaryOp op, OffsetCalc<3> calc, T* out, const T* a, const T* b) {
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        Offsets<3> o = calc.get(i);
        out[o.at[0]] = store_compute<T>(arithmetic_value(op, load_compute(a[o.at[1]]), load_compute(b[o.at[2]])));
    }
}

// arithmetic_kernel for contiguous, 16-byte-aligned float operands.
template <typename T>
__global__ void arithmetic_vec_kernel(int64_t n, BinaryOp op, T* out, const T* a, const T* b) {
    using V = Vec16<T>;
    const int64_t vectors = n / kVecWidth<T>;
    for (int64_t i = first_index(); i < vectors; i += grid_stride()) {
        V x = reinterpret_cast<const V*>(a)[i];
        const V y = reinterpret_cast<const V*>(b)[i];
#pragma unroll
        for (int k = 0; k < kVecWidth<T>; ++k)
            x.v[k] = store_compute<T>(arithmetic_value(op, load_compute(x.v[k]), load_compute(y.v[k])));
        reinterpret_cast<V*>(out)[i] = x;
    }
    for (int64_t i = vectors * kVecWidth<T> + first_index(); i < n; i += grid_stride())   // the tail
        out[i] = store_compute<T>(arithmetic_value(op, load_compute(a[i]), load_compute(b[i])));
}

template <typename T>
__global__ void compare_kernel(int64_t n, BinaryOp op, OffsetCalc<3> calc, bool* out, const T* a, const T* b) {
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        Offsets<3> o = calc.get(i);
        out[o.at[0]] = compare_value(op, load_compute(a[o.at[1]]), load_compute(b[o.at[2]]));
    }
}

// out = a (op) s, or s (op) a; s is already in the compute type (no rounding to T)
template <typename T>
__global__ void binary_scalar_kernel(int64_t n, BinaryOp op, bool scalar_first, OffsetCalc<2> calc, T* out,
                                     const T* a, device_compute_t<T> s) {
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        Offsets<2> o = calc.get(i);
        device_compute_t<T> x = load_compute(a[o.at[1]]);
        out[o.at[0]] = store_compute<T>(scalar_first ? arithmetic_value(op, s, x) : arithmetic_value(op, x, s));
    }
}

// out = a + alpha * b (bool: a || b)
template <typename T>
__global__ void add_scaled_kernel(int64_t n, OffsetCalc<3> calc, T* out, const T* a, const T* b,
                                  device_compute_t<T> alpha) {
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        Offsets<3> o = calc.get(i);
        if constexpr (std::is_same_v<T, bool>) out[o.at[0]] = a[o.at[1]] || b[o.at[2]];
        else out[o.at[0]] = store_compute<T>(load_compute(a[o.at[1]]) + alpha * load_compute(b[o.at[2]]));
    }
}

// Bits is an unsigned integer as wide as the element: where only moves bytes.
template <typename Bits>
__global__ void where_kernel(int64_t n, OffsetCalc<4> calc, Bits* out, const bool* cond, const Bits* a,
                             const Bits* b) {
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        Offsets<4> o = calc.get(i);
        out[o.at[0]] = cond[o.at[1]] ? a[o.at[2]] : b[o.at[3]];
    }
}

template <typename T>
__global__ void clamp_kernel(int64_t n, OffsetCalc<2> calc, T* out, const T* in, device_compute_t<T> lo,
                             device_compute_t<T> hi) {
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        Offsets<2> o = calc.get(i);
        device_compute_t<T> x = load_compute(in[o.at[1]]);
        out[o.at[0]] = store_compute<T>(formulas::clamp(x, lo, hi));
    }
}

// dx = dy * f'(x), C is float or double
template <typename C>
__device__ C activation_grad_value(ActivationGrad op, C v, C g) {
    switch (op) {
#define AMPGRAD_GRAD_CASE(e, name, F) \
        case ActivationGrad::e: return formulas::F::grad(v, g);
        AMPGRAD_ACTIVATION_GRADS(AMPGRAD_GRAD_CASE)
#undef AMPGRAD_GRAD_CASE
    }
    return g;
}

template <typename T>
__global__ void activation_backward_kernel(int64_t n, ActivationGrad op, OffsetCalc<3> calc, T* dx, const T* x,
                                           const T* dy) {
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        Offsets<3> o = calc.get(i);
        dx[o.at[0]] = store_compute<T>(activation_grad_value(op, load_compute(x[o.at[1]]), load_compute(dy[o.at[2]])));
    }
}

// ---- launchers ----


bool int_supports(UnaryOp op) {
    switch (op) {
#define AMPGRAD_INT_SUPPORT(e, name, F) \
        case UnaryOp::e: return formulas::F::kIntegers;
        AMPGRAD_UNARY_OPS(AMPGRAD_INT_SUPPORT)
#undef AMPGRAD_INT_SUPPORT
    }
    return false;
}

template <typename Bits>
void where_typed(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
    int64_t n = out.numel();
    OffsetCalc<4> calc = make_offset_calc<4>({&out, &cond, &a, &b});
    where_kernel<Bits><<<grid_for(n), kBlockSize, 0, current_stream()>>>(
        n, calc, device_ptr<Bits>(out), device_ptr<const bool>(cond), device_ptr<const Bits>(a),
        device_ptr<const Bits>(b));
    CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void unary(UnaryOp op, const Tensor& out, const Tensor& in) {
    const int index = out.device().index;
    require_on_device(op_name(op).data(), index, {&out, &in});
    int64_t n = out.numel();
    if (n == 0) return;
    DeviceGuard guard(index);
    OffsetCalc<2> calc = make_offset_calc<2>({&out, &in});
    if (op == UnaryOp::kLogicalNot) {
        dispatch_all(in.dtype(), "logical_not", [&](auto tag) {
            using T = decltype(tag);
            logical_not_kernel<T><<<grid_for(n), kBlockSize, 0, current_stream()>>>(n, calc, device_ptr<bool>(out),
                                                                                     device_ptr<const T>(in));
            CUDA_CHECK(cudaGetLastError());
        });
        return;
    }
    dispatch_all(in.dtype(), "unary", [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_same_v<T, bool>) {
            throw DTypeError(fmt::format("{}: not supported for bool tensor {}", op_name(op), in.describe()));
        } else {
            if (std::is_integral_v<T> && !int_supports(op))
                throw DTypeError(fmt::format("{}: not supported for integer tensor {}", op_name(op), in.describe()));
            if constexpr (!std::is_integral_v<T>) {
                if (vectorizable<2>(calc, {out.raw_data(), in.raw_data()})) {
                    unary_vec_kernel<T><<<grid_for_vectors<T>(n), kBlockSize, 0, current_stream()>>>(
                        n, op, device_ptr<T>(out), device_ptr<const T>(in));
                    CUDA_CHECK(cudaGetLastError());
                    return;
                }
            }
            unary_kernel<T><<<grid_for(n), kBlockSize, 0, current_stream()>>>(n, op, calc, device_ptr<T>(out),
                                                                              device_ptr<const T>(in));
            CUDA_CHECK(cudaGetLastError());
        }
    });
}

void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
    const int index = out.device().index;
    require_on_device(op_name(op).data(), index, {&out, &a, &b});
    int64_t n = out.numel();
    if (n == 0) return;
    AMPGRAD_CHECK(a.dtype() == b.dtype(), "{}: operand dtypes differ ({} vs {})", op_name(op), a.describe(),
                  b.describe());
    DeviceGuard guard(index);
    OffsetCalc<3> calc = make_offset_calc<3>({&out, &a, &b});
    dispatch_all(a.dtype(), "binary", [&](auto tag) {
        using T = decltype(tag);
        if (is_comparison(op)) {
            compare_kernel<T><<<grid_for(n), kBlockSize, 0, current_stream()>>>(
                n, op, calc, device_ptr<bool>(out), device_ptr<const T>(a), device_ptr<const T>(b));
            CUDA_CHECK(cudaGetLastError());
        } else if constexpr (std::is_same_v<T, bool>) {
            throw DTypeError(fmt::format("{}: not supported for bool tensors ({}, {})", op_name(op), a.describe(),
                                         b.describe()));
        } else {
            if constexpr (!std::is_integral_v<T>) {
                if (vectorizable<3>(calc, {out.raw_data(), a.raw_data(), b.raw_data()})) {
                    arithmetic_vec_kernel<T><<<grid_for_vectors<T>(n), kBlockSize, 0, current_stream()>>>(
                        n, op, device_ptr<T>(out), device_ptr<const T>(a), device_ptr<const T>(b));
                    CUDA_CHECK(cudaGetLastError());
                    return;
                }
            }
            arithmetic_kernel<T><<<grid_for(n), kBlockSize, 0, current_stream()>>>(
                n, op, calc, device_ptr<T>(out), device_ptr<const T>(a), device_ptr<const T>(b));
            CUDA_CHECK(cudaGetLastError());
        }
    });
}

void binary_scalar(BinaryOp op, const Tensor& out, const Tensor& a, double scalar,
                   bool scalar_first) {
    const int index = out.device().index;
    require_on_device(op_name(op).data(), index, {&out, &a});
    int64_t n = out.numel();
    if (n == 0) return;
    AMPGRAD_CHECK(!is_comparison(op), "binary_scalar called with {}", op_name(op));
    DeviceGuard guard(index);
    OffsetCalc<2> calc = make_offset_calc<2>({&out, &a});
    dispatch_float(a.dtype(), "binary_scalar", [&](auto tag) {
        using T = decltype(tag);
        binary_scalar_kernel<T><<<grid_for(n), kBlockSize, 0, current_stream()>>>(
            n, op, scalar_first, calc, device_ptr<T>(out), device_ptr<const T>(a),
            static_cast<device_compute_t<T>>(scalar));
        CUDA_CHECK(cudaGetLastError());
    });
}

void add_scaled(const Tensor& out, const Tensor& a, const Tensor& b, double alpha) {
    const int index = out.device().index;
    require_on_device("add", index, {&out, &a, &b});
    int64_t n = out.numel();
    if (n == 0) return;
    DeviceGuard guard(index);
    OffsetCalc<3> calc = make_offset_calc<3>({&out, &a, &b});
    dispatch_all(out.dtype(), "add", [&](auto tag) {
        using T = decltype(tag);
        add_scaled_kernel<T><<<grid_for(n), kBlockSize, 0, current_stream()>>>(
            n, calc, device_ptr<T>(out), device_ptr<const T>(a), device_ptr<const T>(b),
            static_cast<device_compute_t<T>>(alpha));
        CUDA_CHECK(cudaGetLastError());
    });
}

void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
    const int index = out.device().index;
    require_on_device("where", index, {&out, &cond, &a, &b});
    if (out.numel() == 0) return;
    AMPGRAD_CHECK(cond.dtype() == kBool, "where: condition is {}", cond.describe());
    DeviceGuard guard(index);
    switch (out.element_size()) {
        case 1: return where_typed<uint8_t>(out, cond, a, b);
        case 2: return where_typed<uint16_t>(out, cond, a, b);
        case 4: return where_typed<uint32_t>(out, cond, a, b);
        case 8: return where_typed<uint64_t>(out, cond, a, b);
    }
    throw_bad_dtype("where", out.dtype(), "a known dtype");
}

void clamp(const Tensor& out, const Tensor& in, std::optional<double> lo, std::optional<double> hi) {
    const int index = out.device().index;
    require_on_device("clamp", index, {&out, &in});
    int64_t n = out.numel();
    if (n == 0) return;
    DeviceGuard guard(index);
    OffsetCalc<2> calc = make_offset_calc<2>({&out, &in});
    dispatch_all(in.dtype(), "clamp", [&](auto tag) {
        using T = decltype(tag);
        using C = device_compute_t<T>;
        if constexpr (std::is_same_v<T, bool>) {
            throw DTypeError(fmt::format("clamp: not supported for bool tensor {}", in.describe()));
        } else {
            // a bound is rounded to x's dtype first, as PyTorch's clamp_scalar_kernel_impl does
            // (min_.to<scalar_t>()): f16 x = -0 clamped at 1e-12 stays -0 (the bound rounds to 0)
            // f16/bf16 round through float, as c10's Half(float(double)) and cpu/ do: __double2half
            // rounds once, and differs just above a half-way point (1 + 2^-11 + 2^-40).
            auto bound = [](double v) {
                if constexpr (std::is_integral_v<T> || std::is_floating_point_v<T>) return static_cast<C>(v);
                else return static_cast<C>(static_cast<T>(static_cast<float>(v)));
            };
            C l = lo ? bound(*lo) : no_lower_bound<C>();   // a missing bound clamps nothing,
            C h = hi ? bound(*hi) : no_upper_bound<C>();   // not even +-inf
            clamp_kernel<T><<<grid_for(n), kBlockSize, 0, current_stream()>>>(n, calc, device_ptr<T>(out),
                                                                              device_ptr<const T>(in), l, h);
            CUDA_CHECK(cudaGetLastError());
        }
    });
}

void activation_backward(ActivationGrad op, const Tensor& dx, const Tensor& x, const Tensor& dy) {
    const int index = dx.device().index;
    require_on_device("activation_backward", index, {&dx, &x, &dy});
    int64_t n = dx.numel();
    if (n == 0) return;
    DeviceGuard guard(index);
    OffsetCalc<3> calc = make_offset_calc<3>({&dx, &x, &dy});
    dispatch_float(x.dtype(), "activation_backward", [&](auto tag) {
        using T = decltype(tag);
        activation_backward_kernel<T><<<grid_for(n), kBlockSize, 0, current_stream()>>>(
            n, op, calc, device_ptr<T>(dx), device_ptr<const T>(x), device_ptr<const T>(dy));
        CUDA_CHECK(cudaGetLastError());
    });
}

AMPGRAD_REGISTER_KERNEL(kernels::unary, kCUDA, unary);
AMPGRAD_REGISTER_KERNEL(kernels::binary, kCUDA, binary);
AMPGRAD_REGISTER_KERNEL(kernels::binary_scalar, kCUDA, binary_scalar);
AMPGRAD_REGISTER_KERNEL(kernels::add_scaled, kCUDA, add_scaled);
AMPGRAD_REGISTER_KERNEL(kernels::where, kCUDA, where);
AMPGRAD_REGISTER_KERNEL(kernels::clamp, kCUDA, clamp);
AMPGRAD_REGISTER_KERNEL(kernels::activation_backward, kCUDA, activation_backward);

}  // namespace ampgrad::cuda

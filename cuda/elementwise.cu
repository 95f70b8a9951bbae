// elementwise.cu: unary, binary, axpy, where, clamp and activation-gradient kernels, the GPU twins
// of cpu/elementwise.cpp (same formulas, so results agree to the math library's last bits).
// Every kernel loads to device_compute_t<T> (fp32 for f16/bf16), applies the op, and rounds once
// on store. The op is a kernel argument, switched on per element: it is the same for every
// thread, so the branch costs nothing next to the memory traffic, and each dtype needs one kernel.
#include <limits>

#include "core/bounds.hpp"
#include "cuda/loops.cuh"

namespace ampgrad::cuda {

namespace {

constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kInvSqrt2 = 0.7071067811865476;
constexpr double kInvSqrt2Pi = 0.3989422804014327;

// ---- kernels ----

template <typename C>
__device__ __forceinline__ C sigmoid_of(C x) { return C(1) / (C(1) + exp(-x)); }

// C is float or double
template <typename C>
__device__ C unary_float_value(UnaryOp op, C x) {
    switch (op) {
        case UnaryOp::kNeg: return -x;
        case UnaryOp::kExp: return exp(x);
        case UnaryOp::kLog: return log(x);
        case UnaryOp::kSqrt: return sqrt(x);
        case UnaryOp::kRsqrt: return C(1) / sqrt(x);
        case UnaryOp::kAbs: return fabs(x);
        case UnaryOp::kTanh: return tanh(x);
        case UnaryOp::kSigmoid: return sigmoid_of(x);
        case UnaryOp::kRelu: return x < C(0) ? C(0) : x;
        case UnaryOp::kGeluTanh: {
            C inner = C(kSqrt2OverPi) * (x + C(0.044715) * x * x * x);
            return C(0.5) * x * (C(1) + tanh(inner));
        }
        case UnaryOp::kGeluErf: return C(0.5) * x * (C(1) + erf(x * C(kInvSqrt2)));
        case UnaryOp::kSilu: return x * sigmoid_of(x);
        case UnaryOp::kSign: return C((x > C(0)) - (x < C(0)));
        case UnaryOp::kReciprocal: return C(1) / x;
        case UnaryOp::kSquare: return x * x;
        case UnaryOp::kLogicalNot: break;             // has its own kernel
    }
    return x;
}

// T is int64_t or int32_t; the host only launches the ops integers support
template <typename T>
__device__ T unary_int_value(UnaryOp op, T x) {
    switch (op) {
        case UnaryOp::kNeg: return static_cast<T>(-x);
        case UnaryOp::kAbs: return static_cast<T>(x < 0 ? -x : x);
        case UnaryOp::kSquare: return static_cast<T>(x * x);
        case UnaryOp::kSign: return static_cast<T>((x > 0) - (x < 0));
        default: return x;
    }
}

template <typename T>
__global__ void unary_kernel(int64_t n, UnaryOp op, OffsetCalc<2> calc, T* out, const T* in) {
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        Offsets<2> o = calc.get(i);
        if constexpr (std::is_integral_v<T>) out[o.at[0]] = unary_int_value(op, in[o.at[1]]);
        else out[o.at[0]] = store_compute<T>(unary_float_value(op, load_compute(in[o.at[1]])));
    }
}

template <typename T>
__global__ void logical_not_kernel(int64_t n, OffsetCalc<2> calc, bool* out, const T* in) {
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        Offsets<2> o = calc.get(i);
        out[o.at[0]] = load_compute(in[o.at[1]]) == device_compute_t<T>(0);
    }
}

// C is the compute type (float, double, int64_t, int32_t)
template <typename C>
__device__ C arithmetic_value(BinaryOp op, C x, C y) {
    switch (op) {
        case BinaryOp::kAdd: return x + y;
        case BinaryOp::kSub: return x - y;
        case BinaryOp::kMul: return x * y;
        case BinaryOp::kDiv: return x / y;
        case BinaryOp::kPow:
            if constexpr (std::is_integral_v<C>) return static_cast<C>(pow(double(x), double(y)));
            else return pow(x, y);
        case BinaryOp::kMaximum: return (x != x || x > y) ? x : y;     // NaN propagates, as in PyTorch
        case BinaryOp::kMinimum: return (x != x || x < y) ? x : y;
        default: return x;                                            // comparisons: compare_kernel
    }
}

template <typename C>
__device__ bool compare_value(BinaryOp op, C x, C y) {
    switch (op) {
        case BinaryOp::kEq: return x == y;
        case BinaryOp::kNe: return x != y;
        case BinaryOp::kLt: return x < y;
        case BinaryOp::kLe: return x <= y;
        case BinaryOp::kGt: return x > y;
        case BinaryOp::kGe: return x >= y;
        case BinaryOp::kLogicalAnd: return x != C(0) && y != C(0);
        case BinaryOp::kLogicalOr: return x != C(0) || y != C(0);
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
        out[o.at[0]] = store_compute<T>(x != x ? x : (x < lo ? lo : (x > hi ? hi : x)));   // NaN stays NaN
    }
}

// dx = dy * f'(x), C is float or double
template <typename C>
__device__ C activation_grad_value(ActivationGrad op, C v, C g) {
    switch (op) {
        // tanh, sigmoid, relu: v is the forward output y
        case ActivationGrad::kTanh: return g * (C(1) - v * v);
        case ActivationGrad::kSigmoid: return g * v * (C(1) - v);
        case ActivationGrad::kRelu: return v <= C(0) ? C(0) : g;   // NaN passes g, as PyTorch
        case ActivationGrad::kGeluTanh: {
            C inner = C(kSqrt2OverPi) * (v + C(0.044715) * v * v * v);
            C t = tanh(inner);
            C dinner = C(kSqrt2OverPi) * (C(1) + C(3 * 0.044715) * v * v);
            return g * (C(0.5) * (C(1) + t) + C(0.5) * v * (C(1) - t * t) * dinner);
        }
        case ActivationGrad::kGeluErf: {
            C cdf = C(0.5) * (C(1) + erf(v * C(kInvSqrt2)));
            C pdf = C(kInvSqrt2Pi) * exp(C(-0.5) * v * v);
            return g * (cdf + v * pdf);
        }
        case ActivationGrad::kSilu: { C s = sigmoid_of(v); return g * s * (C(1) + v * (C(1) - s)); }
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

bool is_comparison(BinaryOp op) { return op >= BinaryOp::kEq; }

bool int_supports(UnaryOp op) {
    return op == UnaryOp::kNeg || op == UnaryOp::kAbs || op == UnaryOp::kSquare || op == UnaryOp::kSign;
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

void CudaBackend::unary(UnaryOp op, const Tensor& out, const Tensor& in) {
    require_on_device(op_name(op).data(), index(), {&out, &in});
    int64_t n = out.numel();
    if (n == 0) return;
    DeviceGuard guard(index());
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
            unary_kernel<T><<<grid_for(n), kBlockSize, 0, current_stream()>>>(n, op, calc, device_ptr<T>(out),
                                                                              device_ptr<const T>(in));
            CUDA_CHECK(cudaGetLastError());
        }
    });
}

void CudaBackend::binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
    require_on_device(op_name(op).data(), index(), {&out, &a, &b});
    int64_t n = out.numel();
    if (n == 0) return;
    AMPGRAD_CHECK(a.dtype() == b.dtype(), "{}: operand dtypes differ ({} vs {})", op_name(op), a.describe(),
                  b.describe());
    DeviceGuard guard(index());
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
            arithmetic_kernel<T><<<grid_for(n), kBlockSize, 0, current_stream()>>>(
                n, op, calc, device_ptr<T>(out), device_ptr<const T>(a), device_ptr<const T>(b));
            CUDA_CHECK(cudaGetLastError());
        }
    });
}

void CudaBackend::binary_scalar(BinaryOp op, const Tensor& out, const Tensor& a, double scalar,
                                bool scalar_first) {
    require_on_device(op_name(op).data(), index(), {&out, &a});
    int64_t n = out.numel();
    if (n == 0) return;
    AMPGRAD_CHECK(op <= BinaryOp::kDiv, "binary_scalar called with {}", op_name(op));
    DeviceGuard guard(index());
    OffsetCalc<2> calc = make_offset_calc<2>({&out, &a});
    dispatch_float(a.dtype(), "binary_scalar", [&](auto tag) {
        using T = decltype(tag);
        binary_scalar_kernel<T><<<grid_for(n), kBlockSize, 0, current_stream()>>>(
            n, op, scalar_first, calc, device_ptr<T>(out), device_ptr<const T>(a),
            static_cast<device_compute_t<T>>(scalar));
        CUDA_CHECK(cudaGetLastError());
    });
}

void CudaBackend::add_scaled(const Tensor& out, const Tensor& a, const Tensor& b, double alpha) {
    require_on_device("add", index(), {&out, &a, &b});
    int64_t n = out.numel();
    if (n == 0) return;
    DeviceGuard guard(index());
    OffsetCalc<3> calc = make_offset_calc<3>({&out, &a, &b});
    dispatch_all(out.dtype(), "add", [&](auto tag) {
        using T = decltype(tag);
        add_scaled_kernel<T><<<grid_for(n), kBlockSize, 0, current_stream()>>>(
            n, calc, device_ptr<T>(out), device_ptr<const T>(a), device_ptr<const T>(b),
            static_cast<device_compute_t<T>>(alpha));
        CUDA_CHECK(cudaGetLastError());
    });
}

void CudaBackend::where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
    require_on_device("where", index(), {&out, &cond, &a, &b});
    if (out.numel() == 0) return;
    AMPGRAD_CHECK(cond.dtype() == kBool, "where: condition is {}", cond.describe());
    DeviceGuard guard(index());
    switch (out.element_size()) {
        case 1: return where_typed<uint8_t>(out, cond, a, b);
        case 2: return where_typed<uint16_t>(out, cond, a, b);
        case 4: return where_typed<uint32_t>(out, cond, a, b);
        case 8: return where_typed<uint64_t>(out, cond, a, b);
    }
    throw_bad_dtype("where", out.dtype(), "a known dtype");
}

void CudaBackend::clamp(const Tensor& out, const Tensor& in, std::optional<double> lo, std::optional<double> hi) {
    require_on_device("clamp", index(), {&out, &in});
    int64_t n = out.numel();
    if (n == 0) return;
    DeviceGuard guard(index());
    OffsetCalc<2> calc = make_offset_calc<2>({&out, &in});
    dispatch_all(in.dtype(), "clamp", [&](auto tag) {
        using T = decltype(tag);
        using C = device_compute_t<T>;
        if constexpr (std::is_same_v<T, bool>) {
            throw DTypeError(fmt::format("clamp: not supported for bool tensor {}", in.describe()));
        } else {
            C l = lo ? static_cast<C>(*lo) : no_lower_bound<C>();   // a missing bound clamps nothing,
            C h = hi ? static_cast<C>(*hi) : no_upper_bound<C>();   // not even +-inf
            clamp_kernel<T><<<grid_for(n), kBlockSize, 0, current_stream()>>>(n, calc, device_ptr<T>(out),
                                                                              device_ptr<const T>(in), l, h);
            CUDA_CHECK(cudaGetLastError());
        }
    });
}

void CudaBackend::activation_backward(ActivationGrad op, const Tensor& dx, const Tensor& x, const Tensor& dy) {
    require_on_device("activation_backward", index(), {&dx, &x, &dy});
    int64_t n = dx.numel();
    if (n == 0) return;
    DeviceGuard guard(index());
    OffsetCalc<3> calc = make_offset_calc<3>({&dx, &x, &dy});
    dispatch_float(x.dtype(), "activation_backward", [&](auto tag) {
        using T = decltype(tag);
        activation_backward_kernel<T><<<grid_for(n), kBlockSize, 0, current_stream()>>>(
            n, op, calc, device_ptr<T>(dx), device_ptr<const T>(x), device_ptr<const T>(dy));
        CUDA_CHECK(cudaGetLastError());
    });
}

}  // namespace ampgrad::cuda

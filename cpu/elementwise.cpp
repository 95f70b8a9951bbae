// elementwise.cpp: unary, binary, axpy, where, clamp and activation-gradient kernels.
// Every loop loads to compute_t<T> (fp32 for f16/bf16), applies the op, and rounds once on store.
// The contiguous branch is a plain indexed loop so the compiler vectorises it.
#include <cmath>

#include "core/bounds.hpp"
#include "cpu/backend_cpu.hpp"
#include "cpu/loops.hpp"
#include "cpu/vec_math.hpp"

namespace ampgrad::cpu {

namespace {

constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kInvSqrt2 = 0.7071067811865476;
constexpr double kInvSqrt2Pi = 0.3989422804014327;

// out[i] = f(in[i]) with In/Out storage types and compute type C
template <typename Out, typename In, typename Fn>
void map1(const Tensor& out, const Tensor& in, Fn f) {
    auto L = make_run_layout<2>({&out, &in});
    for_each_run(L, [&f](std::array<char*, 2> p, std::array<int64_t, 2> s, int64_t n) {
        if (s[0] == sizeof(Out) && s[1] == sizeof(In)) {
            auto* o = reinterpret_cast<Out*>(p[0]);
            const auto* x = reinterpret_cast<const In*>(p[1]);
            for (int64_t i = 0; i < n; ++i) o[i] = static_cast<Out>(f(static_cast<compute_t<In>>(x[i])));
        } else {
            for (int64_t i = 0; i < n; ++i)
                *reinterpret_cast<Out*>(p[0] + i * s[0]) =
                    static_cast<Out>(f(static_cast<compute_t<In>>(*reinterpret_cast<const In*>(p[1] + i * s[1]))));
        }
    });
}

// out[i] = f(a[i], b[i])
template <typename Out, typename In, typename Fn>
void map2(const Tensor& out, const Tensor& a, const Tensor& b, Fn f) {
    auto L = make_run_layout<3>({&out, &a, &b});
    for_each_run(L, [&f](std::array<char*, 3> p, std::array<int64_t, 3> s, int64_t n) {
        using C = compute_t<In>;
        if (s[0] == sizeof(Out) && s[1] == sizeof(In) && s[2] == sizeof(In)) {
            auto* o = reinterpret_cast<Out*>(p[0]);
            const auto* x = reinterpret_cast<const In*>(p[1]);
            const auto* y = reinterpret_cast<const In*>(p[2]);
            for (int64_t i = 0; i < n; ++i) o[i] = static_cast<Out>(f(static_cast<C>(x[i]), static_cast<C>(y[i])));
        } else if (s[0] == sizeof(Out) && s[1] == sizeof(In) && s[2] == 0) {      // tensor op scalar
            auto* o = reinterpret_cast<Out*>(p[0]);
            const auto* x = reinterpret_cast<const In*>(p[1]);
            const C y = static_cast<C>(*reinterpret_cast<const In*>(p[2]));
            for (int64_t i = 0; i < n; ++i) o[i] = static_cast<Out>(f(static_cast<C>(x[i]), y));
        } else {
            for (int64_t i = 0; i < n; ++i) {
                C x = static_cast<C>(*reinterpret_cast<const In*>(p[1] + i * s[1]));
                C y = static_cast<C>(*reinterpret_cast<const In*>(p[2] + i * s[2]));
                *reinterpret_cast<Out*>(p[0] + i * s[0]) = static_cast<Out>(f(x, y));
            }
        }
    });
}

template <typename C>
C sigmoid_of(C x) { return C(1) / (C(1) + std::exp(-x)); }

template <typename T>
void unary_float(UnaryOp op, const Tensor& out, const Tensor& in) {
    using C = compute_t<T>;
    switch (op) {
        case UnaryOp::kNeg: return map1<T, T>(out, in, [](C x) { return -x; });
        case UnaryOp::kExp: return map1<T, T>(out, in, [](C x) { return std::exp(x); });
        case UnaryOp::kLog: return map1<T, T>(out, in, [](C x) { return std::log(x); });
        case UnaryOp::kSqrt: return map1<T, T>(out, in, [](C x) { return std::sqrt(x); });
        case UnaryOp::kRsqrt: return map1<T, T>(out, in, [](C x) { return C(1) / std::sqrt(x); });
        case UnaryOp::kAbs: return map1<T, T>(out, in, [](C x) { return std::abs(x); });
        case UnaryOp::kTanh: return map1<T, T>(out, in, [](C x) { return std::tanh(x); });
        case UnaryOp::kSigmoid: return map1<T, T>(out, in, [](C x) { return sigmoid_of(x); });
        case UnaryOp::kRelu: return map1<T, T>(out, in, [](C x) { return x < C(0) ? C(0) : x; });
        case UnaryOp::kGeluTanh:
            return map1<T, T>(out, in, [](C x) {
                C inner = C(kSqrt2OverPi) * (x + C(0.044715) * x * x * x);
                return C(0.5) * x * (C(1) + std::tanh(inner));
            });
        case UnaryOp::kGeluErf:
            return map1<T, T>(out, in, [](C x) { return C(0.5) * x * (C(1) + std::erf(x * C(kInvSqrt2))); });
        case UnaryOp::kSilu: return map1<T, T>(out, in, [](C x) { return x * sigmoid_of(x); });
        case UnaryOp::kSign: return map1<T, T>(out, in, [](C x) { return C((x > C(0)) - (x < C(0))); });
        case UnaryOp::kReciprocal: return map1<T, T>(out, in, [](C x) { return C(1) / x; });
        case UnaryOp::kSquare: return map1<T, T>(out, in, [](C x) { return x * x; });
        case UnaryOp::kLogicalNot: break;
    }
    throw DTypeError(fmt::format("{}: not supported for {}", op_name(op), in.describe()));
}

template <typename T>
void unary_int(UnaryOp op, const Tensor& out, const Tensor& in) {
    switch (op) {
        case UnaryOp::kNeg: return map1<T, T>(out, in, [](T x) { return static_cast<T>(-x); });
        case UnaryOp::kAbs: return map1<T, T>(out, in, [](T x) { return static_cast<T>(x < 0 ? -x : x); });
        case UnaryOp::kSquare: return map1<T, T>(out, in, [](T x) { return static_cast<T>(x * x); });
        case UnaryOp::kSign: return map1<T, T>(out, in, [](T x) { return static_cast<T>((x > 0) - (x < 0)); });
        default: break;
    }
    throw DTypeError(fmt::format("{}: not supported for integer tensor {}", op_name(op), in.describe()));
}

template <typename T>
void compare(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
    using C = compute_t<T>;
    switch (op) {
        case BinaryOp::kEq: return map2<bool, T>(out, a, b, [](C x, C y) { return x == y; });
        case BinaryOp::kNe: return map2<bool, T>(out, a, b, [](C x, C y) { return x != y; });
        case BinaryOp::kLt: return map2<bool, T>(out, a, b, [](C x, C y) { return x < y; });
        case BinaryOp::kLe: return map2<bool, T>(out, a, b, [](C x, C y) { return x <= y; });
        case BinaryOp::kGt: return map2<bool, T>(out, a, b, [](C x, C y) { return x > y; });
        case BinaryOp::kGe: return map2<bool, T>(out, a, b, [](C x, C y) { return x >= y; });
        case BinaryOp::kLogicalAnd: return map2<bool, T>(out, a, b, [](C x, C y) { return x != C(0) && y != C(0); });
        case BinaryOp::kLogicalOr: return map2<bool, T>(out, a, b, [](C x, C y) { return x != C(0) || y != C(0); });
        default: break;
    }
    AMPGRAD_CHECK(false, "compare called with {}", op_name(op));
}

template <typename T>
void arithmetic(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
    using C = compute_t<T>;
    switch (op) {
        case BinaryOp::kAdd: return map2<T, T>(out, a, b, [](C x, C y) { return x + y; });
        case BinaryOp::kSub: return map2<T, T>(out, a, b, [](C x, C y) { return x - y; });
        case BinaryOp::kMul: return map2<T, T>(out, a, b, [](C x, C y) { return x * y; });
        case BinaryOp::kDiv: return map2<T, T>(out, a, b, [](C x, C y) { return x / y; });
        case BinaryOp::kPow:
            return map2<T, T>(out, a, b, [](C x, C y) { return static_cast<C>(std::pow(x, y)); });
        case BinaryOp::kMaximum:    // NaN propagates, as in PyTorch
            return map2<T, T>(out, a, b, [](C x, C y) { return (x != x || x > y) ? x : y; });
        case BinaryOp::kMinimum:
            return map2<T, T>(out, a, b, [](C x, C y) { return (x != x || x < y) ? x : y; });
        default: break;
    }
    AMPGRAD_CHECK(false, "arithmetic called with {}", op_name(op));
}

bool is_comparison(BinaryOp op) { return op >= BinaryOp::kEq; }

}  // namespace

void CpuBackend::unary(UnaryOp op, const Tensor& out, const Tensor& in) {
    if (out.numel() == 0) return;
    if (op == UnaryOp::kLogicalNot) {
        dispatch_all(in.dtype(), "logical_not", [&](auto tag) {
            using T = decltype(tag);
            map1<bool, T>(out, in, [](compute_t<T> x) { return x == compute_t<T>(0); });
        });
        return;
    }
    if (vectorised_unary(op, out, in)) return;         // SIMD exp/tanh on contiguous f32/f16/bf16
    dispatch_all(in.dtype(), "unary", [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_same_v<T, bool>) {
            throw DTypeError(fmt::format("{}: not supported for bool tensor {}", op_name(op), in.describe()));
        } else if constexpr (std::is_integral_v<T>) {
            unary_int<T>(op, out, in);
        } else {
            unary_float<T>(op, out, in);
        }
    });
}

void CpuBackend::binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
    if (out.numel() == 0) return;
    AMPGRAD_CHECK(a.dtype() == b.dtype(), "{}: operand dtypes differ ({} vs {})", op_name(op), a.describe(),
                  b.describe());
    dispatch_all(a.dtype(), "binary", [&](auto tag) {
        using T = decltype(tag);
        if (is_comparison(op)) return compare<T>(op, out, a, b);
        if constexpr (std::is_same_v<T, bool>) {
            throw DTypeError(fmt::format("{}: not supported for bool tensors ({}, {})", op_name(op), a.describe(),
                                         b.describe()));
        } else {
            arithmetic<T>(op, out, a, b);
        }
    });
}

void CpuBackend::binary_scalar(BinaryOp op, const Tensor& out, const Tensor& a, double scalar, bool scalar_first) {
    if (out.numel() == 0) return;
    dispatch_float(a.dtype(), "binary_scalar", [&](auto tag) {
        using T = decltype(tag);
        using C = compute_t<T>;
        const C s = static_cast<C>(scalar);
        switch (op) {
            case BinaryOp::kAdd: return map1<T, T>(out, a, [s](C x) { return x + s; });
            case BinaryOp::kMul: return map1<T, T>(out, a, [s](C x) { return x * s; });
            case BinaryOp::kSub:
                if (scalar_first) return map1<T, T>(out, a, [s](C x) { return s - x; });
                return map1<T, T>(out, a, [s](C x) { return x - s; });
            case BinaryOp::kDiv:
                if (scalar_first) return map1<T, T>(out, a, [s](C x) { return s / x; });
                return map1<T, T>(out, a, [s](C x) { return x / s; });
            default: AMPGRAD_CHECK(false, "binary_scalar called with {}", op_name(op));
        }
    });
}

void CpuBackend::add_scaled(const Tensor& out, const Tensor& a, const Tensor& b, double alpha) {
    if (out.numel() == 0) return;
    dispatch_all(out.dtype(), "add", [&](auto tag) {
        using T = decltype(tag);
        using C = compute_t<T>;
        if constexpr (std::is_same_v<T, bool>) {
            map2<T, T>(out, a, b, [](bool x, bool y) { return x || y; });
        } else {
            C s = static_cast<C>(alpha);
            if (alpha == 1.0) map2<T, T>(out, a, b, [](C x, C y) { return x + y; });
            else map2<T, T>(out, a, b, [s](C x, C y) { return x + s * y; });
        }
    });
}

void CpuBackend::where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
    if (out.numel() == 0) return;
    AMPGRAD_CHECK(cond.dtype() == kBool, "where: condition is {}", cond.describe());
    dispatch_all(out.dtype(), "where", [&](auto tag) {
        using T = decltype(tag);
        auto L = make_run_layout<4>({&out, &cond, &a, &b});
        for_each_run(L, [](std::array<char*, 4> p, std::array<int64_t, 4> s, int64_t n) {
            for (int64_t i = 0; i < n; ++i) {
                bool c = *reinterpret_cast<const bool*>(p[1] + i * s[1]);
                *reinterpret_cast<T*>(p[0] + i * s[0]) = *reinterpret_cast<const T*>(p[c ? 2 : 3] + i * s[c ? 2 : 3]);
            }
        });
    });
}

void CpuBackend::clamp(const Tensor& out, const Tensor& in, std::optional<double> lo, std::optional<double> hi) {
    if (out.numel() == 0) return;
    dispatch_all(in.dtype(), "clamp", [&](auto tag) {
        using T = decltype(tag);
        using C = compute_t<T>;
        if constexpr (std::is_same_v<T, bool>) {
            throw DTypeError(fmt::format("clamp: not supported for bool tensor {}", in.describe()));
        } else {
            C l = lo ? static_cast<C>(*lo) : no_lower_bound<C>();   // a missing bound clamps nothing,
            C h = hi ? static_cast<C>(*hi) : no_upper_bound<C>();   // not even +-inf
            map1<T, T>(out, in, [l, h](C x) {                 // min(max(x, l), h): all h if l > h
                C above = x < l ? l : x;
                return x != x ? x : (above > h ? h : above);
            });
        }
    });
}

void CpuBackend::activation_backward(ActivationGrad op, const Tensor& dx, const Tensor& x, const Tensor& dy) {
    if (dx.numel() == 0) return;
    if (vectorised_activation_backward(op, dx, x, dy)) return;
    dispatch_float(x.dtype(), "activation_backward", [&](auto tag) {
        using T = decltype(tag);
        using C = compute_t<T>;
        switch (op) {
            // tanh, sigmoid, relu: `x` holds the forward output y
            case ActivationGrad::kTanh:
                return map2<T, T>(dx, x, dy, [](C t, C g) { return g * (C(1) - t * t); });
            case ActivationGrad::kSigmoid:
                return map2<T, T>(dx, x, dy, [](C s, C g) { return g * s * (C(1) - s); });
            case ActivationGrad::kRelu:                        // NaN passes g, as PyTorch
                return map2<T, T>(dx, x, dy, [](C r, C g) { return r <= C(0) ? C(0) : g; });
            case ActivationGrad::kGeluTanh:
                return map2<T, T>(dx, x, dy, [](C v, C g) {
                    C inner = C(kSqrt2OverPi) * (v + C(0.044715) * v * v * v);
                    C t = std::tanh(inner);
                    C dinner = C(kSqrt2OverPi) * (C(1) + C(3 * 0.044715) * v * v);
                    return g * (C(0.5) * (C(1) + t) + C(0.5) * v * (C(1) - t * t) * dinner);
                });
            case ActivationGrad::kGeluErf:
                return map2<T, T>(dx, x, dy, [](C v, C g) {
                    C cdf = C(0.5) * (C(1) + std::erf(v * C(kInvSqrt2)));
                    C pdf = C(kInvSqrt2Pi) * std::exp(C(-0.5) * v * v);
                    return g * (cdf + v * pdf);
                });
            case ActivationGrad::kSilu:
                return map2<T, T>(dx, x, dy, [](C v, C g) { C s = sigmoid_of(v); return g * s * (C(1) + v * (C(1) - s)); });
        }
    });
}

}  // namespace ampgrad::cpu

// scalar_math.hpp: the one definition of every elementwise formula: each op's value and, for the
// activations, its gradient dx = dy * f'(x) (from x or from the output y: see the rules below).
// The CPU loops (cpu/elementwise.cpp) and the CUDA kernels (cuda/elementwise.cu) both
// instantiate these, so CPU/GPU agreement does not depend on keeping copies in sync. The op lists in core/kernels.hpp name the struct of each op.
//
// Rules for a formula, so that one text serves the host, the device and (later) SIMD packets:
//  - a struct with `template <class T> AMPGRAD_HOST_DEVICE static T value(T x)` (and `grad(T saved,
//    T dy)` for activations), where T is the compute type: float (also for f16/bf16, which load
//    to fp32), double, and int32/int64 for the ops whose kIntegers is true;
//  - an activation's grad reads what autograd saved, as PyTorch does: the output y when
//    kGradFromOutput (tanh, sigmoid, relu: derivatives.yaml writes their formulas with `result`),
//    else the input x;
//  - only arithmetic and the math functions below, called unqualified: math:: overloads serve
//    float and double, and a SIMD packet type can bring its own exp/tanh/... found by ADL.
#pragma once
#include <cmath>
#include <cstdint>
#include <type_traits>

#if defined(__CUDACC__)
#define AMPGRAD_HOST_DEVICE __host__ __device__
#else
#define AMPGRAD_HOST_DEVICE
#endif

namespace ampgrad {

// ---- math functions: std:: on the host, CUDA's device functions on the device ----
namespace math {

#if defined(__CUDA_ARCH__)
#define AMPGRAD_MATH_FN(name, device_f, device_d)                                        \
    AMPGRAD_HOST_DEVICE inline float name(float x) { return ::device_f(x); }          \
    AMPGRAD_HOST_DEVICE inline double name(double x) { return ::device_d(x); }
#else
#define AMPGRAD_MATH_FN(name, device_f, device_d)                                        \
    AMPGRAD_HOST_DEVICE inline float name(float x) { return std::name(x); }           \
    AMPGRAD_HOST_DEVICE inline double name(double x) { return std::name(x); }
#endif
AMPGRAD_MATH_FN(exp, expf, exp)
AMPGRAD_MATH_FN(log, logf, log)
AMPGRAD_MATH_FN(sqrt, sqrtf, sqrt)
AMPGRAD_MATH_FN(tanh, tanhf, tanh)
AMPGRAD_MATH_FN(erf, erff, erf)
AMPGRAD_MATH_FN(abs, fabsf, fabs)
#undef AMPGRAD_MATH_FN

#if defined(__CUDA_ARCH__)
AMPGRAD_HOST_DEVICE inline float pow(float x, float y) { return ::powf(x, y); }
AMPGRAD_HOST_DEVICE inline double pow(double x, double y) { return ::pow(x, y); }
#else
AMPGRAD_HOST_DEVICE inline float pow(float x, float y) { return std::pow(x, y); }
AMPGRAD_HOST_DEVICE inline double pow(double x, double y) { return std::pow(x, y); }
#endif
// Integers: abs without the floating path; pow by squaring in the integer type, wrapping as the
// type wraps, as PyTorch's powi (aten/src/ATen/native/Pow.h): exact past 2^53, where a trip through
// double would round (3^39), and the same on the CPU and the GPU (whose double pow may be 2 ulp
// off, and 24.999... truncates to 24). A negative exponent gives 1 for base 1, +-1 for base -1,
// else 0 (the op layer is where PyTorch refuses negative integer powers).
template <typename I>
AMPGRAD_HOST_DEVICE inline I integer_pow(I base, I exponent) {
    if (exponent < 0) return base == 1 ? I(1) : base == -1 ? ((exponent & 1) ? I(-1) : I(1)) : I(0);
    using U = std::make_unsigned_t<I>;                       // unsigned: wrapping is defined
    U result = 1, square = static_cast<U>(base);
    for (; exponent > 0; exponent >>= 1) {
        if (exponent & 1) result *= square;
        square *= square;
    }
    return static_cast<I>(result);
}
AMPGRAD_HOST_DEVICE inline int32_t abs(int32_t x) { return x < 0 ? -x : x; }
AMPGRAD_HOST_DEVICE inline int64_t abs(int64_t x) { return x < 0 ? -x : x; }
AMPGRAD_HOST_DEVICE inline int32_t pow(int32_t x, int32_t y) { return integer_pow(x, y); }
AMPGRAD_HOST_DEVICE inline int64_t pow(int64_t x, int64_t y) { return integer_pow(x, y); }

}  // namespace math

namespace formulas {

using namespace math;   // unqualified exp(x) finds math::exp for float/double; ADL finds a packet's

// ---- constants (GELU) ----
inline constexpr double kSqrt2OverPi = 0.7978845608028654;   // sqrt(2/pi)
inline constexpr double kInvSqrt2 = 0.7071067811865476;      // 1/sqrt(2)
inline constexpr double kInvSqrt2Pi = 0.3989422804014327;    // 1/sqrt(2 pi), the normal pdf at 0
inline constexpr double kGeluCubic = 0.044715;               // the tanh approximation's x^3 coefficient

template <class T>
AMPGRAD_HOST_DEVICE inline T sigmoid(T x) { return T(1) / (T(1) + exp(-x)); }

// ---- unary ops (value) and activations (value + grad) ----

struct Neg {
    static constexpr bool kIntegers = true;
    template <class T> AMPGRAD_HOST_DEVICE static T value(T x) { return static_cast<T>(-x); }
};
struct Exp {
    static constexpr bool kIntegers = false;
    template <class T> AMPGRAD_HOST_DEVICE static T value(T x) { return exp(x); }
};
struct Log {
    static constexpr bool kIntegers = false;
    template <class T> AMPGRAD_HOST_DEVICE static T value(T x) { return log(x); }
};
struct Sqrt {
    static constexpr bool kIntegers = false;
    template <class T> AMPGRAD_HOST_DEVICE static T value(T x) { return sqrt(x); }
};
struct Rsqrt {
    static constexpr bool kIntegers = false;
    template <class T> AMPGRAD_HOST_DEVICE static T value(T x) { return T(1) / sqrt(x); }
};
struct Abs {
    static constexpr bool kIntegers = true;
    template <class T> AMPGRAD_HOST_DEVICE static T value(T x) { return abs(x); }
};
struct Sign {
    static constexpr bool kIntegers = true;
    template <class T> AMPGRAD_HOST_DEVICE static T value(T x) { return static_cast<T>((x > T(0)) - (x < T(0))); }
};
struct Reciprocal {
    static constexpr bool kIntegers = false;
    template <class T> AMPGRAD_HOST_DEVICE static T value(T x) { return T(1) / x; }
};
struct Square {
    static constexpr bool kIntegers = true;
    template <class T> AMPGRAD_HOST_DEVICE static T value(T x) { return static_cast<T>(x * x); }
};
// Writes kBool; any input dtype (the kernels special-case its output type).
struct LogicalNot {
    static constexpr bool kIntegers = true;
    template <class T> AMPGRAD_HOST_DEVICE static bool value(T x) { return x == T(0); }
};

// tanh' = 1 - tanh^2, from the saved output y = tanh(x) (PyTorch saves `result`)
struct Tanh {
    static constexpr bool kIntegers = false;
    static constexpr bool kGradFromOutput = true;
    template <class T> AMPGRAD_HOST_DEVICE static T value(T x) { return tanh(x); }
    template <class T> AMPGRAD_HOST_DEVICE static T grad(T y, T dy) { return dy * (T(1) - y * y); }
};
// sigmoid' = s (1 - s), from the saved output s = sigmoid(x)
struct Sigmoid {
    static constexpr bool kIntegers = false;
    static constexpr bool kGradFromOutput = true;
    template <class T> AMPGRAD_HOST_DEVICE static T value(T x) { return sigmoid(x); }
    template <class T> AMPGRAD_HOST_DEVICE static T grad(T y, T dy) { return dy * y * (T(1) - y); }
};
// relu' = 1 where y = relu(x) > 0, else 0, from the saved output y. NaN stays NaN in the value, and
// a NaN passes dy (PyTorch's threshold_backward on `result`).
struct Relu {
    static constexpr bool kIntegers = false;
    static constexpr bool kGradFromOutput = true;
    template <class T> AMPGRAD_HOST_DEVICE static T value(T x) { return x < T(0) ? T(0) : x; }
    template <class T> AMPGRAD_HOST_DEVICE static T grad(T y, T dy) { return y <= T(0) ? T(0) : dy; }
};
// gelu_tanh(x) = x/2 (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3)   (docs/ops/gelu.md)
struct GeluTanh {
    static constexpr bool kIntegers = false;
    static constexpr bool kGradFromOutput = false;
    template <class T> AMPGRAD_HOST_DEVICE static T value(T x) {
        T inner = T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x);
        return T(0.5) * x * (T(1) + tanh(inner));
    }
    // d/dx = (1 + t)/2 + x/2 (1 - t^2) du/dx, du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2)
    template <class T> AMPGRAD_HOST_DEVICE static T grad(T x, T dy) {
        T inner = T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x);
        T t = tanh(inner);
        T dinner = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluCubic) * x * x);
        return dy * (T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * dinner);
    }
};
// gelu(x) = x Phi(x), Phi(x) = (1 + erf(x / sqrt(2))) / 2; gelu' = Phi(x) + x phi(x)
struct GeluErf {
    static constexpr bool kIntegers = false;
    static constexpr bool kGradFromOutput = false;
    template <class T> AMPGRAD_HOST_DEVICE static T value(T x) { return T(0.5) * x * (T(1) + erf(x * T(kInvSqrt2))); }
    template <class T> AMPGRAD_HOST_DEVICE static T grad(T x, T dy) {
        T cdf = T(0.5) * (T(1) + erf(x * T(kInvSqrt2)));
        T pdf = T(kInvSqrt2Pi) * exp(T(-0.5) * x * x);
        return dy * (cdf + x * pdf);
    }
};
// silu(x) = x s(x); silu' = s (1 + x (1 - s))
struct Silu {
    static constexpr bool kIntegers = false;
    static constexpr bool kGradFromOutput = false;
    template <class T> AMPGRAD_HOST_DEVICE static T value(T x) { return x * sigmoid(x); }
    template <class T> AMPGRAD_HOST_DEVICE static T grad(T x, T dy) {
        T s = sigmoid(x);
        return dy * s * (T(1) + x * (T(1) - s));
    }
};

// ---- binary ops: value(a, b) in the compute type; comparisons return bool ----

struct Add { template <class T> AMPGRAD_HOST_DEVICE static T value(T x, T y) { return x + y; } };
struct Sub { template <class T> AMPGRAD_HOST_DEVICE static T value(T x, T y) { return x - y; } };
struct Mul { template <class T> AMPGRAD_HOST_DEVICE static T value(T x, T y) { return x * y; } };
struct Div { template <class T> AMPGRAD_HOST_DEVICE static T value(T x, T y) { return x / y; } };
struct Pow { template <class T> AMPGRAD_HOST_DEVICE static T value(T x, T y) { return static_cast<T>(pow(x, y)); } };
// NaN propagates, as in PyTorch
struct Maximum { template <class T> AMPGRAD_HOST_DEVICE static T value(T x, T y) { return (x != x || x > y) ? x : y; } };
struct Minimum { template <class T> AMPGRAD_HOST_DEVICE static T value(T x, T y) { return (x != x || x < y) ? x : y; } };

struct Eq { template <class T> AMPGRAD_HOST_DEVICE static bool value(T x, T y) { return x == y; } };
struct Ne { template <class T> AMPGRAD_HOST_DEVICE static bool value(T x, T y) { return x != y; } };
struct Lt { template <class T> AMPGRAD_HOST_DEVICE static bool value(T x, T y) { return x < y; } };
struct Le { template <class T> AMPGRAD_HOST_DEVICE static bool value(T x, T y) { return x <= y; } };
struct Gt { template <class T> AMPGRAD_HOST_DEVICE static bool value(T x, T y) { return x > y; } };
struct Ge { template <class T> AMPGRAD_HOST_DEVICE static bool value(T x, T y) { return x >= y; } };
struct LogicalAnd { template <class T> AMPGRAD_HOST_DEVICE static bool value(T x, T y) { return x != T(0) && y != T(0); } };
struct LogicalOr { template <class T> AMPGRAD_HOST_DEVICE static bool value(T x, T y) { return x != T(0) || y != T(0); } };

// clamp: min(max(x, lo), hi), all hi when lo > hi; NaN stays NaN
template <class T>
AMPGRAD_HOST_DEVICE inline T clamp(T x, T lo, T hi) {
    T above = x < lo ? lo : x;
    return x != x ? x : (above > hi ? hi : above);
}

}  // namespace formulas

}  // namespace ampgrad

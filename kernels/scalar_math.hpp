// scalar_math.hpp: the one definition of every elementwise formula: each op's value and, for the
// activations, its gradient dx = dy * f'(x) (from x or from the output y: see the rules below).
// The CPU loops (cpu/elementwise.cpp) and the CUDA kernels (cuda/elementwise.cu) both
// instantiate these, so CPU/GPU agreement does not depend on keeping copies in sync. The op lists in kernels/kernels.hpp name the struct of each op.
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
#include <limits>
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
AMPGRAD_MATH_FN(sin, sinf, sin)
AMPGRAD_MATH_FN(cos, cosf, cos)
AMPGRAD_MATH_FN(exp2, exp2f, exp2)
AMPGRAD_MATH_FN(log1p, log1pf, log1p)
AMPGRAD_MATH_FN(expm1, expm1f, expm1)
AMPGRAD_MATH_FN(floor, floorf, floor)
AMPGRAD_MATH_FN(ceil, ceilf, ceil)
AMPGRAD_MATH_FN(trunc, truncf, trunc)
AMPGRAD_MATH_FN(nearbyint, nearbyintf, nearbyint)   // round half to even (the default rounding mode)
#undef AMPGRAD_MATH_FN

#if defined(__CUDA_ARCH__)
#define AMPGRAD_MATH_FN2(name, device_f, device_d)                                                \
    AMPGRAD_HOST_DEVICE inline float name(float x, float y) { return ::device_f(x, y); }      \
    AMPGRAD_HOST_DEVICE inline double name(double x, double y) { return ::device_d(x, y); }
#else
#define AMPGRAD_MATH_FN2(name, device_f, device_d)                                                \
    AMPGRAD_HOST_DEVICE inline float name(float x, float y) { return std::name(x, y); }       \
    AMPGRAD_HOST_DEVICE inline double name(double x, double y) { return std::name(x, y); }
#endif
AMPGRAD_MATH_FN2(pow, powf, pow)
AMPGRAD_MATH_FN2(fmod, fmodf, fmod)
AMPGRAD_MATH_FN2(atan2, atan2f, atan2)
#undef AMPGRAD_MATH_FN2
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
struct Sin {
    static constexpr bool kIntegers = false;
    template <class T> AMPGRAD_HOST_DEVICE static T value(T x) { return sin(x); }
};
struct Cos {
    static constexpr bool kIntegers = false;
    template <class T> AMPGRAD_HOST_DEVICE static T value(T x) { return cos(x); }
};
struct Exp2 {
    static constexpr bool kIntegers = false;
    template <class T> AMPGRAD_HOST_DEVICE static T value(T x) { return exp2(x); }
};
struct Log1p {
    static constexpr bool kIntegers = false;
    template <class T> AMPGRAD_HOST_DEVICE static T value(T x) { return log1p(x); }
};
struct Expm1 {
    static constexpr bool kIntegers = false;
    template <class T> AMPGRAD_HOST_DEVICE static T value(T x) { return expm1(x); }
};
struct Erf {
    static constexpr bool kIntegers = false;
    template <class T> AMPGRAD_HOST_DEVICE static T value(T x) { return erf(x); }
};
// Rounding to an integer value. Integer tensors never reach these kernels: the ops return a copy.
struct Floor {
    static constexpr bool kIntegers = false;
    template <class T> AMPGRAD_HOST_DEVICE static T value(T x) { return floor(x); }
};
struct Ceil {
    static constexpr bool kIntegers = false;
    template <class T> AMPGRAD_HOST_DEVICE static T value(T x) { return ceil(x); }
};
// Half to even, as torch.round (std::nearbyint in the default rounding mode): round(2.5) = 2.
struct Round {
    static constexpr bool kIntegers = false;
    template <class T> AMPGRAD_HOST_DEVICE static T value(T x) { return nearbyint(x); }
};
struct Trunc {
    static constexpr bool kIntegers = false;
    template <class T> AMPGRAD_HOST_DEVICE static T value(T x) { return trunc(x); }
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

// fmod: the remainder of truncated division, with a's sign (C's fmod, torch.fmod). Integer division
// by 0 has no value: the op layer refuses it, and the formula writes 0 rather than trap. A divisor of
// -1 always leaves 0, written directly: the type's minimum % -1 overflows (SIGFPE on x86, undefined on
// the GPU).
struct Fmod {
    template <class T> AMPGRAD_HOST_DEVICE static T value(T x, T y) {
        if constexpr (std::is_integral_v<T>) return (y == T(0) || y == T(-1)) ? T(0) : static_cast<T>(x % y);
        else return fmod(x, y);
    }
};
// remainder: the remainder of floored division, with b's sign (Python's %, torch.remainder);
// PyTorch's form: fmod, then add b where the signs differ.
struct Remainder {
    template <class T> AMPGRAD_HOST_DEVICE static T value(T x, T y) {
        if constexpr (std::is_integral_v<T>) {
            if (y == T(0) || y == T(-1)) return T(0);      // -1: as Fmod, never the overflowing min % -1
            T r = static_cast<T>(x % y);
            return (r != T(0) && ((r < T(0)) != (y < T(0)))) ? static_cast<T>(r + y) : r;
        } else {
            T r = fmod(x, y);
            return (r != T(0) && ((r < T(0)) != (y < T(0)))) ? r + y : r;
        }
    }
};
// atan2(a, b): the angle of the point (b, a). Integer tensors are promoted to f32 by the op layer;
// the integer branch exists so that the op lists compile for every dtype.
struct Atan2 {
    template <class T> AMPGRAD_HOST_DEVICE static T value(T x, T y) {
        if constexpr (std::is_integral_v<T>) return static_cast<T>(atan2(static_cast<double>(x), static_cast<double>(y)));
        else return atan2(x, y);
    }
};

struct Eq { template <class T> AMPGRAD_HOST_DEVICE static bool value(T x, T y) { return x == y; } };
struct Ne { template <class T> AMPGRAD_HOST_DEVICE static bool value(T x, T y) { return x != y; } };
struct Lt { template <class T> AMPGRAD_HOST_DEVICE static bool value(T x, T y) { return x < y; } };
struct Le { template <class T> AMPGRAD_HOST_DEVICE static bool value(T x, T y) { return x <= y; } };
struct Gt { template <class T> AMPGRAD_HOST_DEVICE static bool value(T x, T y) { return x > y; } };
struct Ge { template <class T> AMPGRAD_HOST_DEVICE static bool value(T x, T y) { return x >= y; } };
struct LogicalAnd { template <class T> AMPGRAD_HOST_DEVICE static bool value(T x, T y) { return x != T(0) && y != T(0); } };
struct LogicalOr { template <class T> AMPGRAD_HOST_DEVICE static bool value(T x, T y) { return x != T(0) || y != T(0); } };
struct LogicalXor { template <class T> AMPGRAD_HOST_DEVICE static bool value(T x, T y) { return (x != T(0)) != (y != T(0)); } };

// ---- ternary: lerp(a, b, w) = a + w (b - a) ----
// PyTorch's two-sided form (aten/src/ATen/native/Lerp.h): from a when |w| < 1/2, from b otherwise,
// so lerp(a, b, 1) is exactly b. T is the compute type.
struct Lerp {
    template <class T> AMPGRAD_HOST_DEVICE static T value(T a, T b, T w) {
        return abs(w) < T(0.5) ? a + w * (b - a) : b - (b - a) * (T(1) - w);
    }
};

// ---- sorting (sort, argsort, topk; docs/ops/sort.md) ----
// Whether a goes strictly before b: ascending a < b, descending a > b. NaN counts as larger than every
// number, as in PyTorch: it sorts last ascending and first descending; two NaNs are equal. Kernels keep
// equal values in index order (a stable sort), whatever `stable` the caller asked for.
struct SortBefore {
    template <class T> AMPGRAD_HOST_DEVICE static bool value(T a, T b, bool descending) {
        if constexpr (std::is_floating_point_v<T>) {
            const bool a_nan = a != a, b_nan = b != b;
            if (a_nan || b_nan) return descending ? (a_nan && !b_nan) : (!a_nan && b_nan);
        }
        return descending ? b < a : a < b;
    }
};

// ---- attention rows (the GEMM path's row kernels, kernels/attention_gemm.cpp; docs/ops/attention.md) ----
// Keys query position t sees: all S, or 0..t under the causal mask (top-left aligned, as PyTorch's is_causal).
AMPGRAD_HOST_DEVICE inline int64_t attention_visible_keys(int64_t t, int64_t S, bool causal) {
    return causal ? (t + 1 < S ? t + 1 : S) : S;
}
// The weight exp(s - shift) of score s, where shift is the row's max (forward) or its lse (backward).
// A -inf score weighs exactly 0, or NaN when the shift is NaN (an inf in q met keys of both signs),
// as exp(-inf - NaN) is in PyTorch; written out because a vectorised exp may not give exactly 0.
// s - shift is never positive (the shift is the max, or the lse >= the max), so a backend may pass an
// exp that serves only x <= 0 (cpu/rows.hpp's vectorisable exp_nonpositive).
struct AttentionWeight {
    template <class T> AMPGRAD_HOST_DEVICE static T value(T s, T shift) {
        return value(s, shift, [](T x) { return exp(x); });
    }
    template <class T, class Exp> AMPGRAD_HOST_DEVICE static T value(T s, T shift, Exp exp_nonpositive) {
        const T weight = exp_nonpositive(s - shift);                  // both sides computed: no branch
        const T minus_inf_weight = shift != shift ? shift : T(0);
        return s == -std::numeric_limits<T>::infinity() ? minus_inf_weight : weight;
    }
};
// dS = P * (dP - D), D = dO . O of the row: the softmax backward with D computed from the output.
struct AttentionScoreGrad {
    template <class T> AMPGRAD_HOST_DEVICE static T value(T p, T dp, T delta) { return p * (dp - delta); }
};

// ---- rotary embeddings: one pair (x1, x2) of a row turned by its angle (docs/ops/rotary.md) ----
// out = x cos + R(x) sin, where R maps a pair (x1, x2) to (-x2, x1). The pair is (j, j + HS/2) in the
// half-split (rotate_half) layout and (2i, 2i+1) in the interleaved one; c1, s1 are cos and sin at
// x1's position, c2, s2 at x2's. The transpose, x cos + R^T(x sin), is the backward's dx (R^T = -R).
struct Rotary {
    template <class T> AMPGRAD_HOST_DEVICE static void forward(T x1, T x2, T c1, T c2, T s1, T s2, T& o1, T& o2) {
        o1 = x1 * c1 - x2 * s1;
        o2 = x2 * c2 + x1 * s2;
    }
    template <class T> AMPGRAD_HOST_DEVICE static void transpose(T x1, T x2, T c1, T c2, T s1, T s2, T& o1, T& o2) {
        o1 = x1 * c1 + x2 * s2;
        o2 = x2 * c2 - x1 * s1;
    }
};

// ---- RMSNorm of a row of C values (docs/ops/rmsnorm.md) ----
// rstd = 1 / sqrt(mean(x^2) + eps); y = x rstd w; with g = dy w and xhat = x rstd,
// dx = rstd (g - xhat mean(g xhat)) and dw = sum over rows of dy xhat.
struct RmsNorm {
    template <class T> AMPGRAD_HOST_DEVICE static T rstd(T sum_squares, T C, T eps) {
        return T(1) / sqrt(sum_squares / C + eps);
    }
    template <class T> AMPGRAD_HOST_DEVICE static T dx(T g, T xhat, T rstd, T mean_g_xhat) {
        return rstd * (g - xhat * mean_g_xhat);
    }
};

// clamp: min(max(x, lo), hi), all hi when lo > hi; NaN stays NaN
template <class T>
AMPGRAD_HOST_DEVICE inline T clamp(T x, T lo, T hi) {
    T above = x < lo ? lo : x;
    return x != x ? x : (above > hi ? hi : above);
}

}  // namespace formulas

}  // namespace ampgrad

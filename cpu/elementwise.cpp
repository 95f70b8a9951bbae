// elementwise.cpp: unary, binary, axpy, where, clamp and activation-gradient kernels.
// The formulas are kernels/scalar_math.hpp's (shared with cuda/elementwise.cu); the op lists of
// kernels/kernels.hpp expand into the switches below, so a new op needs no edit here.
// Every loop loads to compute_t<T> (fp32 for f16/bf16), applies the op, and rounds once on store.
// The contiguous branch is a plain indexed loop so the compiler vectorises it.
#include <cmath>

#include "kernels/bounds.hpp"
#include "kernels/kernels.hpp"
#include "kernels/scalar_math.hpp"
#include "cpu/loops.hpp"
#include "cpu/vec_math.hpp"

namespace ampgrad::cpu {

namespace {

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

// ---- the op lists expanded into switches over kernels/scalar_math.hpp's formulas ----

// T is a storage type; integer T only reaches the ops whose formula has kIntegers.
template <typename T>
void unary_typed(UnaryOp op, const Tensor& out, const Tensor& in) {
    using C = compute_t<T>;
    switch (op) {
#define AMPGRAD_UNARY_CASE(e, name, F)                                                                  \
        case UnaryOp::e:                                                                                \
            if constexpr (std::is_integral_v<T> && !formulas::F::kIntegers) break;                      \
            else return map1<T, T>(out, in, [](C x) { return static_cast<C>(formulas::F::value(x)); }); \
            break;
        AMPGRAD_UNARY_OPS(AMPGRAD_UNARY_CASE)
#undef AMPGRAD_UNARY_CASE
    }
    throw DTypeError(fmt::format("{}: not supported for integer tensor {}", op_name(op), in.describe()));
}

template <typename T>
void binary_typed(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
    using C = compute_t<T>;
    switch (op) {
#define AMPGRAD_COMPARISON_CASE(e, name, F) \
        case BinaryOp::e: return map2<bool, T>(out, a, b, [](C x, C y) { return formulas::F::value(x, y); });
        AMPGRAD_COMPARISON_OPS(AMPGRAD_COMPARISON_CASE)
#undef AMPGRAD_COMPARISON_CASE
#define AMPGRAD_ARITHMETIC_CASE(e, name, F)                                                        \
        case BinaryOp::e:                                                                          \
            if constexpr (std::is_same_v<T, bool>) break;                                          \
            else return map2<T, T>(out, a, b, [](C x, C y) { return formulas::F::value(x, y); }); \
            break;
        AMPGRAD_ARITHMETIC_OPS(AMPGRAD_ARITHMETIC_CASE)
#undef AMPGRAD_ARITHMETIC_CASE
    }
    throw DTypeError(fmt::format("{}: not supported for bool tensors ({}, {})", op_name(op), a.describe(),
                                 b.describe()));
}

// out = a (op) s, or s (op) a when scalar_first
template <typename T, typename F>
void scalar_typed(const Tensor& out, const Tensor& a, compute_t<T> s, bool scalar_first) {
    using C = compute_t<T>;
    if (scalar_first) map1<T, T>(out, a, [s](C x) { return F::value(s, x); });
    else map1<T, T>(out, a, [s](C x) { return F::value(x, s); });
}

template <typename T>
void activation_grad_typed(ActivationGrad op, const Tensor& dx, const Tensor& x, const Tensor& dy) {
    using C = compute_t<T>;
    switch (op) {
#define AMPGRAD_GRAD_CASE(e, name, F) \
        case ActivationGrad::e: return map2<T, T>(dx, x, dy, [](C v, C g) { return formulas::F::grad(v, g); });
        AMPGRAD_ACTIVATION_GRADS(AMPGRAD_GRAD_CASE)
#undef AMPGRAD_GRAD_CASE
    }
}

}  // namespace

void unary(UnaryOp op, const Tensor& out, const Tensor& in) {
    if (out.numel() == 0) return;
    if (op == UnaryOp::kLogicalNot) {
        dispatch_all(in.dtype(), "logical_not", [&](auto tag) {
            using T = decltype(tag);
            map1<bool, T>(out, in, [](compute_t<T> x) { return formulas::LogicalNot::value(x); });
        });
        return;
    }
    if (vectorised_unary(op, out, in)) return;         // SIMD exp/tanh on contiguous f32/f16/bf16
    dispatch_all(in.dtype(), "unary", [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_same_v<T, bool>) {
            throw DTypeError(fmt::format("{}: not supported for bool tensor {}", op_name(op), in.describe()));
        } else {
            unary_typed<T>(op, out, in);
        }
    });
}

void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
    if (out.numel() == 0) return;
    AMPGRAD_CHECK(a.dtype() == b.dtype(), "{}: operand dtypes differ ({} vs {})", op_name(op), a.describe(),
                  b.describe());
    dispatch_all(a.dtype(), "binary", [&](auto tag) { binary_typed<decltype(tag)>(op, out, a, b); });
}

void binary_scalar(BinaryOp op, const Tensor& out, const Tensor& a, double scalar, bool scalar_first) {
    if (out.numel() == 0) return;
    AMPGRAD_CHECK(!is_comparison(op), "binary_scalar called with {}", op_name(op));
    dispatch_float(a.dtype(), "binary_scalar", [&](auto tag) {
        using T = decltype(tag);
        const compute_t<T> s = static_cast<compute_t<T>>(scalar);
        switch (op) {
#define AMPGRAD_SCALAR_CASE(e, name, F) \
            case BinaryOp::e: return scalar_typed<T, formulas::F>(out, a, s, scalar_first);
            AMPGRAD_ARITHMETIC_OPS(AMPGRAD_SCALAR_CASE)
#undef AMPGRAD_SCALAR_CASE
            default: break;
        }
    });
}

void add_scaled(const Tensor& out, const Tensor& a, const Tensor& b, double alpha) {
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

void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
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

void clamp(const Tensor& out, const Tensor& in, std::optional<double> lo, std::optional<double> hi) {
    if (out.numel() == 0) return;
    dispatch_all(in.dtype(), "clamp", [&](auto tag) {
        using T = decltype(tag);
        using C = compute_t<T>;
        if constexpr (std::is_same_v<T, bool>) {
            throw DTypeError(fmt::format("clamp: not supported for bool tensor {}", in.describe()));
        } else {
            // a bound is rounded to x's dtype first, as PyTorch's clamp_scalar_kernel_impl does
            // (min_.to<scalar_t>()): f16 x = -0 clamped at 1e-12 stays -0 (the bound rounds to 0)
            auto bound = [](double v) {
                if constexpr (std::is_integral_v<T>) return static_cast<C>(v);
                else return static_cast<C>(static_cast<T>(v));
            };
            C l = lo ? bound(*lo) : no_lower_bound<C>();   // a missing bound clamps nothing,
            C h = hi ? bound(*hi) : no_upper_bound<C>();   // not even +-inf
            map1<T, T>(out, in, [l, h](C x) { return formulas::clamp(x, l, h); });
        }
    });
}

void activation_backward(ActivationGrad op, const Tensor& dx, const Tensor& x, const Tensor& dy) {   // x: the saved y or x
    if (dx.numel() == 0) return;
    if (vectorised_activation_backward(op, dx, x, dy)) return;
    dispatch_float(x.dtype(), "activation_backward",
                   [&](auto tag) { activation_grad_typed<decltype(tag)>(op, dx, x, dy); });
}

AMPGRAD_REGISTER_KERNEL(kernels::unary, kCPU, unary);
AMPGRAD_REGISTER_KERNEL(kernels::binary, kCPU, binary);
AMPGRAD_REGISTER_KERNEL(kernels::binary_scalar, kCPU, binary_scalar);
AMPGRAD_REGISTER_KERNEL(kernels::add_scaled, kCPU, add_scaled);
AMPGRAD_REGISTER_KERNEL(kernels::where, kCPU, where);
AMPGRAD_REGISTER_KERNEL(kernels::clamp, kCPU, clamp);
AMPGRAD_REGISTER_KERNEL(kernels::activation_backward, kCPU, activation_backward);

}  // namespace ampgrad::cpu

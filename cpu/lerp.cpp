// lerp.cpp: out = lerp(a, b, w), the ternary elementwise kernel, with w a tensor or a scalar kept in
// the compute type. The formula is kernels/scalar_math.hpp's Lerp (shared with cuda/lerp.cu); the loop
// loads to compute_t<T> (fp32 for f16/bf16) and rounds once on store.
#include "kernels/kernels.hpp"
#include "kernels/scalar_math.hpp"
#include "cpu/loops.hpp"

namespace ampgrad::cpu {

namespace {

template <typename T>
T load(const char* p) { return *reinterpret_cast<const T*>(p); }

// w from a tensor: out, a, b, w all of out's shape (a, b, w may be broadcast views)
template <typename T>
void lerp_tensor_weight(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& w) {
    using C = compute_t<T>;
    auto L = make_run_layout<4>({&out, &a, &b, &w});
    for_each_run(L, [](std::array<char*, 4> p, std::array<int64_t, 4> s, int64_t n) {
        for (int64_t i = 0; i < n; ++i) {
            C value = formulas::Lerp::value(static_cast<C>(load<T>(p[1] + i * s[1])),
                                            static_cast<C>(load<T>(p[2] + i * s[2])),
                                            static_cast<C>(load<T>(p[3] + i * s[3])));
            *reinterpret_cast<T*>(p[0] + i * s[0]) = static_cast<T>(value);
        }
    });
}

template <typename T>
void lerp_scalar_weight(const Tensor& out, const Tensor& a, const Tensor& b, compute_t<T> w) {
    using C = compute_t<T>;
    auto L = make_run_layout<3>({&out, &a, &b});
    for_each_run(L, [w](std::array<char*, 3> p, std::array<int64_t, 3> s, int64_t n) {
        for (int64_t i = 0; i < n; ++i) {
            C value = formulas::Lerp::value(static_cast<C>(load<T>(p[1] + i * s[1])),
                                            static_cast<C>(load<T>(p[2] + i * s[2])), w);
            *reinterpret_cast<T*>(p[0] + i * s[0]) = static_cast<T>(value);
        }
    });
}

}  // namespace

void lerp(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& weight, double weight_scalar) {
    if (out.numel() == 0) return;
    AMPGRAD_CHECK(a.dtype() == out.dtype() && b.dtype() == out.dtype() &&
                      (!weight.defined() || weight.dtype() == out.dtype()),
                  "lerp: operand dtypes differ (out {}, a {}, b {})", out.describe(), a.describe(), b.describe());
    dispatch_float(out.dtype(), "lerp", [&](auto tag) {
        using T = decltype(tag);
        if (weight.defined()) lerp_tensor_weight<T>(out, a, b, weight);
        else lerp_scalar_weight<T>(out, a, b, static_cast<compute_t<T>>(weight_scalar));
    });
}

AMPGRAD_REGISTER_KERNEL(kernels::lerp, kCPU, lerp);

}  // namespace ampgrad::cpu

// copy.cpp: strided copy with dtype conversion, and fill. Conversions to f16/bf16 round to
// nearest even (core/dtype.hpp); to the fp8 dtypes through f32, round to nearest even, PyTorch's
// non-saturating cast (core/float8.hpp), or saturating in copy_saturating; to bool test != 0;
// float to int truncates toward zero.
#include "kernels/kernels.hpp"
#include "cpu/loops.hpp"

namespace ampgrad::cpu {

namespace {
template <typename T>
constexpr bool is_float8_v = std::is_same_v<T, Float8_e4m3fn> || std::is_same_v<T, Float8_e5m2>;

template <typename To, typename From>
To convert(From v) {
    if constexpr (std::is_same_v<To, From>) {
        return v;
    } else if constexpr (is_float8_v<From>) {
        return convert<To>(static_cast<float>(v));                      // fp8 -> f32 is exact
    } else if constexpr (is_float8_v<To>) {
        return To(static_cast<float>(static_cast<compute_t<From>>(v)));  // f64 rounds to f32 first, as torch
    } else if constexpr (std::is_same_v<To, bool>) {
        return static_cast<compute_t<From>>(v) != 0;
    } else if constexpr (std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>) {
        return To(static_cast<float>(static_cast<compute_t<From>>(v)));
    } else {
        return static_cast<To>(static_cast<compute_t<From>>(v));
    }
}

// Saturating: finite values past fp8's range, and ±inf, become ±max (NaN stays NaN).
template <typename To, typename From>
To convert_saturating(From v) {
    if constexpr (is_float8_v<To> && !is_float8_v<From>) {
        return To::saturated(static_cast<float>(static_cast<compute_t<From>>(v)));
    } else {
        return convert<To>(v);
    }
}

// Every dtype, the fp8 ones included (core/dispatch.hpp).
template <typename Fn>
decltype(auto) dispatch_with_float8(DType dtype, const char* kernel, Fn&& fn) {
    return dispatch_all_with_float8_as<HostStorage>(dtype, "", kernel, std::forward<Fn>(fn));
}

template <typename To, typename From, bool Saturate = false>
void copy_typed(const Tensor& dst, const Tensor& src) {
    auto L = make_run_layout<2>({&dst, &src});
    for_each_run(L, [](std::array<char*, 2> p, std::array<int64_t, 2> s, int64_t n) {
        auto* out = reinterpret_cast<To*>(p[0]);
        const auto* in = reinterpret_cast<const From*>(p[1]);
        auto cvt = [](From v) { return Saturate ? convert_saturating<To>(v) : convert<To>(v); };
        if (s[0] == sizeof(To) && s[1] == sizeof(From)) {
            for (int64_t i = 0; i < n; ++i) out[i] = cvt(in[i]);
        } else {
            for (int64_t i = 0; i < n; ++i)
                *reinterpret_cast<To*>(p[0] + i * s[0]) = cvt(*reinterpret_cast<const From*>(p[1] + i * s[1]));
        }
    });
}
}  // namespace

void copy(const Tensor& dst, const Tensor& src) {
    AMPGRAD_CHECK(dst.device().is_cpu() && src.device().is_cpu(), "cpu copy got {} <- {}", dst.describe(),
                  src.describe());
    if (dst.numel() == 0) return;
    dispatch_with_float8(dst.dtype(), "copy", [&](auto to) {
        dispatch_with_float8(src.dtype(), "copy", [&](auto from) { copy_typed<decltype(to), decltype(from)>(dst, src); });
    });
}

void copy_saturating(const Tensor& dst, const Tensor& src) {
    AMPGRAD_CHECK(dst.device().is_cpu() && src.device().is_cpu(), "cpu copy_saturating got {} <- {}", dst.describe(),
                  src.describe());
    if (dst.numel() == 0) return;
    dispatch_with_float8(dst.dtype(), "copy_saturating", [&](auto to) {
        dispatch_with_float8(src.dtype(), "copy_saturating", [&](auto from) {
            copy_typed<decltype(to), decltype(from), true>(dst, src);
        });
    });
}

void fill(const Tensor& dst, double value) {
    if (dst.numel() == 0) return;
    dispatch_with_float8(dst.dtype(), "fill", [&](auto tag) {
        using T = decltype(tag);
        T v = convert<T>(value);
        auto L = make_run_layout<1>({&dst});
        for_each_run(L, [v](std::array<char*, 1> p, std::array<int64_t, 1> s, int64_t n) {
            for (int64_t i = 0; i < n; ++i) *reinterpret_cast<T*>(p[0] + i * s[0]) = v;
        });
    });
}

AMPGRAD_REGISTER_KERNEL(kernels::copy, kCPU, copy);
AMPGRAD_REGISTER_KERNEL(kernels::fill, kCPU, fill);
AMPGRAD_REGISTER_KERNEL(kernels::copy_saturating, kCPU, copy_saturating);

}  // namespace ampgrad::cpu

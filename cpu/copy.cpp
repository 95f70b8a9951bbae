// copy.cpp: strided copy with dtype conversion, and fill. Conversions to f16/bf16 round to
// nearest even (core/dtype.hpp); to bool test != 0; float to int truncates toward zero.
#include "core/kernels.hpp"
#include "cpu/loops.hpp"

namespace ampgrad::cpu {

namespace {
template <typename To, typename From>
To convert(From v) {
    if constexpr (std::is_same_v<To, From>) {
        return v;
    } else if constexpr (std::is_same_v<To, bool>) {
        return static_cast<compute_t<From>>(v) != 0;
    } else if constexpr (std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>) {
        return To(static_cast<float>(static_cast<compute_t<From>>(v)));
    } else {
        return static_cast<To>(static_cast<compute_t<From>>(v));
    }
}

template <typename To, typename From>
void copy_typed(const Tensor& dst, const Tensor& src) {
    auto L = make_run_layout<2>({&dst, &src});
    for_each_run(L, [](std::array<char*, 2> p, std::array<int64_t, 2> s, int64_t n) {
        auto* out = reinterpret_cast<To*>(p[0]);
        const auto* in = reinterpret_cast<const From*>(p[1]);
        if (s[0] == sizeof(To) && s[1] == sizeof(From)) {
            for (int64_t i = 0; i < n; ++i) out[i] = convert<To>(in[i]);
        } else {
            for (int64_t i = 0; i < n; ++i)
                *reinterpret_cast<To*>(p[0] + i * s[0]) = convert<To>(*reinterpret_cast<const From*>(p[1] + i * s[1]));
        }
    });
}
}  // namespace

void copy(const Tensor& dst, const Tensor& src) {
    AMPGRAD_CHECK(dst.device().is_cpu() && src.device().is_cpu(), "cpu copy got {} <- {}", dst.describe(),
                  src.describe());
    if (dst.numel() == 0) return;
    dispatch_all(dst.dtype(), "copy", [&](auto to) {
        dispatch_all(src.dtype(), "copy", [&](auto from) { copy_typed<decltype(to), decltype(from)>(dst, src); });
    });
}

void fill(const Tensor& dst, double value) {
    if (dst.numel() == 0) return;
    dispatch_all(dst.dtype(), "fill", [&](auto tag) {
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

}  // namespace ampgrad::cpu

// random.cpp: Philox-based uniform and normal fills. Output elements (2p, 2p+1) come from
// Philox block (offset/4 + p), so values depend only on (seed, offset, index), never on the
// thread count or the device.
#include <cmath>

#include "core/philox.hpp"
#include "kernels/kernels.hpp"
#include "cpu/loops.hpp"

namespace ampgrad::cpu {

namespace {
// Two uniform doubles in [0,1) for element pair `pair`: one Philox block gives 4 x 32 bits.
inline std::array<double, 2> uniform_pair(uint64_t seed, uint64_t offset, int64_t pair) {
    auto r = Philox4x32::generate(seed, 0, offset / 4 + static_cast<uint64_t>(pair));
    return {Philox4x32::to_unit_double(r[0], r[1]), Philox4x32::to_unit_double(r[2], r[3])};
}

template <typename Fn>
void fill_contiguous(const Tensor& out, const char* kernel, Fn value_at) {
    AMPGRAD_CHECK(out.is_contiguous(), "{}: output must be contiguous, got strides of {}", kernel, out.describe());
    int64_t n = out.numel();
    dispatch_float(out.dtype(), kernel, [&](auto tag) {
        using T = decltype(tag);
        T* p = static_cast<T*>(out.raw_data());
        parallel_for((n + 1) / 2, 4096, [&](int64_t b, int64_t e) {
            for (int64_t pair = b; pair < e; ++pair) {
                auto v = value_at(pair);
                p[2 * pair] = static_cast<T>(static_cast<compute_t<T>>(v[0]));
                if (2 * pair + 1 < n) p[2 * pair + 1] = static_cast<T>(static_cast<compute_t<T>>(v[1]));
            }
        });
    });
}
}  // namespace

void random_uniform(const Tensor& out, uint64_t seed, uint64_t offset, double lo, double hi) {
    fill_contiguous(out, "random_uniform", [=](int64_t pair) {
        auto u = uniform_pair(seed, offset, pair);
        // lo + (hi - lo) * u as one fused multiply-add: rounded once whatever the compiler flags
        // (-march=native would fuse it anyway), so cuda/random.cu can match it bit for bit.
        return std::array<double, 2>{std::fma(hi - lo, u[0], lo), std::fma(hi - lo, u[1], lo)};
    });
}

// Box-Muller: two uniforms give two independent standard normals.
void random_normal(const Tensor& out, uint64_t seed, uint64_t offset, double mean, double std) {
    fill_contiguous(out, "random_normal", [=](int64_t pair) {
        auto u = uniform_pair(seed, offset, pair);
        double radius = std::sqrt(-2.0 * std::log(1.0 - u[0]));      // 1-u in (0,1]: log is finite
        double theta = 2.0 * M_PI * u[1];
        double scaled = std * radius;                                 // mean + scaled * cos/sin, fused (see above)
        return std::array<double, 2>{std::fma(scaled, std::cos(theta), mean), std::fma(scaled, std::sin(theta), mean)};
    });
}

AMPGRAD_REGISTER_KERNEL(kernels::random_uniform, kCPU, random_uniform);
AMPGRAD_REGISTER_KERNEL(kernels::random_normal, kCPU, random_normal);

}  // namespace ampgrad::cpu

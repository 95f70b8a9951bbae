// random.cu: Philox uniform and normal fills drawing the same numbers as cpu/random.cpp: elements
// (2p, 2p+1) come from Philox block (offset/4 + p) of core/philox.hpp, with the same double formulas.
// Both sides write every multiply-add as an explicit fma, so no compiler flag changes the rounding:
// uniforms are bit-identical in every dtype. Normals use log/cos/sin, where CUDA and glibc may differ
// in the last ulp of an f64 result; after rounding to f32/f16/bf16 that practically never shows.
#include "core/philox.hpp"
#include "cuda/loops.cuh"

namespace ampgrad::cuda {

namespace {

constexpr double kTwoPi = 2.0 * 3.14159265358979323846;     // == 2.0 * M_PI, as cpu/random.cpp computes it

// ---- kernels ----

struct UniformPair { double u0, u1; };

__device__ __forceinline__ UniformPair uniform_pair(uint64_t seed, uint64_t offset, int64_t pair) {
    auto r = Philox4x32::generate(seed, 0, offset / 4 + static_cast<uint64_t>(pair));
    return {Philox4x32::to_unit_double(r[0], r[1]), Philox4x32::to_unit_double(r[2], r[3])};
}

// Stores the pair's two values (the second only if it exists), rounding as cpu/random.cpp does:
// double -> compute type -> storage type.
template <typename T>
__device__ __forceinline__ void store_pair(T* out, int64_t n, int64_t pair, double v0, double v1) {
    out[2 * pair] = store_compute<T>(static_cast<device_compute_t<T>>(v0));
    if (2 * pair + 1 < n) out[2 * pair + 1] = store_compute<T>(static_cast<device_compute_t<T>>(v1));
}

// out (n) contiguous; one thread per element pair
template <typename T>
__global__ void uniform_kernel(int64_t n, T* out, uint64_t seed, uint64_t offset, double lo, double hi) {
    int64_t pairs = (n + 1) / 2;
    double span = hi - lo;
    for (int64_t pair = first_index(); pair < pairs; pair += grid_stride()) {
        UniformPair u = uniform_pair(seed, offset, pair);
        store_pair(out, n, pair, fma(span, u.u0, lo), fma(span, u.u1, lo));      // lo + span * u
    }
}

// Box-Muller: two uniforms give two independent standard normals.
template <typename T>
__global__ void normal_kernel(int64_t n, T* out, uint64_t seed, uint64_t offset, double mean, double std) {
    int64_t pairs = (n + 1) / 2;
    for (int64_t pair = first_index(); pair < pairs; pair += grid_stride()) {
        UniformPair u = uniform_pair(seed, offset, pair);
        double radius = sqrt(-2.0 * log(1.0 - u.u0));                    // 1-u in (0,1]: log is finite
        double theta = kTwoPi * u.u1;
        double scaled = std * radius;
        store_pair(out, n, pair, fma(scaled, cos(theta), mean), fma(scaled, sin(theta), mean));
    }
}

// ---- launchers ----

void require_contiguous(const char* kernel, const Tensor& out) {
    AMPGRAD_CHECK(out.is_contiguous(), "{}: output must be contiguous, got strides of {}", kernel, out.describe());
}

}  // namespace

void random_uniform(const Tensor& out, uint64_t seed, uint64_t offset, double lo, double hi) {
    const int index = out.device().index;
    require_on_device("random_uniform", index, {&out});
    require_contiguous("random_uniform", out);
    int64_t n = out.numel();
    if (n == 0) return;
    DeviceGuard guard(index);
    dispatch_float(out.dtype(), "random_uniform", [&](auto tag) {
        using T = decltype(tag);
        uniform_kernel<T><<<grid_for((n + 1) / 2), kBlockSize, 0, current_stream()>>>(n, device_ptr<T>(out), seed,
                                                                                      offset, lo, hi);
        CUDA_CHECK(cudaGetLastError());
    });
}

void random_normal(const Tensor& out, uint64_t seed, uint64_t offset, double mean, double std) {
    const int index = out.device().index;
    require_on_device("random_normal", index, {&out});
    require_contiguous("random_normal", out);
    int64_t n = out.numel();
    if (n == 0) return;
    DeviceGuard guard(index);
    dispatch_float(out.dtype(), "random_normal", [&](auto tag) {
        using T = decltype(tag);
        normal_kernel<T><<<grid_for((n + 1) / 2), kBlockSize, 0, current_stream()>>>(n, device_ptr<T>(out), seed,
                                                                                     offset, mean, std);
        CUDA_CHECK(cudaGetLastError());
    });
}

AMPGRAD_REGISTER_KERNEL(kernels::random_uniform, kCUDA, random_uniform);
AMPGRAD_REGISTER_KERNEL(kernels::random_normal, kCUDA, random_normal);

}  // namespace ampgrad::cuda

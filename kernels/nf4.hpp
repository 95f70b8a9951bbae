// nf4.hpp: QLoRA's 4-bit NormalFloat (NF4) and the 8-bit dynamic map of its double quantisation,
// as formulas shared by the CPU kernels (cpu/nf4.cpp) and the CUDA kernels (cuda/nf4.cu).
// Semantics are bitsandbytes 0.50.2's (quantize_4bit(quant_type="nf4"), docs/nf4.md):
//   block of `block_size` values -> absmax = max |w|;  scaled = clamp(w * (1 / absmax), -1, 1)
//   (a short tail block divides: w / absmax);  code = the nearest of the 16 levels, a tie going to
//   the lower level;  two codes per byte, the first element in the high nibble;
//   dequantised w = level[code] * absmax, in f32, then rounded to the output dtype.
// Double quantisation stores the absmax values minus their mean as 8-bit codes of the dynamic map,
// blockwise (block 256), with the same nearest-value rule.
// Not here: tensors, the kernels' loops, autograd (autograd/ops/nf4.cpp).
#pragma once
#include <cmath>
#include <cstdint>

#ifndef AMPGRAD_HOST_DEVICE
#if defined(__CUDACC__)
#define AMPGRAD_HOST_DEVICE __host__ __device__
#else
#define AMPGRAD_HOST_DEVICE
#endif
#endif

namespace ampgrad::nf4 {

inline constexpr int64_t kDefaultBlockSize = 64;     // QLoRA's block for the weights
inline constexpr int64_t kAbsmaxBlockSize = 256;     // QLoRA's block for the absmax (double quantisation)
inline constexpr float kAbsmaxFloor = 1e-38f;        // bitsandbytes clamps absmax to this before 1/absmax

// The 16 NF4 levels (QLoRA, Dettmers et al. 2023, appendix E; bitsandbytes' table, exact f32): the
// quantiles of N(0,1) normalised to [-1, 1], with an exact zero (docs/nf4.md derives them).
// Decimal: -1, -0.6961928, -0.5250731, -0.3949175, -0.2844414, -0.1847734, -0.0910500, 0,
//          0.0795803, 0.1609302, 0.2461123, 0.3379152, 0.4407098, 0.5626170, 0.7229568, 1.
AMPGRAD_HOST_DEVICE inline float level(int code) {
    constexpr float kLevels[16] = {
        -0x1.0p+0f,          -0x1.647362p-1f,    -0x1.0cd66p-1f,     -0x1.946540p-2f,
        -0x1.23449ap-2f,     -0x1.7a6a7ep-3f,    -0x1.74f0e2p-4f,    0.0f,
        0x1.45f5fep-4f,      0x1.4995c6p-3f,     0x1.f809bap-3f,     0x1.5a0674p-2f,
        0x1.c3497p-2f,       0x1.200f56p-1f,     0x1.722766p-1f,     0x1.0p+0f,
    };
    return kLevels[code & 0xF];
}

// The code of a scaled value in [-1, 1]: the first level whose midpoint with the next level is >= x
// (bitsandbytes' torch.bucketize on the f32 midpoints), so a tie goes to the lower level. NaN -> 15.
AMPGRAD_HOST_DEVICE inline uint8_t encode(float scaled) {
    uint8_t code = 0;
    while (code < 15) {
        const float midpoint = (level(code) + level(code + 1)) / 2.0f;
        if (scaled <= midpoint) break;
        ++code;
    }
    return code;
}

// x / absmax as bitsandbytes computes it: a full block multiplies by the f32 reciprocal, a tail
// block divides; absmax is floored at kAbsmaxFloor (an all-zero block gives zeros), then clamped.
AMPGRAD_HOST_DEVICE inline float scale_into_unit(float x, float absmax, bool tail_block) {
    const float a = absmax > kAbsmaxFloor ? absmax : kAbsmaxFloor;
    const float scaled = tail_block ? x / a : x * (1.0f / a);
    return scaled < -1.0f ? -1.0f : (scaled > 1.0f ? 1.0f : scaled);
}

AMPGRAD_HOST_DEVICE inline float decode(uint8_t code, float absmax) { return level(code) * absmax; }

// Packing: byte i holds element 2i in its high nibble and element 2i+1 in its low nibble.
AMPGRAD_HOST_DEVICE inline uint8_t pack(uint8_t first, uint8_t second) {
    return static_cast<uint8_t>((first << 4) | (second & 0xF));
}
AMPGRAD_HOST_DEVICE inline uint8_t unpack(uint8_t byte, int64_t element) {
    return (element & 1) ? (byte & 0xF) : (byte >> 4);
}

// ---- the dynamic 8-bit map (bitsandbytes.functional.create_dynamic_map(signed=True)) ----
// 127 negative values, 0, 127 positive values and 1.0, sorted. Dettmers, "8-bit Approximations
// for Parallelism in Deep Learning" (2016): a sign, a run of zero bits giving the decimal exponent
// (10^-6 .. 10^0), then linear fractions. The positive values, exact f32, as printed by
// tools/fixtures/nf4.py (print_cpp_table); the negative ones are their negations.
AMPGRAD_HOST_DEVICE inline float dynamic_positive(int i) {
    constexpr float kPositive[127] = {
    0x1.27476ep-21f, 0x1.b43528p-19f, 0x1.040bfep-17f, 0x1.64840cp-16f,
    0x1.6f0068p-15f, 0x1.15df66p-14f, 0x1.743e96p-14f, 0x1.47ae16p-13f,
    0x1.19ce0ap-12f, 0x1.8fc506p-12f, 0x1.02de02p-11f, 0x1.3dd982p-11f,
    0x1.78d500p-11f, 0x1.b3d07cp-11f, 0x1.eecbfep-11f, 0x1.4fdf3ap-10f,
    0x1.e353f8p-10f, 0x1.3b645ap-9f, 0x1.851eb8p-9f, 0x1.ced914p-9f,
    0x1.0c49bap-8f, 0x1.3126e8p-8f, 0x1.56041ap-8f, 0x1.7ae148p-8f,
    0x1.9fbe76p-8f, 0x1.c49ba6p-8f, 0x1.e978d4p-8f, 0x1.072b02p-7f,
    0x1.19999ap-7f, 0x1.2c0830p-7f, 0x1.3e76c8p-7f, 0x1.75c290p-7f,
    0x1.d1eb86p-7f, 0x1.170a3ep-6f, 0x1.451ebap-6f, 0x1.733334p-6f,
    0x1.a147aep-6f, 0x1.cf5c2ap-6f, 0x1.fd70a4p-6f, 0x1.15c290p-5f,
    0x1.2ccccep-5f, 0x1.43d70ap-5f, 0x1.5ae146p-5f, 0x1.71eb86p-5f,
    0x1.88f5c2p-5f, 0x1.a00000p-5f, 0x1.b70a3ep-5f, 0x1.ce147ap-5f,
    0x1.e51ebap-5f, 0x1.fc28f6p-5f, 0x1.09999ap-4f, 0x1.151ebap-4f,
    0x1.20a3d6p-4f, 0x1.2c28f6p-4f, 0x1.37ae14p-4f, 0x1.433334p-4f,
    0x1.4eb854p-4f, 0x1.5a3d70p-4f, 0x1.65c290p-4f, 0x1.7147aep-4f,
    0x1.7ccccep-4f, 0x1.8851eep-4f, 0x1.93d70ap-4f, 0x1.b66668p-4f,
    0x1.f00000p-4f, 0x1.14ccccp-3f, 0x1.31999ap-3f, 0x1.4e6666p-3f,
    0x1.6b3334p-3f, 0x1.880000p-3f, 0x1.a4ccccp-3f, 0x1.c1999ap-3f,
    0x1.de6666p-3f, 0x1.fb3332p-3f, 0x1.0c0000p-2f, 0x1.1a6668p-2f,
    0x1.28ccccp-2f, 0x1.373334p-2f, 0x1.459998p-2f, 0x1.540000p-2f,
    0x1.626666p-2f, 0x1.70ccccp-2f, 0x1.7f3334p-2f, 0x1.8d9998p-2f,
    0x1.9c0000p-2f, 0x1.aa6666p-2f, 0x1.b8ccccp-2f, 0x1.c73334p-2f,
    0x1.d59998p-2f, 0x1.e40000p-2f, 0x1.f26664p-2f, 0x1.006666p-1f,
    0x1.079998p-1f, 0x1.0eccccp-1f, 0x1.160000p-1f, 0x1.1d3334p-1f,
    0x1.246668p-1f, 0x1.2b999ap-1f, 0x1.32ccccp-1f, 0x1.3a0000p-1f,
    0x1.413334p-1f, 0x1.486668p-1f, 0x1.4f999ap-1f, 0x1.56ccccp-1f,
    0x1.5e0000p-1f, 0x1.653334p-1f, 0x1.6c6668p-1f, 0x1.73999ap-1f,
    0x1.7accccp-1f, 0x1.820000p-1f, 0x1.893334p-1f, 0x1.906666p-1f,
    0x1.97999ap-1f, 0x1.9eccccp-1f, 0x1.a60000p-1f, 0x1.ad3334p-1f,
    0x1.b46666p-1f, 0x1.bb999ap-1f, 0x1.c2ccccp-1f, 0x1.ca0000p-1f,
    0x1.d13334p-1f, 0x1.d86666p-1f, 0x1.df999ap-1f, 0x1.e6ccccp-1f,
    0x1.ee0000p-1f, 0x1.f53334p-1f, 0x1.fc6666p-1f,
    };
    return kPositive[i];
}

AMPGRAD_HOST_DEVICE inline float dynamic_value(int code) {
    if (code < 127) return -dynamic_positive(126 - code);
    if (code == 127) return 0.0f;
    if (code < 255) return dynamic_positive(code - 128);
    return 1.0f;
}

// A double-quantised absmax back: map value x block absmax + the mean, as one fused multiply-add on
// both devices (nvcc always fuses it; GCC only where it may contract with FMA: one ulp apart else).
AMPGRAD_HOST_DEVICE inline float dynamic_decode(uint8_t code, float block_absmax, float offset) {
    return fmaf(dynamic_value(code), block_absmax, offset);
}

// The nearest map value to x in [-1, 1], a tie going to the lower code (bucketize on the f32
// midpoints, as bitsandbytes' default backend). A binary search over the 255 midpoints.
AMPGRAD_HOST_DEVICE inline uint8_t dynamic_encode(float x) {
    int lo = 0, hi = 255;                             // the answer is in [lo, hi]
    while (lo < hi) {
        const int mid = (lo + hi) / 2;
        const float midpoint = (dynamic_value(mid) + dynamic_value(mid + 1)) / 2.0f;
        if (x <= midpoint) hi = mid; else lo = mid + 1;
    }
    return static_cast<uint8_t>(lo);
}

}  // namespace ampgrad::nf4

// float8.hpp: the two 8-bit float formats (OCP FP8: E4M3 "fn" and E5M2) and their one conversion
// formula to and from f32, shared by the CPU copy (cpu/copy.cpp) and the CUDA copy (cuda/copy.cu).
// Semantics are PyTorch's torch.float8_e4m3fn / torch.float8_e5m2 (docs/fp8.md):
//   e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities; NaN = S.1111.111; max 448.
//   e5m2:   1 sign, 5 exponent (bias 15), 2 mantissa bits; IEEE-like: ±inf, NaNs; max 57344.
// f32 -> fp8 rounds to nearest even. Past the finite range a cast either saturates (±max; ±inf too)
// or does not (e4m3fn: NaN, e5m2: ±inf). PyTorch's `.to()` (2.15, checked bit for bit by the
// fixtures) saturates to e4m3fn and does not to e5m2; the Float8_* constructors do the same, and
// `saturated()` saturates both (the scaled recipes' cast). NaN stays NaN (0x7F | sign) always.
// Not here: any arithmetic on fp8 values.
#pragma once
#include <cstdint>
#include <cstring>

#ifndef AMPGRAD_HOST_DEVICE
#if defined(__CUDACC__)
#define AMPGRAD_HOST_DEVICE __host__ __device__
#else
#define AMPGRAD_HOST_DEVICE
#endif
#endif

namespace ampgrad {

namespace fp8 {

AMPGRAD_HOST_DEVICE inline uint32_t bits_of(float f) {
#if defined(__CUDA_ARCH__)
    return __float_as_uint(f);
#else
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
#endif
}
AMPGRAD_HOST_DEVICE inline float float_of(uint32_t u) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    std::memcpy(&f, &u, 4);
    return f;
#endif
}

// The facts of one format. kFiniteOnly: e4m3fn's variant of OCP E4M3 (no inf; only S.1111.111 is NaN).
template <int ExpBits, int ManBits, bool FiniteOnly>
struct Format {
    static constexpr int kExpBits = ExpBits;
    static constexpr int kManBits = ManBits;
    static constexpr bool kFiniteOnly = FiniteOnly;
    static constexpr int kBias = (1 << (ExpBits - 1)) - 1;                    // 7, 15
    static constexpr uint32_t kExpMax = (1u << ExpBits) - 1;                   // the all-ones exponent field
    static constexpr uint32_t kManMask = (1u << ManBits) - 1;
    // The largest finite code without sign: e4m3fn 0x7E (1.1111.110 = 448), e5m2 0x7B (1.11110.11 = 57344).
    static constexpr uint32_t kMaxFiniteCode = FiniteOnly ? 0x7Eu : ((kExpMax - 1) << ManBits) | kManMask;
    static constexpr uint8_t kNaNCode = 0x7F;                                 // | sign; as PyTorch writes NaN
    static constexpr uint8_t kOverflowCode = FiniteOnly ? 0x7F : 0x7C;       // non-saturating: NaN, or inf
    static constexpr bool kTorchSaturates = FiniteOnly;                        // what PyTorch's .to() does
};
using E4M3fn = Format<4, 3, true>;
using E5M2 = Format<5, 2, false>;

// value >> shift, rounded to nearest even on the dropped bits (shift in [1, 31]).
AMPGRAD_HOST_DEVICE inline uint32_t shift_right_rne(uint32_t value, int shift) {
    const uint32_t kept = value >> shift;
    const uint32_t dropped = value & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    return kept + ((dropped > half || (dropped == half && (kept & 1u))) ? 1u : 0u);
}

// f32 -> fp8 code, round to nearest even; saturate as explained at the top of the file.
template <class Fmt>
AMPGRAD_HOST_DEVICE inline uint8_t encode(float f, bool saturate) {
    const uint32_t bits = bits_of(f);
    const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
    const uint32_t abs = bits & 0x7FFFFFFFu;
    if (abs > 0x7F800000u) return sign | Fmt::kNaNCode;                        // NaN
    const int f32_exp = static_cast<int>(abs >> 23);                           // biased by 127
    const int exp = f32_exp - 127 + Fmt::kBias;                                // biased for the fp8 format
    uint32_t code;
    if (exp >= 1) {
        // Normal in fp8: the exponent and f32 mantissa side by side, the 23 - M dropped bits rounded
        // (a carry out of the mantissa correctly bumps the exponent).
        const uint32_t packed = (static_cast<uint32_t>(exp) << 23) | (abs & 0x7FFFFFu);
        code = exp > 64 ? 0xFFFFu : shift_right_rne(packed, 23 - Fmt::kManBits);   // > 64: far past the range
    } else {
        // Subnormal in fp8: the significand (with its implicit 1 unless f32-subnormal) in units of
        // fp8's smallest subnormal 2^(1 - bias - M). Rounding may carry into the smallest normal: right.
        const uint32_t significand = f32_exp == 0 ? (abs & 0x7FFFFFu) : ((abs & 0x7FFFFFu) | 0x800000u);
        const int shift = 24 - exp - Fmt::kManBits - (f32_exp == 0 ? 1 : 0);
        code = shift > 25 ? 0u : shift_right_rne(significand, shift);          // > 25: below half the smallest
    }
    if (code > Fmt::kMaxFiniteCode) return sign | (saturate ? static_cast<uint8_t>(Fmt::kMaxFiniteCode) : Fmt::kOverflowCode);
    return sign | static_cast<uint8_t>(code);
}

// fp8 code -> f32, exact. A NaN keeps its mantissa bits in the top of f32's and is quiet (the quiet
// bit set), as PyTorch's decode gives them.
template <class Fmt>
AMPGRAD_HOST_DEVICE inline float decode(uint8_t code) {
    const uint32_t sign = static_cast<uint32_t>(code & 0x80u) << 24;
    const uint32_t exp = (code >> Fmt::kManBits) & Fmt::kExpMax;
    const uint32_t man = code & Fmt::kManMask;
    const uint32_t f32_man = man << (23 - Fmt::kManBits);
    const bool special = Fmt::kFiniteOnly ? (exp == Fmt::kExpMax && man == Fmt::kManMask) : exp == Fmt::kExpMax;
    if (special && !Fmt::kFiniteOnly && man == 0) return float_of(sign | 0x7F800000u);     // e5m2's ±inf
    if (special) return float_of(sign | 0x7FC00000u | f32_man);                             // quiet NaN
    if (exp == 0) {                                                             // ±0 and subnormals
        // man * 2^(1 - bias - M), built as an exact power of two times a small integer
        const float unit = float_of(static_cast<uint32_t>(127 + 1 - Fmt::kBias - Fmt::kManBits) << 23);
        const float v = static_cast<float>(man) * unit;
        return float_of(sign | bits_of(v));
    }
    return float_of(sign | ((exp + 127u - Fmt::kBias) << 23) | f32_man);
}

}  // namespace fp8

// ---- storage types: one byte; float conversions as PyTorch's .to() ----

struct Float8_e4m3fn {
    uint8_t bits = 0;
    Float8_e4m3fn() = default;
    AMPGRAD_HOST_DEVICE Float8_e4m3fn(float f) : bits(fp8::encode<fp8::E4M3fn>(f, fp8::E4M3fn::kTorchSaturates)) {}  // NOLINT
    AMPGRAD_HOST_DEVICE operator float() const { return fp8::decode<fp8::E4M3fn>(bits); }
    AMPGRAD_HOST_DEVICE static Float8_e4m3fn from_bits(uint8_t b) { Float8_e4m3fn v; v.bits = b; return v; }
    AMPGRAD_HOST_DEVICE static Float8_e4m3fn saturated(float f) { return from_bits(fp8::encode<fp8::E4M3fn>(f, true)); }
};
struct Float8_e5m2 {
    uint8_t bits = 0;
    Float8_e5m2() = default;
    AMPGRAD_HOST_DEVICE Float8_e5m2(float f) : bits(fp8::encode<fp8::E5M2>(f, fp8::E5M2::kTorchSaturates)) {}  // NOLINT
    AMPGRAD_HOST_DEVICE operator float() const { return fp8::decode<fp8::E5M2>(bits); }
    AMPGRAD_HOST_DEVICE static Float8_e5m2 from_bits(uint8_t b) { Float8_e5m2 v; v.bits = b; return v; }
    AMPGRAD_HOST_DEVICE static Float8_e5m2 saturated(float f) { return from_bits(fp8::encode<fp8::E5M2>(f, true)); }
};

inline constexpr double kFloat8E4M3fnMax = 448.0;
inline constexpr double kFloat8E5M2Max = 57344.0;

}  // namespace ampgrad

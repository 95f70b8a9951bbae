// dtype.hpp: the ten element types (kUInt8: packed 4-bit codes, kernels/nf4.hpp), IEEE fp16/bf16 storage types with exact
// round-to-nearest-even conversion (the two fp8 formats: core/float8.hpp), and PyTorch's
// type-promotion rules.
// Not here: any arithmetic on tensors (see cpu/ and autograd/ops/).
#pragma once
#include <cstdint>
#include <cstring>
#include <iosfwd>
#include <string_view>

#include "core/float8.hpp"

namespace ampgrad {

// The fp8 dtypes and kUInt8 come last so the others keep their numbers. They are storage formats:
// casts, copies and views work on them, arithmetic refuses them (DTypeError). kUInt8 is
// torch.uint8; ampgrad uses it for raw bytes such as NF4's packed codes (kernels/nf4.hpp).
enum class DType : uint8_t { kFloat32, kFloat16, kBFloat16, kFloat64, kInt64, kInt32, kBool, kFloat8_e4m3fn, kFloat8_e5m2,
                             kUInt8 };
inline constexpr DType kFloat32 = DType::kFloat32;
inline constexpr DType kFloat16 = DType::kFloat16;
inline constexpr DType kBFloat16 = DType::kBFloat16;
inline constexpr DType kFloat64 = DType::kFloat64;
inline constexpr DType kInt64 = DType::kInt64;
inline constexpr DType kInt32 = DType::kInt32;
inline constexpr DType kBool = DType::kBool;
inline constexpr DType kFloat8_e4m3fn = DType::kFloat8_e4m3fn;
inline constexpr DType kFloat8_e5m2 = DType::kFloat8_e5m2;
inline constexpr DType kUInt8 = DType::kUInt8;
// libtorch's short names (torch::kFloat, torch::kLong, ...)
inline constexpr DType kFloat = kFloat32;
inline constexpr DType kDouble = kFloat64;
inline constexpr DType kHalf = kFloat16;
inline constexpr DType kLong = kInt64;
inline constexpr DType kInt = kInt32;
inline constexpr DType kByte = kUInt8;

// ---- fp16 / bf16 bit-exact conversion (round-to-nearest-even, overflow to inf) ----

inline uint32_t float_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float bits_float(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

// IEEE binary16: 1 sign, 5 exponent, 10 mantissa bits. Handles subnormals, inf, NaN.
inline uint16_t float_to_half_bits(float f) {
    uint32_t x = float_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t abs = x & 0x7FFFFFFFu;
    if (abs >= 0x7F800000u) {                                   // inf or NaN
        return static_cast<uint16_t>(sign | 0x7C00u | (abs > 0x7F800000u ? 0x200u : 0u));
    }
    if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds to >= 65520: inf
    if (abs < 0x38800000u) {                                    // below 2^-14: fp16 subnormal or zero
        // Adding 0.5f shifts the value so the fp32 rounding hardware performs RNE for us.
        float r = bits_float(abs) + 0.5f;
        return static_cast<uint16_t>(sign | (float_bits(r) - 0x3F000000u));
    }
    uint32_t mant_odd = (abs >> 13) & 1u;
    abs += 0xC8000FFFu + mant_odd;                              // rebias exponent (-112<<23) and round
    return static_cast<uint16_t>(sign | (abs >> 13));
}

inline float half_bits_to_float(uint16_t h) {
    uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu;
    uint32_t mant = h & 0x3FFu;
    if (exp == 0x1F) return bits_float(sign | 0x7F800000u | (mant << 13));   // inf / NaN
    if (exp == 0) {                                                         // zero / subnormal
        float v = static_cast<float>(mant) * 5.9604644775390625e-8f;        // mant * 2^-24
        return sign ? -v : v;
    }
    return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

// bfloat16 is the top half of an fp32; RNE on the dropped 16 bits, NaN stays quiet NaN.
inline uint16_t float_to_bf16_bits(float f) {
    uint32_t x = float_bits(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
    uint32_t lsb = (x >> 16) & 1u;
    x += 0x7FFFu + lsb;
    return static_cast<uint16_t>(x >> 16);
}
inline float bf16_bits_to_float(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }

struct Half {
    uint16_t bits = 0;
    Half() = default;
    Half(float f) : bits(float_to_half_bits(f)) {}  // NOLINT: implicit like c10::Half
    operator float() const { return half_bits_to_float(bits); }
    static Half from_bits(uint16_t b) { Half h; h.bits = b; return h; }
};
struct BFloat16 {
    uint16_t bits = 0;
    BFloat16() = default;
    BFloat16(float f) : bits(float_to_bf16_bits(f)) {}  // NOLINT
    operator float() const { return bf16_bits_to_float(bits); }
    static BFloat16 from_bits(uint16_t b) { BFloat16 h; h.bits = b; return h; }
};

// ---- dtype facts ----

constexpr size_t element_size(DType t) {
    switch (t) {
        case DType::kFloat32: case DType::kInt32: return 4;
        case DType::kFloat16: case DType::kBFloat16: return 2;
        case DType::kFloat64: case DType::kInt64: return 8;
        case DType::kBool: case DType::kFloat8_e4m3fn: case DType::kFloat8_e5m2: case DType::kUInt8: return 1;
    }
    return 0;
}
constexpr bool is_float8(DType t) { return t == DType::kFloat8_e4m3fn || t == DType::kFloat8_e5m2; }
// As torch.is_floating_point: true for the fp8 dtypes too (whose arithmetic still refuses them).
constexpr bool is_floating(DType t) {
    return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kFloat64 ||
           is_float8(t);
}
constexpr bool is_reduced_float(DType t) { return t == DType::kFloat16 || t == DType::kBFloat16; }

// Short names as used in error messages: "f32", "f16", "bf16", "f64", "i64", "i32", "bool", "u8", and
// PyTorch's names for the fp8 dtypes: "float8_e4m3fn", "float8_e5m2".
constexpr std::string_view dtype_name(DType t) {
    switch (t) {
        case DType::kFloat32: return "f32";
        case DType::kFloat16: return "f16";
        case DType::kBFloat16: return "bf16";
        case DType::kFloat64: return "f64";
        case DType::kInt64: return "i64";
        case DType::kInt32: return "i32";
        case DType::kBool: return "bool";
        case DType::kFloat8_e4m3fn: return "float8_e4m3fn";
        case DType::kFloat8_e5m2: return "float8_e5m2";
        case DType::kUInt8: return "u8";
    }
    return "?";
}

// libtorch's ScalarType names, as `std::cout << dtype` prints them: "Float", "Half", "BFloat16", "Double",
// "Long", "Int", "Bool", "Float8_e4m3fn", "Float8_e5m2", "Byte".
std::string_view scalar_type_name(DType t);
std::ostream& operator<<(std::ostream& os, DType t);

// Machine epsilon of a float dtype (distance from 1 to the next value); tests derive tolerances from it.
constexpr double dtype_eps(DType t) {
    switch (t) {
        case DType::kFloat16: return 9.765625e-4;        // 2^-10
        case DType::kBFloat16: return 7.8125e-3;         // 2^-7
        case DType::kFloat32: return 1.1920928955e-7;    // 2^-23
        case DType::kFloat64: return 2.220446049250313e-16;
        case DType::kFloat8_e4m3fn: return 0.125;          // 2^-3
        case DType::kFloat8_e5m2: return 0.25;             // 2^-2
        default: return 0.0;
    }
}

// `value` rounded as storing it in a tensor of float dtype t would round it (through f32, RNE).
inline double round_to_dtype(double value, DType t) {
    switch (t) {
        case DType::kFloat16: return static_cast<float>(Half(static_cast<float>(value)));
        case DType::kBFloat16: return static_cast<float>(BFloat16(static_cast<float>(value)));
        case DType::kFloat32: return static_cast<float>(value);
        case DType::kFloat8_e4m3fn: return static_cast<float>(Float8_e4m3fn(static_cast<float>(value)));
        case DType::kFloat8_e5m2: return static_cast<float>(Float8_e5m2(static_cast<float>(value)));
        default: return value;
    }
}

// PyTorch promotion for two tensor operands of the same category:
// bool < int32 < int64 < (f16, bf16) < f32 < f64, and f16 + bf16 -> f32. An fp8 dtype promotes only
// with itself (DTypeError otherwise, as torch.promote_types).
DType promote_types(DType a, DType b);

}  // namespace ampgrad

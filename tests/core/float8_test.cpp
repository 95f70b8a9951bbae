// float8_test.cpp: the fp8 dtypes (core/float8.hpp, core/dtype.hpp) against PyTorch bit for bit:
// all 256 codes of each format decoded, a million generated f32 casts (tools/fixtures/float8.py runs
// the same generator; the fixture holds a hash of the million codes and every 250th sample), every
// f16 and bf16 bit pattern, f64 ties; then round trips and the saturating / non-saturating rules.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <iterator>
#include <string>

#include "ampgrad/ampgrad.h"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using ampgrad::testing::load_fixture;

namespace {

struct Fp8Case {
    const char* name;    // fixture suffix
    DType dtype;
    double max_value;
};
const Fp8Case kCases[] = {{"e4m3fn", kFloat8_e4m3fn, 448.0}, {"e5m2", kFloat8_e5m2, 57344.0}};

// tools/fixtures/float8.py's generator, value for value.
uint64_t splitmix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
constexpr uint32_t kSpecials[] = {0x00000000, 0x7F800000, 0x7FC00000, 0x7F800001, 0x43E00000, 0x43E80000,
                                  0x43F00000, 0x43F80000, 0x47600000, 0x47700000, 0x47800000, 0x3B000000,
                                  0x3A800000, 0x3C800000, 0x37800000, 0x37000000, 0x38800000, 0x00000001,
                                  0x007FFFFF, 0x7F7FFFFF, 0x3F800000, 0x43E7FFFF, 0x43E80001, 0x476FFFFF};
uint32_t f32_input_bits(uint64_t i, uint64_t seed) {
    const uint64_t u = splitmix64(seed + i * 0x9E3779B97F4A7C15ull);
    const uint32_t sign = (u >> 59) & 1u, low = static_cast<uint32_t>(u);
    const uint64_t category = u >> 60;
    uint32_t man = low & 0x7FFFFFu, exp;
    if (category < 7) {
        exp = 127 - 26 + (low >> 23) % 45;
    } else if (category < 10) {
        const uint32_t drop = 20 + (low >> 23) % 2;
        man = (man & ~((1u << drop) - 1u)) | (1u << (drop - 1));
        man = (man + ((low >> 24) % 3) - 1u) & 0x7FFFFFu;
        exp = 127 - 24 + static_cast<uint32_t>((u >> 32) % 42);
    } else if (category < 12) {
        return low;
    } else if (category < 13) {
        return kSpecials[(u >> 32) % std::size(kSpecials)] | (sign << 31);
    } else {
        exp = 127 - 24 + (low >> 23) % 19;
    }
    return (sign << 31) | (exp << 23) | man;
}

uint64_t fnv1a64(const uint8_t* bytes, size_t n) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < n; ++i) h = (h ^ bytes[i]) * 0x100000001B3ull;
    return h;
}

// An fp8 tensor holding the given codes.
Tensor fp8_codes(DType dtype, const std::vector<uint8_t>& codes) {
    Tensor t = make_empty({static_cast<int64_t>(codes.size())}, dtype, Device(kCPU));
    std::memcpy(t.raw_data(), codes.data(), codes.size());
    return t;
}
std::vector<uint8_t> bytes_of(const Tensor& t) {
    Tensor c = t.contiguous();
    const auto* p = static_cast<const uint8_t*>(c.raw_data());
    return std::vector<uint8_t>(p, p + c.numel() * static_cast<int64_t>(c.element_size()));
}
std::vector<uint8_t> all_codes() {
    std::vector<uint8_t> codes(256);
    for (int i = 0; i < 256; ++i) codes[static_cast<size_t>(i)] = static_cast<uint8_t>(i);
    return codes;
}
// A tensor of dtype `dtype` (2 or 4 bytes) holding these bit patterns.
template <typename Bits>
Tensor from_bits(const std::vector<Bits>& bits, DType dtype) {
    Tensor t = make_empty({static_cast<int64_t>(bits.size())}, dtype, Device(kCPU));
    std::memcpy(t.raw_data(), bits.data(), bits.size() * sizeof(Bits));
    return t;
}

}  // namespace

TEST_CASE("float8: dtype facts, names and promotion") {
    CHECK(element_size(kFloat8_e4m3fn) == 1);
    CHECK(element_size(kFloat8_e5m2) == 1);
    CHECK(dtype_name(kFloat8_e4m3fn) == "float8_e4m3fn");
    CHECK(dtype_name(kFloat8_e5m2) == "float8_e5m2");
    CHECK(is_floating(kFloat8_e5m2));
    CHECK(is_float8(kFloat8_e4m3fn));
    CHECK_FALSE(is_float8(kBFloat16));
    CHECK_FALSE(is_reduced_float(kFloat8_e4m3fn));
    CHECK(promote_types(kFloat8_e4m3fn, kFloat8_e4m3fn) == kFloat8_e4m3fn);
    CHECK_THROWS_WITH_AS(promote_types(kFloat8_e4m3fn, kFloat32),
                         doctest::Contains("promotion of float8_e4m3fn with f32 is not supported"), DTypeError);
    CHECK_THROWS_AS(promote_types(kBFloat16, kFloat8_e5m2), DTypeError);
    Tensor t = zeros({2, 3}, TensorOptions(kFloat8_e5m2));
    CHECK(t.describe() == "(2,3) float8_e5m2 cpu");
    CHECK(round_to_dtype(449.0, kFloat8_e4m3fn) == 448.0);
    CHECK(round_to_dtype(0.3, kFloat8_e5m2) == 0.3125);
}

TEST_CASE("float8: all 256 codes decode to f32, f16 and bf16 as PyTorch's") {
    for (const Fp8Case& c : kCases) {
        const std::string fmt_name = c.name;
        CAPTURE(fmt_name);
        ampgrad::testing::Fixture fx = load_fixture(std::string("fp8_codes_") + c.name);
        const std::vector<int64_t> f32_bits = fx.at("f32_bits").to_vector<int64_t>();
        const std::vector<int64_t> f16_bits = fx.at("f16_bits").to_vector<int64_t>();
        const std::vector<int64_t> bf16_bits = fx.at("bf16_bits").to_vector<int64_t>();
        Tensor codes = fp8_codes(c.dtype, all_codes());
        const std::vector<float> as_f32 = codes.to(kFloat32).to_vector<float>();
        const std::vector<Half> as_f16 = codes.to(kFloat16).to_vector<Half>();
        const std::vector<BFloat16> as_bf16 = codes.to(kBFloat16).to_vector<BFloat16>();
        int nan_codes = 0;
        for (size_t i = 0; i < 256; ++i) {
            CAPTURE(i);
            CHECK(float_bits(as_f32[i]) == static_cast<uint32_t>(f32_bits[i]));     // NaN payloads included
            // A NaN code to f16/bf16 goes through f32 and ampgrad's f32 -> f16/bf16 NaN rules (core/dtype.hpp:
            // payload dropped), where PyTorch keeps payload bits: NaN-ness only for those.
            const bool nan = std::isnan(as_f32[i]);
            nan_codes += nan;
            if (nan) {
                CHECK(std::isnan(static_cast<float>(as_f16[i])));
                CHECK(std::isnan(static_cast<float>(as_bf16[i])));
                CHECK(std::isnan(half_bits_to_float(static_cast<uint16_t>(f16_bits[i]))));
                CHECK(std::isnan(bf16_bits_to_float(static_cast<uint16_t>(bf16_bits[i]))));
            } else {
                CHECK(as_f16[i].bits == static_cast<uint16_t>(f16_bits[i]));
                CHECK(as_bf16[i].bits == static_cast<uint16_t>(bf16_bits[i]));
            }
        }
        CHECK(nan_codes == (c.dtype == kFloat8_e4m3fn ? 2 : 6));    // S.1111.111, or exponent 11111 with m != 0
    }
}

TEST_CASE("float8: a million f32 casts match PyTorch's .to() and the saturating cast bit for bit") {
    for (const Fp8Case& c : kCases) {
        const std::string fmt_name = c.name;
        CAPTURE(fmt_name);
        ampgrad::testing::Fixture fx = load_fixture(std::string("fp8_cast_f32_") + c.name);
        const auto count = fx.params.at("count").get<int64_t>();
        const auto seed = fx.params.at("seed").get<uint64_t>();
        std::vector<uint32_t> input_bits(static_cast<size_t>(count));
        for (int64_t i = 0; i < count; ++i) input_bits[static_cast<size_t>(i)] = f32_input_bits(static_cast<uint64_t>(i), seed);
        Tensor x = from_bits(input_bits, kFloat32);                                                  // (count)
        const std::vector<uint8_t> codes = bytes_of(x.to(c.dtype));
        const std::vector<uint8_t> saturated = bytes_of(to_float8_saturated(x, c.dtype));
        const std::vector<int64_t> sample_bits = fx.at("sample_input_bits").to_vector<int64_t>();
        const std::vector<int64_t> sample_codes = fx.at("sample_code").to_vector<int64_t>();
        const std::vector<int64_t> sample_saturated = fx.at("sample_saturated_code").to_vector<int64_t>();
        const size_t every = static_cast<size_t>(count) / sample_bits.size();
        int wrong = 0;
        for (size_t k = 0; k < sample_bits.size(); ++k) {
            const size_t i = k * every;
            REQUIRE(input_bits[i] == static_cast<uint32_t>(sample_bits[k]));          // the same generator
            if (codes[i] != sample_codes[k] || saturated[i] != sample_saturated[k]) {
                if (++wrong <= 5)
                    FAIL_CHECK("input 0x" << std::hex << input_bits[i] << ": got 0x" << int(codes[i]) << " / saturated 0x"
                                          << int(saturated[i]) << ", PyTorch 0x" << sample_codes[k] << " / 0x"
                                          << sample_saturated[k]);
            }
        }
        CHECK(wrong == 0);
        CHECK(std::to_string(fnv1a64(codes.data(), codes.size())) == fx.params.at("fnv1a64").get<std::string>());
        CHECK(std::to_string(fnv1a64(saturated.data(), saturated.size())) ==
              fx.params.at("fnv1a64_saturated").get<std::string>());
    }
}

TEST_CASE("float8: every f16 and bf16 bit pattern casts as PyTorch's") {
    for (const Fp8Case& c : kCases) {
        for (DType src : {kFloat16, kBFloat16}) {
            const std::string name = std::string("fp8_cast_") + (src == kFloat16 ? "f16_" : "bf16_") + c.name;
            CAPTURE(name);
            ampgrad::testing::Fixture fx = load_fixture(name);
            std::vector<uint16_t> bits(65536);
            for (uint32_t b = 0; b < 65536; ++b) bits[b] = static_cast<uint16_t>(b);
            const std::vector<uint8_t> codes = bytes_of(from_bits(bits, src).to(c.dtype));
            const std::vector<int64_t> sample_bits = fx.at("sample_input_bits").to_vector<int64_t>();
            const std::vector<int64_t> sample_codes = fx.at("sample_code").to_vector<int64_t>();
            for (size_t k = 0; k < sample_bits.size(); ++k) {
                CAPTURE(sample_bits[k]);
                CHECK(codes[static_cast<size_t>(sample_bits[k])] == sample_codes[k]);
            }
            CHECK(std::to_string(fnv1a64(codes.data(), codes.size())) == fx.params.at("fnv1a64").get<std::string>());
        }
    }
}

TEST_CASE("float8: f64 values round to f32 first, then to fp8, as PyTorch's") {
    for (const Fp8Case& c : kCases) {
        const std::string fmt_name = c.name;
        CAPTURE(fmt_name);
        ampgrad::testing::Fixture fx = load_fixture(std::string("fp8_cast_f64_") + c.name);
        const std::vector<uint8_t> codes = bytes_of(fx.at("x").to(c.dtype));
        const std::vector<int64_t> expected = fx.at("code").to_vector<int64_t>();
        REQUIRE(codes.size() == expected.size());
        int wrong = 0;
        for (size_t i = 0; i < codes.size(); ++i) wrong += codes[i] != expected[i];
        CHECK(wrong == 0);
    }
}

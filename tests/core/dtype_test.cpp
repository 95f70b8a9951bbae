// dtype_test.cpp: fp16/bf16 conversion is bit-exact IEEE round-to-nearest-even; promotion table.
#include <doctest/doctest.h>

#include <cmath>

#include "ampgrad/ampgrad.h"

using namespace ampgrad;

TEST_CASE("fp16 round trip is exact for every one of the 65536 bit patterns") {
    for (uint32_t b = 0; b < 65536; ++b) {
        Half h = Half::from_bits(static_cast<uint16_t>(b));
        float f = h;
        if (std::isnan(f)) continue;
        REQUIRE(Half(f).bits == b);
    }
}

TEST_CASE("fp16 rounds to nearest even, overflows to inf and underflows to subnormals/zero") {
    CHECK(Half(65504.0f).bits == 0x7BFF);                // max finite
    CHECK(Half(65519.0f).bits == 0x7BFF);                // below the halfway point: rounds down
    CHECK(Half(65520.0f).bits == 0x7C00);                // halfway to 65536: rounds to even = inf
    CHECK(std::isinf(static_cast<float>(Half(1e6f))));
    CHECK(Half(1.0f + 1.0f / 2048).bits == 0x3C00);      // tie between 1 and 1+2^-10: even is 1
    CHECK(Half(1.0f + 3.0f / 2048).bits == 0x3C02);      // tie between 1+2^-10 and 1+2^-9: even is the upper
    CHECK(Half(5.960464477539063e-8f).bits == 0x0001);   // smallest subnormal 2^-24
    CHECK(Half(2.9802322387695312e-8f).bits == 0x0000);  // 2^-25 is a tie with 0: rounds to even (0)
    CHECK(Half(-0.0f).bits == 0x8000);
    CHECK(std::isnan(static_cast<float>(Half(NAN))));
}

TEST_CASE("bf16 keeps the fp32 exponent and rounds the mantissa to nearest even") {
    CHECK(BFloat16(1.0f).bits == 0x3F80);
    CHECK(BFloat16(bits_float(0x3F808000u)).bits == 0x3F80);   // tie, even stays
    CHECK(BFloat16(bits_float(0x3F818000u)).bits == 0x3F82);   // tie, odd rounds up
    CHECK(BFloat16(bits_float(0x3F808001u)).bits == 0x3F81);   // above tie rounds up
    CHECK(std::isinf(static_cast<float>(BFloat16(3.4e38f * 1.01f))));
    CHECK(std::isnan(static_cast<float>(BFloat16(NAN))));
    for (uint32_t b = 0; b < 65536; ++b) {
        float f = BFloat16::from_bits(static_cast<uint16_t>(b));
        if (!std::isnan(f)) REQUIRE(BFloat16(f).bits == b);
    }
}

TEST_CASE("type promotion follows PyTorch") {
    CHECK(promote_types(kFloat16, kFloat32) == kFloat32);
    CHECK(promote_types(kFloat16, kBFloat16) == kFloat32);
    CHECK(promote_types(kInt64, kFloat16) == kFloat16);
    CHECK(promote_types(kInt32, kInt64) == kInt64);
    CHECK(promote_types(kBool, kInt32) == kInt32);
    CHECK(promote_types(kFloat64, kFloat32) == kFloat64);
}

TEST_CASE("fp16 storage overflows for real on the CPU") {
    Tensor x = full({4}, 60000.0, TensorOptions(kFloat16));
    Tensor y = x + x;                                          // 120000 does not fit in fp16
    for (float v : y.to_vector<float>()) CHECK(std::isinf(v));
    Tensor tiny = full({2}, 1e-8, TensorOptions(kFloat16));    // below the smallest subnormal/2
    for (float v : tiny.to_vector<float>()) CHECK(v == 0.0f);
}

TEST_CASE("u8 (torch.uint8) is a storage dtype: casts, copies and views work, arithmetic refuses") {
    CHECK(element_size(kUInt8) == 1);
    CHECK(dtype_name(kUInt8) == "u8");
    CHECK(!is_floating(kUInt8));
    CHECK(promote_types(kBool, kUInt8) == kUInt8);
    CHECK(promote_types(kUInt8, kInt32) == kInt32);
    Tensor bytes = tensor(std::vector<uint8_t>{0, 1, 127, 128, 255}, {5});
    CHECK(bytes.dtype() == kUInt8);
    CHECK(bytes.describe() == "(5) u8 cpu");
    CHECK(bytes.to(kFloat32).to_vector<float>() == std::vector<float>{0, 1, 127, 128, 255});
    CHECK(full({3}, 200.0).to(kUInt8).to_vector<uint8_t>() == std::vector<uint8_t>{200, 200, 200});
    CHECK(bytes.slice(0, 1, 3).contiguous().to_vector<uint8_t>() == std::vector<uint8_t>{1, 127});
    CHECK_THROWS_AS(bytes + bytes, DTypeError);
}

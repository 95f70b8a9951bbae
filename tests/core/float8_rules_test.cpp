// float8_rules_test.cpp: the fp8 dtypes' rules beyond the PyTorch fixtures (float8_test.cpp): round
// trips through every float dtype, saturating against non-saturating casts at the edges, subnormals
// and ±0, what works on fp8 tensors (copies, views, fill, item) and what refuses (arithmetic).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "ampgrad/ampgrad.h"

using namespace ampgrad;

namespace {

uint8_t e4m3(float f, bool saturate) { return fp8::encode<fp8::E4M3fn>(f, saturate); }
uint8_t e5m2(float f, bool saturate) { return fp8::encode<fp8::E5M2>(f, saturate); }
bool is_nan_code(DType dtype, uint8_t code) {
    return dtype == kFloat8_e4m3fn ? (code & 0x7F) == 0x7F : (code & 0x7F) > 0x7C;
}
uint8_t code_of(const Tensor& t) { return *static_cast<const uint8_t*>(t.contiguous().raw_data()); }

}  // namespace

TEST_CASE("float8: every non-NaN code survives a round trip through f32, f64, f16 and bf16") {
    for (DType dtype : {kFloat8_e4m3fn, kFloat8_e5m2}) {
        CAPTURE(dtype_name(dtype));
        Tensor codes = make_empty({256}, dtype, Device(kCPU));
        auto* p = static_cast<uint8_t*>(codes.raw_data());
        for (int i = 0; i < 256; ++i) p[i] = static_cast<uint8_t>(i);
        for (DType wide : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
            CAPTURE(dtype_name(wide));
            Tensor back = codes.to(wide).to(dtype);
            Tensor back_saturated = to_float8_saturated(codes.to(wide), dtype);
            const auto* q = static_cast<const uint8_t*>(back.raw_data());
            const auto* s = static_cast<const uint8_t*>(back_saturated.raw_data());
            for (int i = 0; i < 256; ++i) {
                CAPTURE(i);
                const uint8_t code = static_cast<uint8_t>(i);
                if (is_nan_code(dtype, code)) {
                    CHECK(is_nan_code(dtype, q[i]));
                } else {
                    CHECK(q[i] == code);
                    CHECK(s[i] == ((code & 0x7F) == 0x7C && dtype == kFloat8_e5m2 ? (code & 0x80) | 0x7B : code));
                }
            }
        }
    }
}

TEST_CASE("float8: the edges of the range, saturating and not") {
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    // e4m3fn: max 448 = 0x7E; 464 is the tie between 448 and the NaN code: even (448) wins.
    CHECK(e4m3(448.0f, false) == 0x7E);
    CHECK(e4m3(464.0f, false) == 0x7E);
    CHECK(e4m3(465.0f, false) == 0x7F);                   // non-saturating: NaN (OCP's rule, older PyTorch)
    CHECK(e4m3(465.0f, true) == 0x7E);
    CHECK(e4m3(-1e9f, true) == 0xFE);
    CHECK(e4m3(inf, false) == 0x7F);
    CHECK(e4m3(-inf, true) == 0xFE);
    CHECK(e4m3(nan, true) == 0x7F);
    CHECK(Float8_e4m3fn(1e9f).bits == 0x7E);              // PyTorch 2.15's .to() saturates to e4m3fn
    CHECK(Float8_e4m3fn(-inf).bits == 0xFE);
    // e5m2: max 57344 = 0x7B; 61440 is the tie between 57344 and inf: even (inf) wins.
    CHECK(e5m2(57344.0f, false) == 0x7B);
    CHECK(e5m2(61439.0f, false) == 0x7B);
    CHECK(e5m2(61440.0f, false) == 0x7C);
    CHECK(e5m2(61440.0f, true) == 0x7B);
    CHECK(e5m2(-inf, false) == 0xFC);
    CHECK(e5m2(-inf, true) == 0xFB);
    CHECK(Float8_e5m2(1e9f).bits == 0x7C);                // and does not saturate to e5m2
    CHECK(Float8_e5m2::saturated(1e9f).bits == 0x7B);
    CHECK(std::isinf(static_cast<float>(Float8_e5m2::from_bits(0xFC))));
    CHECK(std::isnan(static_cast<float>(Float8_e4m3fn::from_bits(0xFF))));
    CHECK(static_cast<float>(Float8_e4m3fn::from_bits(0x7E)) == 448.0f);
}

TEST_CASE("float8: subnormals, underflow to ±0 and ties to even") {
    CHECK(e4m3(std::ldexp(1.0f, -9), false) == 0x01);            // smallest e4m3fn subnormal
    CHECK(e4m3(std::ldexp(1.0f, -10), false) == 0x00);           // half of it: tie, even is 0
    CHECK(e4m3(std::ldexp(3.0f, -10), false) == 0x02);           // 1.5 units: tie, even is 2
    CHECK(e4m3(-std::ldexp(1.0f, -11), false) == 0x80);          // -0 keeps its sign
    CHECK(e4m3(std::ldexp(7.5f, -9), false) == 0x08);            // rounds up into the smallest normal 2^-6
    CHECK(e5m2(std::ldexp(1.0f, -16), false) == 0x01);           // smallest e5m2 subnormal
    CHECK(e5m2(std::ldexp(1.0f, -17), false) == 0x00);
    CHECK(e5m2(std::numeric_limits<float>::denorm_min(), false) == 0x00);
    CHECK(e4m3(1.0f + 1.0f / 16, false) == 0x38);                // 1 + half a step: even (1.0)
    CHECK(e4m3(1.0f + 3.0f / 16, false) == 0x3A);                // 1.125 + half a step: even (1.25)
    CHECK(e5m2(1.0f + 1.0f / 8, false) == 0x3C);
    CHECK(static_cast<float>(Float8_e4m3fn::from_bits(0x80)) == 0.0f);
    CHECK(std::signbit(static_cast<float>(Float8_e4m3fn::from_bits(0x80))));
    CHECK(static_cast<float>(Float8_e5m2::from_bits(0x03)) == std::ldexp(3.0f, -16));
}

TEST_CASE("float8 tensors: copies, views, fill and item work") {
    Tensor x = tensor(std::vector<float>{0.5f, -2.0f, 3.0f, 1000.0f, 0.0f, -0.0f}, {2, 3});
    Tensor q = x.to(kFloat8_e4m3fn);                                                          // (2,3)
    CHECK(q.dtype() == kFloat8_e4m3fn);
    CHECK(q.to(kFloat32).to_vector<float>() == std::vector<float>{0.5f, -2.0f, 3.0f, 448.0f, 0.0f, -0.0f});
    Tensor t = q.transpose(0, 1);                                                             // (3,2) view
    CHECK(t.to(kFloat32).to_vector<float>() == std::vector<float>{0.5f, 448.0f, -2.0f, 0.0f, 3.0f, -0.0f});
    CHECK(t.contiguous().is_contiguous());
    CHECK(q.reshape({6}).narrow(0, 1, 2).to(kFloat64).to_vector<double>() == std::vector<double>{-2.0, 3.0});
    CHECK(q.select(0, 1).select(0, 0).item<float>() == 448.0f);
    CHECK(q.clone().to(kFloat32).to_vector<float>() == q.to(kFloat32).to_vector<float>());
    Tensor filled = full({3}, 0.3, TensorOptions(kFloat8_e5m2));
    CHECK(code_of(filled) == 0x35);                                                          // 0.3 -> 0.3125
    CHECK(filled.select(0, 2).item<double>() == 0.3125);
    CHECK(x.to(kFloat8_e5m2).to(kFloat8_e4m3fn).to(kFloat32).to_vector<float>()[3] == 448.0f);   // 1024 -> 448
    Tensor direct = tensor(std::vector<Float8_e5m2>{Float8_e5m2(1.5f), Float8_e5m2::from_bits(0x7C)});
    CHECK(direct.dtype() == kFloat8_e5m2);
    CHECK(std::isinf(direct.to(kFloat32).to_vector<float>()[1]));
}

TEST_CASE("float8 tensors: arithmetic refuses them with a DTypeError naming the op") {
    Tensor q = ones({2, 16}).to(kFloat8_e4m3fn);
    CHECK_THROWS_WITH_AS(q + q, doctest::Contains("add: unsupported dtype float8_e4m3fn"), DTypeError);
    CHECK_THROWS_WITH_AS(q * 2.0, doctest::Contains("float8_e4m3fn"), DTypeError);
    CHECK_THROWS_WITH_AS(exp(q), doctest::Contains("exp: fp8 tensors"), DTypeError);
    CHECK_THROWS_WITH_AS(F::softmax(q, -1), doctest::Contains("softmax: fp8 tensors"), DTypeError);
    CHECK_THROWS_WITH_AS(F::gelu(q), doctest::Contains("float8_e4m3fn"), DTypeError);
    CHECK_THROWS_WITH_AS(sum(q), doctest::Contains("reduce: unsupported dtype float8_e4m3fn"), DTypeError);
    CHECK_THROWS_WITH_AS(matmul(q, q.t()), doctest::Contains("matmul: fp8 operands"), DTypeError);
    CHECK_THROWS_WITH_AS(q + ones({2, 16}), doctest::Contains("not supported"), DTypeError);   // no promotion
    CHECK_THROWS_WITH_AS(to_float8_saturated(q, kFloat16), doctest::Contains("to_float8_saturated"), DTypeError);
    // amax the PyTorch way, after a cast: abs().max() on the widened values
    CHECK(max(abs(q.to(kFloat32))).item<float>() == 1.0f);
}

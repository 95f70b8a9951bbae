// float8_scaling_test.cpp: fp8 current scaling (amp/float8_scaling.cpp) against torchao's rules
// re-implemented in PyTorch (tools/fixtures/float8_scaling.py): the scales and the fp8 codes bit for
// bit, the fp8 linear's output within the f32 accumulation bound of torch._scaled_mm's.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "ampgrad/ampgrad.h"
#include "amp/float8_scaling.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;

namespace {

std::vector<int64_t> codes_of(const Tensor& fp8) {
    Tensor c = fp8.contiguous();
    const auto* p = static_cast<const uint8_t*>(c.raw_data());
    return std::vector<int64_t>(p, p + c.numel());
}
std::vector<uint32_t> f32_bits(const Tensor& t) {
    std::vector<float> v = t.contiguous().to_vector<float>();
    std::vector<uint32_t> bits(v.size());
    std::memcpy(bits.data(), v.data(), v.size() * 4);
    return bits;
}

}  // namespace

TEST_CASE("float8 current scaling: scales, codes and the fp8 linear match torchao's rules") {
    for (auto [name, scaling, out_dtype] : {std::tuple{"float8_current_tensorwise", amp::Float8Scaling::kTensorwise, kFloat32},
                                            std::tuple{"float8_current_rowwise", amp::Float8Scaling::kRowwise, kBFloat16}}) {
        CAPTURE(std::string(name));
        ampgrad::testing::Fixture fx = ampgrad::testing::load_fixture(name);
        const Tensor& x = fx.at("x");                                                       // (M,K) f32
        const Tensor& w = fx.at("w");                                                       // (N,K) f32
        amp::Float8Tensor xq = amp::quantize_float8(x, kFloat8_e4m3fn, scaling);
        amp::Float8Tensor wq = amp::quantize_float8(w, kFloat8_e4m3fn, scaling);
        CHECK(xq.data.dtype() == kFloat8_e4m3fn);
        CHECK(xq.scale.sizes() == fx.at("x_scale").sizes());
        CHECK(f32_bits(xq.scale) == f32_bits(fx.at("x_scale")));
        CHECK(f32_bits(wq.scale) == f32_bits(fx.at("w_scale")));
        CHECK(codes_of(xq.data) == fx.at("x_codes").to_vector<int64_t>());
        CHECK(codes_of(wq.data) == fx.at("w_codes").to_vector<int64_t>());

        Tensor y = amp::linear_float8(x, w, scaling, out_dtype);                           // (M,N)
        const Tensor& want = fx.at("y");
        REQUIRE(y.sizes() == want.sizes());
        const std::vector<double> got = y.to(kFloat64).to_vector<double>(), ref = want.to(kFloat64).to_vector<double>();
        const std::vector<double> xs = xq.scale.to(kFloat64).to_vector<double>(), ws = wq.scale.to(kFloat64).to_vector<double>();
        const std::vector<double> xd = xq.data.to(kFloat64).to_vector<double>(), wd = wq.data.to(kFloat64).to_vector<double>();
        const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
        int wrong = 0;
        for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < N; ++j) {
                double magnitude = 0.0;
                for (int64_t k = 0; k < K; ++k) magnitude += std::fabs(xd[i * K + k] * wd[j * K + k]);
                const double inv = 1.0 / (xs[xs.size() == 1 ? 0 : i] * ws[ws.size() == 1 ? 0 : j]);
                const double tol = 2 * (K + 3) * std::ldexp(1.0, -24) * magnitude * inv +
                                   dtype_eps(out_dtype) * std::fabs(ref[i * N + j]) + 1e-30;
                wrong += std::fabs(got[i * N + j] - ref[i * N + j]) > tol;
            }
        CHECK(wrong == 0);
    }
}

TEST_CASE("float8 current scaling: an all-zero tensor gets the floor's scale, and bad targets are refused") {
    amp::Float8Tensor q = amp::quantize_float8(zeros({2, 16}), kFloat8_e5m2, amp::Float8Scaling::kTensorwise);
    CHECK(q.scale.item<double>() == static_cast<double>(static_cast<float>(57344.0 / 1e-12)));
    CHECK(q.data.to(kFloat32).abs().max().item<float>() == 0.0f);
    Tensor rowwise = amp::amax_to_scale(tensor(std::vector<float>{1.0f, 3.0f, 448.0f}, {3, 1}), kFloat8_e4m3fn, true);
    CHECK(rowwise.to_vector<float>() == std::vector<float>{256.0f, 128.0f, 1.0f});     // 448, 149.3, 1 rounded down
    CHECK_THROWS_WITH_AS(amp::quantize_float8(zeros({2, 16}), kBFloat16, amp::Float8Scaling::kTensorwise),
                         doctest::Contains("must be float8_e4m3fn or float8_e5m2"), DTypeError);
    CHECK_THROWS_AS(amp::linear_float8(zeros({2, 16}), zeros({16, 8}), amp::Float8Scaling::kTensorwise, kFloat32),
                    ShapeError);
}

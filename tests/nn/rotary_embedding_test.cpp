// rotary_embedding_test.cpp: nn::RotaryEmbedding's tables against transformers' LlamaRotaryEmbedding
// (default and Llama 3 rope_scaling, as written out in tools/fixtures/rotary.py), the interleaved
// layout, the dtype and device of the tables, and bad configuration.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {
const Tolerance kExact{0, 0};
}  // namespace

TEST_CASE("RotaryEmbedding builds transformers' default tables") {
    Fixture fx = load_fixture("rotary_tables_default");
    nn::RotaryEmbedding rope(16, fx.param("theta"));
    auto [cos, sin] = rope.forward(fx.at("position_ids"));            // (B,T) -> (B,T,HS)
    CHECK(cos.sizes() == Shape{2, 4, 16});
    // angles up to 30000 rad in f32: the last bits of cos/sin depend on the libm's argument reduction
    CHECK_CLOSE(cos, fx.at("cos"), tol_for(kFloat32, 16));
    CHECK_CLOSE(sin, fx.at("sin"), tol_for(kFloat32, 16));
    auto [cos_1d, sin_1d] = rope.forward(select(fx.at("position_ids"), 0, 0));   // (T) -> (T,HS)
    CHECK_CLOSE(cos_1d, select(cos, 0, 0), kExact);
    CHECK(rope.named_parameters().empty());
}

TEST_CASE("RotaryEmbedding applies Llama 3's frequency scaling from the config") {
    Fixture fx = load_fixture("rotary_tables_llama3");
    nn::Llama3RopeScaling scaling{fx.param("factor"), fx.param("low_freq_factor"), fx.param("high_freq_factor"),
                                  static_cast<int64_t>(fx.param("original_max_position_embeddings"))};
    nn::RotaryEmbedding rope(64, fx.param("theta"), scaling);
    CHECK_CLOSE(rope.inv_freq, fx.at("inv_freq"), tol_for(kFloat32));
    auto [cos, sin] = rope.forward(fx.at("position_ids"));
    CHECK_CLOSE(cos, fx.at("cos"), tol_for(kFloat32, 16));
    CHECK_CLOSE(sin, fx.at("sin"), tol_for(kFloat32, 16));
    // the factor is the config's: 8 (Llama 3.1) gives other low frequencies than 32 (Llama 3.2)
    nn::RotaryEmbedding rope8(64, fx.param("theta"), nn::Llama3RopeScaling{8.0, 1.0, 4.0, 8192});
    CHECK_FALSE(allclose(rope8.inv_freq, rope.inv_freq));
}

TEST_CASE("RotaryEmbedding's interleaved tables repeat each angle twice, in the requested dtype") {
    nn::RotaryEmbedding half(8), interleaved(8, 10000.0, std::nullopt, true);
    Tensor pos = arange(5);
    auto [cos_h, sin_h] = half.forward(pos);
    auto [cos_i, sin_i] = interleaved.forward(pos, kBFloat16);
    CHECK(cos_i.dtype() == kBFloat16);
    for (int64_t i = 0; i < 4; ++i) {
        CAPTURE(i);
        Tensor angle_cos = narrow(cos_h, -1, i, 1).to(kBFloat16);                // frequency i, half layout
        CHECK_CLOSE(narrow(cos_i, -1, 2 * i, 1), angle_cos, kExact);
        CHECK_CLOSE(narrow(cos_i, -1, 2 * i + 1, 1), angle_cos, kExact);
        CHECK_CLOSE(narrow(cos_h, -1, i + 4, 1), narrow(cos_h, -1, i, 1), kExact);
    }
}

TEST_CASE("RotaryEmbedding rejects bad configuration and positions") {
    CHECK_THROWS_AS(nn::RotaryEmbedding(7), ValueError);
    CHECK_THROWS_AS(nn::RotaryEmbedding(8, -1.0), ValueError);
    CHECK_THROWS_WITH_AS(nn::RotaryEmbedding(8, 10000.0, nn::Llama3RopeScaling{}), doctest::Contains("factor"),
                         ValueError);
    CHECK_THROWS_AS(nn::RotaryEmbedding(8, 10000.0, nn::Llama3RopeScaling{8.0, 4.0, 1.0, 8192}), ValueError);
    nn::RotaryEmbedding rope(8);
    CHECK_THROWS_AS(rope.forward(randn({4})), DTypeError);
    CHECK_THROWS_AS(rope.forward(zeros({1, 2, 3}, TensorOptions(kInt64))), DTypeError);
}

// A float64 model's tables are float64 throughout (issue 33: they were f32 cast to f64, about 1e-6
// relative off): against the closed form in double, with and without Llama 3's scaling.
TEST_CASE("RotaryEmbedding: kFloat64 tables are computed in f64, to double rounding") {
    const double theta = 500000.0;
    const nn::Llama3RopeScaling s{8.0, 1.0, 4.0, 16};
    for (const bool scaled : {false, true}) {
        CAPTURE(scaled);
        nn::RotaryEmbedding rope(8, theta, scaled ? std::optional<nn::Llama3RopeScaling>(s) : std::nullopt);
        Tensor pos = arange(50, TensorOptions(kInt64));
        auto [cos, sin] = rope.forward(pos, kFloat64);                  // (T,HS)
        REQUIRE(cos.dtype() == kFloat64);
        const std::vector<double> c = cos.to_vector<double>(), n = sin.to_vector<double>();
        double worst = 0.0;
        for (int64_t p = 0; p < 50; ++p)
            for (int64_t i = 0; i < 4; ++i) {
                double f = 1.0 / std::pow(theta, 2.0 * static_cast<double>(i) / 8.0);
                if (scaled) {   // Llama 3's rule (transformers' _compute_llama3_parameters), in double
                    const double wavelen = 2.0 * M_PI / f, low = 16.0 / s.low_freq_factor, high = 16.0 / s.high_freq_factor;
                    const double smooth = (16.0 / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
                    f = wavelen > low ? f / s.factor : wavelen < high ? f : (1 - smooth) * f / s.factor + smooth * f;
                }
                for (int64_t half = 0; half < 2; ++half) {
                    const size_t k = static_cast<size_t>(p * 8 + i + 4 * half);
                    worst = std::max({worst, std::abs(c[k] - std::cos(static_cast<double>(p) * f)),
                                      std::abs(n[k] - std::sin(static_cast<double>(p) * f))});
                }
            }
        CHECK(worst < 1e-13);
        auto [cos32, sin32] = rope.forward(pos, kFloat32);              // f32 tables: f32's rounding
        CHECK(max(abs(cos32.to(kFloat64) - cos)).item<double>() < 1e-5);
        CHECK(max(abs(cos32.to(kFloat64) - cos)).item<double>() > 1e-12);
    }
}

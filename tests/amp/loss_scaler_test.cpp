// loss_scaler_test.cpp: DeepSpeed's DynamicLossScaler (window, hysteresis, consecutive_hysteresis,
// min_scale and the error at the minimum) against golden traces derived by hand from
// DeepSpeed's deepspeed/runtime/fp16/loss_scaler.py (docs/amp.md §6), the static scaler, state_dict, and the fused overflow check.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "tests/support/check_close.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

// Feeds overflow flags ('o' overflow, '.' clean) and returns the scale after each update.
std::vector<double> trace(amp::DynamicLossScaler& s, const std::string& flags) {
    std::vector<double> out;
    for (char c : flags) {
        s.update_scale(c == 'o');
        out.push_back(s.loss_scale());
    }
    return out;
}

}  // namespace

TEST_CASE("DynamicLossScaler: DeepSpeed's fp16 config defaults") {
    amp::DynamicLossScaler s;
    CHECK(s.loss_scale() == 65536.0);
    CHECK(s.options().scale_window == 1000);
    CHECK(s.options().delayed_shift == 2);
    CHECK(s.options().min_scale == 1.0);
    CHECK(s.cur_hysteresis() == 2);
    CHECK(s.last_overflow_iter() == -1);
    CHECK(s.dynamic());
}

TEST_CASE("DynamicLossScaler: the first growth comes on the (window+1)-th clean update, then every window") {
    amp::DynamicLossScaler s({.init_scale = 8, .scale_window = 3, .delayed_shift = 1});
    CHECK(trace(s, "...") == std::vector<double>{8, 8, 8});
    CHECK(trace(s, ".") == std::vector<double>{16});                         // 4th clean update
    CHECK(trace(s, "...") == std::vector<double>{16, 16, 32});              // then every 3
    CHECK(trace(s, "o") == std::vector<double>{16});                         // overflow halves
    CHECK(trace(s, "....") == std::vector<double>{16, 16, 16, 32});         // window+1 after an overflow
    CHECK(s.cur_iter() == 12);
}

TEST_CASE("DynamicLossScaler: hysteresis delays the drop; a growth refills it") {
    amp::DynamicLossScaler s({.init_scale = 64, .scale_window = 2, .delayed_shift = 2});
    s.update_scale(true);                                                    // first overflow: spent hysteresis
    CHECK(s.loss_scale() == 64);
    CHECK(s.cur_hysteresis() == 1);
    CHECK(s.last_event() ==
          "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 64, but hysteresis is 2. Reducing hysteresis to 1");
    s.update_scale(true);                                                    // second: the scale drops
    CHECK(s.loss_scale() == 32);
    CHECK(s.last_event() == "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 64, reducing to 32");
    CHECK(trace(s, "o") == std::vector<double>{16});                         // hysteresis stays used up
    CHECK(trace(s, "...") == std::vector<double>{16, 16, 32});               // growth refills it
    CHECK(s.cur_hysteresis() == 2);
    CHECK(trace(s, "o") == std::vector<double>{32});
}

TEST_CASE("DynamicLossScaler: consecutive_hysteresis refills on every clean step") {
    amp::DynamicLossScaler s({.init_scale = 64, .scale_window = 100, .delayed_shift = 2, .consecutive_hysteresis = true});
    CHECK(trace(s, "o.o.o") == std::vector<double>{64, 64, 64, 64, 64});     // never two in a row
    CHECK(trace(s, "oo") == std::vector<double>{32, 16});                    // the last 'o' left it at 1
    amp::DynamicLossScaler plain({.init_scale = 64, .scale_window = 100, .delayed_shift = 2});
    CHECK(trace(plain, "o.o.o") == std::vector<double>{64, 64, 32, 32, 16});
}

TEST_CASE("DynamicLossScaler: from 2^k, k overflows reach min_scale and the next one raises") {
    amp::DynamicLossScaler s({.init_scale = 8, .delayed_shift = 1});
    CHECK(trace(s, "ooo") == std::vector<double>{4, 2, 1});
    CHECK_THROWS_WITH_AS(s.update_scale(true),
                         doctest::Contains("Current loss scale already at minimum - cannot decrease scale anymore. Exiting run."),
                         LossScaleError);
    CHECK(s.cur_iter() == 3);                                                // not incremented by the raise
    CHECK(s.loss_scale() == 1);
    amp::DynamicLossScaler quiet({.init_scale = 4, .min_scale = 2, .delayed_shift = 1, .raise_error_at_min_scale = false});
    CHECK(trace(quiet, "ooo") == std::vector<double>{2, 2, 2});             // floored, skipping on
}

TEST_CASE("StaticLossScaler: the scale never changes") {
    amp::StaticLossScaler s(128);
    s.update_scale(true);
    s.update_scale(false);
    CHECK(s.loss_scale() == 128);
    CHECK_FALSE(s.dynamic());
    Tensor loss = full({}, 0.5, TensorOptions().requires_grad(true));
    CHECK(s.scale_loss(loss).item<float>() == 64.0f);
}

TEST_CASE("LossScaler: f16 losses are scaled in f32 and rounded once") {
    Tensor loss = full({}, 1000.0, TensorOptions(kFloat16));
    Tensor scaled = amp::StaticLossScaler(64).scale_loss(loss);
    CHECK(scaled.dtype() == kFloat16);
    CHECK(scaled.item<float>() == 64000.0f);                                  // fits f16 (max 65504)
    CHECK(std::isinf(amp::StaticLossScaler(128).scale_loss(loss).item<float>()));   // 128000 does not
}

TEST_CASE("DynamicLossScaler: state_dict round-trips every counter") {
    amp::DynamicLossScaler a({.init_scale = 64, .scale_window = 2, .delayed_shift = 3});
    trace(a, "o..o");
    amp::DynamicLossScaler b;
    b.load_state_dict(a.state_dict());
    CHECK(b.loss_scale() == a.loss_scale());
    CHECK(b.cur_iter() == a.cur_iter());
    CHECK(b.last_overflow_iter() == a.last_overflow_iter());
    CHECK(b.cur_hysteresis() == a.cur_hysteresis());
    CHECK(trace(b, "..o.o") == trace(a, "..o.o"));
    CHECK_THROWS_WITH_AS(b.load_state_dict({{"cur_scale", 2.0}}), doctest::Contains("cur_iter"), ValueError);
}

TEST_CASE("grads_have_overflow: one fused pass, grads unchanged") {
    Tensor a = ones({3}, TensorOptions().requires_grad(true)), b = ones({2}, TensorOptions().requires_grad(true));
    (a * 2.0).sum().backward();
    CHECK_FALSE(amp::grads_have_overflow({a, b}));                           // b has no grad: skipped
    (b * std::numeric_limits<double>::infinity()).sum().backward();
    CHECK(amp::grads_have_overflow({a, b}));
    CHECK(a.grad().to_vector<float>() == std::vector<float>{2, 2, 2});
    std::optional<amp::NonFiniteGrad> bad = amp::first_nonfinite_grad({a, b});
    REQUIRE(bad);
    CHECK(bad->index == 1);
    CHECK(bad->count == 2);
}

TEST_CASE("DynamicLossScaler: bad options give typed errors") {
    CHECK_THROWS_AS(amp::DynamicLossScaler({.scale_window = 0}), ValueError);
    CHECK_THROWS_AS(amp::DynamicLossScaler({.min_scale = 0}), ValueError);
    CHECK_THROWS_AS(amp::DynamicLossScaler({.scale_factor = 1.0}), ValueError);
    CHECK_THROWS_AS(amp::DynamicLossScaler({.init_scale = 0.5}), ValueError);
    CHECK_THROWS_AS(amp::StaticLossScaler(0.0), ValueError);
}

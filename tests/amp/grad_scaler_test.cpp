// grad_scaler_test.cpp: GradScaler against PyTorch's semantics (defaults, scale/unscale_/step/update,
// the per-optimizer state machine and its errors, disabled mode, state_dict) and a PyTorch trace,
// plus our additions: step() results, overflow provenance, min/max scale, `>=` growth, and the
// error that names a missing update(). The fused optimizers' path is in grad_scaler_fused_test.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "tests/amp/scaler_toy.hpp"
#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

TEST_CASE("GradScaler: PyTorch's defaults") {
    amp::GradScaler scaler;
    CHECK(scaler.get_scale() == 65536.0);               // init_scale before the first scale()
    CHECK(scaler.get_growth_factor() == 2.0);
    CHECK(scaler.get_backoff_factor() == 0.5);
    CHECK(scaler.get_growth_interval() == 2000);
    CHECK(scaler.is_enabled());
    CHECK_FALSE(scaler.scale_tensor().defined());       // created lazily
    Tensor scaled = scaler.scale(full({}, 3.0));
    CHECK(scaled.item<float>() == 3.0f * 65536.0f);
    CHECK(scaler.scale_tensor().dtype() == kFloat32);
    CHECK(scaler.scale_tensor().dim() == 0);
    CHECK(scaler.get_growth_tracker() == 0);
}

TEST_CASE("GradScaler: scaling is exact, so a clean step is bit-identical to unscaled f32 training") {
    Toy a(1), b(1);
    amp::GradScaler scaler;
    for (int it = 0; it < 3; ++it) {
        amp::StepResult r = iterate(scaler, a);
        CHECK_FALSE(r.skipped());
        CHECK(r.reason().empty());
        b.opt.zero_grad();
        b.loss().backward();
        b.opt.step();
        CHECK(equal(a.w, b.w));
    }
    CHECK(scaler.get_scale() == 65536.0);
    CHECK(scaler.get_growth_tracker() == 3);
    CHECK(scaler.iteration() == 3);
}

TEST_CASE("GradScaler: an inf or NaN gradient skips the step, names the parameter, and backs off") {
    Toy toy;
    amp::GradScaler scaler;
    iterate(scaler, toy);
    Tensor before = toy.w.detach().clone();
    amp::StepResult r = iterate(scaler, toy, std::numeric_limits<double>::infinity());
    CHECK(r.skipped());
    CHECK(r.found_inf());
    CHECK(r.reason().find("fc.weight") != std::string::npos);
    CHECK(equal(toy.w, before));                         // bit-identical across the skipped step
    CHECK(scaler.get_scale() == 32768.0);
    CHECK(scaler.get_growth_tracker() == 0);
    REQUIRE(scaler.overflow_history().size() == 1);
    CHECK(scaler.overflow_history()[0].param == "fc.weight");
    CHECK(scaler.overflow_history()[0].iteration == 1);
    CHECK(scaler.overflow_history()[0].nonfinite_count == 12);
    CHECK(scaler.overflow_history()[0].scale == 65536.0);
    // a NaN loss: the same
    r = iterate(scaler, toy, std::nan(""));
    CHECK(r.skipped());
    CHECK(equal(toy.w, before));
    CHECK(scaler.get_scale() == 16384.0);
    CHECK(scaler.consecutive_skips() == 2);
    iterate(scaler, toy);
    CHECK(scaler.consecutive_skips() == 0);
    CHECK_FALSE(equal(toy.w, before));
}

TEST_CASE("GradScaler: unscale_ divides by the scale in place, then clipping sees true gradients") {
    Toy a(2), b(2);
    amp::GradScaler scaler;
    a.opt.zero_grad();
    scaler.scale(a.loss()).backward();
    scaler.unscale_(a.opt);
    b.loss().backward();
    CHECK(equal(a.w.grad(), b.w.grad()));
    double norm = nn::utils::clip_grad_norm_(a.opt.param_groups()[0].params, 1e-3).item<double>();
    CHECK(norm == doctest::Approx(b.w.grad().norm().item<double>()));
    CHECK_FALSE(scaler.step(a.opt).skipped());            // step() does not unscale again
    scaler.update();
}

TEST_CASE("GradScaler: growth after growth_interval clean steps, with `>=` so lowering it cannot freeze") {
    Toy toy;
    amp::GradScaler scaler({.init_scale = 4.0, .growth_interval = 3});
    iterate(scaler, toy);
    iterate(scaler, toy);
    CHECK(scaler.get_scale() == 4.0);
    CHECK(scaler.get_growth_tracker() == 2);
    iterate(scaler, toy);
    CHECK(scaler.get_scale() == 8.0);
    CHECK(scaler.get_growth_tracker() == 0);
    // tracker 5 with interval 10; lower the interval to 3: PyTorch's `==` would never grow again
    scaler.set_growth_interval(10);
    for (int i = 0; i < 5; ++i) iterate(scaler, toy);
    CHECK(scaler.get_growth_tracker() == 5);
    scaler.set_growth_interval(3);
    iterate(scaler, toy);
    CHECK(scaler.get_scale() == 16.0);
    CHECK(scaler.get_growth_tracker() == 0);
}

TEST_CASE("GradScaler: min_scale and max_scale bound the scale") {
    Toy toy;
    amp::GradScaler scaler({.init_scale = 4.0, .growth_interval = 1, .min_scale = 2.0, .max_scale = 8.0});
    iterate(scaler, toy);
    CHECK(scaler.get_scale() == 8.0);
    iterate(scaler, toy);
    CHECK(scaler.get_scale() == 8.0);                     // capped
    iterate(scaler, toy, kInf);
    iterate(scaler, toy, kInf);
    iterate(scaler, toy, kInf);
    CHECK(scaler.get_scale() == 2.0);                     // floored
}

TEST_CASE("GradScaler: matches a PyTorch trace (scale, tracker and parameters per iteration)") {
    Fixture fx = load_fixture("amp_grad_scaler_trace");
    Tensor p = tensor<float>({1.0f, -2.0f, 0.5f}).requires_grad_(true);
    optim::SGD opt(std::vector<Tensor>{p}, optim::SGDOptions(fx.param("lr")));
    amp::GradScaler scaler({.init_scale = fx.param("init_scale"),
                            .growth_interval = static_cast<int64_t>(fx.param("growth_interval"))});
    Tensor coefs = fx.at("coefs");
    std::vector<float> scales = fx.at("scales").to_vector<float>();
    std::vector<float> trackers = fx.at("trackers").to_vector<float>();
    std::vector<float> stepped = fx.at("stepped").to_vector<float>();
    for (int64_t it = 0; it < coefs.size(0); ++it) {
        CAPTURE(it);
        opt.zero_grad();
        scaler.scale((p * coefs.select(0, it)).sum()).backward();
        amp::StepResult r = scaler.step(opt);
        scaler.update();
        CHECK(r.skipped() == (stepped[it] == 0.0f));
        CHECK(scaler.get_scale() == scales[it]);
        CHECK(scaler.get_growth_tracker() == static_cast<int64_t>(trackers[it]));
        CHECK(equal(p.detach(), fx.at("params").select(0, it)));
    }
}

TEST_CASE("GradScaler: f16/bf16 outputs are scaled in f32 and rounded once; lists are scaled elementwise") {
    amp::GradScaler scaler({.init_scale = 1024.0});
    Tensor h = full({2}, 3.0, TensorOptions(kBFloat16));
    Tensor s = scaler.scale(h);
    CHECK(s.dtype() == kBFloat16);
    CHECK(s.to_vector<float>()[0] == 3072.0f);
    tensor_list both = scaler.scale(tensor_list{full({}, 1.0), full({}, 2.0)});
    CHECK(both[1].item<float>() == 2048.0f);
    Tensor x = full({}, 2.0, TensorOptions().requires_grad(true));
    scaler.scale(x * 1.0).backward();
    CHECK(x.grad().item<float>() == 1024.0f);            // the scale flows into backward
    // a () f16 loss promotes to f32 against the () f32 scale, as in PyTorch: 65536 * 3 stays finite
    amp::GradScaler default_scale;
    Tensor loss16 = full({}, 3.0, TensorOptions(kFloat16));
    Tensor scaled16 = default_scale.scale(loss16);
    CHECK(scaled16.dtype() == kFloat32);
    CHECK(scaled16.item<float>() == 196608.0f);
}

TEST_CASE("GradScaler: update(new_scale) sets the scale") {
    Toy toy;
    amp::GradScaler scaler;
    iterate(scaler, toy);
    toy.opt.zero_grad();
    scaler.scale(toy.loss()).backward();
    scaler.step(toy.opt);
    scaler.update(512.0);
    CHECK(scaler.get_scale() == 512.0);
    scaler.scale(toy.loss());
    scaler.update(full({1}, 256.0));
    CHECK(scaler.get_scale() == 256.0);
    CHECK_THROWS_WITH_AS(scaler.update(full({2}, 1.0)), doctest::Contains("1-element"), ValueError);
}

TEST_CASE("GradScaler: several optimizers, each skipping on its own inf, one update()") {
    Toy a(3), b(4);
    amp::GradScaler scaler;
    a.opt.zero_grad();
    b.opt.zero_grad();
    scaler.scale(a.loss(kInf) + b.loss()).backward();
    Tensor a_before = a.w.detach().clone(), b_before = b.w.detach().clone();
    CHECK(scaler.step(a.opt).skipped());
    CHECK_FALSE(scaler.step(b.opt).skipped());
    scaler.update();
    CHECK(equal(a.w, a_before));
    CHECK_FALSE(equal(b.w, b_before));
    CHECK(scaler.get_scale() == 32768.0);                // any inf backs off the shared scale
}

TEST_CASE("GradScaler: the state machine's errors (PyTorch's texts)") {
    Toy toy;
    amp::GradScaler scaler;
    CHECK_THROWS_WITH_AS(scaler.unscale_(toy.opt),
                         doctest::Contains("Attempted unscale_ but _scale is None.  This may indicate"), AmpError);
    CHECK_THROWS_WITH_AS(scaler.step(toy.opt), doctest::Contains("Attempted step but _scale is None."), AmpError);
    CHECK_THROWS_WITH_AS(scaler.update(), doctest::Contains("Attempted update but _scale is None."), AmpError);

    scaler.scale(toy.loss()).backward();
    scaler.unscale_(toy.opt);
    Tensor grad_after_one = toy.w.grad().clone();
    CHECK_THROWS_WITH_AS(scaler.unscale_(toy.opt),
                         doctest::Contains("unscale_() has already been called on this optimizer since the last update()."),
                         AmpError);
    CHECK(equal(toy.w.grad(), grad_after_one));          // nothing was unscaled twice
    scaler.step(toy.opt);
    CHECK_THROWS_WITH_AS(scaler.unscale_(toy.opt), doctest::Contains("unscale_() is being called after step()."),
                         AmpError);
    CHECK_THROWS_WITH_AS(scaler.step(toy.opt), doctest::Contains("step() has already been called since the last update()."),
                         AmpError);
    scaler.update();
    CHECK_THROWS_WITH_AS(scaler.update(), doctest::Contains("No inf checks were recorded prior to update."), AmpError);
    toy.opt.zero_grad();
    CHECK_THROWS_WITH_AS(scaler.step(toy.opt), doctest::Contains("No inf checks were recorded for this optimizer."),
                         AmpError);
}

TEST_CASE("GradScaler: a missing update() is named in the error it causes") {
    Toy toy;
    amp::GradScaler scaler;
    toy.opt.zero_grad();
    scaler.scale(toy.loss(kInf)).backward();
    CHECK(scaler.step(toy.opt).skipped());                 // ... and the user `continue`s without update()
    toy.opt.zero_grad();
    scaler.scale(toy.loss()).backward();
    CHECK_THROWS_WITH_AS(scaler.unscale_(toy.opt), doctest::Contains("update() was not called after the last step()"),
                         AmpError);
    CHECK_THROWS_WITH_AS(scaler.step(toy.opt), doctest::Contains("update() was not called"), AmpError);
    scaler.update();                                      // recovering is just calling it
    toy.opt.zero_grad();
    scaler.scale(toy.loss()).backward();
    CHECK_FALSE(scaler.step(toy.opt).skipped());
}

TEST_CASE("GradScaler: f16 gradients are refused and left untouched") {
    Tensor w = randn({2, 3}).to(kFloat16).requires_grad_(true);
    w.set_name("half.weight");
    optim::SGD opt(std::vector<Tensor>{w}, optim::SGDOptions(0.1));
    amp::GradScaler scaler({.init_scale = 8.0});
    {
        amp::AutocastGuard autocast(kCPU, kFloat16);
        scaler.scale(matmul(w, ones({3, 2})).to(kFloat32).sum()).backward();
    }
    REQUIRE(w.grad().dtype() == kFloat16);
    Tensor grad_before = w.grad().clone();
    CHECK_THROWS_WITH_AS(scaler.unscale_(opt), doctest::Contains("Attempting to unscale FP16 gradients."), AmpError);
    CHECK_THROWS_WITH_AS(scaler.step(opt), doctest::Contains("half.weight"), AmpError);
    CHECK(equal(w.grad(), grad_before));
    Tensor b = randn({3}).to(kBFloat16).requires_grad_(true);   // bf16 grads are allowed (as PyTorch)
    optim::SGD opt_b(std::vector<Tensor>{b}, optim::SGDOptions(0.1));
    scaler.scale(b.to(kFloat32).sum()).backward();
    CHECK_FALSE(scaler.step(opt_b).skipped());
}

TEST_CASE("GradScaler: disabled mode is a pass-through") {
    Toy toy;
    amp::GradScaler scaler({.enabled = false});
    Tensor loss = toy.loss();
    CHECK(scaler.scale(loss).is_same(loss));
    loss.backward();
    Tensor before = toy.w.detach().clone();
    scaler.unscale_(toy.opt);
    CHECK_FALSE(scaler.step(toy.opt).skipped());
    CHECK_FALSE(equal(toy.w, before));
    scaler.update();
    CHECK(scaler.get_scale() == 1.0);
    CHECK(scaler.state_dict().empty());
    amp::GradScaler disabled_bad({.growth_factor = 0.5, .enabled = false});   // not validated when disabled
    CHECK_FALSE(disabled_bad.is_enabled());
}

TEST_CASE("GradScaler: state_dict has PyTorch's keys and round-trips, also before the first scale()") {
    Toy toy;
    amp::GradScaler a({.init_scale = 64.0, .growth_interval = 5});
    iterate(a, toy);
    iterate(a, toy);
    amp::ScalerStateDict sd = a.state_dict();
    std::vector<std::string> keys;
    for (const auto& [k, v] : sd) keys.push_back(k);
    CHECK(keys == std::vector<std::string>{"_growth_tracker", "backoff_factor", "growth_factor", "growth_interval", "scale"});
    CHECK(sd.at("scale") == 64.0);
    CHECK(sd.at("_growth_tracker") == 2.0);
    amp::GradScaler b;
    b.load_state_dict(sd);
    CHECK(b.get_scale() == 64.0);
    CHECK(b.get_growth_interval() == 5);
    iterate(b, toy);
    iterate(b, toy);
    iterate(b, toy);
    CHECK(b.get_scale() == 128.0);                       // the tracker continued from 2
    amp::GradScaler c;
    iterate(c, toy);
    c.load_state_dict(sd);                               // also into a live scaler
    CHECK(c.get_scale() == 64.0);
    CHECK(c.get_growth_tracker() == 2);
}

// A checkpoint saved right after a resume (load, then state_dict, before any step) must carry the
// loaded state: the scale and growth tracker tensors are created lazily by the first scale().
TEST_CASE("GradScaler: every loaded value survives load_state_dict -> state_dict before the first step") {
    amp::ScalerStateDict loaded{{"scale", 512.0}, {"growth_factor", 3.0}, {"backoff_factor", 0.25},
                                {"growth_interval", 7.0}, {"_growth_tracker", 1.0}};
    amp::GradScaler fresh;
    fresh.load_state_dict(loaded);
    CHECK(fresh.scale_tensor().defined() == false);     // still lazy
    CHECK(fresh.get_growth_tracker() == 1);
    CHECK(fresh.get_scale() == 512.0);
    CHECK(fresh.state_dict() == loaded);
    amp::GradScaler again;                               // and a second hop keeps it too
    again.load_state_dict(fresh.state_dict());
    CHECK(again.state_dict() == loaded);

    // The lazily created tensors start from the loaded values: 6 clean steps reach the interval of 7.
    Toy toy;
    for (int i = 0; i < 5; ++i) iterate(fresh, toy);
    CHECK(fresh.get_growth_tracker() == 6);
    CHECK(fresh.get_scale() == 512.0);
    iterate(fresh, toy);
    CHECK(fresh.get_growth_tracker() == 0);
    CHECK(fresh.get_scale() == 1536.0);
}

TEST_CASE("GradScaler: before the first scale(), get_scale() reports the bounded scale scale() will create") {
    amp::GradScaler scaler({.init_scale = 65536.0, .max_scale = 1024.0});
    CHECK(scaler.get_scale() == 1024.0);
    CHECK(scaler.state_dict().at("scale") == 1024.0);
    Toy toy;
    iterate(scaler, toy);
    CHECK(scaler.get_scale() == 1024.0);
}

TEST_CASE("GradScaler: bad input gives typed errors") {
    CHECK_THROWS_WITH_AS(amp::GradScaler({.growth_factor = 1.0}), doctest::Contains("The growth factor must be > 1.0."),
                         ValueError);
    CHECK_THROWS_WITH_AS(amp::GradScaler({.backoff_factor = 1.0}), doctest::Contains("The backoff factor must be < 1.0."),
                         ValueError);
    CHECK_THROWS_AS(amp::GradScaler({.growth_interval = 0}), ValueError);
    CHECK_THROWS_AS(amp::GradScaler({.min_scale = 4.0, .max_scale = 2.0}), ValueError);
    amp::GradScaler scaler;
    amp::GradScaler disabled({.enabled = false});
    CHECK_THROWS_WITH_AS(scaler.load_state_dict(disabled.state_dict()),
                         doctest::Contains("The source state dict is empty, possibly because it was saved from a "
                                           "disabled instance of GradScaler."),
                         AmpError);
    CHECK(scaler.get_scale() == 65536.0);                // nothing changed
    CHECK_THROWS_WITH_AS(scaler.load_state_dict({{"scale", 2.0}}), doctest::Contains("growth_factor"), ValueError);
    disabled.load_state_dict(scaler.state_dict());       // loading into a disabled scaler does nothing
    CHECK(disabled.get_scale() == 1.0);
    CHECK_THROWS_AS(scaler.scale(Tensor()), ValueError);
}

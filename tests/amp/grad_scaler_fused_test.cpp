// grad_scaler_fused_test.cpp: GradScaler with the fused SGD/Adam/AdamW kernels (PyTorch's
// _step_supports_amp_scaling path): the kernel unscales and skips on the device, bit-identical to
// unscale-then-step, leaves .grad unscaled as PyTorch's fused Adam does, and honours an earlier unscale_.
#include <doctest/doctest.h>

#include "tests/amp/scaler_toy.hpp"
#include "tests/support/check_close.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

// PyTorch's _step_supports_amp_scaling path: a fused optimizer gets the scaled gradients and the
// found_inf flag, and its kernel unscales and skips; no host decision precedes the step.
TEST_CASE("GradScaler: a fused optimizer unscales and skips inside its kernel, bit-identical to unscale-then-step") {
    // unscale_first: the scaler unscales in place and the kernel gets no inv_scale
    auto run = [](bool unscale_first, std::vector<Tensor>& grads_after) {
        manual_seed(4);
        Tensor w = randn({3, 4}).requires_grad_(true);
        w.set_name("fc.weight");
        Tensor x = randn({5, 4});
        optim::AdamW opt(std::vector<Tensor>{w}, optim::AdamWOptions(1e-2));
        amp::GradScalerOptions options;
        options.init_scale = 1024.0;
        amp::GradScaler scaler(options);
        std::vector<amp::StepResult> results;
        for (int it = 0; it < 4; ++it) {
            opt.zero_grad();
            const double poison = it == 2 ? std::numeric_limits<double>::infinity() : 1.0;
            scaler.scale(linear(x, w).pow(2.0).mean() * poison).backward();
            if (unscale_first) scaler.unscale_(opt);
            results.push_back(scaler.step(opt));
            grads_after.push_back(w.grad().clone());
            scaler.update();
        }
        return std::tuple{w, opt.state(w)["exp_avg_sq"].clone(), opt.state(w)["step"].item<float>(), results,
                          scaler.get_scale()};
    };
    std::vector<Tensor> fused_grads, plain_grads;
    auto [w_f, v_f, step_f, res_f, scale_f] = run(false, fused_grads);
    auto [w_p, v_p, step_p, res_p, scale_p] = run(true, plain_grads);
    CHECK(equal(w_f, w_p));
    CHECK(equal(v_f, v_p));
    CHECK(step_f == 3.0f);
    CHECK(step_p == 3.0f);
    CHECK(scale_f == scale_p);
    for (int it = 0; it < 4; ++it) {
        CHECK(res_f[it].skipped() == (it == 2));
        CHECK(res_f[it].reason() == res_p[it].reason());
    }
    // The kernel stores the unscaled gradient back, as torch's fused Adam does: after a clean step .grad
    // is bit-identical to what unscale_ leaves (a skipped step leaves the gradients alone).
    for (int it : {0, 1, 3}) {
        CAPTURE(it);
        CHECK(equal(fused_grads[it], plain_grads[it]));
    }
    CHECK(!equal(fused_grads[0] * 1024.0, plain_grads[0]));
}

TEST_CASE("GradScaler: after step() the gradients are unscaled with every optimizer, and step() converts to bool") {
    auto grad_after_step = [](auto make_optimizer) {
        manual_seed(9);
        Tensor w = randn({4}).requires_grad_(true);
        auto opt = make_optimizer(w);
        amp::GradScaler scaler;                               // scale 65536
        scaler.scale((w * 3.0).sum()).backward();
        bool skipped = scaler.step(opt);
        scaler.update();
        CHECK(!skipped);
        return w.grad().clone();
    };
    const Tensor threes = full({4}, 3.0);
    using Params = std::vector<Tensor>;
    auto adam = [](Tensor& w) { return optim::Adam(Params{w}, optim::AdamOptions(0.1)); };
    auto adamw = [](Tensor& w) { return optim::AdamW(Params{w}, optim::AdamWOptions(0.1)); };
    auto sgd_momentum = [](Tensor& w) { return optim::SGD(Params{w}, optim::SGDOptions(0.1).momentum(0.9)); };
    auto sgd_unfused = [](Tensor& w) { return optim::SGD(Params{w}, optim::SGDOptions(0.1).fused(false)); };
    CHECK(equal(grad_after_step(adam), threes));
    CHECK(equal(grad_after_step(adamw), threes));
    CHECK(equal(grad_after_step(sgd_momentum), threes));
    CHECK(equal(grad_after_step(sgd_unfused), threes));
}

TEST_CASE("GradScaler: unscale_ before a fused step is honoured: the kernel does not divide again") {
    Toy a(6), b(6);
    amp::GradScaler scaler;
    a.opt.zero_grad();
    scaler.scale(a.loss()).backward();
    scaler.unscale_(a.opt);                              // e.g. to clip
    CHECK_FALSE(scaler.step(a.opt).skipped());
    scaler.update();
    b.opt.zero_grad();
    b.loss().backward();
    b.opt.step();
    CHECK(equal(a.w, b.w));
}

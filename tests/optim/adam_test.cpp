// adam_test.cpp: Adam and AdamW against PyTorch trajectories (bias correction per parameter step,
// L2 vs decoupled weight decay, amsgrad, skipped parameters, f64, param groups), both paths.
#include <doctest/doctest.h>

#include "tests/optim/trajectory.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

TEST_CASE("Adam matches PyTorch over 5 steps, including a step where one parameter has no grad") {
    for (bool fused : {true, false}) {
        check_trajectory("optim_adam", fused);               // param 1 skips step 2: its step count is 4
        check_trajectory("optim_adam_l2_amsgrad", fused);
    }
}

TEST_CASE("AdamW matches PyTorch over 5 steps (f32, f64 + amsgrad, param groups)") {
    for (bool fused : {true, false}) {
        check_trajectory("optim_adamw", fused);
        check_trajectory("optim_adamw_amsgrad_f64", fused);
        check_trajectory("optim_adamw_groups", fused);
    }
}

TEST_CASE("AdamW built from AdamWOptions defaults to weight_decay 0.01, decoupled") {
    Fixture fx = load_fixture("optim_adamw");
    std::vector<Tensor> params = fixture_params(fx);
    optim::AdamW opt(params, optim::AdamWOptions(0.01));
    CHECK(opt.param_groups()[0].option("weight_decay") == 0.01);
    CHECK(opt.param_groups()[0].option("decoupled_weight_decay") == 1.0);
    for (int t = 0; t < 5; ++t) {
        set_fixture_grads(fx, params, t);
        opt.step();
        check_fixture_step(fx, params, t);
    }
}

TEST_CASE("AdamW(params, lr) keeps AdamW's weight decay 1e-2, as torch.optim.AdamW(params, lr) does") {
    Tensor p = ones({1}, TensorOptions().requires_grad(true));
    optim::AdamW opt({p}, 0.1);
    CHECK(opt.param_groups()[0].option("weight_decay") == 0.01);
    (p.sum() * 0.0).backward();
    opt.step();
    CHECK(p.item<float>() == doctest::Approx(0.999));   // torch: 1 - 0.1 * 0.01 (decay alone; the gradient is 0)
}

TEST_CASE("Adam with betas/eps/amsgrad set through AdamOptions follows torch") {
    Fixture fx = load_fixture("optim_adam_l2_amsgrad");
    std::vector<Tensor> params = fixture_params(fx);
    optim::Adam opt(params, optim::AdamOptions(0.01).betas({0.8, 0.99}).eps(1e-6).weight_decay(0.1).amsgrad(true));
    for (int t = 0; t < 5; ++t) {
        set_fixture_grads(fx, params, t);
        opt.step();
        check_fixture_step(fx, params, t);
    }
}

TEST_CASE("Adam refuses f16/bf16 parameters and points to the master-weights wrapper") {
    Tensor p = zeros({2}, TensorOptions(kFloat16)).requires_grad_(true);
    CHECK_THROWS_WITH_AS(optim::Adam({p}), doctest::Contains("amp::MasterWeightsOptimizer"), DTypeError);
    Tensor q = zeros({2}, TensorOptions(kBFloat16)).requires_grad_(true);
    CHECK_THROWS_WITH_AS(optim::AdamW({q}), doctest::Contains("AdamW: parameter (unnamed) is (2) bf16 cpu"), DTypeError);
}

TEST_CASE("Adam rejects bad options with PyTorch's messages") {
    Tensor p = zeros({2}).requires_grad_(true);
    CHECK_THROWS_WITH_AS(optim::Adam({p}, optim::AdamOptions(-1.0)), doctest::Contains("Invalid learning rate"),
                         ValueError);
    CHECK_THROWS_WITH_AS(optim::Adam({p}, optim::AdamOptions(1e-3).betas({1.0, 0.999})),
                         doctest::Contains("Invalid beta parameter at index 0: 1"), ValueError);
    CHECK_THROWS_WITH_AS(optim::Adam({p}, optim::AdamOptions(1e-3).betas({0.9, -0.1})),
                         doctest::Contains("Invalid beta parameter at index 1"), ValueError);
    CHECK_THROWS_WITH_AS(optim::Adam({p}, optim::AdamOptions(1e-3).eps(-1.0)), doctest::Contains("Invalid epsilon value"),
                         ValueError);
    CHECK_THROWS_WITH_AS(optim::AdamW({p}, optim::AdamWOptions(1e-3).weight_decay(-0.1)),
                         doctest::Contains("AdamW: Invalid weight_decay value"), ValueError);
}

// step(StepScaling): the kernel reads grad * inv_scale and skips the whole step, step counts
// included, on found_inf.
TEST_CASE("AdamW step(StepScaling): unscales inside the kernel and skips on found_inf, step counts included") {
    auto make = [](bool fused, DType dtype) {
        manual_seed(5);
        Tensor w = randn({6, 5}, TensorOptions(dtype)).requires_grad_(true);
        return std::pair{w, std::make_unique<optim::AdamW>(std::vector<Tensor>{w},
                                                           optim::AdamWOptions(1e-2).amsgrad(true).fused(fused))};
    };
    for (DType dtype : {kFloat32, kFloat64}) {
        CAPTURE(dtype);
        auto [w, opt] = make(true, dtype);
        auto [ref_w, ref] = make(true, dtype);       // the same kernel, given unscaled gradients
        Tensor grad = randn({6, 5}, TensorOptions(dtype));
        for (int it = 0; it < 4; ++it) {
            const bool overflow = it == 1;
            Tensor before = w.detach().clone();
            w.set_grad(grad * 512.0);
            opt->step(StepScaling{full({}, 1.0 / 512.0), full({}, overflow ? 1.0 : 0.0)});
            if (overflow) {
                CHECK(equal(w, before));
                CHECK(opt->state(w)["step"].item<float>() == 1.0f);   // not counted
                continue;
            }
            ref_w.set_grad(grad);
            ref->step();
            CHECK(equal(w, ref_w));
            for (const char* key : {"exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"})
                CHECK(equal(opt->state(w)[key], ref->state(ref_w)[key]));
        }
        CHECK(opt->state(w)["step"].item<float>() == 3.0f);
    }
}

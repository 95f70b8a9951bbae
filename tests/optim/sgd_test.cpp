// sgd_test.cpp: SGD against PyTorch trajectories (plain, momentum + Nesterov + weight decay,
// dampening + maximize, param groups), through both the fused CPU loop and the tensor-op path.
#include <doctest/doctest.h>

#include "tests/optim/trajectory.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

TEST_CASE("SGD matches PyTorch over 5 steps (fused CPU loop and tensor-op path)") {
    for (bool fused : {true, false}) {
        check_trajectory("optim_sgd_plain", fused);
        check_trajectory("optim_sgd_nesterov_wd", fused);
        check_trajectory("optim_sgd_dampening_maximize", fused);
        check_trajectory("optim_sgd_groups", fused);
    }
}

TEST_CASE("SGD built from SGDOptions follows the same trajectory") {
    Fixture fx = load_fixture("optim_sgd_nesterov_wd");
    std::vector<Tensor> params = fixture_params(fx);
    optim::SGD opt(params, optim::SGDOptions(0.1).momentum(0.9).weight_decay(0.01).nesterov(true));
    for (int t = 0; t < 5; ++t) {
        set_fixture_grads(fx, params, t);
        opt.step();
        check_fixture_step(fx, params, t);
    }
    CHECK(opt.param_groups()[0].lr() == 0.1);
    CHECK(opt.param_groups()[0].option("nesterov") == 1.0);
}

TEST_CASE("SGD on f16 parameters runs the tensor-op path within f16 tolerance of f64") {
    Tensor p64 = tensor(std::vector<double>{0.5, -1.25, 2.0, 0.125}, {4}).requires_grad_(true);
    Tensor p16 = p64.detach().to(kFloat16).requires_grad_(true);
    optim::SGD a({p64}, optim::SGDOptions(0.1).momentum(0.9));
    optim::SGD b({p16}, optim::SGDOptions(0.1).momentum(0.9));
    for (int t = 0; t < 3; ++t) {
        Tensor g = tensor(std::vector<double>{0.1 * t, -0.2, 0.3, 1.0 + t}, {4});
        p64.set_grad(g);
        p16.set_grad(g.to(kFloat16));
        a.step();
        b.step();
    }
    CHECK_CLOSE(p16, p64, tol_for(kFloat16, 8));
}

TEST_CASE("SGD rejects bad options with PyTorch's messages") {
    Tensor p = zeros({2}).requires_grad_(true);
    CHECK_THROWS_WITH_AS(optim::SGD({p}, optim::SGDOptions(-0.1)), doctest::Contains("Invalid learning rate: -0.1"),
                         ValueError);
    CHECK_THROWS_WITH_AS(optim::SGD({p}, optim::SGDOptions(0.1).momentum(-1)),
                         doctest::Contains("Invalid momentum value"), ValueError);
    CHECK_THROWS_WITH_AS(optim::SGD({p}, optim::SGDOptions(0.1).nesterov(true)),
                         doctest::Contains("Nesterov momentum requires a momentum and zero dampening"), ValueError);
    CHECK_THROWS_WITH_AS(optim::SGD({p}, optim::SGDOptions(0.1).momentum(0.9).dampening(0.1).nesterov(true)),
                         doctest::Contains("Nesterov"), ValueError);
    CHECK_THROWS_WITH_AS(optim::SGD(std::vector<Tensor>{}, optim::SGDOptions(0.1)),
                         doctest::Contains("SGD: optimizer got an empty parameter list"), ValueError);
    Tensor non_leaf = p * 2.0;
    CHECK_THROWS_WITH_AS(optim::SGD({non_leaf}, optim::SGDOptions(0.1)),
                         doctest::Contains("can't optimize a non-leaf Tensor"), ValueError);
}

TEST_CASE("SGD skips parameters without a gradient and creates no state for them") {
    Tensor a = ones({3}).requires_grad_(true), b = ones({3}).requires_grad_(true);
    optim::SGD opt({a, b}, optim::SGDOptions(0.5).momentum(0.9));
    a.set_grad(ones({3}));
    opt.step();
    CHECK(a.to_vector<float>() == std::vector<float>{0.5f, 0.5f, 0.5f});
    CHECK(b.to_vector<float>() == std::vector<float>{1.0f, 1.0f, 1.0f});
    CHECK(opt.find_state(b) == nullptr);
    CHECK(opt.find_state(a)->count("momentum_buffer") == 1);
}

// step(StepScaling): the kernel reads grad * inv_scale and skips the whole step on found_inf.
TEST_CASE("SGD step(StepScaling): unscales inside the kernel, skips on found_inf, keeps no buffer from a skipped first step") {
    auto make = [](bool fused) {
        manual_seed(3);
        Tensor w = randn({4, 3}).requires_grad_(true);
        return std::pair{w, std::make_unique<optim::SGD>(std::vector<Tensor>{w},
                                                         optim::SGDOptions(0.1).momentum(0.9).dampening(0.1).fused(fused))};
    };
    auto [w, opt] = make(true);
    auto [ref_w, ref] = make(true);                  // the same kernel, given unscaled gradients
    auto [plain_w, plain] = make(false);
    Tensor grad = randn({4, 3});
    CHECK(opt->supports_amp_scaling());
    CHECK_FALSE(plain->supports_amp_scaling());
    Tensor before = w.detach().clone();
    w.set_grad(grad * 1024.0);
    opt->step(StepScaling{full({}, 1.0 / 1024.0), full({}, 1.0)});          // found_inf: nothing changes
    CHECK(equal(w, before));
    CHECK((opt->find_state(w) == nullptr || opt->find_state(w)->count("momentum_buffer") == 0));
    for (int it = 0; it < 3; ++it) {
        w.set_grad(grad * 1024.0);
        opt->step(StepScaling{full({}, 1.0 / 1024.0), full({}, 0.0)});
        ref_w.set_grad(grad);
        ref->step();
        CHECK(equal(w, ref_w));                      // bit-identical to stepping on unscaled gradients
        CHECK(equal(opt->state(w)["momentum_buffer"], ref->state(ref_w)["momentum_buffer"]));
    }
    CHECK(equal(w.grad(), grad));                    // .grad is stored back unscaled, as torch's fused kernels do
    CHECK_THROWS_WITH_AS(plain->step(StepScaling{}), doctest::Contains("fused=false"), AmpError);
}

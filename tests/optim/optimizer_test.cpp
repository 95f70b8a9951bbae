// optimizer_test.cpp: what every optimizer shares: state_dict round trips (save, load into a fresh
// optimizer, continue == uninterrupted), load errors, zero_grad, param groups.
#include <doctest/doctest.h>

#include "tests/optim/trajectory.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

std::unique_ptr<optim::Optimizer> make(const std::string& kind, const std::vector<Tensor>& params) {
    if (kind == "sgd") return std::make_unique<optim::SGD>(params, optim::SGDOptions(0.1).momentum(0.9).nesterov(true));
    if (kind == "adam") return std::make_unique<optim::Adam>(params, optim::AdamOptions(0.01).amsgrad(true));
    return std::make_unique<optim::AdamW>(params, optim::AdamWOptions(0.01));
}

// Steps [from, to) of the fixture's gradients.
void run_steps(const Fixture& fx, optim::Optimizer& opt, const std::vector<Tensor>& params, int from, int to) {
    for (int t = from; t < to; ++t) {
        set_fixture_grads(fx, params, t);
        opt.step();
    }
}

}  // namespace

TEST_CASE("state_dict round trip: save after 3 steps, load into a fresh optimizer, continue == uninterrupted") {
    Fixture fx = load_fixture("optim_adam");                  // only its gradients are used
    for (const char* kind : {"sgd", "adam", "adamw"}) {
        CAPTURE(kind);
        std::vector<Tensor> straight = fixture_params(fx);
        auto opt_a = make(kind, straight);
        run_steps(fx, *opt_a, straight, 0, 5);

        std::vector<Tensor> resumed = fixture_params(fx);
        auto opt_b = make(kind, resumed);
        run_steps(fx, *opt_b, resumed, 0, 3);
        optim::OptimizerStateDict saved = opt_b->state_dict();
        std::vector<Tensor> reloaded;                          // a fresh model with the saved values
        for (const Tensor& p : resumed) reloaded.push_back(p.detach().clone().requires_grad_(true));
        auto opt_c = make(kind, reloaded);
        opt_c->load_state_dict(saved);
        run_steps(fx, *opt_b, resumed, 3, 4);                  // the old optimizer moves on: no sharing
        run_steps(fx, *opt_c, reloaded, 3, 5);
        for (size_t i = 0; i < straight.size(); ++i) CHECK(equal(reloaded[i], straight[i]));
    }
}

TEST_CASE("state_dict has torch's layout: flat indices across groups, step as a 0-dim f32 tensor") {
    Tensor a = ones({2}).requires_grad_(true), b = ones({3}).requires_grad_(true), c = ones({1}).requires_grad_(true);
    std::vector<optim::ParamGroup> groups = {{{a, b}, {}}, {{c}, {{"lr", 0.5}}}};
    optim::Adam opt(groups, optim::AdamOptions(0.1));
    a.set_grad(ones({2}));
    c.set_grad(ones({1}));
    opt.step();
    optim::OptimizerStateDict sd = opt.state_dict();
    CHECK(sd.group_param_indices == std::vector<std::vector<int64_t>>{{0, 1}, {2}});
    CHECK(sd.state.count(0) == 1);
    CHECK(sd.state.count(1) == 0);                             // b had no grad: no state
    REQUIRE(sd.state.count(2) == 1);
    const Tensor& step = sd.state.at(2).at("step");
    CHECK(step.dim() == 0);
    CHECK(step.dtype() == kFloat32);
    CHECK(step.item<float>() == 1.0f);
    CHECK(sd.param_groups[0].at("lr") == 0.1);
    CHECK(sd.param_groups[1].at("lr") == 0.5);
    CHECK(sd.param_groups[1].at("beta2") == 0.999);           // defaults fill a group's missing options
}

TEST_CASE("load_state_dict rejects a different group layout or state shapes") {
    Tensor a = ones({2}).requires_grad_(true), b = ones({3}).requires_grad_(true);
    optim::SGD two_groups(std::vector<optim::ParamGroup>{{{a}, {}}, {{b}, {}}}, optim::SGDOptions(0.1));
    optim::SGD one_group({a, b}, optim::SGDOptions(0.1));
    CHECK_THROWS_WITH_AS(one_group.load_state_dict(two_groups.state_dict()),
                         doctest::Contains("different number of parameter groups"), ValueError);
    Tensor c = ones({2}).requires_grad_(true);
    optim::SGD small({c}, optim::SGDOptions(0.1));
    optim::OptimizerStateDict sd = one_group.state_dict();
    sd.param_groups.resize(1);
    CHECK_THROWS_WITH_AS(small.load_state_dict(sd), doctest::Contains("doesn't match the size of optimizer's group"),
                         ValueError);
    optim::OptimizerStateDict bad = small.state_dict();
    bad.state[0]["momentum_buffer"] = zeros({5});
    CHECK_THROWS_WITH_AS(small.load_state_dict(bad), doctest::Contains("is (5) f32 cpu but the parameter is (2) f32 cpu"),
                         ShapeError);
}

TEST_CASE("load_state_dict casts state to the parameter's dtype") {
    Tensor p = ones({2}, TensorOptions(kFloat64)).requires_grad_(true);
    optim::Adam opt({p});
    optim::OptimizerStateDict sd = opt.state_dict();
    sd.state[0] = {{"step", full({}, 3.0)}, {"exp_avg", ones({2})}, {"exp_avg_sq", ones({2})}};
    opt.load_state_dict(sd);
    CHECK(opt.find_state(p)->at("exp_avg").dtype() == kFloat64);
    CHECK(opt.find_state(p)->at("step").dtype() == kFloat32);
}

TEST_CASE("zero_grad drops grads by default and zeroes them in place with set_to_none=false") {
    Tensor p = ones({2}).requires_grad_(true);
    optim::SGD opt({p}, optim::SGDOptions(0.1));
    p.set_grad(ones({2}));
    Tensor g = p.grad();
    opt.zero_grad(false);
    CHECK(p.grad().is_same(g));
    CHECK(g.to_vector<float>() == std::vector<float>{0.0f, 0.0f});
    opt.zero_grad();
    CHECK(!p.grad().defined());
}

TEST_CASE("param groups: per-group options, changing lr between steps, duplicates rejected") {
    Tensor a = zeros({1}).requires_grad_(true), b = zeros({1}).requires_grad_(true);
    optim::SGD opt(std::vector<optim::ParamGroup>{{{a}, {}}, {{b}, {{"lr", 1.0}}}}, optim::SGDOptions(0.1));
    a.set_grad(ones({1}));
    b.set_grad(ones({1}));
    opt.step();
    CHECK(a.item<float>() == doctest::Approx(-0.1));
    CHECK(b.item<float>() == doctest::Approx(-1.0));
    opt.param_groups()[1].set_lr(2.0);
    opt.step();
    CHECK(b.item<float>() == doctest::Approx(-3.0));
    CHECK_THROWS_WITH_AS(opt.add_param_group({{a}, {}}), doctest::Contains("more than one parameter group"), ValueError);
    Tensor c = zeros({1}).requires_grad_(true);
    opt.add_param_group({{c}, {}});
    CHECK(opt.param_groups()[2].lr() == 0.1);                  // filled from the defaults
    CHECK_THROWS_WITH_AS(opt.param_groups()[0].option("betas"), doctest::Contains("no option \"betas\""), ValueError);
}

TEST_CASE("step rejects a hand-set gradient of the wrong shape") {
    Tensor p = zeros({2, 3}).requires_grad_(true);
    p.set_name("w");
    optim::AdamW opt({p});
    p.set_grad(zeros({3}));
    CHECK_THROWS_WITH_AS(opt.step(), doctest::Contains("AdamW: the gradient of parameter w does not match it: grad is (3) "
                                                       "f32 cpu, parameter is (2,3) f32 cpu"), ShapeError);
}

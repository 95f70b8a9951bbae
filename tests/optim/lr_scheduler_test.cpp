// lr_scheduler_test.cpp: ConstantLR, StepLR and WarmupCosineLR against torch.optim.lr_scheduler
// and nanoGPT's get_lr (fixtures lr_*.json), resuming from state_dict, bad options, and the
// weight-decay parameter groups.
#include <doctest/doctest.h>

#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

struct TwoGroups {
    Tensor p0 = zeros({2}).requires_grad_(true), p1 = zeros({3}).requires_grad_(true);
    std::unique_ptr<optim::SGD> opt;
    TwoGroups() {
        std::vector<optim::ParamGroup> groups(2);
        groups[0].params = {p0};
        groups[0].options["lr"] = 0.1;
        groups[1].params = {p1};
        groups[1].options["lr"] = 0.02;
        opt = std::make_unique<optim::SGD>(groups, optim::SGDOptions(0.5));
    }
};

// Runs `steps` steps and compares get_last_lr() and the optimizer's group lrs to the fixture rows.
void check_against(const std::string& fixture, optim::LRScheduler& sched, optim::Optimizer& opt) {
    Fixture fx = load_fixture(fixture);
    auto lrs = fx.at("lrs").to_vector<double>();                 // (steps+1, 2)
    int64_t steps = fx.params.at("steps").get<int64_t>();
    for (int64_t t = 0; t <= steps; ++t) {
        CAPTURE(t);
        if (t > 0) sched.step();
        REQUIRE(sched.get_last_lr().size() == 2);
        for (size_t g = 0; g < 2; ++g) {
            double want = lrs[static_cast<size_t>(t) * 2 + g];
            CHECK(sched.get_last_lr()[g] == doctest::Approx(want).epsilon(1e-12));
            CHECK(opt.param_groups()[g].lr() == sched.get_last_lr()[g]);
        }
    }
    CHECK(sched.last_epoch() == steps);
}

}  // namespace

TEST_CASE("StepLR matches torch.optim.lr_scheduler.StepLR") {
    TwoGroups m;
    optim::StepLR sched(*m.opt, {.step_size = 4, .gamma = 0.5});
    check_against("lr_step", sched, *m.opt);
    TwoGroups positional;
    optim::StepLR libtorch_spelling(*positional.opt, 4, 0.5);   // libtorch's StepLR(optimizer, step_size, gamma)
    check_against("lr_step", libtorch_spelling, *positional.opt);
}

TEST_CASE("ConstantLR matches torch.optim.lr_scheduler.ConstantLR; the default keeps the lr") {
    TwoGroups m;
    optim::ConstantLR sched(*m.opt, {.factor = 0.25, .total_iters = 6});
    check_against("lr_constant", sched, *m.opt);

    TwoGroups plain;
    optim::ConstantLR constant(*plain.opt);
    for (int i = 0; i < 5; ++i) constant.step();
    CHECK(constant.get_last_lr() == std::vector<double>{0.1, 0.02});
}

TEST_CASE("WarmupCosineLR matches nanoGPT's get_lr: warm-up, cosine decay, then min_lr") {
    TwoGroups m;
    optim::WarmupCosineLR sched(*m.opt, {.warmup_iters = 5, .lr_decay_iters = 20, .min_lr = 0.001});
    check_against("lr_warmup_cosine", sched, *m.opt);
    CHECK(sched.lr_at(5, 0.1) == doctest::Approx(0.1));           // the peak, right after warm-up
    CHECK(sched.lr_at(20, 0.1) == doctest::Approx(0.001));
    CHECK(sched.lr_at(1000, 0.1) == 0.001);
}

TEST_CASE("state_dict: a resumed scheduler continues the same sequence") {
    TwoGroups a, b;
    optim::WarmupCosineLROptions o{.warmup_iters = 3, .lr_decay_iters = 12, .min_lr = 0.0};
    optim::WarmupCosineLR sa(*a.opt, o);
    for (int i = 0; i < 7; ++i) sa.step();
    optim::SchedulerStateDict sd = sa.state_dict();
    CHECK(sd.last_epoch == 7);
    CHECK(sd.base_lrs == std::vector<double>{0.1, 0.02});

    // The optimizer of the resumed run starts from a decayed lr; base_lrs come from the state.
    b.opt->param_groups()[0].set_lr(1e-9);
    optim::WarmupCosineLR sb(*b.opt, o);
    sb.load_state_dict(sd);
    CHECK(sb.get_last_lr() == sa.get_last_lr());
    CHECK(b.opt->param_groups()[0].lr() == sa.get_last_lr()[0]);
    for (int i = 0; i < 6; ++i) {
        sa.step();
        sb.step();
        CHECK(sb.get_last_lr() == sa.get_last_lr());
    }
}

TEST_CASE("load_state_dict rejects another schedule, other options or another group count") {
    TwoGroups m;
    optim::StepLR step(*m.opt, {.step_size = 2, .gamma = 0.5});
    optim::ConstantLR constant(*m.opt);
    CHECK_THROWS_AS(step.load_state_dict(constant.state_dict()), ValueError);
    TwoGroups other;
    optim::StepLR step3(*other.opt, {.step_size = 3, .gamma = 0.5});
    CHECK_THROWS_WITH_AS(step.load_state_dict(step3.state_dict()), doctest::Contains("step_size"), ValueError);
    optim::SchedulerStateDict sd = step.state_dict();
    sd.base_lrs.pop_back();
    sd.last_lrs.pop_back();
    CHECK_THROWS_WITH_AS(step.load_state_dict(sd), doctest::Contains("1 groups but the optimizer has 2"), ValueError);
}

TEST_CASE("schedulers reject bad options") {
    TwoGroups m;
    CHECK_THROWS_AS(optim::StepLR(*m.opt, {.step_size = 0}), ValueError);
    CHECK_THROWS_AS(optim::StepLR(*m.opt, {.step_size = 2, .gamma = 0.0}), ValueError);
    CHECK_THROWS_AS(optim::ConstantLR(*m.opt, {.factor = 1.5}), ValueError);
    CHECK_THROWS_WITH_AS(optim::WarmupCosineLR(*m.opt, {.warmup_iters = 10, .lr_decay_iters = 10}),
                         doctest::Contains("lr_decay_iters (10) must be greater than warmup_iters (10)"), ValueError);
    CHECK_THROWS_AS(optim::WarmupCosineLR(*m.opt, {.warmup_iters = 1, .lr_decay_iters = 10, .min_lr = -1}),
                    ValueError);
}

TEST_CASE("weight_decay_groups: decay on matrices only, as GPT-2 training does") {
    Tensor w = randn({4, 3}).requires_grad_(true), emb = randn({10, 4}).requires_grad_(true);
    Tensor b = zeros({4}).requires_grad_(true), gain = ones({4}).requires_grad_(true);
    Tensor frozen = randn({2, 2});                                  // requires_grad false: left out
    auto groups = optim::weight_decay_groups({w, b, emb, gain, frozen}, 0.1);
    REQUIRE(groups.size() == 2);
    REQUIRE(groups[0].params.size() == 2);
    CHECK(groups[0].params[0].is_same(w));
    CHECK(groups[0].params[1].is_same(emb));
    REQUIRE(groups[1].params.size() == 2);
    CHECK(groups[1].params[0].is_same(b));
    CHECK(groups[0].option("weight_decay") == 0.1);
    CHECK(groups[1].option("weight_decay") == 0.0);

    // AdamW with these groups decays w but not b: with a zero gradient only the decay moves them.
    optim::AdamW opt(groups, optim::AdamWOptions(0.5));
    Tensor w0 = w.detach().clone(), b0 = b.detach().clone();
    for (Tensor p : {w, b, emb, gain}) p.set_grad(zeros_like(p));
    opt.step();
    CHECK_CLOSE(w.detach(), w0 * (1.0 - 0.5 * 0.1), tol_for(kFloat32));
    CHECK_CLOSE(b.detach(), b0, tol_for(kFloat32));
}

TEST_CASE("weight_decay_groups over named parameters: the same groups, and the names in the groups' order") {
    Tensor w = randn({4, 3}).requires_grad_(true), emb = randn({10, 4}).requires_grad_(true);
    Tensor b = zeros({4}).requires_grad_(true), frozen = randn({2, 2});
    optim::NamedParamGroups named =
        optim::weight_decay_groups({{"fc.weight", w}, {"fc.bias", b}, {"wte", emb}, {"frozen", frozen}}, 0.1);
    CHECK(named.names == std::vector<std::string>{"fc.weight", "wte", "fc.bias"});
    REQUIRE(named.groups.size() == 2);
    REQUIRE(named.groups[0].params.size() == 2);
    CHECK(named.groups[0].params[1].is_same(emb));
    REQUIRE(named.groups[1].params.size() == 1);
    CHECK(named.groups[1].params[0].is_same(b));
    CHECK(named.groups[0].option("weight_decay") == 0.1);
    CHECK(named.groups[1].option("weight_decay") == 0.0);
}

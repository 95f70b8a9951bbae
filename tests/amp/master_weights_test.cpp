// master_weights_test.cpp: f16/bf16 parameters with f32 master weights (Apex O2 / DeepSpeed):
// the step arithmetic, unscaling with the backward's scale (DeepSpeed's ordering bug fixed),
// skipped steps leaving everything bit-identical, clipping, state_dict resume, and bad input.
#include <doctest/doctest.h>

#include <limits>

#include "tests/support/check_close.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::unique_ptr<optim::Optimizer> make_sgd(std::vector<optim::ParamGroup> groups) {
    return std::make_unique<optim::SGD>(std::move(groups), optim::SGDOptions(0.5));
}
std::unique_ptr<optim::Optimizer> make_adamw(std::vector<optim::ParamGroup> groups) {
    return std::make_unique<optim::AdamW>(std::move(groups), optim::AdamWOptions(1e-2));
}

// A tiny f16 model: two linear layers, names set by nn::Module.
struct Net {
    std::shared_ptr<nn::Sequential> seq;
    Tensor x, target;
    explicit Net(DType dtype, uint64_t seed = 1) {
        manual_seed(seed);
        seq = std::make_shared<nn::Sequential>();
        seq->push_back(std::make_shared<nn::Linear>(4, 8));
        seq->push_back(std::make_shared<nn::Linear>(8, 2));
        seq->to(dtype);
        x = randn({16, 4}).to(dtype);
        target = randn({16, 2});
    }
    Tensor loss(double poison = 1.0) const {
        return (seq->forward(x).to(kFloat32) - target).pow(2.0).mean() * poison;     // mse
    }
};

// Runs `steps` iterations; returns the masters after each.
std::vector<std::vector<Tensor>> train(Net& net, amp::MasterWeightsOptimizer& opt, int steps) {
    std::vector<std::vector<Tensor>> out;
    for (int i = 0; i < steps; ++i) {
        opt.zero_grad();
        opt.backward(net.loss());
        opt.step();
        std::vector<Tensor> snap;
        for (const Tensor& m : opt.master_params()) snap.push_back(m.detach().clone());
        out.push_back(snap);
    }
    return out;
}

}  // namespace

TEST_CASE("master weights: f32 copies of f16 params; the model gets the rounded masters after a step") {
    Net net(kFloat16);
    amp::MasterWeightsOptimizer opt(net.seq->parameters(), make_sgd, std::make_unique<amp::StaticLossScaler>(128));
    REQUIRE(opt.master_params().size() == 4);
    for (size_t i = 0; i < 4; ++i) {
        CHECK(opt.master_params()[i].dtype() == kFloat32);
        CHECK(equal(opt.master_params()[i].to(kFloat16), opt.model_params()[i]));
    }
    CHECK(opt.master_params()[0].name() == "0.weight");
    Tensor m0 = opt.master_params()[0].detach().clone();
    opt.zero_grad();
    opt.backward(net.loss());
    Tensor g16 = opt.model_params()[0].grad().clone();                   // scaled f16 grad
    CHECK_FALSE(opt.step().skipped());
    Tensor expected = m0 - g16.to(kFloat32) * (0.5 / 128.0);             // SGD on the unscaled f32 grad
    CHECK(equal(opt.master_params()[0], expected));
    for (size_t i = 0; i < 4; ++i) CHECK(equal(opt.master_params()[i].to(kFloat16), opt.model_params()[i]));
    CHECK(opt.model_params()[0].dtype() == kFloat16);
}

TEST_CASE("master weights: unscale with the scale the backward used, even when the scaler grows it") {
    // Scaling by powers of two is exact in f16 (away from overflow/underflow), so a dynamic scaler that
    // grows every step must train bit-identically to a static scale. DeepSpeed unscales after
    // update_scale and would divide by 2S on every growth step.
    Net a(kFloat16, 3), b(kFloat16, 3);
    amp::MasterWeightsOptimizer dyn(a.seq->parameters(), make_sgd,
                                    std::make_unique<amp::DynamicLossScaler>(amp::DynamicLossScalerOptions{
                                        .init_scale = 64, .scale_window = 1, .delayed_shift = 1}));
    amp::MasterWeightsOptimizer fixed(b.seq->parameters(), make_sgd, std::make_unique<amp::StaticLossScaler>(64));
    auto ta = train(a, dyn, 4);
    auto tb = train(b, fixed, 4);
    CHECK(dyn.loss_scale() > 64);                                        // it did grow
    for (size_t s = 0; s < 4; ++s)
        for (size_t i = 0; i < ta[s].size(); ++i) CHECK(equal(ta[s][i], tb[s][i]));
}

TEST_CASE("master weights: an overflow skips the step; parameters, masters and optimizer state stay bit-identical") {
    Net net(kFloat16);
    amp::MasterWeightsOptimizer opt(net.seq->parameters(), make_adamw,
                                    std::make_unique<amp::DynamicLossScaler>(amp::DynamicLossScalerOptions{
                                        .init_scale = 1024, .delayed_shift = 2}));
    train(net, opt, 2);
    std::vector<Tensor> params_before, masters_before;
    for (const Tensor& p : opt.model_params()) params_before.push_back(p.detach().clone());
    for (const Tensor& m : opt.master_params()) masters_before.push_back(m.detach().clone());
    Tensor exp_avg_before = opt.inner().state(opt.master_params()[0]).at("exp_avg").clone();
    for (int i = 0; i < 2; ++i) {
        opt.zero_grad();
        opt.backward(net.loss(kInf));
        amp::StepResult r = opt.step();
        CHECK(r.skipped());
        CHECK(r.reason().find("0.weight") != std::string::npos);
    }
    CHECK(opt.loss_scale() == 512);                                       // hysteresis 2: second overflow halves
    CHECK(opt.skipped_steps() == 2);
    CHECK(opt.state_dict().skipped_steps == 2);                           // saved, and loaded back
    amp::MasterWeightsOptimizer other(Net(kFloat16).seq->parameters(), make_adamw,
                                      std::make_unique<amp::DynamicLossScaler>());
    other.load_state_dict(opt.state_dict());
    CHECK(other.skipped_steps() == 2);
    for (size_t i = 0; i < params_before.size(); ++i) {
        CHECK(equal(opt.model_params()[i], params_before[i]));
        CHECK(equal(opt.master_params()[i], masters_before[i]));
        CHECK_FALSE(opt.model_params()[i].grad().defined());
    }
    CHECK(equal(opt.inner().state(opt.master_params()[0]).at("exp_avg"), exp_avg_before));
}

TEST_CASE("master weights: bf16 params train close to an f32 run") {
    Net low(kBFloat16, 5), ref(kFloat32, 5);
    amp::MasterWeightsOptimizer opt(low.seq->parameters(), make_sgd, std::make_unique<amp::StaticLossScaler>(1));
    optim::SGD ref_opt(ref.seq->parameters(), optim::SGDOptions(0.5));
    for (int i = 0; i < 3; ++i) {
        opt.zero_grad();
        opt.backward(low.loss());
        opt.step();
        ref_opt.zero_grad();
        ref.loss().backward();
        ref_opt.step();
    }
    for (size_t i = 0; i < 4; ++i)
        CHECK_CLOSE(opt.master_params()[i], ref.seq->parameters()[i], tol_for(kBFloat16, 64));
}

TEST_CASE("master weights: clip_grad clips the unscaled f32 gradients") {
    Net a(kFloat16, 6), b(kFloat16, 6);
    amp::MasterWeightsOptimizer clipped(a.seq->parameters(), make_sgd, std::make_unique<amp::StaticLossScaler>(256),
                                        {.clip_grad = 1e-3});
    amp::MasterWeightsOptimizer plain(b.seq->parameters(), make_sgd, std::make_unique<amp::StaticLossScaler>(256));
    std::vector<Tensor> m0;
    for (const Tensor& m : clipped.master_params()) m0.push_back(m.detach().clone());
    train(a, clipped, 1);
    train(b, plain, 1);
    std::vector<Tensor> deltas;
    for (size_t i = 0; i < m0.size(); ++i) deltas.push_back((clipped.master_params()[i] - m0[i]) / 0.5);
    double norm = nn::utils::get_total_norm(deltas).item<double>();
    CHECK(norm == doctest::Approx(1e-3).epsilon(1e-3));                   // |lr * g_clipped| / lr = max_norm
    CHECK_FALSE(equal(clipped.master_params()[0], plain.master_params()[0]));
}

TEST_CASE("master weights: state_dict holds masters, optimizer and scaler state; a resume is bit-exact") {
    auto make_scaler = [] {
        return std::make_unique<amp::DynamicLossScaler>(amp::DynamicLossScalerOptions{.init_scale = 256, .scale_window = 2});
    };
    Net a(kFloat16, 7);
    amp::MasterWeightsOptimizer opt_a(a.seq->parameters(), make_adamw, make_scaler());
    train(a, opt_a, 3);
    amp::MasterWeightsStateDict sd = opt_a.state_dict();
    CHECK(sd.master_weights.size() == 4);
    CHECK(sd.loss_scaler.at("cur_iter") == 3);
    // snapshot (state_dict shares the live tensors, as PyTorch's does)
    for (Tensor& m : sd.master_weights) m = m.detach().clone();
    for (auto& [idx, st] : sd.optimizer.state)
        for (auto& [k, v] : st) v = v.clone();
    auto continued = train(a, opt_a, 3);

    Net b(kFloat16, 99);                                                  // different initial weights
    amp::MasterWeightsOptimizer opt_b(b.seq->parameters(), make_adamw, make_scaler());
    opt_b.load_state_dict(sd);
    CHECK(equal(opt_b.model_params()[0], opt_b.master_params()[0].to(kFloat16)));
    b.x = a.x;
    b.target = a.target;
    auto resumed = train(b, opt_b, 3);
    for (size_t s = 0; s < 3; ++s)
        for (size_t i = 0; i < 4; ++i) CHECK(equal(resumed[s][i], continued[s][i]));
    CHECK(opt_b.loss_scale() == opt_a.loss_scale());
}

TEST_CASE("master weights: LossScaleError at the minimum leaves the model untouched; bad input") {
    Net net(kFloat16);
    amp::MasterWeightsOptimizer opt(net.seq->parameters(), make_sgd,
                                    std::make_unique<amp::DynamicLossScaler>(amp::DynamicLossScalerOptions{
                                        .init_scale = 2, .delayed_shift = 1}));
    Tensor before = opt.model_params()[0].detach().clone();
    opt.backward(net.loss(kInf));
    CHECK(opt.step().skipped());                                            // 2 -> 1
    opt.backward(net.loss(kInf));
    CHECK_THROWS_WITH_AS(opt.step(), doctest::Contains("Current loss scale already at minimum"), LossScaleError);
    CHECK(equal(opt.model_params()[0], before));
    CHECK_THROWS_AS(amp::MasterWeightsOptimizer(net.seq->parameters(), make_sgd, nullptr), ValueError);
    amp::MasterWeightsStateDict sd = opt.state_dict();
    sd.master_weights.pop_back();
    CHECK_THROWS_WITH_AS(opt.load_state_dict(sd), doctest::Contains("3 master weights given, 4 expected"), ValueError);
    sd = opt.state_dict();
    sd.master_weights[0] = zeros({2, 2});
    CHECK_THROWS_AS(opt.load_state_dict(sd), ShapeError);
}

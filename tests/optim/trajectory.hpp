// trajectory.hpp: replays a PyTorch optimizer trajectory fixture (tools/fixtures/optim.py) with
// ampgrad's optimizer and checks the parameters after every step and the final state.
#pragma once
#include <memory>
#include <string>

#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

namespace ampgrad::testing {

// A group's options: the fixture's top-level options overridden by the group's own (bools as 0/1).
inline std::map<std::string, double> fixture_group_options(const nlohmann::json& top, const nlohmann::json& group) {
    std::map<std::string, double> out;
    for (const nlohmann::json* src : {&top, &group})
        for (auto& [key, value] : src->items())
            if (key != "params") out[key] = value.is_boolean() ? (value.get<bool>() ? 1.0 : 0.0) : value.get<double>();
    return out;
}

// Builds the fixture's optimizer over `params` (fresh leaves copied from p{i}).
inline std::unique_ptr<optim::Optimizer> make_fixture_optimizer(const Fixture& fx, const std::vector<Tensor>& params,
                                                                 bool fused) {
    std::vector<optim::ParamGroup> groups;
    for (const auto& g : fx.params.at("groups")) {
        optim::ParamGroup group;
        for (int64_t i : g.at("params").get<std::vector<int64_t>>()) group.params.push_back(params[i]);
        group.options = fixture_group_options(fx.params.at("options"), g);
        groups.push_back(std::move(group));
    }
    std::string kind = fx.params.at("optimizer").get<std::string>();
    if (kind == "sgd") return std::make_unique<optim::SGD>(groups, optim::SGDOptions().fused(fused));
    if (kind == "adam") return std::make_unique<optim::Adam>(groups, optim::AdamOptions().fused(fused));
    return std::make_unique<optim::AdamW>(groups, optim::AdamWOptions().fused(fused));
}

inline std::vector<Tensor> fixture_params(const Fixture& fx) {
    std::vector<Tensor> params;
    for (int i = 0; i < fx.params.at("nparams").get<int>(); ++i)
        params.push_back(fx.at(fmt::format("p{}", i)).clone().requires_grad_(true));
    return params;
}

// Sets each parameter's grad for step t from the fixture (undefined where torch's was None).
inline void set_fixture_grads(const Fixture& fx, const std::vector<Tensor>& params, int t) {
    for (size_t i = 0; i < params.size(); ++i) {
        std::string key = fmt::format("g{}_{}", i, t);
        params[i].set_grad(fx.tensors.count(key) ? fx.at(key).clone() : Tensor());
    }
}

inline void check_fixture_step(const Fixture& fx, const std::vector<Tensor>& params, int t) {
    Tolerance tol = tol_for(params[0].dtype());
    for (size_t i = 0; i < params.size(); ++i) {
        CAPTURE(i);
        CHECK_CLOSE(params[i], fx.at(fmt::format("p{}_{}", i, t)), tol);
    }
}

// Runs all steps, checking the parameters after each one and the final state against torch.
inline void check_trajectory(const std::string& name, bool fused) {
    CAPTURE(name);
    CAPTURE(fused);
    Fixture fx = load_fixture(name);
    std::vector<Tensor> params = fixture_params(fx);
    auto opt = make_fixture_optimizer(fx, params, fused);
    for (int t = 0; t < fx.params.at("steps").get<int>(); ++t) {
        CAPTURE(t);
        set_fixture_grads(fx, params, t);
        opt->step();
        check_fixture_step(fx, params, t);
    }
    for (size_t i = 0; i < params.size(); ++i) {
        const optim::ParamState* st = opt->find_state(params[i]);
        for (const char* key : {"momentum_buffer", "exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"}) {
            std::string fx_key = fmt::format("{}{}", key, i);
            CAPTURE(fx_key);
            if (!fx.tensors.count(fx_key)) {
                CHECK((st == nullptr || !st->count(key)));
                continue;
            }
            REQUIRE(st != nullptr);
            REQUIRE(st->count(key) == 1);
            CHECK_CLOSE(st->at(key), fx.at(fx_key), tol_for(params[i].dtype()));
        }
    }
}

}  // namespace ampgrad::testing

// adam.hpp: Adam (and, with decoupled weight decay, AdamW), exactly PyTorch's torch.optim.Adam.
// Per parameter, with t its own step count (1 on its first step):
//
//   g = grad (+ weight_decay * p, Adam's L2)     or   p *= 1 - lr * weight_decay   (AdamW)
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g^2            (amsgrad: v_max = max(v_max, v), used below)
//   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
//
// Parameters must be f32 or f64: f16/bf16 models keep fp32 master weights (amp::MasterWeightsOptimizer).
//   optim::Adam opt(model->parameters(), optim::AdamOptions(1e-3).betas({0.9, 0.95}));
#pragma once
#include <tuple>

#include "optim/optimizer.hpp"

namespace ampgrad::optim {

struct AdamOptions {
    AdamOptions(double lr = 1e-3) : lr_(lr) {}   // NOLINT: AdamOptions(3e-4) reads like libtorch
    AdamOptions& lr(double v) { lr_ = v; return *this; }
    AdamOptions& betas(std::tuple<double, double> v) { std::tie(beta1_, beta2_) = v; return *this; }
    AdamOptions& eps(double v) { eps_ = v; return *this; }
    AdamOptions& weight_decay(double v) { weight_decay_ = v; return *this; }
    AdamOptions& amsgrad(bool v) { amsgrad_ = v; return *this; }
    AdamOptions& maximize(bool v) { maximize_ = v; return *this; }
    AdamOptions& decoupled_weight_decay(bool v) { decoupled_weight_decay_ = v; return *this; }   // AdamW
    AdamOptions& fused(bool v) { fused_ = v; return *this; }   // one-pass CPU loop where possible
    double lr() const { return lr_; }
    std::tuple<double, double> betas() const { return {beta1_, beta2_}; }
    double eps() const { return eps_; }
    double weight_decay() const { return weight_decay_; }
    bool amsgrad() const { return amsgrad_; }
    bool maximize() const { return maximize_; }
    bool decoupled_weight_decay() const { return decoupled_weight_decay_; }
    bool fused() const { return fused_; }
    // The group options: "lr", "beta1", "beta2", "eps", "weight_decay", "amsgrad", "maximize",
    // "decoupled_weight_decay", "fused" (booleans as 0/1).
    std::map<std::string, double> to_map() const;

private:
    double lr_, beta1_ = 0.9, beta2_ = 0.999, eps_ = 1e-8, weight_decay_ = 0.0;
    bool amsgrad_ = false, maximize_ = false, decoupled_weight_decay_ = false, fused_ = true;
};

class Adam : public Optimizer {
public:
    Adam(std::vector<Tensor> params, const AdamOptions& options = {});
    Adam(std::vector<ParamGroup> groups, const AdamOptions& defaults = {});
    using Optimizer::step;   // step(StepScaling): GradScaler's loss-scaled step (optimizer.hpp)
    void step() override;

protected:
    Adam(std::vector<ParamGroup> groups, const AdamOptions& defaults, std::string name);
    void validate_group(const ParamGroup& group) const override;

    // The fused kernel unscales by scaling.inv_scale and skips on found_inf by itself.
    bool has_scaled_step() const override { return true; }
    void step_scaled(const StepScaling& scaling) override;
};

}  // namespace ampgrad::optim

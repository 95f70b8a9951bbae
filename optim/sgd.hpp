// sgd.hpp: stochastic gradient descent with momentum, dampening, weight decay and Nesterov,
// exactly PyTorch's torch.optim.SGD:
//
//   g = grad (+ weight_decay * p)
//   buf = g on the first step, else momentum * buf + (1 - dampening) * g
//   g = nesterov ? g + momentum * buf : buf              (only when momentum != 0)
//   p -= lr * g
//
//   optim::SGD opt(model->parameters(), optim::SGDOptions(0.1).momentum(0.9).nesterov(true));
#pragma once
#include "optim/optimizer.hpp"

namespace ampgrad::optim {

struct SGDOptions {
    SGDOptions(double lr = 1e-3) : lr_(lr) {}   // NOLINT: SGDOptions(0.1) reads like libtorch
    SGDOptions& lr(double v) { lr_ = v; return *this; }
    SGDOptions& momentum(double v) { momentum_ = v; return *this; }
    SGDOptions& dampening(double v) { dampening_ = v; return *this; }
    SGDOptions& weight_decay(double v) { weight_decay_ = v; return *this; }
    SGDOptions& nesterov(bool v) { nesterov_ = v; return *this; }
    SGDOptions& maximize(bool v) { maximize_ = v; return *this; }
    SGDOptions& fused(bool v) { fused_ = v; return *this; }   // one-pass CPU loop where possible
    double lr() const { return lr_; }
    double momentum() const { return momentum_; }
    double dampening() const { return dampening_; }
    double weight_decay() const { return weight_decay_; }
    bool nesterov() const { return nesterov_; }
    bool maximize() const { return maximize_; }
    bool fused() const { return fused_; }
    // The group options: "lr", "momentum", "dampening", "weight_decay", "nesterov", "maximize", "fused".
    std::map<std::string, double> to_map() const;

private:
    double lr_, momentum_ = 0.0, dampening_ = 0.0, weight_decay_ = 0.0;
    bool nesterov_ = false, maximize_ = false, fused_ = true;
};

class SGD : public Optimizer {
public:
    SGD(std::vector<Tensor> params, const SGDOptions& options = {});
    SGD(std::vector<ParamGroup> groups, const SGDOptions& defaults = {});
    using Optimizer::step;   // step(StepScaling): GradScaler's loss-scaled step (optimizer.hpp)
    void step() override;

protected:
    void validate_group(const ParamGroup& group) const override;

    // The fused kernel unscales by scaling.inv_scale and skips on found_inf by itself.
    bool has_scaled_step() const override { return true; }
    void step_scaled(const StepScaling& scaling) override;
};

}  // namespace ampgrad::optim

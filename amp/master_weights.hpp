// master_weights.hpp: mixed precision style (b), Apex O2 / DeepSpeed FP16_Optimizer: the model's
// parameters are f16 (or bf16), and an optimizer wrapper keeps an f32 "master" copy of each one.
// The inner optimizer (SGD, Adam, ...) updates the masters; the model gets them back rounded.
//
//   model->to(kFloat16);
//   amp::MasterWeightsOptimizer opt(model->parameters(),
//       [](std::vector<optim::ParamGroup> g) { return std::make_unique<optim::AdamW>(g, optim::AdamWOptions(1e-3)); },
//       std::make_unique<amp::DynamicLossScaler>());
//   opt.zero_grad();
//   opt.backward(loss);                 // (loss * S).backward(): f16 grads, scaled
//   amp::StepResult r = opt.step();     // check, unscale by S, update S, step f32 masters, copy back
//
// step() unscales with the scale the backward used, *before* updating it: DeepSpeed unscales
// after update_scale, dividing by 2S right after a growth (docs/amp.md §7).
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "amp/grad_scaler.hpp"
#include "amp/loss_scaler.hpp"
#include "optim/optimizer.hpp"

namespace ampgrad::amp {

struct MasterWeightsOptions {
    double clip_grad = 0.0;      // > 0: clip the unscaled f32 gradients to this total L2 norm
};

// What state_dict() holds: the f32 masters (in parameter order), the inner optimizer's state
// (which refers to the masters), and the loss scaler's state. Enough to resume bit-exactly.
struct MasterWeightsStateDict {
    std::vector<Tensor> master_weights;
    optim::OptimizerStateDict optimizer;
    LossScalerStateDict loss_scaler;
    int64_t skipped_steps = 0;    // steps skipped for overflow so far (DeepSpeed saves it too)
};

class MasterWeightsOptimizer {
public:
    using InnerFactory = std::function<std::unique_ptr<optim::Optimizer>(std::vector<optim::ParamGroup>)>;

    // `groups` hold the model's (f16/bf16/f32) parameters and the group options; make_inner gets
    // the same groups with the f32 masters in place of the parameters.
    MasterWeightsOptimizer(std::vector<optim::ParamGroup> groups, const InnerFactory& make_inner,
                           std::unique_ptr<LossScaler> scaler, MasterWeightsOptions options = {});
    MasterWeightsOptimizer(std::vector<Tensor> params, const InnerFactory& make_inner,
                           std::unique_ptr<LossScaler> scaler, MasterWeightsOptions options = {});

    Tensor scale_loss(const Tensor& loss) const { return scaler_->scale_loss(loss); }
    void backward(const Tensor& loss, bool retain_graph = false) const;
    // Overflow check + unscale (one fused pass over f32 copies of the grads), host decision,
    // scale update, then either skip (grads dropped, parameters untouched) or clip, step, copy back.
    StepResult step();
    void zero_grad(bool set_to_none = true);

    double loss_scale() const { return scaler_->loss_scale(); }
    LossScaler& loss_scaler() { return *scaler_; }
    optim::Optimizer& inner() { return *inner_; }
    const std::vector<Tensor>& model_params() const { return model_params_; }
    const std::vector<Tensor>& master_params() const { return master_params_; }
    int64_t skipped_steps() const { return skipped_steps_; }

    MasterWeightsStateDict state_dict() const;
    // Copies the masters in (and rounds them into the model's parameters), then loads the inner
    // optimizer and the scaler.
    void load_state_dict(const MasterWeightsStateDict& state);

private:
    void copy_grads_to_masters();
    void copy_masters_to_model();

    std::vector<Tensor> model_params_;     // flat, in group order
    std::vector<Tensor> master_params_;    // f32 leaves, same order
    std::unique_ptr<optim::Optimizer> inner_;
    std::unique_ptr<LossScaler> scaler_;
    MasterWeightsOptions options_;
    int64_t skipped_steps_ = 0;
};

}  // namespace ampgrad::amp

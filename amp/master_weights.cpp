// master_weights.cpp: the f32-master-weights optimizer wrapper (Apex O2 / DeepSpeed FP16_Optimizer)
// with DeepSpeed's step order, except that gradients are unscaled by the scale the backward used.
#include "amp/master_weights.hpp"

#include <algorithm>

#include "autograd/grad_mode.hpp"
#include "autograd/ops/ops.hpp"
#include "kernels/kernels.hpp"
#include "core/error.hpp"
#include "core/profiler.hpp"
#include "nn/utils/clip_grad.hpp"

namespace ampgrad::amp {

namespace {

std::string param_label(const Tensor& p, size_t index) {
    std::string name = p.name();
    return name.empty() ? fmt::format("params[{}] {}", index, p.describe()) : name;
}

}  // namespace

MasterWeightsOptimizer::MasterWeightsOptimizer(std::vector<optim::ParamGroup> groups, const InnerFactory& make_inner,
                                               std::unique_ptr<LossScaler> scaler, MasterWeightsOptions options)
    : scaler_(std::move(scaler)), options_(options) {
    if (!scaler_) throw ValueError("MasterWeightsOptimizer: a loss scaler is required (StaticLossScaler(1) for none)");
    NoGradGuard no_grad;
    std::vector<optim::ParamGroup> master_groups = groups;
    for (size_t g = 0; g < groups.size(); ++g) {
        for (size_t i = 0; i < groups[g].params.size(); ++i) {
            const Tensor& p = groups[g].params[i];
            if (!is_floating(p.dtype()))
                throw DTypeError(fmt::format("MasterWeightsOptimizer: parameter {} is not floating",
                                             param_label(p, model_params_.size())));
            Tensor master = zeros(p.sizes(), TensorOptions(kFloat32).device(p.device()));   // same shape, f32
            master.copy_(p);
            master.requires_grad_(true);
            master.set_name(p.name());
            model_params_.push_back(p);
            master_params_.push_back(master);
            master_groups[g].params[i] = master;
        }
    }
    inner_ = make_inner(std::move(master_groups));
    if (!inner_) throw ValueError("MasterWeightsOptimizer: make_inner returned no optimizer");
}

MasterWeightsOptimizer::MasterWeightsOptimizer(std::vector<Tensor> params, const InnerFactory& make_inner,
                                               std::unique_ptr<LossScaler> scaler, MasterWeightsOptions options)
    : MasterWeightsOptimizer(optim::single_group(std::move(params)), make_inner, std::move(scaler), options) {}

void MasterWeightsOptimizer::backward(const Tensor& loss, bool retain_graph) const {
    scale_loss(loss).backward({}, retain_graph);
}

// master.grad = an f32 copy of the model's (scaled) grad; undefined where the model has none.
void MasterWeightsOptimizer::copy_grads_to_masters() {
    for (size_t i = 0; i < model_params_.size(); ++i) {
        const Tensor& g = model_params_[i].grad();
        if (!g.defined()) master_params_[i].set_grad(Tensor());
        else if (g.dtype() == kFloat32) master_params_[i].set_grad(g.clone());      // never alias the model's
        else master_params_[i].set_grad(to_dtype(g, kFloat32));                     // a fresh f32 tensor
    }
}

void MasterWeightsOptimizer::copy_masters_to_model() {
    for (size_t i = 0; i < model_params_.size(); ++i) model_params_[i].copy_(master_params_[i]);  // rounds to f16
}

StepResult MasterWeightsOptimizer::step() {
    profiler::Span span("amp", "MasterWeights.step");
    NoGradGuard no_grad;
    copy_grads_to_masters();
    // 1. One fused pass: found_inf |= !isfinite(g); g *= 1/S, with S the scale the backward used.
    const double backward_scale = scaler_->loss_scale();
    std::vector<std::pair<Device, std::vector<Tensor>>> by_device;
    for (const Tensor& m : master_params_) {
        if (!m.grad().defined()) continue;
        auto it = std::find_if(by_device.begin(), by_device.end(), [&](const auto& e) { return e.first == m.device(); });
        if (it == by_device.end()) it = by_device.insert(by_device.end(), {m.device(), {}});
        it->second.push_back(m.grad());
    }
    bool overflow = false;
    for (auto& [device, grads] : by_device) {
        Tensor found = zeros({}, TensorOptions(kFloat32).device(device));
        Tensor inv = full({}, static_cast<float>(1.0 / backward_scale), TensorOptions(kFloat32).device(device));
        kernels::non_finite_check_and_unscale(grads, found, inv);
        overflow = overflow || found.item<float>() != 0.0f;                     // HOST SYNC: decide
    }
    // 2. Overflow provenance (rare path), then the scale update (may throw LossScaleError at min_scale).
    std::string where;
    if (overflow) {
        if (std::optional<NonFiniteGrad> bad = first_nonfinite_grad(master_params_))
            where = fmt::format("first in {} ({} elements inf/NaN)", param_label(model_params_[bad->index], bad->index),
                                bad->count);
    }
    scaler_->update_scale(overflow);
    // 3. Overflow: drop every gradient; the parameters and the optimizer state stay bit-identical.
    if (overflow) {
        ++skipped_steps_;
        zero_grad(true);
        return StepResult::skipped_with(
            fmt::format("non-finite gradient: {} at scale {}; step skipped. {}", where, backward_scale,
                        scaler_->last_event()));
    }
    // 4. Clip the unscaled f32 gradients, step the masters, round them into the model.
    if (options_.clip_grad > 0.0) nn::utils::clip_grad_norm_(master_params_, options_.clip_grad);
    inner_->step();
    copy_masters_to_model();
    for (Tensor& m : master_params_) m.set_grad(Tensor());    // the f32 grads are not needed any more
    return {};
}

void MasterWeightsOptimizer::zero_grad(bool set_to_none) {
    for (Tensor& p : model_params_) {
        if (set_to_none || !p.grad().defined()) p.set_grad(Tensor());
        else p.mutable_grad().zero_();
    }
    for (Tensor& m : master_params_) m.set_grad(Tensor());
}

MasterWeightsStateDict MasterWeightsOptimizer::state_dict() const {
    return MasterWeightsStateDict{master_params_, inner_->state_dict(), scaler_->state_dict(), skipped_steps_};
}

void MasterWeightsOptimizer::load_state_dict(const MasterWeightsStateDict& state) {
    if (state.master_weights.size() != master_params_.size())
        throw ValueError(fmt::format("MasterWeightsOptimizer.load_state_dict: {} master weights given, {} expected",
                                     state.master_weights.size(), master_params_.size()));
    for (size_t i = 0; i < master_params_.size(); ++i)
        if (state.master_weights[i].sizes() != master_params_[i].sizes())
            throw ShapeError(fmt::format("MasterWeightsOptimizer.load_state_dict: master weight {} is {}, expected {}",
                                         i, state.master_weights[i].describe(), master_params_[i].describe()));
    NoGradGuard no_grad;
    for (size_t i = 0; i < master_params_.size(); ++i) master_params_[i].copy_(state.master_weights[i]);
    copy_masters_to_model();
    inner_->load_state_dict(state.optimizer);
    scaler_->load_state_dict(state.loss_scaler);
    skipped_steps_ = state.skipped_steps;
}

}  // namespace ampgrad::amp

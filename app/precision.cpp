// precision.cpp: the four `--prec` recipes (app/precision.hpp).
#include "app/precision.hpp"

#include "autograd/ops/ops.hpp"
#include "core/error.hpp"
#include "nn/utils/clip_grad.hpp"

namespace ampgrad::app {

namespace {

// The total L2 norm of the gradients as a double. The sum of squares is formed in f32 on the
// gradients' device (an f16 one would overflow), and the norm is read back once.
double grad_norm_f32(const std::vector<Tensor>& params) {
    std::vector<Tensor> grads;
    for (const Tensor& p : params)
        if (p.grad().defined()) grads.push_back(p.grad());
    return nn::utils::get_total_norm(grads, 2.0, /*error_if_nonfinite=*/false, kFloat32).item<double>();
}

}  // namespace

Precision::Precision(const RunConfig& cfg, nn::Module& model)
    : mode_(cfg.prec), device_(cfg.device == "cuda" ? kCUDA : kCPU), grad_clip_(cfg.grad_clip), grad_accum_(cfg.grad_accum),
      model_(model) {
    optim::AdamOptions options = optim::AdamWOptions(cfg.lr).betas({cfg.beta1, cfg.beta2}).weight_decay(cfg.weight_decay);
    // nanoGPT's grouping: decay on matrices and embeddings (dim >= 2), none on biases and norm gains.
    std::vector<std::pair<std::string, Tensor>> named_params;
    for (const auto& [name, p] : model.named_parameters()) named_params.emplace_back(name, p);
    optim::NamedParamGroups named = optim::weight_decay_groups(named_params, cfg.weight_decay);
    std::vector<optim::ParamGroup>& groups = named.groups;
    param_names_ = std::move(named.names);
    for (const optim::ParamGroup& g : groups) params_.insert(params_.end(), g.params.begin(), g.params.end());
    if (mode_ == "fp16-master") {
        model.to(kFloat16);
        amp::DynamicLossScalerOptions so;
        so.init_scale = cfg.init_scale;
        so.scale_window = cfg.scale_window;
        so.delayed_shift = cfg.hysteresis;
        so.raise_error_at_min_scale = true;
        auto make_inner = [options](std::vector<optim::ParamGroup> g) {
            return std::make_unique<optim::AdamW>(std::move(g), options);
        };
        master_ = std::make_unique<amp::MasterWeightsOptimizer>(groups, make_inner,
                                                                std::make_unique<amp::DynamicLossScaler>(so),
                                                                amp::MasterWeightsOptions{cfg.grad_clip});
        return;
    }
    adamw_ = std::make_unique<optim::AdamW>(groups, options);
    if (mode_ == "fp16") {
        amp::GradScalerOptions so;
        so.init_scale = cfg.init_scale;
        so.growth_interval = cfg.scale_window;
        scaler_ = std::make_unique<amp::GradScaler>(so);
    }
    if (mode_ == "fp8") fp8_ = std::make_unique<Fp8Run>(cfg, model);
}

std::unique_ptr<amp::AutocastGuard> Precision::autocast() const {
    if (mode_ == "fp32") return nullptr;
    if (fp8_) return fp8_->autocast();
    return std::make_unique<amp::AutocastGuard>(device_, mode_ == "bf16" ? kBFloat16 : kFloat16);
}

optim::Optimizer& Precision::optimizer() { return master_ ? master_->inner() : *adamw_; }
const optim::Optimizer& Precision::optimizer() const {
    return master_ ? const_cast<amp::MasterWeightsOptimizer&>(*master_).inner() : *adamw_;
}

void Precision::set_lr(double lr) {
    for (optim::ParamGroup& g : optimizer().param_groups()) g.set_lr(lr);
}

double Precision::loss_scale() const {
    if (master_) return master_->loss_scale();
    if (scaler_) return scaler_->get_scale();
    return 1.0;
}

void Precision::zero_grad() {
    step_scale_ = loss_scale();
    if (master_) master_->zero_grad();
    else adamw_->zero_grad();
}

void Precision::backward(const Tensor& micro_loss) {
    const Tensor loss = grad_accum_ == 1 ? micro_loss : micro_loss / static_cast<double>(grad_accum_);
    if (master_) master_->backward(loss);
    else if (scaler_) scaler_->scale(loss).backward();
    else loss.backward();
}

StepOutcome Precision::step() {
    StepOutcome out;
    out.scale = step_scale_;
    if (master_) {
        out.grad_norm = grad_norm_f32(params_) / out.scale;
        out.skipped = master_->step().skipped();
    } else if (scaler_) {
        scaler_->unscale_(*adamw_);
        out.grad_norm = grad_clip_ > 0 ? nn::utils::clip_grad_norm(params_, grad_clip_) : grad_norm_f32(params_);
        out.skipped = scaler_->step(*adamw_).skipped();
        scaler_->update();
    } else {
        out.grad_norm = grad_clip_ > 0 ? nn::utils::clip_grad_norm(params_, grad_clip_) : grad_norm_f32(params_);
        adamw_->step();
        if (fp8_) fp8_->update();   // the amaxes of this step -> the scales of the next
    }
    skipped_ += out.skipped;
    return out;
}

// ---- checkpoint state ----

nn::NamedTensors Precision::state_tensors() const {
    nn::NamedTensors out;
    const optim::OptimizerStateDict sd = optimizer().state_dict();
    for (const auto& [index, state] : sd.state)
        for (const auto& [key, t] : state) out.insert(key + "." + param_names_.at(static_cast<size_t>(index)), t);
    if (master_) {
        const std::vector<Tensor>& masters = master_->master_params();
        for (size_t i = 0; i < masters.size(); ++i) out.insert("master." + param_names_[i], masters[i].detach());
    }
    if (fp8_)
        for (const auto& [name, t] : fp8_->state_tensors()) out.insert(name, t);   // "fp8.<layer>.amax_history", ...
    return out;
}

nlohmann::json Precision::state_json() const {
    const optim::OptimizerStateDict sd = optimizer().state_dict();
    nlohmann::json j = {{"mode", mode_}, {"param_names", param_names_}, {"param_groups", sd.param_groups},
                        {"group_param_indices", sd.group_param_indices}, {"skipped_steps", skipped_}};
    if (scaler_) j["grad_scaler"] = scaler_->state_dict();
    if (master_) j["loss_scaler"] = master_->state_dict().loss_scaler;
    return j;
}

void Precision::load_state(const nn::NamedTensors& tensors, const nlohmann::json& state) {
    if (state.at("mode").get<std::string>() != mode_)
        throw ValueError(fmt::format("checkpoint: its precision is {}, not {}", state.at("mode").get<std::string>(), mode_));
    if (state.at("param_names").get<std::vector<std::string>>() != param_names_)
        throw ValueError("checkpoint: its optimiser holds other parameters than this model");
    optim::OptimizerStateDict sd;
    sd.param_groups = state.at("param_groups").get<std::vector<std::map<std::string, double>>>();
    sd.group_param_indices = state.at("group_param_indices").get<std::vector<std::vector<int64_t>>>();
    for (const auto& [name, t] : tensors) {
        if (name.rfind("master.", 0) == 0 || name.rfind("fp8.", 0) == 0) continue;
        const size_t dot = name.find('.');
        const std::string key = name.substr(0, dot), param = name.substr(dot + 1);
        auto it = std::find(param_names_.begin(), param_names_.end(), param);
        if (dot == std::string::npos || it == param_names_.end())
            throw ValueError(fmt::format("checkpoint: optimizer entry \"{}\" names no parameter of this model", name));
        sd.state[it - param_names_.begin()][key] = t;
    }
    skipped_ = state.at("skipped_steps").get<int64_t>();
    if (master_) {
        amp::MasterWeightsStateDict ms;
        for (const std::string& name : param_names_) ms.master_weights.push_back(tensors.at("master." + name));
        ms.optimizer = sd;
        ms.loss_scaler = state.at("loss_scaler").get<amp::LossScalerStateDict>();
        master_->load_state_dict(ms);
        return;
    }
    adamw_->load_state_dict(sd);
    if (fp8_) fp8_->load_state_tensors(tensors);
    if (scaler_) scaler_->load_state_dict(state.at("grad_scaler").get<amp::ScalerStateDict>());
}

}  // namespace ampgrad::app

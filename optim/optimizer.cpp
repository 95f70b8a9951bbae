// optimizer.cpp: the parts every optimizer shares: param groups with default options,
// zero_grad, the per-parameter state map, and state_dict()/load_state_dict() by flat index.
#include "optim/optimizer.hpp"

#include <set>

#include "autograd/grad_mode.hpp"
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"

namespace ampgrad::optim {

double ParamGroup::option(const std::string& key) const {
    auto it = options.find(key);
    if (it == options.end()) {
        std::string known;
        for (const auto& [k, v] : options) known += (known.empty() ? "" : ", ") + k;
        throw ValueError(fmt::format("optimizer: param group has no option \"{}\" (it has: {})", key, known));
    }
    return it->second;
}

std::vector<ParamGroup> single_group(std::vector<Tensor> params) {
    std::vector<ParamGroup> groups(1);
    groups[0].params = std::move(params);
    return groups;
}

bool gets_weight_decay(const Tensor& param) { return param.dim() >= 2; }

NamedParamGroups weight_decay_groups(const std::vector<std::pair<std::string, Tensor>>& named_params, double weight_decay) {
    NamedParamGroups out;
    out.groups.resize(2);
    std::vector<std::string> group_names[2];
    for (const auto& [name, p] : named_params) {
        if (!p.requires_grad()) continue;
        const int g = gets_weight_decay(p) ? 0 : 1;
        out.groups[g].params.push_back(p);
        group_names[g].push_back(name);
    }
    out.groups[0].options["weight_decay"] = weight_decay;
    out.groups[1].options["weight_decay"] = 0.0;
    out.names = std::move(group_names[0]);
    out.names.insert(out.names.end(), group_names[1].begin(), group_names[1].end());
    return out;
}

std::vector<ParamGroup> weight_decay_groups(const std::vector<Tensor>& params, double weight_decay) {
    std::vector<std::pair<std::string, Tensor>> unnamed;
    for (const Tensor& p : params) unnamed.emplace_back(std::string(), p);
    return weight_decay_groups(unnamed, weight_decay).groups;
}

Optimizer::Optimizer(std::vector<ParamGroup> groups) : Optimizer(std::move(groups), {}, "Optimizer") {}

Optimizer::Optimizer(std::vector<ParamGroup> groups, std::map<std::string, double> defaults, std::string name)
    : name_(std::move(name)), defaults_(std::move(defaults)) {
    bool any = false;
    for (const ParamGroup& g : groups) any = any || !g.params.empty();
    if (!any) throw ValueError(fmt::format("{}: optimizer got an empty parameter list", name_));
    for (ParamGroup& g : groups) add_param_group(std::move(g));
}

void Optimizer::add_param_group(ParamGroup group) {
    for (const auto& [key, value] : defaults_) group.options.try_emplace(key, value);
    std::set<const TensorImpl*> seen;
    for (const ParamGroup& g : groups_)
        for (const Tensor& p : g.params) seen.insert(p.impl());
    for (const Tensor& p : group.params) {
        if (!p.defined()) throw ValueError(fmt::format("{}: a parameter is an undefined tensor", name_));
        if (!p.is_leaf())
            throw ValueError(fmt::format("{}: can't optimize a non-leaf Tensor ({}); pass a leaf such as "
                                         "x.detach().requires_grad_()", name_, p.describe()));
        if (!seen.insert(p.impl()).second)
            throw ValueError(fmt::format("{}: some parameters appear in more than one parameter group (or twice in "
                                         "one): {} {}", name_, p.name().empty() ? "unnamed" : p.name(), p.describe()));
    }
    validate_group(group);
    groups_.push_back(std::move(group));
}

bool Optimizer::supports_amp_scaling() const {
    if (!has_scaled_step()) return false;
    for (const ParamGroup& group : groups_)
        if (group.options.count("fused") == 0 || group.option("fused") == 0) return false;
    return true;
}

void Optimizer::step(const StepScaling& scaling) {
    if (!has_scaled_step())
        throw AmpError(fmt::format("{}.step(StepScaling): this optimizer does not take a loss-scaled step "
                                   "(supports_amp_scaling() is false); unscale the gradients first, as "
                                   "GradScaler::step does for it", name_));
    if (!supports_amp_scaling())
        throw AmpError(fmt::format("{}.step(StepScaling): a group has fused=false; only the fused step reads "
                                   "loss-scaled gradients (GradScaler::step unscales for the others)", name_));
    step_scaled(scaling);
}

void Optimizer::step_scaled(const StepScaling&) {
    throw AmpError(fmt::format("{}: has_scaled_step() is true but step_scaled is not overridden", name_));
}

void Optimizer::zero_grad(bool set_to_none) {
    NoGradGuard no_grad;
    for (ParamGroup& g : groups_) {
        for (Tensor& p : g.params) {
            if (!p.grad().defined()) continue;
            if (set_to_none) {
                p.set_grad(Tensor());
            } else {
                Tensor& grad = p.mutable_grad();
                if (grad.grad_fn()) grad = grad.detach();   // drop history, as PyTorch does
                grad.zero_();
            }
        }
    }
}

void Optimizer::check_grad(const Tensor& param) const {
    const Tensor& grad = param.grad();
    if (grad.sizes() != param.sizes() || grad.device() != param.device())
        throw ShapeError(fmt::format("{}: the gradient of parameter {} does not match it: grad is {}, parameter is {}",
                                     name_, param.name().empty() ? "(unnamed)" : param.name(), grad.describe(),
                                     param.describe()));
}

ParamState& Optimizer::state(const Tensor& param) { return state_[param.impl()]; }

const ParamState* Optimizer::find_state(const Tensor& param) const {
    auto it = state_.find(param.impl());
    return it == state_.end() ? nullptr : &it->second;
}

OptimizerStateDict Optimizer::state_dict() const {
    OptimizerStateDict sd;
    int64_t index = 0;
    for (const ParamGroup& g : groups_) {
        std::vector<int64_t> indices;
        for (const Tensor& p : g.params) {
            if (const ParamState* s = find_state(p); s && !s->empty()) sd.state[index] = *s;
            indices.push_back(index++);
        }
        sd.param_groups.push_back(g.options);
        sd.group_param_indices.push_back(std::move(indices));
    }
    return sd;
}

namespace {

// A private copy of a saved state tensor, on the parameter's device and (floating state) dtype.
// "step" is kept as PyTorch keeps it (torch/optim/optimizer.py, _process_value_according_to_param_policy):
// a 0-dim f32 tensor on the CPU, or on the parameter's device when the group is fused, where the
// fused kernel reads and counts it.
Tensor load_state_value(const std::string& key, const Tensor& value, const Tensor& param, bool fused) {
    bool is_step = key == "step";
    DType dtype = is_step ? kFloat32 : (is_floating(value.dtype()) ? param.dtype() : value.dtype());
    Device device = is_step && !fused ? Device(kCPU) : param.device();
    Tensor copy = make_empty(value.sizes(), dtype, device);
    copy_(copy, value.detach());
    return copy;
}

}  // namespace

void Optimizer::load_state_dict(const OptimizerStateDict& sd) {
    if (sd.param_groups.size() != groups_.size() || sd.group_param_indices.size() != groups_.size())
        throw ValueError(fmt::format("{}: loaded state dict has a different number of parameter groups ({} vs {} in "
                                     "this optimizer)", name_, sd.param_groups.size(), groups_.size()));
    for (size_t i = 0; i < groups_.size(); ++i)
        if (sd.group_param_indices[i].size() != groups_[i].params.size())
            throw ValueError(fmt::format("{}: loaded state dict contains a parameter group that doesn't match the size "
                                         "of optimizer's group: group {} has {} parameters, saved {}", name_, i,
                                         groups_[i].params.size(), sd.group_param_indices[i].size()));
    NoGradGuard no_grad;
    std::map<const TensorImpl*, ParamState> loaded;
    for (size_t i = 0; i < groups_.size(); ++i) {
        for (size_t j = 0; j < groups_[i].params.size(); ++j) {
            const Tensor& p = groups_[i].params[j];
            auto it = sd.state.find(sd.group_param_indices[i][j]);
            if (it == sd.state.end()) continue;
            auto fused_option = sd.param_groups[i].find("fused");
            const bool fused = fused_option != sd.param_groups[i].end() && fused_option->second != 0;
            ParamState& s = loaded[p.impl()];
            for (const auto& [key, value] : it->second) {
                if (key != "step" && value.defined() && value.sizes() != p.sizes())
                    throw ShapeError(fmt::format("{}: state \"{}\" of parameter {} is {} but the parameter is {}", name_,
                                                 key, sd.group_param_indices[i][j], value.describe(), p.describe()));
                s[key] = value.defined() ? load_state_value(key, value, p, fused) : Tensor();
            }
        }
    }
    for (size_t i = 0; i < groups_.size(); ++i) groups_[i].options = sd.param_groups[i];
    state_ = std::move(loaded);
}

}  // namespace ampgrad::optim

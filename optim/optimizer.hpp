// optimizer.hpp: the base every optimizer derives from (libtorch-style param groups).
// A group holds its parameters and its hyper-parameters by name ("lr", "weight_decay", ...);
// per-parameter state (momentum buffers, Adam moments, "step") lives in the base, keyed by
// parameter, so state_dict()/load_state_dict() are written once, here.
// GradScaler and the master-weights wrapper (amp/) only rely on param_groups(), step(), zero_grad().
#pragma once
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/fused_kernels.hpp"
#include "core/tensor.hpp"

namespace ampgrad::optim {

struct ParamGroup {
    std::vector<Tensor> params;
    std::map<std::string, double> options;      // "lr", "momentum", "beta1", "beta2", "eps", "weight_decay", ...
    double option(const std::string& key) const;   // throws ValueError naming the key if missing
    double lr() const { return option("lr"); }
    void set_lr(double lr) { options["lr"] = lr; }
};

// One parameter's state by name: "momentum_buffer", "exp_avg", "exp_avg_sq", "max_exp_avg_sq",
// "step" (a 0-dim f32 tensor, as in PyTorch: on the CPU, or on the parameter's device where a fused
// kernel takes the step, as PyTorch's fused Adam keeps it).
using ParamState = std::map<std::string, Tensor>;

// Serializable optimizer state (PyTorch's optimizer.state_dict() shape): per-parameter state by
// flat parameter index, plus each group's options and the indices of its parameters.
// Indices count parameters across groups in order: group 0 holds 0..n0-1, group 1 n0..., etc.
struct OptimizerStateDict {
    std::map<int64_t, std::map<std::string, Tensor>> state;
    std::vector<std::map<std::string, double>> param_groups;
    std::vector<std::vector<int64_t>> group_param_indices;
};

class Optimizer {
public:
    explicit Optimizer(std::vector<ParamGroup> groups);
    // `defaults` fill every option a group does not set (PyTorch's `defaults`); `name` ("SGD",
    // "Adam", ...) starts every error message. Derived constructors then run validate_group on
    // each group (a virtual call from this constructor would not reach them).
    Optimizer(std::vector<ParamGroup> groups, std::map<std::string, double> defaults, std::string name);
    virtual ~Optimizer() = default;
    Optimizer(const Optimizer&) = delete;
    Optimizer& operator=(const Optimizer&) = delete;

    virtual void step() = 0;
    // A step on gradients still multiplied by the loss scale (kernels/fused_kernels.hpp, StepScaling):
    // each gradient is read as grad * inv_scale, and when found_inf is nonzero nothing changes.
    // GradScaler::step calls it, without unscaling first or reading found_inf, when
    // supports_amp_scaling() (PyTorch's _step_supports_amp_scaling, which its fused Adam and SGD
    // set): the optimizer has such a step (has_scaled_step()) and every group keeps "fused" on.
    // step(StepScaling) throws AmpError otherwise.
    bool supports_amp_scaling() const;
    void step(const StepScaling& scaling);
    // set_to_none=true drops .grad (the default, as in PyTorch 2.x); false zeroes it in place.
    void zero_grad(bool set_to_none = true);
    std::vector<ParamGroup>& param_groups() { return groups_; }
    const std::vector<ParamGroup>& param_groups() const { return groups_; }
    // Fills missing options from the defaults, validates them, and rejects a parameter that is
    // already in another group (ValueError).
    void add_param_group(ParamGroup group);
    const std::map<std::string, double>& defaults() const { return defaults_; }

    // The state of one parameter (empty until its first step with a gradient).
    ParamState& state(const Tensor& param);
    const ParamState* find_state(const Tensor& param) const;

    // state_dict() shares the live state tensors (as PyTorch does); load_state_dict() copies them,
    // cast to each parameter's dtype and device ("step" stays f32, on the CPU unless the saved group is
    // fused: then on the parameter's device), and takes the saved options.
    virtual OptimizerStateDict state_dict() const;
    virtual void load_state_dict(const OptimizerStateDict& sd);

protected:
    // An optimizer whose fused kernel reads a StepScaling (Adam, SGD) returns true and runs the step
    // in step_scaled; step() is then step_scaled(StepScaling{}).
    virtual bool has_scaled_step() const { return false; }
    virtual void step_scaled(const StepScaling& scaling);
    // Derived classes check a group's options here (called by add_param_group); throw ValueError.
    virtual void validate_group(const ParamGroup& group) const {}
    // ShapeError unless param's grad has param's shape and device (a hand-set grad may not).
    void check_grad(const Tensor& param) const;

    std::string name_ = "Optimizer";
    std::vector<ParamGroup> groups_;
    std::map<std::string, double> defaults_;
    std::map<const TensorImpl*, ParamState> state_;
};

// Wraps a flat parameter list as one group (what `SGD(model->parameters(), ...)` builds).
std::vector<ParamGroup> single_group(std::vector<Tensor> params);

// GPT-2's split (nanoGPT's configure_optimizers): group 0 holds every parameter with dim() >= 2
// (matmul weights, embeddings) with "weight_decay" = weight_decay; group 1 the rest (biases,
// LayerNorm gains) with "weight_decay" = 0. Parameters that do not require grad are left out.
std::vector<ParamGroup> weight_decay_groups(const std::vector<Tensor>& params, double weight_decay);
// That split's rule for one parameter: decayed when dim() >= 2 (also the ZeRO engine's, zero/engine.hpp).
bool gets_weight_decay(const Tensor& param);

// The same split of named parameters (a module's named_parameters()), with the names in the
// groups' order: group 0's, then group 1's (the order an optimizer's state is indexed in).
struct NamedParamGroups {
    std::vector<ParamGroup> groups;
    std::vector<std::string> names;
};
NamedParamGroups weight_decay_groups(const std::vector<std::pair<std::string, Tensor>>& named_params, double weight_decay);

}  // namespace ampgrad::optim

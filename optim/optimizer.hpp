// optimizer.hpp: the base every optimizer derives from (libtorch-style param groups).
// A group holds its parameters and its hyper-parameters by name ("lr", "weight_decay", ...);
// per-parameter state (momentum buffers, Adam moments) lives in the derived class.
// GradScaler and the master-weights wrapper (amp/) only rely on param_groups(), step(), zero_grad().
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.hpp"

namespace ampgrad::optim {

struct ParamGroup {
    std::vector<Tensor> params;
    std::map<std::string, double> options;      // "lr", "momentum", "beta1", "beta2", "eps", "weight_decay", ...
    double option(const std::string& key) const;   // throws ValueError naming the key if missing
    double lr() const { return option("lr"); }
};

// Serializable optimizer state (PyTorch's optimizer.state_dict() shape): per-parameter state by
// flat parameter index, plus each group's options and the indices of its parameters.
struct OptimizerStateDict {
    std::map<int64_t, std::map<std::string, Tensor>> state;
    std::vector<std::map<std::string, double>> param_groups;
    std::vector<std::vector<int64_t>> group_param_indices;
};

class Optimizer {
public:
    explicit Optimizer(std::vector<ParamGroup> groups);
    virtual ~Optimizer() = default;
    Optimizer(const Optimizer&) = delete;
    Optimizer& operator=(const Optimizer&) = delete;

    virtual void step() = 0;
    // set_to_none=true drops .grad (the default, as in PyTorch 2.x); false zeroes it in place.
    void zero_grad(bool set_to_none = true);
    std::vector<ParamGroup>& param_groups() { return groups_; }
    const std::vector<ParamGroup>& param_groups() const { return groups_; }
    void add_param_group(ParamGroup group);
    virtual OptimizerStateDict state_dict() const = 0;
    virtual void load_state_dict(const OptimizerStateDict& sd) = 0;

protected:
    std::vector<ParamGroup> groups_;
};

}  // namespace ampgrad::optim

// lr_scheduler.cpp: the scheduler base (counter, base lrs, state) and the three schedules'
// closed-form lr_at formulas.
#include "optim/lr_scheduler.hpp"

#include <cmath>
#include <numbers>

#include "core/error.hpp"

namespace ampgrad::optim {

LRScheduler::LRScheduler(Optimizer& optimizer, std::string name, std::map<std::string, double> options)
    : optimizer_(optimizer), name_(std::move(name)), options_(std::move(options)) {}

void LRScheduler::initialize() {
    base_lrs_.clear();
    for (const ParamGroup& g : optimizer_.param_groups()) base_lrs_.push_back(g.lr());
    last_epoch_ = 0;
    apply();
}

void LRScheduler::apply() {
    auto& groups = optimizer_.param_groups();
    if (groups.size() != base_lrs_.size())
        throw ValueError(fmt::format("{}: the optimizer has {} param groups but the scheduler was made for {}", name_,
                                     groups.size(), base_lrs_.size()));
    last_lrs_.clear();
    for (size_t i = 0; i < groups.size(); ++i) {
        double lr = lr_at(last_epoch_, base_lrs_[i]);
        groups[i].set_lr(lr);
        last_lrs_.push_back(lr);
    }
}

void LRScheduler::step() {
    ++last_epoch_;
    apply();
}

SchedulerStateDict LRScheduler::state_dict() const {
    return SchedulerStateDict{name_, last_epoch_, base_lrs_, last_lrs_, options_};
}

void LRScheduler::load_state_dict(const SchedulerStateDict& state) {
    if (state.name != name_)
        throw ValueError(fmt::format("{}: load_state_dict got the state of a {}", name_, state.name));
    if (state.options != options_) {
        std::vector<std::string> diff;
        for (const auto& [k, v] : options_) {
            auto it = state.options.find(k);
            diff.push_back(it == state.options.end() ? fmt::format("{}: missing (ours {})", k, v)
                                                     : fmt::format("{}: {} (ours {})", k, it->second, v));
        }
        throw ValueError(fmt::format("{}: load_state_dict got different options: {}", name_, fmt::join(diff, ", ")));
    }
    size_t groups = optimizer_.param_groups().size();
    if (state.base_lrs.size() != groups || state.last_lrs.size() != groups)
        throw ValueError(fmt::format("{}: load_state_dict got lrs for {} groups but the optimizer has {}", name_,
                                     state.base_lrs.size(), groups));
    if (state.last_epoch < 0)
        throw ValueError(fmt::format("{}: load_state_dict got last_epoch {} (must be >= 0)", name_, state.last_epoch));
    base_lrs_ = state.base_lrs;
    last_epoch_ = state.last_epoch;
    apply();
}

// ---- ConstantLR ----

ConstantLR::ConstantLR(Optimizer& optimizer, ConstantLROptions options)
    : LRScheduler(optimizer, "ConstantLR",
                  {{"factor", options.factor}, {"total_iters", static_cast<double>(options.total_iters)}}),
      o_(options) {
    if (!(o_.factor >= 0.0 && o_.factor <= 1.0))
        throw ValueError(fmt::format("ConstantLR: factor must be in [0, 1] but got {}", o_.factor));
    if (o_.total_iters < 0)
        throw ValueError(fmt::format("ConstantLR: total_iters must be >= 0 but got {}", o_.total_iters));
    initialize();
}

double ConstantLR::lr_at(int64_t step, double base_lr) const {
    return step < o_.total_iters ? base_lr * o_.factor : base_lr;
}

// ---- StepLR ----

StepLR::StepLR(Optimizer& optimizer, StepLROptions options)
    : LRScheduler(optimizer, "StepLR", {{"step_size", static_cast<double>(options.step_size)}, {"gamma", options.gamma}}),
      o_(options) {
    if (o_.step_size < 1) throw ValueError(fmt::format("StepLR: step_size must be >= 1 but got {}", o_.step_size));
    if (!(o_.gamma > 0.0)) throw ValueError(fmt::format("StepLR: gamma must be > 0 but got {}", o_.gamma));
    initialize();
}

double StepLR::lr_at(int64_t step, double base_lr) const {
    return base_lr * std::pow(o_.gamma, static_cast<double>(step / o_.step_size));
}

// ---- WarmupCosineLR ----

WarmupCosineLR::WarmupCosineLR(Optimizer& optimizer, WarmupCosineLROptions options)
    : LRScheduler(optimizer, "WarmupCosineLR",
                  {{"warmup_iters", static_cast<double>(options.warmup_iters)},
                   {"lr_decay_iters", static_cast<double>(options.lr_decay_iters)},
                   {"min_lr", options.min_lr}}),
      o_(options) {
    if (o_.warmup_iters < 0)
        throw ValueError(fmt::format("WarmupCosineLR: warmup_iters must be >= 0 but got {}", o_.warmup_iters));
    if (o_.lr_decay_iters <= o_.warmup_iters)
        throw ValueError(fmt::format("WarmupCosineLR: lr_decay_iters ({}) must be greater than warmup_iters ({})",
                                     o_.lr_decay_iters, o_.warmup_iters));
    if (!(o_.min_lr >= 0.0)) throw ValueError(fmt::format("WarmupCosineLR: min_lr must be >= 0 but got {}", o_.min_lr));
    initialize();
}

double WarmupCosineLR::lr_at(int64_t it, double base_lr) const {
    if (it < o_.warmup_iters)
        return base_lr * static_cast<double>(it + 1) / static_cast<double>(o_.warmup_iters + 1);
    if (it > o_.lr_decay_iters) return o_.min_lr;
    double ratio = static_cast<double>(it - o_.warmup_iters) / static_cast<double>(o_.lr_decay_iters - o_.warmup_iters);
    double coeff = 0.5 * (1.0 + std::cos(std::numbers::pi * ratio));
    return o_.min_lr + coeff * (base_lr - o_.min_lr);
}

}  // namespace ampgrad::optim

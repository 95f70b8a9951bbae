// lr_scheduler.hpp: learning-rate schedules stepped beside the optimizer, as PyTorch's
// torch.optim.lr_scheduler. A scheduler remembers each group's starting lr (base_lrs), and
// step() advances its counter and writes lr_at(counter, base_lr) into every group's "lr".
//
//   optim::AdamW opt(optim::weight_decay_groups(model->parameters(), 0.1), optim::AdamWOptions(6e-4));
//   optim::WarmupCosineLR sched(opt, {.warmup_iters = 100, .lr_decay_iters = 5000, .min_lr = 6e-5});
//   for (int it = 0; it < iters; ++it) {
//       loss.backward(); opt.step(); opt.zero_grad();
//       sched.step();                  // the lr for the next iteration
//   }
//
// Construction applies step 0 at once (the group lr becomes lr_at(0)), like PyTorch; so after n
// calls of step() the optimizer uses lr_at(n). Values are computed in closed form from the
// counter, so a resumed run (load_state_dict) reproduces them exactly.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "optim/optimizer.hpp"

namespace ampgrad::optim {

// A scheduler's resumable state: the counter, each group's base and last lr, and the schedule's
// own hyper-parameters by name (checked on load: a state from another schedule is rejected).
struct SchedulerStateDict {
    std::string name;
    int64_t last_epoch = 0;
    std::vector<double> base_lrs;
    std::vector<double> last_lrs;
    std::map<std::string, double> options;
};

class LRScheduler {
public:
    virtual ~LRScheduler() = default;
    LRScheduler(const LRScheduler&) = delete;
    LRScheduler& operator=(const LRScheduler&) = delete;

    void step();                                          // counter += 1, then set every group's lr
    const std::vector<double>& get_last_lr() const { return last_lrs_; }
    const std::vector<double>& base_lrs() const { return base_lrs_; }
    int64_t last_epoch() const { return last_epoch_; }
    // The lr this schedule gives a group with starting lr `base_lr` at step `step` (>= 0).
    virtual double lr_at(int64_t step, double base_lr) const = 0;

    SchedulerStateDict state_dict() const;
    // Restores the counter and lrs and writes last_lrs into the groups (ValueError if the state
    // is another schedule's, its options differ, or its group count differs from the optimizer's).
    void load_state_dict(const SchedulerStateDict& state);

protected:
    // `name` starts every error message. Derived constructors validate their options, then call
    // initialize() (a virtual call from here would not reach lr_at).
    LRScheduler(Optimizer& optimizer, std::string name, std::map<std::string, double> options);
    void initialize();                                    // records base_lrs and applies step 0

    Optimizer& optimizer_;
    std::string name_;
    std::map<std::string, double> options_;

private:
    void apply();
    int64_t last_epoch_ = 0;
    std::vector<double> base_lrs_;
    std::vector<double> last_lrs_;
};

// lr = base_lr * factor for the first total_iters steps, then base_lr (PyTorch's ConstantLR).
// The defaults keep the lr constant; PyTorch's own defaults are factor 1/3, total_iters 5.
struct ConstantLROptions {
    double factor = 1.0;
    int64_t total_iters = 0;
};
class ConstantLR : public LRScheduler {
public:
    explicit ConstantLR(Optimizer& optimizer, ConstantLROptions options = {});
    double lr_at(int64_t step, double base_lr) const override;

private:
    ConstantLROptions o_;
};

// lr = base_lr * gamma^(step / step_size) (integer division), PyTorch's StepLR.
struct StepLROptions {
    int64_t step_size = 1;
    double gamma = 0.1;
};
class StepLR : public LRScheduler {
public:
    StepLR(Optimizer& optimizer, StepLROptions options);
    StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1)   // libtorch's spelling
        : StepLR(optimizer, StepLROptions{step_size, gamma}) {}
    double lr_at(int64_t step, double base_lr) const override;

private:
    StepLROptions o_;
};

// Linear warm-up then cosine decay, nanoGPT's get_lr(it) with max lr = each group's base lr:
//   it <  warmup_iters:    base_lr * (it + 1) / (warmup_iters + 1)
//   it >  lr_decay_iters:  min_lr
//   otherwise:             min_lr + 0.5 * (1 + cos(pi * r)) * (base_lr - min_lr),
//                          r = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
// min_lr is absolute (nanoGPT uses base_lr / 10); with several groups it is the floor of each.
struct WarmupCosineLROptions {
    int64_t warmup_iters = 0;
    int64_t lr_decay_iters = 1;
    double min_lr = 0.0;
};
class WarmupCosineLR : public LRScheduler {
public:
    WarmupCosineLR(Optimizer& optimizer, WarmupCosineLROptions options);
    double lr_at(int64_t step, double base_lr) const override;

private:
    WarmupCosineLROptions o_;
};

}  // namespace ampgrad::optim

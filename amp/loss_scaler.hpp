// loss_scaler.hpp: DeepSpeed's loss scalers (deepspeed/runtime/fp16/loss_scaler.py; docs/amp.md §6), used by the master-weights
// optimizer (master_weights.hpp) and later by ZeRO. Unlike GradScaler, the state is a few host
// numbers: DeepSpeed decides on the host anyway, once per optimizer step.
//   DynamicLossScaler: halve on overflow (after `delayed_shift` overflows: hysteresis), double after
//       `scale_window` clean steps, never below min_scale; at the minimum, LossScaleError.
//   StaticLossScaler: a fixed scale (DeepSpeed's LossScaler; fp16.loss_scale > 0).
//
//   amp::DynamicLossScaler scaler;                  // 2^16, window 1000, hysteresis 2, min 1
//   scaler.scale_loss(loss).backward();
//   bool overflow = amp::grads_have_overflow(params);
//   scaler.update_scale(overflow);                  // then skip the step if overflow
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.hpp"

namespace ampgrad::amp {

using LossScalerStateDict = std::map<std::string, double>;

class LossScaler {
public:
    virtual ~LossScaler() = default;
    virtual double loss_scale() const = 0;
    virtual bool dynamic() const = 0;
    // Called once per optimizer step (the gradient-accumulation boundary) with the overflow verdict.
    virtual void update_scale(bool overflow) = 0;
    virtual LossScalerStateDict state_dict() const = 0;
    virtual void load_state_dict(const LossScalerStateDict& state) = 0;

    // loss * loss_scale(); an f16/bf16 loss is multiplied in f32 and rounded once.
    Tensor scale_loss(const Tensor& loss) const;
    // DeepSpeed's log line for the last update ("[deepspeed] OVERFLOW! ..."), empty if none.
    const std::string& last_event() const { return last_event_; }

protected:
    std::string last_event_;
};

class StaticLossScaler : public LossScaler {
public:
    explicit StaticLossScaler(double scale = 1.0);
    double loss_scale() const override { return scale_; }
    bool dynamic() const override { return false; }
    void update_scale(bool overflow) override;          // the scale never changes
    LossScalerStateDict state_dict() const override { return {{"cur_scale", scale_}}; }
    void load_state_dict(const LossScalerStateDict& state) override;

private:
    double scale_;
};

// DeepSpeed's fp16 config defaults (the Python class itself defaults to 2^32 and delayed_shift 1).
struct DynamicLossScalerOptions {
    double init_scale = 65536.0;           // 2^initial_scale_power, power 16
    double scale_factor = 2.0;
    int64_t scale_window = 1000;           // loss_scale_window
    double min_scale = 1.0;                // min_loss_scale
    int64_t delayed_shift = 2;             // hysteresis: overflows tolerated before the scale drops
    bool consecutive_hysteresis = false;   // refill the hysteresis on every clean step
    bool raise_error_at_min_scale = true;  // LossScaleError on an overflow at min_scale
};

class DynamicLossScaler : public LossScaler {
public:
    explicit DynamicLossScaler(DynamicLossScalerOptions options = {});
    double loss_scale() const override { return cur_scale_; }
    bool dynamic() const override { return true; }
    void update_scale(bool overflow) override;
    // Keys: cur_scale, cur_iter, last_overflow_iter, cur_hysteresis, plus the options
    // (scale_factor, scale_window, min_scale, delayed_shift, consecutive_hysteresis).
    LossScalerStateDict state_dict() const override;
    void load_state_dict(const LossScalerStateDict& state) override;

    double cur_scale() const { return cur_scale_; }   // DeepSpeed's name for loss_scale()
    int64_t cur_iter() const { return cur_iter_; }
    int64_t last_overflow_iter() const { return last_overflow_iter_; }
    int64_t cur_hysteresis() const { return cur_hysteresis_; }
    const DynamicLossScalerOptions& options() const { return options_; }

private:
    DynamicLossScalerOptions options_;
    double cur_scale_;
    int64_t cur_iter_ = 0;
    int64_t last_overflow_iter_ = -1;
    int64_t cur_hysteresis_;
};

// True if any parameter's gradient holds an inf or NaN: one fused pass per device (the unscale
// kernel with inv_scale 1), then one host read per device to decide.
bool grads_have_overflow(const std::vector<Tensor>& params);

// Overflow provenance: the first of `params` (in order) whose gradient has an inf or NaN, and how
// many such elements it has. One host read per parameter, so call it only after an overflow.
struct NonFiniteGrad {
    size_t index = 0;
    int64_t count = 0;
};
std::optional<NonFiniteGrad> first_nonfinite_grad(const std::vector<Tensor>& params);

}  // namespace ampgrad::amp

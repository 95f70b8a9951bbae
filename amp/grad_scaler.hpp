// grad_scaler.hpp: dynamic loss scaling for autocast training with f32 parameters, exactly
// PyTorch's torch.amp.GradScaler (torch/amp/grad_scaler.py; docs/amp.md §4), plus these fixes:
//  - step() says whether it skipped and why (the first parameter with a non-finite gradient);
//  - optional min_scale / max_scale;
//  - growth uses `tracker >= interval`, so lowering the interval cannot freeze the scale;
//  - a missing update() is named in the error it causes.
// The scale, growth tracker and found_inf flags are tensors on the gradients' device. With a fused
// optimizer (Adam, SGD), which skips in its kernel, an iteration on a GPU reads nothing on the host:
// the StepResult reads found_inf when it is asked. Other host reads: step() with an unfused
// optimizer (to decide), get_scale() and state_dict(). docs/amp.md explains each.
//
//   amp::GradScaler scaler;                                  // init 65536, x2 every 2000 clean steps
//   for (...) {
//       optimizer.zero_grad();
//       { amp::AutocastGuard autocast(kCPU, kFloat16); loss = model(x) ...; }
//       scaler.scale(loss).backward();                       // grads are scaled by S
//       amp::StepResult r = scaler.step(optimizer);          // unscale, check, step or skip
//       scaler.update();                                     // S /= 2 on inf, S *= 2 after 2000 clean
//   }
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "amp/step_result.hpp"
#include "core/tensor.hpp"
#include "optim/optimizer.hpp"

namespace ampgrad::amp {

struct GradScalerOptions {
    double init_scale = 65536.0;         // 2^16
    double growth_factor = 2.0;          // must be > 1
    double backoff_factor = 0.5;         // must be < 1
    int64_t growth_interval = 2000;      // clean steps between growths
    bool enabled = true;                 // false: scale/unscale_/update do nothing, step() just steps
    // ampgrad additions (not in PyTorch): the scale never leaves [min_scale, max_scale].
    double min_scale = 0.0;
    double max_scale = std::numeric_limits<double>::infinity();
    // ampgrad addition: whether step() may return before the host knows if the step was skipped
    // (amp/step_result.hpp). Only fused optimizers, which skip in their kernel, can be deferred.
    // Unset: deferred when the scale lives off the CPU, where reading it would stall the host.
    std::optional<bool> defer_step_result;
};

// The same keys as PyTorch: scale, growth_factor, backoff_factor, growth_interval, _growth_tracker.
// Empty for a disabled scaler.
using ScalerStateDict = std::map<std::string, double>;

class GradScaler {
public:
    explicit GradScaler(GradScalerOptions options = {});

    // outputs * scale (the scale is created on the first call, on the output's device). f16/bf16
    // outputs are multiplied in f32 and rounded once, so the scale itself is never rounded to f16.
    Tensor scale(const Tensor& outputs);
    tensor_list scale(const tensor_list& outputs);
    // Divides the optimizer's gradients by the scale in place and records whether any is non-finite.
    void unscale_(optim::Optimizer& optimizer);
    // Unscales if unscale_() was not called, then steps the optimizer unless a gradient is
    // non-finite. An unfused optimizer needs found_inf on the host to decide (one sync); a fused one
    // skips in its kernel, and the result may be deferred (GradScalerOptions::defer_step_result).
    StepResult step(optim::Optimizer& optimizer);
    // Updates the scale from every optimizer's found_inf (on the device), or sets it.
    void update(std::optional<double> new_scale = std::nullopt);
    void update(const Tensor& new_scale);               // 1-element, no grad

    double get_scale() const;            // host read; init_scale before the first scale(), 1 when disabled
    const Tensor& scale_tensor() const { return scale_; }   // 0-dim f32; undefined before scale()
    int64_t get_growth_tracker() const;  // host read
    double get_growth_factor() const { return options_.growth_factor; }
    void set_growth_factor(double v) { options_.growth_factor = v; }
    double get_backoff_factor() const { return options_.backoff_factor; }
    void set_backoff_factor(double v) { options_.backoff_factor = v; }
    int64_t get_growth_interval() const { return options_.growth_interval; }
    void set_growth_interval(int64_t v) { options_.growth_interval = v; }
    bool is_enabled() const { return options_.enabled; }

    int64_t iteration() const { return iteration_; }                 // update() calls so far
    // These read every deferred step result first (HOST SYNC when any is still unread).
    int64_t consecutive_skips() const;                    // finished iterations in a row with a skip
    const std::vector<OverflowRecord>& overflow_history() const;
    int64_t unread_step_results() const;                  // deferred results not read yet

    ScalerStateDict state_dict() const;
    void load_state_dict(const ScalerStateDict& state);

private:
    enum class Stage { kReady, kUnscaled, kStepped };
    struct OptimizerState {
        Stage stage = Stage::kReady;
        std::vector<std::pair<Device, Tensor>> found_inf;   // one 0-dim f32 flag per device
        int64_t scale_calls = 0;        // scale_calls_ when this optimizer left kReady
    };

    double initial_scale() const;
    void require_scale(const char* call) const;
    OptimizerState& state_of(const optim::Optimizer& optimizer);
    void check_not_unscaled_twice(const OptimizerState& st) const;
    // Fills st.found_inf, one flag per device; check_only leaves the gradients as they are.
    void unscale_grads(optim::Optimizer& optimizer, OptimizerState& st, bool check_only = false);
    StepResult step_in_kernel(optim::Optimizer& optimizer, OptimizerState& st);
    std::shared_ptr<detail::StepOutcome> new_outcome(const optim::Optimizer& optimizer, const Tensor& found_inf);
    Tensor summed_found_inf(const OptimizerState& st) const;
    void finish_iteration();
    void count_finished_iterations(bool read_device) const;

    GradScalerOptions options_;
    Tensor scale_;                      // 0-dim f32
    Tensor growth_tracker_;             // 0-dim i32
    int64_t init_growth_tracker_ = 0;   // what the tracker starts at (set by load_state_dict)
    std::map<const optim::Optimizer*, OptimizerState> per_optimizer_;
    int64_t scale_calls_ = 0;
    int64_t iteration_ = 0;
    // Step outcomes of the current iteration; finished iterations wait in unaccounted_ until every
    // outcome is known, then count into consecutive_skips_ and overflows_, in order.
    std::vector<std::shared_ptr<detail::StepOutcome>> this_iteration_;
    mutable std::deque<std::vector<std::shared_ptr<detail::StepOutcome>>> unaccounted_;
    mutable int64_t consecutive_skips_ = 0;
    mutable std::vector<OverflowRecord> overflows_;
};

}  // namespace ampgrad::amp

// grad_scaler.hpp: dynamic loss scaling for autocast training with f32 parameters, exactly
// PyTorch's torch.amp.GradScaler (torch/amp/grad_scaler.py; docs/amp.md §4), plus these fixes:
//  - step() says whether it skipped and why (the first parameter with a non-finite gradient);
//  - optional min_scale / max_scale;
//  - growth uses `tracker >= interval`, so lowering the interval cannot freeze the scale;
//  - a missing update() is named in the error it causes.
// The scale, growth tracker and found_inf flags are tensors on the gradients' device; the only host
// reads are in step() (to decide), get_scale() and state_dict(). docs/amp.md explains each.
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
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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
};

// What step() did. PyTorch returns None on a skip, so users compare scales to find out.
struct StepResult {
    bool skipped = false;                // the step changed nothing (not called, or its kernel skipped)
    bool found_inf = false;              // some gradient held an inf or NaN
    std::string reason;                  // empty when it stepped; else names the first bad parameter
};

// Overflow provenance: where the first non-finite gradient was on a skipped step.
struct OverflowRecord {
    int64_t iteration = 0;               // the scaler's iteration (update() calls before it)
    std::string param;                   // the parameter's name (Tensor::name()) or its group position
    int64_t nonfinite_count = 0;         // how many elements of its gradient were inf/NaN
    double scale = 0.0;                  // the scale the backward used
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
    // non-finite. Reads found_inf on the host: the one sync an iteration needs.
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
    int64_t consecutive_skips() const { return consecutive_skips_; } // iterations in a row with a skip
    const std::vector<OverflowRecord>& overflow_history() const { return overflows_; }

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
    StepResult skipped_step(const optim::Optimizer& optimizer);
    OverflowRecord find_first_overflow(const optim::Optimizer& optimizer) const;

    GradScalerOptions options_;
    Tensor scale_;                      // 0-dim f32
    Tensor growth_tracker_;             // 0-dim i32
    int64_t init_growth_tracker_ = 0;   // what the tracker starts at (set by load_state_dict)
    std::map<const optim::Optimizer*, OptimizerState> per_optimizer_;
    int64_t scale_calls_ = 0;
    int64_t iteration_ = 0;
    int64_t consecutive_skips_ = 0;
    bool skipped_this_iteration_ = false;
    std::vector<OverflowRecord> overflows_;
};

}  // namespace ampgrad::amp

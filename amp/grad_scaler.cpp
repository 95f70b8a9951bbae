// grad_scaler.cpp: GradScaler's per-optimizer state machine (READY -> UNSCALED -> STEPPED, reset
// by update()), its errors, and its persistence. The arithmetic is in two backend kernels
// (cpu/amp.cpp, cuda/amp.cu); every host read is marked "HOST SYNC" (docs/amp.md lists them).
#include "amp/grad_scaler.hpp"

#include <algorithm>
#include <cmath>

#include "amp/loss_scaler.hpp"
#include "autograd/grad_mode.hpp"
#include "autograd/ops/ops.hpp"
#include "kernels/kernels.hpp"
#include "core/error.hpp"
#include "core/profiler.hpp"

namespace ampgrad::amp {

namespace {

constexpr const char* kNoScaleHint =
    "but _scale is None.  This may indicate your script did not use scaler.scale(loss or outputs) "
    "earlier in the iteration.";

// PyTorch's outputs * scale, with its type promotion against the () f32 scale: f32 outputs are
// multiplied directly; f16/bf16 ones with dims in f32, then rounded once to their dtype (so a scale
// of 65536, which f16 cannot hold, is never rounded to f16); a () f16/bf16 output (a loss summed in
// f16) meets the () scale as an equal and comes back f32, so 65536 * loss cannot overflow f16;
// f64 in f64.
Tensor scaled(const Tensor& out, const Tensor& scale) {
    if (out.dtype() == kFloat64) return out * to_dtype(scale, kFloat64);
    if (is_reduced_float(out.dtype())) {
        Tensor product = to_dtype(out, kFloat32) * scale;
        return out.dim() == 0 ? product : to_dtype(product, out.dtype());
    }
    return out * scale;
}

}  // namespace

GradScaler::GradScaler(GradScalerOptions options) : options_(options) {
    if (!options_.enabled) return;                      // PyTorch validates only enabled scalers
    if (!(options_.growth_factor > 1.0))
        throw ValueError(fmt::format("GradScaler: The growth factor must be > 1.0. (got {})", options_.growth_factor));
    if (!(options_.backoff_factor < 1.0))
        throw ValueError(fmt::format("GradScaler: The backoff factor must be < 1.0. (got {})", options_.backoff_factor));
    if (options_.growth_interval < 1)
        throw ValueError(fmt::format("GradScaler: growth_interval must be >= 1 (got {})", options_.growth_interval));
    if (!(options_.min_scale >= 0.0 && options_.min_scale <= options_.max_scale))
        throw ValueError(fmt::format("GradScaler: need 0 <= min_scale <= max_scale (got min_scale {}, max_scale {})",
                                     options_.min_scale, options_.max_scale));
}

// ---- scale ----

Tensor GradScaler::scale(const Tensor& outputs) {
    if (!options_.enabled) return outputs;
    if (!outputs.defined()) throw ValueError("GradScaler.scale: outputs must be a Tensor or an iterable of Tensors: got an undefined tensor");
    if (!scale_.defined()) {                            // lazily, on the first output's device
        scale_ = full({}, initial_scale(), TensorOptions(kFloat32).device(outputs.device()));
        growth_tracker_ = full({}, static_cast<double>(init_growth_tracker_), TensorOptions(kInt32).device(outputs.device()));
    }
    ++scale_calls_;
    Tensor s = outputs.device() == scale_.device() ? scale_ : to_device(scale_, outputs.device());
    return scaled(outputs, s);
}

tensor_list GradScaler::scale(const tensor_list& outputs) {
    tensor_list out;
    out.reserve(outputs.size());
    for (const Tensor& t : outputs) out.push_back(scale(t));
    return out;
}

// ---- the state machine ----

void GradScaler::require_scale(const char* call) const {
    if (!scale_.defined()) throw AmpError(fmt::format("GradScaler.{}: Attempted {} {}", call, call, kNoScaleHint));
}

GradScaler::OptimizerState& GradScaler::state_of(const optim::Optimizer& optimizer) {
    return per_optimizer_[&optimizer];                  // PyTorch: a defaultdict keyed by id(optimizer)
}

// unscale_ on an optimizer that already left READY. When scale() ran since then, the user is in a
// new iteration and forgot update(): say so instead of PyTorch's puzzling text.
void GradScaler::check_not_unscaled_twice(const OptimizerState& st) const {
    if (st.stage == Stage::kReady) return;
    if (scale_calls_ > st.scale_calls)
        throw AmpError(fmt::format(
            "GradScaler.unscale_: update() was not called after the last {}: this optimizer is still in "
            "iteration {} and scale() has been called since; call scaler.update() once at the end of every "
            "iteration, also when step() skipped",
            st.stage == Stage::kStepped ? "step()" : "unscale_()", iteration_));
    if (st.stage == Stage::kUnscaled)
        throw AmpError("GradScaler.unscale_: unscale_() has already been called on this optimizer since the last update().");
    throw AmpError("GradScaler.unscale_: unscale_() is being called after step().");
}

void GradScaler::unscale_(optim::Optimizer& optimizer) {
    if (!options_.enabled) return;
    profiler::Span span("amp", "GradScaler.unscale_");
    require_scale("unscale_");
    OptimizerState& st = state_of(optimizer);
    check_not_unscaled_twice(st);
    unscale_grads(optimizer, st);
    st.stage = Stage::kUnscaled;
    st.scale_calls = scale_calls_;
}

// Checks every gradient first (so a bad one changes nothing), then one fused kernel call per device.
void GradScaler::unscale_grads(optim::Optimizer& optimizer, OptimizerState& st, bool check_only) {
    std::vector<std::pair<Device, std::vector<Tensor>>> by_device;
    const auto& groups = optimizer.param_groups();
    for (size_t g = 0; g < groups.size(); ++g) {
        for (size_t i = 0; i < groups[g].params.size(); ++i) {
            const Tensor& p = groups[g].params[i];
            const Tensor& grad = p.grad();
            if (!grad.defined()) continue;
            if (grad.dtype() == kFloat16)
                throw AmpError(fmt::format(
                    "GradScaler.unscale_: Attempting to unscale FP16 gradients. {} has an f16 gradient {}; "
                    "keep parameters in f32 under autocast, or use amp::MasterWeightsOptimizer for f16 parameters",
                    detail::param_label(p, g, i), grad.describe()));
            auto it = std::find_if(by_device.begin(), by_device.end(),
                                   [&](const auto& e) { return e.first == grad.device(); });
            if (it == by_device.end()) it = by_device.insert(by_device.end(), {grad.device(), {}});
            it->second.push_back(grad);
        }
    }
    NoGradGuard no_grad;
    // inv = float32(1 / double(scale)), computed on the scale's device (no host read); 1 to check only
    Tensor inv_scale = check_only ? ones({}, TensorOptions(kFloat32).device(scale_.device()))
                                  : to_dtype(reciprocal(to_dtype(scale_, kFloat64)), kFloat32);   // ()
    st.found_inf.clear();
    for (auto& [device, grads] : by_device) {
        Tensor found = zeros({}, TensorOptions(kFloat32).device(device));
        Tensor inv = device == inv_scale.device() ? inv_scale : to_device(inv_scale, device);
        kernels::non_finite_check_and_unscale(grads, found, inv);
        if (!check_only)
            for (const Tensor& grad : grads) grad.bump_version();
        st.found_inf.emplace_back(device, found);
    }
}

StepResult GradScaler::step(optim::Optimizer& optimizer) {
    profiler::Span span("amp", "GradScaler.step");
    if (!options_.enabled) {
        optimizer.step();
        return {};
    }
    require_scale("step");
    OptimizerState& st = state_of(optimizer);
    if (st.stage == Stage::kStepped) {
        std::string hint = scale_calls_ > st.scale_calls
                               ? " It looks like update() was not called at the end of the last iteration: call "
                                 "scaler.update() after the scaler.step() calls of every iteration."
                               : "";
        throw AmpError("GradScaler.step: step() has already been called since the last update()." + hint);
    }
    if (optimizer.supports_amp_scaling()) return step_in_kernel(optimizer, st);
    if (st.stage == Stage::kReady) unscale_(optimizer);
    if (st.found_inf.empty())
        throw AmpError("GradScaler.step: No inf checks were recorded for this optimizer. (None of its parameters has a gradient.)");

    Tensor found_total = summed_found_inf(st);
    const bool found = found_total.item<float>() != 0.0f;                  // HOST SYNC: decide
    if (!found) optimizer.step();
    std::shared_ptr<detail::StepOutcome> outcome = new_outcome(optimizer, found_total);
    outcome->settle(found);
    st.stage = Stage::kStepped;
    st.scale_calls = scale_calls_;
    return StepResult(outcome);
}

// PyTorch's path for optimizers with _step_supports_amp_scaling (its fused Adam and SGD): the
// gradients are only checked (unless unscale_ ran), and the optimizer's kernel reads them as
// grad * (1/scale) and skips by itself on found_inf. The step is issued without waiting on the
// flag; the result reads it now (on the CPU, where that is free) or when asked (deferred).
StepResult GradScaler::step_in_kernel(optim::Optimizer& optimizer, OptimizerState& st) {
    const bool unscaled = st.stage == Stage::kUnscaled;
    if (st.stage == Stage::kReady) unscale_grads(optimizer, st, /*check_only=*/true);
    if (st.found_inf.empty())
        throw AmpError("GradScaler.step: No inf checks were recorded for this optimizer. (None of its parameters has a gradient.)");
    NoGradGuard no_grad;
    StepScaling scaling;
    scaling.found_inf = summed_found_inf(st);
    if (!unscaled) scaling.inv_scale = to_dtype(reciprocal(to_dtype(scale_, kFloat64)), kFloat32);   // ()
    optimizer.step(scaling);
    st.stage = Stage::kStepped;
    st.scale_calls = scale_calls_;
    std::shared_ptr<detail::StepOutcome> outcome = new_outcome(optimizer, scaling.found_inf);
    if (options_.defer_step_result.value_or(!scale_.device().is_cpu()))
        outcome->scale = scale_.clone();                 // update() changes scale_ in place before the read
    else
        outcome->resolve();
    return StepResult(outcome);
}

// The outcome of this step, unread: the flag and the scale stay on the device, and the
// parameters are kept (until update()) to locate an overflow if the result is read as a skip.
std::shared_ptr<detail::StepOutcome> GradScaler::new_outcome(const optim::Optimizer& optimizer, const Tensor& found_inf) {
    auto outcome = std::make_shared<detail::StepOutcome>();
    outcome->resolved = false;
    outcome->record.iteration = iteration_;
    outcome->found_inf = found_inf;
    outcome->scale = scale_;                             // a deferred outcome takes a copy (step_in_kernel)
    for (const auto& group : optimizer.param_groups()) outcome->param_groups.push_back(group.params);
    this_iteration_.push_back(outcome);
    return outcome;
}

// The sum of an optimizer's found_inf flags over its devices, on the scale's device (no host read).
Tensor GradScaler::summed_found_inf(const OptimizerState& st) const {
    Tensor total;
    for (const auto& [device, flag] : st.found_inf) {
        Tensor f = device == scale_.device() ? flag : to_device(flag, scale_.device());
        total = total.defined() ? total + f : f;
    }
    return total;
}

// ---- update ----

void GradScaler::update(std::optional<double> new_scale) {
    if (!options_.enabled) return;
    profiler::Span span("amp", "GradScaler.update");
    require_scale("update");
    NoGradGuard no_grad;
    if (new_scale) {
        scale_.fill_(*new_scale);
    } else {
        Tensor found_total;                              // the sum over optimizers and devices, on scale_'s device
        for (const auto& [opt, st] : per_optimizer_) {
            if (st.found_inf.empty()) continue;
            Tensor f = summed_found_inf(st);
            found_total = found_total.defined() ? found_total + f : f;
        }
        if (!found_total.defined()) throw AmpError("GradScaler.update: No inf checks were recorded prior to update.");
        kernels::update_scale(scale_, growth_tracker_, found_total, options_.growth_factor,
                              options_.backoff_factor, options_.growth_interval, options_.min_scale,
                              options_.max_scale);
        scale_.bump_version();
        growth_tracker_.bump_version();
    }
    finish_iteration();
}

void GradScaler::update(const Tensor& new_scale) {
    if (!options_.enabled) return;
    require_scale("update");
    if (new_scale.numel() != 1 || new_scale.requires_grad())
        throw ValueError(fmt::format("GradScaler.update: new_scale should be a 1-element tensor with requires_grad=False, got {}",
                                     new_scale.describe()));
    NoGradGuard no_grad;
    scale_.copy_(to_device(new_scale.reshape({}), scale_.device()));
    finish_iteration();
}

// Closes the iteration: its outcomes forget the gradients (which may change from here on) and
// queue for counting; the iterations whose outcomes are all known are counted now, with no read.
void GradScaler::finish_iteration() {
    for (const auto& outcome : this_iteration_) outcome->forget_gradients();
    unaccounted_.push_back(std::move(this_iteration_));
    this_iteration_.clear();
    count_finished_iterations(/*read_device=*/false);
    per_optimizer_.clear();
    ++iteration_;
}

// Folds finished iterations, oldest first, into consecutive_skips_ and overflows_. Without
// read_device it stops at the first iteration with an unread outcome.
void GradScaler::count_finished_iterations(bool read_device) const {
    while (!unaccounted_.empty()) {
        auto& outcomes = unaccounted_.front();
        bool known = std::all_of(outcomes.begin(), outcomes.end(), [](const auto& o) { return o->resolved; });
        if (!known && !read_device) return;
        bool skipped = false;
        for (const auto& outcome : outcomes) {
            outcome->resolve();                                                 // HOST SYNC if unread
            if (!outcome->skipped) continue;
            skipped = true;
            overflows_.push_back(outcome->record);
        }
        consecutive_skips_ = skipped ? consecutive_skips_ + 1 : 0;
        unaccounted_.pop_front();
    }
}

int64_t GradScaler::consecutive_skips() const {
    count_finished_iterations(/*read_device=*/true);
    return consecutive_skips_;
}

const std::vector<OverflowRecord>& GradScaler::overflow_history() const {
    count_finished_iterations(/*read_device=*/true);
    return overflows_;
}

int64_t GradScaler::unread_step_results() const {
    int64_t unread = 0;
    for (const auto& outcomes : unaccounted_)
        for (const auto& o : outcomes) unread += o->resolved ? 0 : 1;
    for (const auto& o : this_iteration_) unread += o->resolved ? 0 : 1;
    return unread;
}

// ---- queries and persistence ----

// What scale() will create: init_scale (set by the options or load_state_dict) within the bounds.
double GradScaler::initial_scale() const {
    return std::min(std::max(options_.init_scale, options_.min_scale), options_.max_scale);
}

// Before the first scale() the tensors do not exist yet: report what they will start at, so a
// state dict loaded before the first step comes back out of state_dict() unchanged.
double GradScaler::get_scale() const {
    if (!options_.enabled) return 1.0;
    return scale_.defined() ? scale_.item<float>() : initial_scale();               // HOST SYNC
}

int64_t GradScaler::get_growth_tracker() const {
    return growth_tracker_.defined() ? growth_tracker_.item<int64_t>() : init_growth_tracker_;   // HOST SYNC
}

ScalerStateDict GradScaler::state_dict() const {
    if (!options_.enabled) return {};
    return {{"scale", get_scale()},
            {"growth_factor", options_.growth_factor},
            {"backoff_factor", options_.backoff_factor},
            {"growth_interval", static_cast<double>(options_.growth_interval)},
            {"_growth_tracker", static_cast<double>(get_growth_tracker())}};
}

void GradScaler::load_state_dict(const ScalerStateDict& state) {
    if (!options_.enabled) return;
    if (state.empty())
        throw AmpError("GradScaler.load_state_dict: The source state dict is empty, possibly because it was saved "
                       "from a disabled instance of GradScaler.");
    auto at = [&](const char* key) {
        auto it = state.find(key);
        if (it == state.end()) throw ValueError(fmt::format("GradScaler.load_state_dict: missing key \"{}\"", key));
        return it->second;
    };
    // read every key before changing anything, so a bad dict leaves the scaler as it was
    double scale = at("scale"), growth = at("growth_factor"), backoff = at("backoff_factor");
    double interval = at("growth_interval"), tracker = at("_growth_tracker");
    options_.init_scale = scale;
    options_.growth_factor = growth;
    options_.backoff_factor = backoff;
    options_.growth_interval = static_cast<int64_t>(interval);
    NoGradGuard no_grad;
    if (scale_.defined()) scale_.fill_(options_.init_scale);
    init_growth_tracker_ = static_cast<int64_t>(tracker);
    if (growth_tracker_.defined()) growth_tracker_.fill_(tracker);
}

}  // namespace ampgrad::amp

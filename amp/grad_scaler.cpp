// grad_scaler.cpp: GradScaler's per-optimizer state machine (READY -> UNSCALED -> STEPPED, reset
// by update()), its errors, and its persistence. The arithmetic is in two backend kernels
// (cpu/amp.cpp, cuda/amp.cu); every host read is marked "HOST SYNC" (docs/amp.md lists them).
#include "amp/grad_scaler.hpp"

#include <algorithm>
#include <cmath>

#include "amp/loss_scaler.hpp"
#include "autograd/grad_mode.hpp"
#include "autograd/ops/ops.hpp"
#include "core/kernels.hpp"
#include "core/error.hpp"

namespace ampgrad::amp {

namespace {

constexpr const char* kNoScaleHint =
    "but _scale is None.  This may indicate your script did not use scaler.scale(loss or outputs) "
    "earlier in the iteration.";

// A parameter's name for messages: its Tensor::name() (set by nn::Module) or its group position.
std::string param_label(const Tensor& p, size_t group, size_t index) {
    std::string name = p.name();
    if (!name.empty()) return name;
    return fmt::format("param_groups[{}].params[{}] {}", group, index, p.describe());
}

// f32 outputs are multiplied directly; f16/bf16 in f32 then rounded once (so a scale of 65536,
// which f16 cannot hold, is never rounded to f16); f64 in f64.
Tensor scaled(const Tensor& out, const Tensor& scale) {
    if (out.dtype() == kFloat64) return out * to_dtype(scale, kFloat64);
    if (is_reduced_float(out.dtype())) return to_dtype(to_dtype(out, kFloat32) * scale, out.dtype());
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
    if (!outputs.defined()) throw ValueError("GradScaler.scale: outputs must be a Tensor or a list of Tensors: got an undefined tensor");
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
                    "GradScaler.unscale_: Attempting to unscale FP16 gradients: {} has an f16 gradient {}; "
                    "keep parameters in f32 under autocast, or use amp::MasterWeightsOptimizer for f16 parameters",
                    param_label(p, g, i), grad.describe()));
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
        throw AmpError("GradScaler.step: No inf checks were recorded for this optimizer: none of its parameters has a gradient.");

    double found = 0.0;
    for (const auto& [device, flag] : st.found_inf) found += flag.item<float>();   // HOST SYNC: decide
    StepResult result;
    if (found == 0.0) optimizer.step();
    else result = skipped_step(optimizer);
    st.stage = Stage::kStepped;
    st.scale_calls = scale_calls_;
    return result;
}

// PyTorch's path for optimizers with _step_supports_amp_scaling (its fused Adam and SGD): the
// gradients are only checked (unless unscale_ ran), and the optimizer's kernel reads them as
// grad * (1/scale) and skips by itself on found_inf. The step is issued without waiting on the
// flag; the host reads it afterwards only to fill the StepResult.
StepResult GradScaler::step_in_kernel(optim::Optimizer& optimizer, OptimizerState& st) {
    const bool unscaled = st.stage == Stage::kUnscaled;
    if (st.stage == Stage::kReady) unscale_grads(optimizer, st, /*check_only=*/true);
    if (st.found_inf.empty())
        throw AmpError("GradScaler.step: No inf checks were recorded for this optimizer: none of its parameters has a gradient.");
    NoGradGuard no_grad;
    StepScaling scaling;
    for (const auto& [device, flag] : st.found_inf) {           // the sum, on the scale's device
        Tensor f = device == scale_.device() ? flag : to_device(flag, scale_.device());
        scaling.found_inf = scaling.found_inf.defined() ? scaling.found_inf + f : f;
    }
    if (!unscaled) scaling.inv_scale = to_dtype(reciprocal(to_dtype(scale_, kFloat64)), kFloat32);   // ()
    optimizer.step(scaling);
    st.stage = Stage::kStepped;
    st.scale_calls = scale_calls_;
    if (scaling.found_inf.item<float>() == 0.0f) return {};   // read after the step was issued
    return skipped_step(optimizer);
}

// Records where the first overflow was and says why the step was skipped.
StepResult GradScaler::skipped_step(const optim::Optimizer& optimizer) {
    OverflowRecord rec = find_first_overflow(optimizer);
    overflows_.push_back(rec);
    skipped_this_iteration_ = true;
    return StepResult{true, true,
                      fmt::format("non-finite gradient: first in {} ({} element{} inf/NaN) at iteration {}, "
                                  "scale {}; step skipped, the scale will back off in update()",
                                  rec.param, rec.nonfinite_count, rec.nonfinite_count == 1 ? "" : "s",
                                  rec.iteration, rec.scale)};
}

// Only on a skipped step (rare), so the per-parameter host reads cost nothing in the common case.
OverflowRecord GradScaler::find_first_overflow(const optim::Optimizer& optimizer) const {
    std::vector<Tensor> params;
    std::vector<std::string> labels;
    const auto& groups = optimizer.param_groups();
    for (size_t g = 0; g < groups.size(); ++g)
        for (size_t i = 0; i < groups[g].params.size(); ++i) {
            params.push_back(groups[g].params[i]);
            labels.push_back(param_label(groups[g].params[i], g, i));
        }
    OverflowRecord rec{iteration_, "(unknown)", 0, get_scale()};
    if (std::optional<NonFiniteGrad> bad = first_nonfinite_grad(params)) {
        rec.param = labels[bad->index];
        rec.nonfinite_count = bad->count;
    }
    return rec;
}

// ---- update ----

void GradScaler::update(std::optional<double> new_scale) {
    if (!options_.enabled) return;
    require_scale("update");
    NoGradGuard no_grad;
    if (new_scale) {
        scale_.fill_(*new_scale);
    } else {
        Tensor found_total;                              // the sum over optimizers and devices, on scale_'s device
        for (const auto& [opt, st] : per_optimizer_)
            for (const auto& [device, flag] : st.found_inf) {
                Tensor f = device == scale_.device() ? flag : to_device(flag, scale_.device());
                found_total = found_total.defined() ? found_total + f : f;
            }
        if (!found_total.defined()) throw AmpError("GradScaler.update: No inf checks were recorded prior to update.");
        kernels::update_scale(scale_, growth_tracker_, found_total, options_.growth_factor,
                              options_.backoff_factor, options_.growth_interval, options_.min_scale,
                              options_.max_scale);
        scale_.bump_version();
        growth_tracker_.bump_version();
    }
    consecutive_skips_ = skipped_this_iteration_ ? consecutive_skips_ + 1 : 0;
    skipped_this_iteration_ = false;
    per_optimizer_.clear();
    ++iteration_;
}

void GradScaler::update(const Tensor& new_scale) {
    if (!options_.enabled) return;
    require_scale("update");
    if (new_scale.numel() != 1 || new_scale.requires_grad())
        throw ValueError(fmt::format("GradScaler.update: new_scale should be a 1-element tensor with requires_grad=False, got {}",
                                     new_scale.describe()));
    NoGradGuard no_grad;
    scale_.copy_(to_device(new_scale.reshape({}), scale_.device()));
    consecutive_skips_ = skipped_this_iteration_ ? consecutive_skips_ + 1 : 0;
    skipped_this_iteration_ = false;
    per_optimizer_.clear();
    ++iteration_;
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

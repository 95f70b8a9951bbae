// loss_scaler.cpp: DeepSpeed's StaticLossScaler/DynamicLossScaler update rules, line for line
// (deepspeed/runtime/fp16/loss_scaler.py; docs/amp.md §6), and the one-pass overflow check the master-weights optimizer uses.
#include "amp/loss_scaler.hpp"

#include <algorithm>

#include "autograd/grad_mode.hpp"
#include "autograd/ops/ops.hpp"
#include "kernels/kernels.hpp"
#include "core/error.hpp"

namespace ampgrad::amp {

namespace {

double state_at(const LossScalerStateDict& state, const char* key, const char* who) {
    auto it = state.find(key);
    if (it == state.end()) throw ValueError(fmt::format("{}.load_state_dict: missing key \"{}\"", who, key));
    return it->second;
}

}  // namespace

Tensor LossScaler::scale_loss(const Tensor& loss) const {
    double s = loss_scale();
    if (is_reduced_float(loss.dtype())) return to_dtype(to_dtype(loss, kFloat32) * s, loss.dtype());
    return loss * s;
}

// ---- static ----

StaticLossScaler::StaticLossScaler(double scale) : scale_(scale) {
    if (!(scale > 0.0)) throw ValueError(fmt::format("StaticLossScaler: scale must be > 0 (got {})", scale));
}

void StaticLossScaler::update_scale(bool overflow) {
    last_event_ = overflow ? fmt::format("Grad overflow: using static loss scale of {}; step skipped", scale_) : "";
}

void StaticLossScaler::load_state_dict(const LossScalerStateDict& state) {
    scale_ = state_at(state, "cur_scale", "StaticLossScaler");
}

// ---- dynamic ----

DynamicLossScaler::DynamicLossScaler(DynamicLossScalerOptions options)
    : options_(options), cur_scale_(options.init_scale), cur_hysteresis_(options.delayed_shift) {
    if (options_.scale_window <= 0)
        throw ValueError(fmt::format("DynamicLossScaler: scale_window must be > 0 (got {})", options_.scale_window));
    if (!(options_.min_scale > 0.0))
        throw ValueError(fmt::format("DynamicLossScaler: min_scale must be > 0 (got {})", options_.min_scale));
    if (!(options_.scale_factor > 1.0))
        throw ValueError(fmt::format("DynamicLossScaler: scale_factor must be > 1 (got {})", options_.scale_factor));
    if (options_.delayed_shift < 1)
        throw ValueError(fmt::format("DynamicLossScaler: delayed_shift must be >= 1 (got {})", options_.delayed_shift));
    if (!(options_.init_scale >= options_.min_scale))
        throw ValueError(fmt::format("DynamicLossScaler: init_scale {} is below min_scale {}", options_.init_scale,
                                     options_.min_scale));
}

// Overflow: drop the scale once the hysteresis is used up (else spend one unit of it);
// clean: grow after scale_window clean updates since the last overflow.
void DynamicLossScaler::update_scale(bool overflow) {
    last_event_.clear();
    if (overflow) {
        if (options_.delayed_shift == 1 || cur_hysteresis_ == 1) {
            if (cur_scale_ == options_.min_scale && options_.raise_error_at_min_scale)
                throw LossScaleError(fmt::format(
                    "DynamicLossScaler.update_scale: Current loss scale already at minimum - cannot decrease scale "
                    "anymore. Exiting run. (scale {}, min_scale {}, iteration {}; set raise_error_at_min_scale=false "
                    "to keep skipping steps instead)",
                    cur_scale_, options_.min_scale, cur_iter_));
            double next_scale = std::max(cur_scale_ / options_.scale_factor, options_.min_scale);
            last_event_ = fmt::format("[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {}, reducing to {}",
                                      static_cast<int64_t>(cur_scale_), static_cast<int64_t>(next_scale));
            cur_scale_ = next_scale;
        } else {
            last_event_ = fmt::format(
                "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {}, but hysteresis is {}. "
                "Reducing hysteresis to {}",
                static_cast<int64_t>(cur_scale_), cur_hysteresis_, cur_hysteresis_ - 1);
            cur_hysteresis_ -= 1;
        }
        last_overflow_iter_ = cur_iter_;
    } else {
        if (options_.consecutive_hysteresis) cur_hysteresis_ = options_.delayed_shift;
        int64_t stable_interval = cur_iter_ - last_overflow_iter_ - 1;
        if (stable_interval > 0 && stable_interval % options_.scale_window == 0) {
            if (!options_.consecutive_hysteresis) cur_hysteresis_ = options_.delayed_shift;
            cur_scale_ *= options_.scale_factor;
        }
    }
    cur_iter_ += 1;
}

LossScalerStateDict DynamicLossScaler::state_dict() const {
    return {{"cur_scale", cur_scale_},
            {"cur_iter", static_cast<double>(cur_iter_)},
            {"last_overflow_iter", static_cast<double>(last_overflow_iter_)},
            {"cur_hysteresis", static_cast<double>(cur_hysteresis_)},
            {"scale_factor", options_.scale_factor},
            {"scale_window", static_cast<double>(options_.scale_window)},
            {"min_scale", options_.min_scale},
            {"delayed_shift", static_cast<double>(options_.delayed_shift)},
            {"consecutive_hysteresis", options_.consecutive_hysteresis ? 1.0 : 0.0}};
}

void DynamicLossScaler::load_state_dict(const LossScalerStateDict& state) {
    const char* who = "DynamicLossScaler";
    cur_scale_ = state_at(state, "cur_scale", who);
    cur_iter_ = static_cast<int64_t>(state_at(state, "cur_iter", who));
    last_overflow_iter_ = static_cast<int64_t>(state_at(state, "last_overflow_iter", who));
    cur_hysteresis_ = static_cast<int64_t>(state_at(state, "cur_hysteresis", who));
    options_.scale_factor = state_at(state, "scale_factor", who);
    options_.scale_window = static_cast<int64_t>(state_at(state, "scale_window", who));
    options_.min_scale = state_at(state, "min_scale", who);
    options_.delayed_shift = static_cast<int64_t>(state_at(state, "delayed_shift", who));
    options_.consecutive_hysteresis = state_at(state, "consecutive_hysteresis", who) != 0.0;
}

// ---- overflow check ----

bool grads_have_overflow(const std::vector<Tensor>& params) {
    NoGradGuard no_grad;
    std::vector<std::pair<Device, std::vector<Tensor>>> by_device;
    for (const Tensor& p : params) {
        const Tensor& g = p.grad();
        if (!g.defined()) continue;
        auto it = std::find_if(by_device.begin(), by_device.end(), [&](const auto& e) { return e.first == g.device(); });
        if (it == by_device.end()) it = by_device.insert(by_device.end(), {g.device(), {}});
        it->second.push_back(g);
    }
    bool overflow = false;
    for (auto& [device, grads] : by_device) {
        Tensor found = zeros({}, TensorOptions(kFloat32).device(device));
        Tensor one = ones({}, TensorOptions(kFloat32).device(device));          // inv_scale 1: check only
        kernels::non_finite_check_and_unscale(grads, found, one);
        overflow = overflow || found.item<float>() != 0.0f;                     // HOST SYNC: decide
    }
    return overflow;
}

std::optional<NonFiniteGrad> first_nonfinite_grad(const std::vector<Tensor>& params) {
    NoGradGuard no_grad;
    for (size_t i = 0; i < params.size(); ++i) {
        const Tensor& g = params[i].grad();
        if (!g.defined()) continue;
        int64_t bad = sum(logical_not(isfinite(g))).item<int64_t>();           // HOST SYNC (overflow only)
        if (bad > 0) return NonFiniteGrad{i, bad};
    }
    return std::nullopt;
}

}  // namespace ampgrad::amp

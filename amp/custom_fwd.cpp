// custom_fwd.cpp: the custom_fwd / custom_bwd scopes for custom autograd Functions.
#include "amp/custom_fwd.hpp"

#include "autograd/ops/ops.hpp"
#include "core/error.hpp"

namespace ampgrad::amp {

CustomFwdScope::CustomFwdScope(DeviceType device, std::optional<DType> cast_inputs,
                               std::initializer_list<Tensor*> inputs) {
    state_.dtype = get_autocast_dtype(device);
    const bool autocast_on = is_autocast_enabled(device) && autocast_active();
    if (!cast_inputs) {
        state_.fwd_used_autocast = autocast_on;
        return;
    }
    state_.fwd_used_autocast = false;
    if (!autocast_on) return;                                    // outside autocast: nothing to do
    for (Tensor* t : inputs) {
        if (!t || !t->defined() || !is_floating(t->dtype()) || t->dtype() == kFloat64) continue;
        if (t->device().type != device) continue;
        *t = to_dtype(*t, *cast_inputs);
    }
    disable_.emplace(device, state_.dtype, /*enabled=*/false);
}

CustomFwdScope::CustomFwdScope(autograd::AutogradContext* ctx, DeviceType device, std::optional<DType> cast_inputs,
                               std::initializer_list<Tensor*> inputs)
    : CustomFwdScope(device, cast_inputs, inputs) {
    ctx->saved_data[kFwdUsedAutocastKey] = state_.fwd_used_autocast;
    ctx->saved_data[kAutocastDtypeKey] = static_cast<int64_t>(state_.dtype);
}

AutocastFwdState load_fwd_state(const autograd::AutogradContext* ctx) {
    auto used = ctx->saved_data.find(kFwdUsedAutocastKey);
    auto dtype = ctx->saved_data.find(kAutocastDtypeKey);
    if (used == ctx->saved_data.end() || dtype == ctx->saved_data.end())
        throw AmpError("custom_bwd: the forward did not record its autocast state: open an amp::CustomFwdScope(ctx, ...) "
                       "at the top of forward");
    return AutocastFwdState{used->second.toBool(), static_cast<DType>(dtype->second.toInt())};
}

CustomBwdScope::CustomBwdScope(DeviceType device, const AutocastFwdState& state)
    : previous_suspended_(detail::set_autocast_suspended(false)) {
    for (size_t t = 0; t < kNumDeviceTypes; ++t)      // the other device types stay off, as the engine had them
        if (static_cast<DeviceType>(t) != device)
            other_devices_[t].emplace(static_cast<DeviceType>(t), std::nullopt, /*enabled=*/false);
    device_.emplace(device, state.dtype, state.fwd_used_autocast);
}

CustomBwdScope::~CustomBwdScope() {
    device_.reset();
    for (auto it = other_devices_.rbegin(); it != other_devices_.rend(); ++it) it->reset();
    detail::set_autocast_suspended(previous_suspended_);
}

}  // namespace ampgrad::amp

// custom_fwd.hpp: torch.amp.custom_fwd / custom_bwd for custom autograd Functions
// (torch/amp/autocast_mode.py; docs/amp.md §2). A custom Function's forward runs under whatever autocast state the caller
// has, but its backward runs with autocast suspended (the engine does that); these two scopes make
// the backward see the forward's autocast state, and can cast the inputs for the forward.
//
//   struct MyFn : autograd::Function<MyFn> {
//       static tensor_list forward(AutogradContext* ctx, Tensor x, Tensor w) {
//           amp::CustomFwdScope fwd(ctx, kCPU, kFloat32, {&x, &w});  // cast_inputs=f32: x, w now f32,
//           ...                                                      // autocast off in this scope
//       }
//       static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
//           amp::CustomBwdScope bwd(ctx, kCPU);                      // the forward's autocast state
//           ...
//       }
//   };
#pragma once
#include <array>
#include <initializer_list>
#include <optional>

#include "amp/autocast.hpp"
#include "autograd/function.hpp"

namespace ampgrad::amp {

// What custom_fwd stores on the ctx (PyTorch: ctx._fwd_used_autocast, ctx._dtype).
struct AutocastFwdState {
    bool fwd_used_autocast = false;
    DType dtype = kBFloat16;
};
inline constexpr const char* kFwdUsedAutocastKey = "_fwd_used_autocast";
inline constexpr const char* kAutocastDtypeKey = "_dtype";

// custom_fwd(device_type, cast_inputs). Without cast_inputs: records whether autocast is on and runs
// the forward under the current state. With cast_inputs=T inside an enabled autocast region: casts
// the eligible inputs (floating, not f64, on `device`) to T in place and disables autocast for the
// scope (the forward then runs entirely in T); outside autocast it does nothing.
class CustomFwdScope {
public:
    CustomFwdScope(DeviceType device, std::optional<DType> cast_inputs = std::nullopt,
                   std::initializer_list<Tensor*> inputs = {});
    // The same, storing the state in ctx->saved_data["_fwd_used_autocast"] and ["_dtype"].
    CustomFwdScope(autograd::AutogradContext* ctx, DeviceType device, std::optional<DType> cast_inputs = std::nullopt,
                   std::initializer_list<Tensor*> inputs = {});
    const AutocastFwdState& state() const { return state_; }

private:
    AutocastFwdState state_;
    std::optional<AutocastGuard> disable_;
};

// Reads what a CustomFwdScope stored in ctx->saved_data (AmpError if the forward did not use one).
AutocastFwdState load_fwd_state(const autograd::AutogradContext* ctx);

// custom_bwd(device_type): runs the scope under autocast(device, enabled=fwd_used_autocast,
// dtype=the forward's dtype), although the engine suspends autocast during backward.
class CustomBwdScope {
public:
    CustomBwdScope(DeviceType device, const AutocastFwdState& state);
    CustomBwdScope(const autograd::AutogradContext* ctx, DeviceType device)
        : CustomBwdScope(device, load_fwd_state(ctx)) {}
    ~CustomBwdScope();
    CustomBwdScope(const CustomBwdScope&) = delete;
    CustomBwdScope& operator=(const CustomBwdScope&) = delete;

private:
    bool previous_suspended_;
    std::array<std::optional<AutocastGuard>, kNumDeviceTypes> other_devices_;   // off, as the engine had them
    std::optional<AutocastGuard> device_;
};

}  // namespace ampgrad::amp

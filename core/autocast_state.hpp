// autocast_state.hpp: the per-thread autocast state, below every layer that reads it. For each
// device type: enabled + the lower-precision dtype; plus the cast-cache flag, the nesting depth of
// autocast regions, and the "suspended" flag the engine sets for backward. The policy (which ops
// cast to what) and the cast cache are amp/'s: amp installs them here as hooks, so the op layer
// (AMPGRAD_AUTOCAST in autograd/ops/autocast_hook.hpp) and the engine never call upward.
#pragma once
#include <array>
#include <initializer_list>
#include <string_view>

#include "core/device.hpp"
#include "core/dtype.hpp"
#include "core/tensor.hpp"

namespace ampgrad {

// The autocast state of one device type.
struct AutocastState {
    bool enabled = false;
    DType dtype = kBFloat16;    // the lower-precision dtype
};
using AutocastStates = std::array<AutocastState, kNumDeviceTypes>;   // indexed by device_type_index

namespace autocast {

// The lower-precision dtype a device type uses when none is given (AMPGRAD_DEVICE_TYPES).
DType default_dtype(DeviceType device);

AutocastStates states();                 // this thread's, for every device type
AutocastState state(DeviceType device);
bool cache_enabled();
int nesting();                           // open StateGuards on this thread
// True when autocast is enabled for some device type on this thread and not suspended.
bool active();
// Backward never autocasts: the engine suspends it (SuspendGuard); custom_bwd and checkpoint's
// recompute lift the suspension. Returns the previous value.
bool set_suspended(bool suspended);

// RAII: set one device type's state and the cache flag for a scope. When the outermost guard
// exits, the exit hook runs (amp clears its cast cache there).
class StateGuard {
public:
    StateGuard(DeviceType device, AutocastState state, bool cache_enabled);
    ~StateGuard();
    StateGuard(const StateGuard&) = delete;
    StateGuard& operator=(const StateGuard&) = delete;

private:
    DeviceType device_;
    AutocastState previous_;
    bool previous_cache_enabled_;
};

class SuspendGuard {
public:
    SuspendGuard() : previous_(set_suspended(true)) {}
    ~SuspendGuard() { set_suspended(previous_); }
    SuspendGuard(const SuspendGuard&) = delete;
    SuspendGuard& operator=(const SuspendGuard&) = delete;

private:
    bool previous_;
};

// ---- hooks amp/ installs (amp/autocast.cpp) ----
// Casts an op's floating inputs in place per the policy for `op`.
using CastHook = void (*)(std::string_view op, std::initializer_list<Tensor*> args);
using ExitHook = void (*)();             // the outermost autocast region ended
void set_cast_hook(CastHook hook);
void set_exit_hook(ExitHook hook);
// Runs the cast hook (nothing when none is installed). Called through AMPGRAD_AUTOCAST.
void cast_inputs(std::string_view op, std::initializer_list<Tensor*> args);

}  // namespace autocast

}  // namespace ampgrad

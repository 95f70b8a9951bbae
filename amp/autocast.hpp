// autocast.hpp: automatic mixed precision for the forward pass (docs/amp.md §2).
// Inside an AutocastGuard, the ops in the policy table (autocast_policy.cpp) cast their floating
// inputs first: matmul/linear run in f16/bf16, exp/log/losses in f32, softmax/sum return f32.
// The state is per thread and per device type, and guards nest; it lives in core
// (core/autocast_state.hpp) so the op layer and the engine read it without calling up into amp/.
// This file installs the policy and the cast cache there as hooks. Backward never autocasts (the
// engine suspends it); custom_fwd/custom_bwd (custom_fwd.hpp) restore it for custom Functions.
//
//   {
//       amp::AutocastGuard autocast(kCPU);               // bf16 on the CPU (f16 on CUDA)
//       Tensor y = linear(x, w, b);                      // (B,N) bf16; w's bf16 cast is cached
//       loss = F::cross_entropy(y, targets);             // () f32
//   }                                                    // the cast cache is cleared here
//   loss.backward();                                     // w.grad() is f32, like w
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "amp/autocast_policy.hpp"
#include "autograd/ops/fp8_linear.hpp"
#include "core/autocast_state.hpp"
#include "core/tensor.hpp"

namespace ampgrad::amp {

struct Fp8Recipe;   // amp/fp8_recipe.hpp

// The dtype an AutocastGuard uses when none is given: bf16 on the CPU, f16 on CUDA.
DType default_autocast_dtype(DeviceType device);
bool is_autocast_enabled(DeviceType device);
DType get_autocast_dtype(DeviceType device);
bool is_autocast_cache_enabled();
int autocast_nesting();               // open AutocastGuards on this thread
// True when autocast is enabled for some device type on this thread and not suspended.
bool autocast_active();
// Cast the floating tensors in `args` per the policy for `op` (the hook AMPGRAD_AUTOCAST runs).
// Throws AmpError for banned ops.
void autocast_inputs(std::string_view op, std::initializer_list<Tensor*> args);
// Backward never autocasts (backward ops run in their forward's dtypes): the engine holds this
// guard while a graph task runs. custom_bwd re-enables autocast explicitly.
using AutocastSuspendGuard = autocast::SuspendGuard;

// RAII: enable (or, with enabled=false, disable) autocast for one device type on this thread.
// On exit it restores the previous enabled flag, dtype and cache flag; when the outermost guard
// exits the cast cache is cleared. dtype must be f16 or bf16 (AmpError otherwise).
class AutocastGuard {
public:
    explicit AutocastGuard(DeviceType device, std::optional<DType> dtype = std::nullopt, bool enabled = true,
                           bool cache_enabled = true);
    // The fp8 mode (docs/fp8.md §7): bf16 autocast, and every nn::Linear that amp::Fp8Training gave
    // an fp8 state (made with this recipe) runs F::fp8_linear; the rest runs as under bf16 autocast.
    // A plain AutocastGuard opened inside turns the fp8 mode off for its scope.
    AutocastGuard(DeviceType device, const Fp8Recipe& recipe);
    ~AutocastGuard();
    AutocastGuard(const AutocastGuard&) = delete;
    AutocastGuard& operator=(const AutocastGuard&) = delete;

private:
    autocast::StateGuard guard_;
    fp8_autocast::Scope fp8_scope_;
};

// ---- the cast cache (aten/src/ATen/autocast_mode.cpp's, with its two bugs fixed; docs/amp.md §2) ----
// Casts of f32 leaf tensors that require grad (weights) to the lower-precision dtype are cached for
// the outermost autocast region, so a weight used by several ops is cast once. The key is
// (tensor, target dtype, grad mode) and each entry remembers the tensor's version counter:
//  - a cast made under no_grad (no history) is never handed to a grad-enabled op (pytorch #112583);
//  - a cast made before an in-place update of the weight is never reused after it (stale cast).
struct AutocastCacheStats {
    int64_t hits = 0;
    int64_t misses = 0;         // casts made and stored
    int64_t stale = 0;          // entries recast because the source's version changed
    int64_t size = 0;           // entries held now
};
AutocastCacheStats autocast_cache_stats();   // this thread's counters since the cache was last cleared
void clear_autocast_cache();

// ---- explaining decisions ----
// One autocast decision, as recorded by an AutocastRecorder.
struct CastEvent {
    std::string op;
    std::vector<CastInput> inputs;              // before the casts
    std::vector<std::optional<DType>> casts;    // the dtype each input was cast to (nullopt: kept)
    std::vector<bool> cache_hits;               // per input: the cast came from the cache
    AutocastStates state;                       // the autocast state the op saw
};
// While alive, records every decision the op hook makes on this thread (for tools/amp_policy and
// tests): "why did this op run in this dtype?".
class AutocastRecorder {
public:
    AutocastRecorder();
    ~AutocastRecorder();
    AutocastRecorder(const AutocastRecorder&) = delete;
    AutocastRecorder& operator=(const AutocastRecorder&) = delete;
    const std::vector<CastEvent>& events() const { return events_; }
    std::string str() const;                    // every event, explained

private:
    friend void autocast_inputs(std::string_view op, std::initializer_list<Tensor*> args);
    std::vector<CastEvent> events_;
    AutocastRecorder* previous_;
};

// The autocast state of every device type on this thread (indexed by device_type_index).
AutocastStates current_autocast_state();

namespace detail {
// Used by custom_bwd to run a custom backward under autocast although the engine suspends it.
// Returns the previous value.
bool set_autocast_suspended(bool suspended);
}  // namespace detail

}  // namespace ampgrad::amp

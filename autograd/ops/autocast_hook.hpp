// autocast_hook.hpp: the one line every autocast-eligible op runs first. When autocast is on
// (amp/autocast.hpp), the op's floating inputs are replaced by casts chosen from the single
// policy table in amp/autocast_policy.cpp; when it is off this is one thread-local read.
//
//   Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
//       Tensor a = a_in, b = b_in;
//       AMPGRAD_AUTOCAST("matmul", &a, &b);       // f32 -> f16/bf16 under autocast
//       ...
#pragma once
#include <initializer_list>
#include <string_view>

#include "core/tensor.hpp"

namespace ampgrad::amp {

// True when autocast is enabled for some device type on this thread and not suspended.
bool autocast_active();
// Cast the floating tensors in `args` per the policy for `op`. Throws AmpError for banned ops.
void autocast_inputs(std::string_view op, std::initializer_list<Tensor*> args);

// Backward never autocasts (backward ops run in their forward's dtypes): the engine holds
// this guard while a graph task runs. custom_bwd re-enables autocast explicitly.
class AutocastSuspendGuard {
public:
    AutocastSuspendGuard();
    ~AutocastSuspendGuard();
    AutocastSuspendGuard(const AutocastSuspendGuard&) = delete;
    AutocastSuspendGuard& operator=(const AutocastSuspendGuard&) = delete;

private:
    bool previous_;
};

}  // namespace ampgrad::amp

#define AMPGRAD_AUTOCAST(op, ...)                                                  \
    do {                                                                           \
        if (::ampgrad::amp::autocast_active()) ::ampgrad::amp::autocast_inputs(op, {__VA_ARGS__}); \
    } while (0)

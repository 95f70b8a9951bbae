// autocast_hook.hpp: the one line every autocast-eligible op runs first. When autocast is on
// (core/autocast_state.hpp), the op's floating inputs are replaced by casts chosen from the single
// policy table in amp/autocast_policy.cpp (amp/ installs that hook in core at load time); when it
// is off this is one thread-local read.
//
//   Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
//       Tensor a = a_in, b = b_in;
//       AMPGRAD_AUTOCAST("matmul", &a, &b);       // f32 -> f16/bf16 under autocast
//       ...
#pragma once
#include "core/autocast_state.hpp"

#define AMPGRAD_AUTOCAST(op, ...)                                                              \
    do {                                                                                       \
        if (::ampgrad::autocast::active()) ::ampgrad::autocast::cast_inputs(op, {__VA_ARGS__}); \
    } while (0)

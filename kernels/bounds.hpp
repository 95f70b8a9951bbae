// bounds.hpp: the value that stands for "no bound" in compute type C, shared by the CPU and CUDA
// kernels: a clamp with a missing bound, and the identity of a max/min reduction. For floating
// types it is +-inf, so clamp(x, lo, nullopt) leaves +inf alone and amax([-inf]) is -inf (never
// +-FLT_MAX); for integers it is the type's lowest/highest value.
#pragma once
#include <limits>

namespace ampgrad {

template <typename C>
constexpr C no_lower_bound() {
    if constexpr (std::numeric_limits<C>::has_infinity) return -std::numeric_limits<C>::infinity();
    else return std::numeric_limits<C>::lowest();
}

template <typename C>
constexpr C no_upper_bound() {
    if constexpr (std::numeric_limits<C>::has_infinity) return std::numeric_limits<C>::infinity();
    else return std::numeric_limits<C>::max();
}

}  // namespace ampgrad

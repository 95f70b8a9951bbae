// fused_step.hpp: whether an optimizer may hand a parameter to its one-pass kernel
// (kernels::sgd_step / kernels::adam_step, core/kernels.hpp) instead of the tensor-op formulas.
#pragma once
#include <initializer_list>

#include "core/fused_kernels.hpp"

namespace ampgrad::optim {

// True if `kernel` has an implementation for the first tensor's device and every defined tensor
// is on that device, contiguous, and of one dtype, f32 or f64 (what the CPU loops take).
inline bool fused_step_supported(const KernelBase& kernel, std::initializer_list<const Tensor*> tensors) {
    const Tensor* first = *tensors.begin();
    if (!kernel.has(first->device().type)) return false;
    if (first->dtype() != kFloat32 && first->dtype() != kFloat64) return false;
    for (const Tensor* t : tensors) {
        if (!t->defined()) continue;
        if (!(t->device() == first->device()) || !t->is_contiguous() || t->dtype() != first->dtype()) return false;
    }
    return true;
}

}  // namespace ampgrad::optim

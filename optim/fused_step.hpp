// fused_step.hpp: what the optimizers share around their one-pass multi-tensor kernels
// (kernels::sgd_step / kernels::adam_step, kernels/fused_kernels.hpp): whether a parameter may go to
// the kernel, the grouping of a parameter group into one kernel call per (device, dtype), and the
// host-side reading of a StepScaling for the parameters the kernel cannot take.
#pragma once
#include <initializer_list>
#include <optional>
#include <utility>
#include <vector>

#include "kernels/fused_kernels.hpp"

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

// The parameters of one kernel call: one (device, dtype) of a group. Lists is SgdTensors or AdamTensors.
template <typename Lists>
struct KernelBatch {
    Device device;
    DType dtype;
    Lists lists;
};

// The batch for p's device and dtype, created on first use.
template <typename Lists>
Lists& batch_for(std::vector<KernelBatch<Lists>>& batches, const Tensor& p) {
    for (KernelBatch<Lists>& b : batches)
        if (b.device == p.device() && b.dtype == p.dtype()) return b.lists;
    batches.push_back({p.device(), p.dtype(), Lists{}});
    return batches.back().lists;
}

// The scaling with its tensors on `device` (a no-op where they are already there).
StepScaling scaling_on(const StepScaling& scaling, const Device& device);

// The host's view of a StepScaling, for parameters that take the tensor-op path: read once, on
// first need (a device sync where the flag lives on a GPU).
class HostScaling {
public:
    explicit HostScaling(const StepScaling& scaling) : scaling_(scaling) {}
    bool skip();                                  // found_inf is nonzero
    // grad * inv_scale, stored back into grad as the fused kernels do (grad as it is when undefined)
    Tensor unscaled(const Tensor& grad) const;

private:
    const StepScaling& scaling_;
    std::optional<bool> skip_;
};

}  // namespace ampgrad::optim

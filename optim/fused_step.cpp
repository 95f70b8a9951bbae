// fused_step.cpp: see fused_step.hpp.
#include "optim/fused_step.hpp"

#include "autograd/ops/ops.hpp"

namespace ampgrad::optim {

StepScaling scaling_on(const StepScaling& scaling, const Device& device) {
    auto move = [&](const Tensor& t) { return !t.defined() || t.device() == device ? t : to_device(t, device); };
    return {move(scaling.inv_scale), move(scaling.found_inf)};
}

bool HostScaling::skip() {
    if (!skip_) skip_ = scaling_.found_inf.defined() && scaling_.found_inf.item<float>() != 0.0f;   // HOST SYNC
    return *skip_;
}

Tensor HostScaling::unscaled(const Tensor& grad) const {
    if (!scaling_.inv_scale.defined()) return grad;
    grad.copy_(mul(grad, to_device(scaling_.inv_scale, grad.device())));   // () f32 keeps grad's dtype
    return grad;
}

}  // namespace ampgrad::optim

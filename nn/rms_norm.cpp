// rms_norm.cpp: nn::RMSNorm (the math is F::rms_norm in autograd/ops/rms_norm.cpp).
#include "nn/rms_norm.hpp"

#include "autograd/ops/ops.hpp"
#include "core/error.hpp"
#include "nn/init.hpp"

namespace ampgrad::nn {

RMSNorm::RMSNorm(Shape shape, std::optional<double> eps_, bool elementwise_affine, TensorOptions options)
    : Module("RMSNorm"), normalized_shape(std::move(shape)), eps(eps_) {
    if (normalized_shape.empty())
        throw ValueError("RMSNorm: normalized_shape must have at least one dim, e.g. Shape{C}");
    if (elementwise_affine) weight = register_parameter("weight", empty(normalized_shape, options.requires_grad(false)));
    if (!init::skipping_init()) reset_parameters();   // deferred: loaded later (nn/init.hpp)
}

void RMSNorm::reset_parameters() {
    if (weight.defined()) init::ones_(weight);
}

Tensor RMSNorm::forward(const Tensor& x) const {
    return with_forward_hooks(x, [&](const Tensor& in) { return F::rms_norm(in, normalized_shape, weight, eps); });
}

}  // namespace ampgrad::nn

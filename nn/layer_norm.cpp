// layer_norm.cpp: nn::LayerNorm (the math is F::layer_norm in autograd/ops/layer_norm.cpp).
#include "nn/layer_norm.hpp"

#include "autograd/ops/ops.hpp"
#include "core/error.hpp"
#include "nn/init.hpp"

namespace ampgrad::nn {

LayerNorm::LayerNorm(Shape shape, double eps_, bool elementwise_affine, bool with_bias, TensorOptions options)
    : Module("LayerNorm"), normalized_shape(std::move(shape)), eps(eps_) {
    if (normalized_shape.empty())
        throw ValueError("LayerNorm: normalized_shape must have at least one dim, e.g. Shape{C}");
    TensorOptions opts = options.requires_grad(false);
    if (elementwise_affine) {
        weight = register_parameter("weight", empty(normalized_shape, opts));
        if (with_bias) bias = register_parameter("bias", empty(normalized_shape, opts));
    }
    if (!init::skipping_init()) reset_parameters();   // deferred: loaded later (nn/init.hpp)
}

void LayerNorm::reset_parameters() {
    if (weight.defined()) init::ones_(weight);
    if (bias.defined()) init::zeros_(bias);
}

Tensor LayerNorm::forward(const Tensor& x) const {
    return with_forward_hooks(x, [&](const Tensor& in) { return F::layer_norm(in, normalized_shape, weight, bias, eps); });
}

}  // namespace ampgrad::nn

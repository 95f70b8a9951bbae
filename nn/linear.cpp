// linear.cpp: nn::Linear (the math is ampgrad::linear in autograd/ops/matmul.cpp).
#include "nn/linear.hpp"

#include <cmath>

#include "autograd/grad_mode.hpp"
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"
#include "nn/init.hpp"
#include "nn/lora.hpp"

namespace ampgrad::nn {

Linear::Linear(int64_t in, int64_t out, bool with_bias, TensorOptions options)
    : Module("Linear"), in_features(in), out_features(out) {
    if (in < 0 || out < 0)
        throw ValueError(fmt::format("Linear: feature counts must be non-negative, got in_features={} out_features={}",
                                     in, out));
    TensorOptions opts = options.requires_grad(false);
    weight = register_parameter("weight", empty({out, in}, opts));
    if (with_bias) bias = register_parameter("bias", empty({out}, opts));
    if (!init::skipping_init()) reset_parameters();   // deferred: loaded later (nn/init.hpp)
}

void Linear::reset_parameters() {
    // kaiming_uniform_(a=sqrt(5)): gain = sqrt(2 / (1 + 5)), bound = gain * sqrt(3 / fan_in) = 1 / sqrt(fan_in).
    double bound = in_features > 0 ? 1.0 / std::sqrt(static_cast<double>(in_features)) : 0.0;
    init::uniform_(weight, -bound, bound);
    if (bias.defined()) init::uniform_(bias, -bound, bound);
}

Tensor Linear::base_forward(const Tensor& x) const {
    return linear(x, weight, bias);   // (*,in) @ (in,out) + (out) -> (*,out)
}

Tensor Linear::forward(const Tensor& x) const {
    return with_forward_hooks(x, [&](const Tensor& in) {
        Tensor y = base_forward(in);                                        // (*,out)
        if (lora && !lora->merged) y = lora->forward(y, in, is_training());
        return y;
    });
}

}  // namespace ampgrad::nn

// activation.cpp: the activation modules (nn/activation.hpp); the ops and their backward are in
// autograd/ops/activation.cpp.
#include "nn/activation.hpp"

#include "autograd/ops/ops.hpp"
#include "core/error.hpp"

namespace ampgrad::nn {

Tensor ReLU::forward(const Tensor& x) const {
    return with_forward_hooks(x, [](const Tensor& in) { return relu(in); });
}

GELU::GELU(std::string approximate_) : Module("GELU"), approximate(std::move(approximate_)) {
    if (approximate != "none" && approximate != "tanh")
        throw ValueError(fmt::format("GELU: approximate must be \"none\" or \"tanh\", but got \"{}\"", approximate));
}

Tensor GELU::forward(const Tensor& x) const {
    return with_forward_hooks(x, [this](const Tensor& in) { return gelu(in, approximate == "tanh"); });
}

Tensor Tanh::forward(const Tensor& x) const {
    return with_forward_hooks(x, [](const Tensor& in) { return tanh(in); });
}

Tensor Sigmoid::forward(const Tensor& x) const {
    return with_forward_hooks(x, [](const Tensor& in) { return sigmoid(in); });
}

Tensor SiLU::forward(const Tensor& x) const {
    return with_forward_hooks(x, [](const Tensor& in) { return silu(in); });
}

}  // namespace ampgrad::nn

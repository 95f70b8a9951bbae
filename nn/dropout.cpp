// dropout.cpp: nn::Dropout (the mask and its backward are F::dropout).
#include "nn/dropout.hpp"

#include "autograd/ops/ops.hpp"
#include "core/error.hpp"

namespace ampgrad::nn {

Dropout::Dropout(double p_) : Module("Dropout"), p(p_) {
    if (!(p >= 0.0 && p <= 1.0))
        throw ValueError(fmt::format("Dropout: dropout probability has to be between 0 and 1, but got {}", p));
}

Tensor Dropout::forward(const Tensor& x) const {
    return with_forward_hooks(x, [&](const Tensor& in) {
        if (!is_training() || p == 0.0) return in;
        return F::dropout(in, p, true);
    });
}

}  // namespace ampgrad::nn

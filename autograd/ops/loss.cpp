// loss.cpp: placeholder until implemented.
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"

namespace ampgrad::nn::functional {
Tensor cross_entropy(const Tensor&, const Tensor&, int64_t) { throw Error("cross_entropy: not implemented yet"); }
Tensor mse_loss(const Tensor&, const Tensor&) { throw Error("mse_loss: not implemented yet"); }
Tensor binary_cross_entropy_with_logits(const Tensor&, const Tensor&) { throw Error("bce_with_logits: not implemented yet"); }
Tensor binary_cross_entropy(const Tensor&, const Tensor&) { throw Error("bce: not implemented yet"); }
}  // namespace ampgrad::nn::functional

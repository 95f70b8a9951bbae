// attention.cpp: placeholder until implemented.
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"

namespace ampgrad::nn::functional {
Tensor scaled_dot_product_attention(const Tensor&, const Tensor&, const Tensor&, bool) { throw Error("sdpa: not implemented yet"); }
}  // namespace ampgrad::nn::functional

// layer_norm.cpp: placeholder until implemented.
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"

namespace ampgrad::nn::functional {
Tensor layer_norm(const Tensor&, const Shape&, const Tensor&, const Tensor&, double) { throw Error("layer_norm: not implemented yet"); }
}  // namespace ampgrad::nn::functional

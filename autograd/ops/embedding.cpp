// embedding.cpp: placeholder until implemented.
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"

namespace ampgrad::nn::functional {
Tensor embedding(const Tensor&, const Tensor&) { throw Error("embedding: not implemented yet"); }
}  // namespace ampgrad::nn::functional

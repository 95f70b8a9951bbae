// dropout.cpp: placeholder until implemented.
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"

namespace ampgrad::nn::functional {
Tensor dropout(const Tensor&, double, bool) { throw Error("dropout: not implemented yet"); }
}  // namespace ampgrad::nn::functional

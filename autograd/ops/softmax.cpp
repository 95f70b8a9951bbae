// softmax.cpp: placeholder until implemented.
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"

namespace ampgrad::nn::functional {
Tensor softmax(const Tensor&, int64_t) { throw Error("softmax: not implemented yet"); }
Tensor log_softmax(const Tensor&, int64_t) { throw Error("log_softmax: not implemented yet"); }
}  // namespace ampgrad::nn::functional

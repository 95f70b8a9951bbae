// activation.cpp: placeholder until implemented.
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"

namespace ampgrad {
Tensor tanh(const Tensor& x) { throw Error("tanh: not implemented yet"); }
Tensor sigmoid(const Tensor& x) { throw Error("sigmoid: not implemented yet"); }
Tensor relu(const Tensor& x) { throw Error("relu: not implemented yet"); }
Tensor gelu(const Tensor& x, bool tanh_approximation) { throw Error("gelu: not implemented yet"); }
Tensor silu(const Tensor& x) { throw Error("silu: not implemented yet"); }
}  // namespace ampgrad
namespace ampgrad::nn::functional {
Tensor relu(const Tensor& x) { return ampgrad::relu(x); }
Tensor gelu(const Tensor& x, bool t) { return ampgrad::gelu(x, t); }
Tensor silu(const Tensor& x) { return ampgrad::silu(x); }
}  // namespace ampgrad::nn::functional

// matmul.cpp: placeholder until implemented.
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"

namespace ampgrad {
Tensor matmul(const Tensor& a, const Tensor& b) { throw Error("matmul: not implemented yet"); }
Tensor mm(const Tensor& a, const Tensor& b) { throw Error("mm: not implemented yet"); }
Tensor bmm(const Tensor& a, const Tensor& b) { throw Error("bmm: not implemented yet"); }
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) { throw Error("linear: not implemented yet"); }
}  // namespace ampgrad

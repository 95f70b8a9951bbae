// reduce.cpp: placeholder until implemented.
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"

namespace ampgrad {
Tensor sum(const Tensor& x) { throw Error("sum: not implemented yet"); }
Tensor sum(const Tensor& x, const Shape& dims, bool keepdim) { throw Error("sum: not implemented yet"); }
Tensor mean(const Tensor& x) { throw Error("mean: not implemented yet"); }
Tensor mean(const Tensor& x, const Shape& dims, bool keepdim) { throw Error("mean: not implemented yet"); }
std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) { throw Error("max: not implemented yet"); }
Tensor max(const Tensor& x) { throw Error("max: not implemented yet"); }
Tensor amax(const Tensor& x, const Shape& dims, bool keepdim) { throw Error("amax: not implemented yet"); }
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) { throw Error("argmax: not implemented yet"); }
Tensor logsumexp(const Tensor& x, int64_t dim, bool keepdim) { throw Error("logsumexp: not implemented yet"); }
Tensor norm(const Tensor& x) { throw Error("norm: not implemented yet"); }
Tensor var(const Tensor& x, int64_t dim, bool unbiased, bool keepdim) { throw Error("var: not implemented yet"); }
Tensor sum_to(const Tensor& x, const Shape& shape) { throw Error("sum_to: not implemented yet"); }
}  // namespace ampgrad

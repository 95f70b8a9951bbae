// all_any.cpp: all and any, torch.all / torch.any: whether every (some) element is nonzero (NaN
// counts as nonzero), over the whole tensor or along one dim. They return kBool and are not
// differentiable. An empty tensor is all() true and any() false, as in PyTorch. Both count the
// zero (nonzero) elements with logical_not and an int64 sum, so they run on any device.
#include "autograd/grad_mode.hpp"
#include "autograd/ops/ops.hpp"

namespace ampgrad {

namespace {

// The number of elements that are zero (want_nonzero false) or nonzero, over dims (empty: all).
Tensor count_where(const Tensor& x, bool want_nonzero, const Shape& dims, bool keepdim) {
    NoGradGuard no_grad;
    Tensor zero = logical_not(x);                                       // (*) kBool
    Tensor hit = want_nonzero ? logical_not(zero) : zero;
    return dims.empty() ? hit.to(kInt64).sum() : hit.to(kInt64).sum(dims, keepdim);
}

}  // namespace

Tensor all(const Tensor& x) { return eq(count_where(x, false, {}, false), 0.0); }
Tensor all(const Tensor& x, int64_t dim, bool keepdim) { return eq(count_where(x, false, {dim}, keepdim), 0.0); }
Tensor any(const Tensor& x) { return gt(count_where(x, true, {}, false), 0.0); }
Tensor any(const Tensor& x, int64_t dim, bool keepdim) { return gt(count_where(x, true, {dim}, keepdim), 0.0); }

Tensor Tensor::all() const { return ampgrad::all(*this); }
Tensor Tensor::all(int64_t dim, bool keepdim) const { return ampgrad::all(*this, dim, keepdim); }
Tensor Tensor::any() const { return ampgrad::any(*this); }
Tensor Tensor::any(int64_t dim, bool keepdim) const { return ampgrad::any(*this, dim, keepdim); }

}  // namespace ampgrad

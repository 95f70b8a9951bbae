// index_utils.hpp: what the indexing ops (autograd/ops/index.cpp, index_derived.cpp) share: the
// index dtype check, the kernels' IndexError named after the op that ran them, a gather with no
// autograd, and alpha scaling as PyTorch applies it (truncated for integer tensors).
#pragma once
#include <cmath>
#include <string_view>

#include "autograd/ops/op_utils.hpp"
#include "autograd/ops/ops.hpp"

namespace ampgrad::ops {

// DTypeError unless index is int64 or int32 (PyTorch's gather/scatter/index_* accept both).
inline void check_index_dtype(std::string_view op, const Tensor& index) {
    if (index.dtype() != kInt64 && index.dtype() != kInt32)
        throw DTypeError(fmt::format("{}: index must be int64 or int32, got {}", op, index.describe()));
}

// Runs an index kernel; its IndexError ("index k is out of bounds for dimension d with size n")
// comes back prefixed with the op that called it.
template <typename Fn>
void run_index_kernel(std::string_view op, Fn&& fn) {
    try {
        fn();
    } catch (const IndexError& e) {
        throw IndexError(fmt::format("{}: {}", op, e.what()));
    }
}

// out (I) = x[p with p[dim] = index[p]], no autograd; dim already wrapped. An empty index gives an
// empty out of its shape without a kernel (PyTorch checks nothing more then).
inline Tensor gather_raw(std::string_view op, const Tensor& x, int64_t dim, const Tensor& index) {
    Tensor out = make_empty(index.sizes(), x.dtype(), x.device());
    if (index.numel() > 0) run_index_kernel(op, [&] { kernels::gather(out, x, index, dim); });
    return out;
}

// t * alpha in t's dtype, no autograd; integer and bool tensors take alpha truncated (PyTorch's
// index_add casts alpha to the tensor's type).
inline Tensor scale_raw(const Tensor& t, double alpha) {
    if (alpha == 1.0) return t;
    if (is_floating(t.dtype())) {
        Tensor out = make_empty(t.sizes(), t.dtype(), t.device());
        kernels::binary_scalar(BinaryOp::kMul, out, t, alpha, false);
        return out;
    }
    const double whole = std::trunc(alpha);
    if (t.dtype() == kBool) return whole != 0.0 ? t : zeros(t.sizes(), t.options());
    return binary_raw(BinaryOp::kMul, "index_add", t, full({}, whole, t.options()));
}

}  // namespace ampgrad::ops

// reduce_utils.hpp: what every reduction op shares (autograd/ops/reduce.cpp, reduce_stats.cpp,
// extremum.cpp): the dims list, the keepdim and dropped shapes, the raw kernel call into the keepdim
// shape, and putting reduced dims back on a gradient. Internal to autograd/ops (not installed).
// Shapes: (*) -> (*) without the reduced dims, or with 1 there when keepdim (docs/notation.md).
#pragma once
#include <string_view>
#include <vector>

#include "kernels/kernels.hpp"
#include "core/tensor.hpp"

namespace ampgrad::ops {

// Sorted, wrapped, duplicate-free dims; an empty list means every dim. A 0-dim tensor accepts
// dim 0 and -1 (as PyTorch's maybe_wrap_dim) and reduces over nothing: the list comes back empty.
// ValueError naming `op` for a repeated dim, IndexError for one out of range.
std::vector<int64_t> reduce_dims(std::string_view op, const Tensor& x, const Shape& dims);
Shape kept_shape(const Tensor& x, const std::vector<int64_t>& dims);      // 1 at each reduced dim
Shape dropped_shape(const Tensor& x, const std::vector<int64_t>& dims);   // the reduced dims removed
int64_t reduced_count(const Tensor& x, const std::vector<int64_t>& dims); // elements per output
// The raw reduction (no autograd), computed in `dtype` into the keepdim shape, then viewed as the
// final shape. An empty result stays empty; max/min over a size-0 dim have no identity (their ops
// call check_extremum_dims first, which throws as PyTorch does).
Tensor reduce_raw(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, DType dtype);
// g of a !keepdim reduction -> the keepdim shape (differentiable: unsqueeze at each reduced dim).
Tensor restore_dims(Tensor g, const std::vector<int64_t>& dims, bool keepdim);

}  // namespace ampgrad::ops

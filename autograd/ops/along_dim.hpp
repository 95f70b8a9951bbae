// along_dim.hpp (internal to autograd/ops): one dim of a tensor moved last and viewed as rows
// (R,N), the layout of the row kernels (cpu/sort.cpp, cpu/cumsum.cpp and their cuda/ twins), and the
// differentiable gather/scatter along those rows that sort, topk, flip and cumsum's backward share.
// Not public API (the public gather/scatter are separate ops).
#pragma once
#include "core/tensor.hpp"

namespace ampgrad::ops {

// Where a tensor's rows came from, to put a result of the same layout back.
struct RowLayout {
    int64_t dim = 0;          // the wrapped dim that became the last
    Shape moved;              // x's shape with dim moved last (a 0-d x counts as (1))
    bool scalar = false;      // x was 0-d
};

// x (*) -> rows (R,N), N = x.size(dim) (a 0-d x is one row of one element); differentiable.
Tensor to_rows(const Tensor& x, int64_t dim, RowLayout& layout);
// rows (R,N') -> x's shape with dim of size N'; differentiable.
Tensor from_rows(const Tensor& rows, const RowLayout& layout);
// rows (R,N), index (R,K) or (1,K) int64 -> (R,K): rows[r][index[r][j]]; differentiable in rows.
Tensor take_along_last(const Tensor& rows, const Tensor& index);
// src (R,K) placed at index (R,K) or (1,K) of zeros (R,N) (indices distinct per row); differentiable in src.
Tensor put_along_last(const Tensor& src, const Tensor& index, int64_t n);
// (1,N) int64: N-1, ..., 1, 0 on `device`, the index that reverses rows of N.
Tensor reversed_index(int64_t n, Device device);

}  // namespace ampgrad::ops

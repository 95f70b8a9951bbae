// index_layout.hpp: the index arithmetic of the ops that index along one dim (gather, scatter,
// scatter_add, and through them index_select, index_add, take_along_dim), written once for the CPU
// kernels (cpu/index.cpp) and the CUDA kernels (cuda/index.cu).
//
// Every such op walks the positions p of an index tensor (shape I). At p it reads k = index[p] and
// touches two other tensors:
//   - `data`, the tensor indexed along `dim`: element p with p[dim] replaced by k (self of gather,
//     the destination of scatter);
//   - `other`, the tensor walked in step with the index: element p (out of gather, src of scatter).
// gather:  other[p] = data[p with p[dim] = index[p]]
// scatter: data[p with p[dim] = index[p]] (+)= other[p]
// Both other tensors may be larger than I in any dim but dim (PyTorch's rule); the walk only visits
// I's positions. Strides are in elements; stride 0 reads a broadcast operand.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "kernels/scalar_math.hpp"   // AMPGRAD_HOST_DEVICE
#include "core/tensor.hpp"

namespace ampgrad {

inline constexpr int kIndexMaxDims = 16;

// The element offsets of one position: in index and other, and in data with p[dim] = 0.
struct IndexOffsets {
    int64_t index = 0, data = 0, other = 0;
};

// Passed to CUDA kernels by value.
struct IndexAlongDim {
    int ndim = 0;                            // the index's dims (0-d tensors count as 1-d of size 1)
    int dim = 0;                             // the dim indexed, in [0, ndim)
    int64_t dim_size = 1;                    // data.size(dim): an index k must satisfy 0 <= k < dim_size
    int64_t sizes[kIndexMaxDims] = {};       // the index's shape
    int64_t index_strides[kIndexMaxDims] = {};
    int64_t data_strides[kIndexMaxDims] = {};
    int64_t other_strides[kIndexMaxDims] = {};

    // Offsets of the position with row-major number `linear` among the index's positions; with
    // `skip_dim`, `linear` numbers the slices (positions whose coordinate at dim is 0) instead.
    AMPGRAD_HOST_DEVICE IndexOffsets offsets(int64_t linear, bool skip_dim) const {
        IndexOffsets o;
        for (int d = ndim - 1; d >= 0; --d) {
            if (skip_dim && d == dim) continue;
            const int64_t coord = linear % sizes[d];
            linear /= sizes[d];
            o.index += coord * index_strides[d];
            o.other += coord * other_strides[d];
            if (d != dim) o.data += coord * data_strides[d];   // data's dim coordinate is the index value
        }
        return o;
    }
    // The number of slices: the index's positions with dim's coordinate fixed.
    AMPGRAD_HOST_DEVICE int64_t slices(int64_t numel) const { return sizes[dim] == 0 ? 0 : numel / sizes[dim]; }
    AMPGRAD_HOST_DEVICE bool in_range(int64_t k) const { return k >= 0 && k < dim_size; }
};

// The layout of data, index and other for an indexing kernel, or AMPGRAD_CHECK failure naming the
// kernel if they break the contract: same number of dims (0-d counts as 1-d), index no larger
// than data apart from dim and no larger than other anywhere.
inline IndexAlongDim make_index_layout(const char* kernel, const Tensor& data, const Tensor& index,
                                       const Tensor& other, int64_t dim) {
    const int64_t ndim = std::max<int64_t>(index.dim(), 1);
    AMPGRAD_CHECK(ndim <= kIndexMaxDims && std::max<int64_t>(data.dim(), 1) == ndim &&
                      std::max<int64_t>(other.dim(), 1) == ndim && dim >= 0 && dim < ndim,
                  "{}: data {} / index {} / other {} do not fit along dim {}", kernel, data.describe(),
                  index.describe(), other.describe(), dim);
    IndexAlongDim L;
    L.ndim = static_cast<int>(ndim);
    L.dim = static_cast<int>(dim);
    auto size_of = [](const Tensor& t, int64_t d) { return t.dim() == 0 ? int64_t{1} : t.size(d); };
    auto stride_of = [](const Tensor& t, int64_t d) { return t.dim() == 0 ? int64_t{0} : t.stride(d); };
    L.dim_size = size_of(data, dim);
    for (int64_t d = 0; d < ndim; ++d) {
        L.sizes[d] = size_of(index, d);
        AMPGRAD_CHECK((d == dim || L.sizes[d] <= size_of(data, d)) && L.sizes[d] <= size_of(other, d),
                      "{}: index {} is larger than data {} or other {} at dim {}", kernel, index.describe(),
                      data.describe(), other.describe(), d);
        L.index_strides[d] = stride_of(index, d);
        L.data_strides[d] = stride_of(data, d);
        L.other_strides[d] = stride_of(other, d);
    }
    return L;
}

// PyTorch's message for an index outside [0, size).
inline std::string index_out_of_bounds_message(int64_t k, int64_t dim, int64_t size) {
    return fmt::format("index {} is out of bounds for dimension {} with size {}", k, dim, size);
}

}  // namespace ampgrad

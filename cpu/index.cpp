// index.cpp: the CPU kernels that index along one dim: gather (out[p] = self[p with p[dim] =
// index[p]]) and scatter / scatter-add (self[p with p[dim] = index[p]] (+)= src[p]). The walk and
// its offsets are kernels/index_layout.hpp's, shared with cuda/index.cu.
//   gather: the index positions split across threads by rows of the last dim (each writes its own
//     out elements).
//   scatter: one task per slice (the positions that differ only at dim); a slice's positions write
//     only into that slice of self, so threads never share an element, and within a slice the
//     writes apply in index order: race-free and deterministic, with no atomics.
// Every index is checked before any thread starts (an exception must not leave an OpenMP region).
#include <algorithm>
#include <vector>

#include "kernels/index_layout.hpp"
#include "kernels/kernels.hpp"
#include "cpu/loops.hpp"

namespace ampgrad::cpu {

namespace {

// Calls fn(I{}) with the C++ type of an int64/int32 index.
template <typename Fn>
void dispatch_index(const char* kernel, const Tensor& index, Fn&& fn) {
    if (index.dtype() == kInt64) fn(int64_t{});
    else if (index.dtype() == kInt32) fn(int32_t{});
    else throw DTypeError(fmt::format("{}: index must be int64 or int32, got {}", kernel, index.describe()));
}

// IndexError for the first index outside [0, dim_size), in row-major order (PyTorch's message).
// Walks rows of the last dim, so the layout's divisions run once per row, not per index.
template <typename I>
void check_bounds(const IndexAlongDim& L, const I* index, int64_t numel) {
    const int last = L.ndim - 1;
    const int64_t run = L.sizes[last];
    for (int64_t r = 0; r < numel / run; ++r) {
        const int64_t base = L.offsets(r * run, false).index;
        for (int64_t j = 0; j < run; ++j) {
            const int64_t k = static_cast<int64_t>(index[base + j * L.index_strides[last]]);
            if (!L.in_range(k)) throw IndexError(index_out_of_bounds_message(k, L.dim, L.dim_size));
        }
    }
}

// ---- kernels ----

// One run per row of the index's last dim: the offsets are computed once per run (the divisions
// of the layout's walk), then stepped along the last dim.
template <typename T, typename I>
void gather_kernel(const IndexAlongDim& L, T* out, const T* self, const I* index, int64_t numel) {
    const int last = L.ndim - 1;
    const int64_t run = L.sizes[last];
    const int64_t data_step = last == L.dim ? 0 : L.data_strides[last];
    // index_select's layout: one index value per row, and contiguous rows: a row copy
    const bool row_copy = last != L.dim && L.index_strides[last] == 0 && data_step == 1 && L.other_strides[last] == 1;
    parallel_for(numel / run, std::max<int64_t>(1, kGrainSize / run), [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
            const IndexOffsets o = L.offsets(r * run, false);
            if (row_copy) {
                const int64_t k = static_cast<int64_t>(index[o.index]);
                std::copy_n(self + o.data + k * L.data_strides[L.dim], run, out + o.other);
                continue;
            }
            for (int64_t j = 0; j < run; ++j) {
                const int64_t k = static_cast<int64_t>(index[o.index + j * L.index_strides[last]]);
                out[o.other + j * L.other_strides[last]] = self[o.data + j * data_step + k * L.data_strides[L.dim]];
            }
        }
    });
}

// Each thread owns a range of slices and walks them in blocks: the positions at dim are the outer
// loop and the block's slices the inner one, so neighbouring slices (usually neighbouring columns)
// are written together. Every target element still sees its slice's positions in index order.
template <typename T, typename I>
void scatter_kernel(const IndexAlongDim& L, T* self, const I* index, const T* src, int64_t numel, bool accumulate) {
    using Acc = compute_t<T>;
    constexpr int64_t kBlock = 1024;                                          // slices per block
    const int64_t length = L.sizes[L.dim];
    const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(length, 1));
    parallel_for(L.slices(numel), grain, [&](int64_t begin, int64_t end) {
        std::vector<IndexOffsets> starts;
        for (int64_t block = begin; block < end; block += kBlock) {
            const int64_t block_end = std::min(end, block + kBlock);
            starts.clear();
            for (int64_t s = block; s < block_end; ++s) starts.push_back(L.offsets(s, true));
            for (int64_t j = 0; j < length; ++j) {
                for (const IndexOffsets& o : starts) {
                    const int64_t k = static_cast<int64_t>(index[o.index + j * L.index_strides[L.dim]]);
                    T& dst = self[o.data + k * L.data_strides[L.dim]];
                    const T value = src[o.other + j * L.other_strides[L.dim]];
                    dst = accumulate ? static_cast<T>(static_cast<Acc>(dst) + static_cast<Acc>(value)) : value;
                }
            }
        }
    });
}

}  // namespace

// ---- launchers ----

void gather(const Tensor& out, const Tensor& self, const Tensor& index, int64_t dim) {
    AMPGRAD_CHECK(out.sizes() == index.sizes() && out.dtype() == self.dtype(),
                  "gather kernel: out {} must have index {}'s shape and self {}'s dtype", out.describe(),
                  index.describe(), self.describe());
    const IndexAlongDim L = make_index_layout("gather kernel", self, index, out, dim);
    const int64_t numel = index.numel();
    dispatch_index("gather", index, [&](auto index_tag) {
        using I = decltype(index_tag);
        const I* idx = static_cast<const I*>(index.raw_data());
        check_bounds(L, idx, numel);
        if (numel == 0) return;
        dispatch_all(self.dtype(), "gather", [&](auto tag) {
            using T = decltype(tag);
            gather_kernel(L, static_cast<T*>(out.raw_data()), static_cast<const T*>(self.raw_data()), idx, numel);
        });
    });
}

void scatter(const Tensor& self, const Tensor& index, const Tensor& src, int64_t dim, bool accumulate) {
    AMPGRAD_CHECK(src.dtype() == self.dtype(), "scatter kernel: src {} must have self {}'s dtype", src.describe(),
                  self.describe());
    const IndexAlongDim L = make_index_layout("scatter kernel", self, index, src, dim);
    const int64_t numel = index.numel();
    dispatch_index("scatter", index, [&](auto index_tag) {
        using I = decltype(index_tag);
        const I* idx = static_cast<const I*>(index.raw_data());
        check_bounds(L, idx, numel);
        if (numel == 0) return;
        dispatch_all(self.dtype(), "scatter", [&](auto tag) {
            using T = decltype(tag);
            scatter_kernel(L, static_cast<T*>(self.raw_data()), idx, static_cast<const T*>(src.raw_data()), numel,
                           accumulate);
        });
    });
}

AMPGRAD_REGISTER_KERNEL(kernels::gather, kCPU, gather);
AMPGRAD_REGISTER_KERNEL(kernels::scatter, kCPU, scatter);

}  // namespace ampgrad::cpu

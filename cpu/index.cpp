// index.cpp: the CPU kernels that index along one dim: gather (out[p] = self[p with p[dim] =
// index[p]]) and scatter / scatter-add (self[p with p[dim] = index[p]] (+)= src[p]). The walk and
// its offsets are core/index_layout.hpp's, shared with cuda/index.cu.
//   gather: one task per index position, split across threads (each writes its own out element).
//   scatter: one task per slice (the positions that differ only at dim); a slice's positions write
//     only into that slice of self, so threads never share an element, and within a slice the
//     writes apply in index order: race-free and deterministic, with no atomics.
// Every index is checked before any thread starts (an exception must not leave an OpenMP region).
#include "core/index_layout.hpp"
#include "core/kernels.hpp"
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
template <typename I>
void check_bounds(const IndexAlongDim& L, const I* index, int64_t numel) {
    for (int64_t p = 0; p < numel; ++p) {
        const int64_t k = static_cast<int64_t>(index[L.offsets(p, false).index]);
        if (!L.in_range(k)) throw IndexError(index_out_of_bounds_message(k, L.dim, L.dim_size));
    }
}

// ---- kernels ----

template <typename T, typename I>
void gather_kernel(const IndexAlongDim& L, T* out, const T* self, const I* index, int64_t numel) {
    parallel_for(numel, kGrainSize, [&](int64_t begin, int64_t end) {
        for (int64_t p = begin; p < end; ++p) {
            const IndexOffsets o = L.offsets(p, false);
            out[o.other] = self[o.data + static_cast<int64_t>(index[o.index]) * L.data_strides[L.dim]];
        }
    });
}

template <typename T, typename I>
void scatter_kernel(const IndexAlongDim& L, T* self, const I* index, const T* src, int64_t numel, bool accumulate) {
    using Acc = compute_t<T>;
    const int64_t length = L.sizes[L.dim];
    const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(length, 1));
    parallel_for(L.slices(numel), grain, [&](int64_t begin, int64_t end) {
        for (int64_t s = begin; s < end; ++s) {
            const IndexOffsets o = L.offsets(s, true);
            for (int64_t j = 0; j < length; ++j) {
                const int64_t k = static_cast<int64_t>(index[o.index + j * L.index_strides[L.dim]]);
                T& dst = self[o.data + k * L.data_strides[L.dim]];
                const T value = src[o.other + j * L.other_strides[L.dim]];
                dst = accumulate ? static_cast<T>(static_cast<Acc>(dst) + static_cast<Acc>(value)) : value;
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

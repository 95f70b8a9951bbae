// index.cu: the GPU twin of cpu/index.cpp: gather, and scatter / scatter-add, indexing along one
// dim with kernels/index_layout.hpp's walk (the same offsets as the CPU kernels).
//   gather: one thread per index position (grid-stride).
//   scatter: one thread per slice (the positions that differ only at dim), walking its positions
//     in index order. A slice writes only into its own slice of self, so no two threads share an
//     element: no atomics, the same result on every run and the same order of adds as the CPU
//     (f16/bf16 too: each add loads to fp32 and rounds on store, as the CPU kernel does). The price
//     is parallelism: a scatter along dim with few slices (index_add of rows into a narrow table)
//     runs long serial loops; atomics (or a sort, as cuda/embedding.cu) would trade determinism
//     for it.
// An index outside [0, size) cannot be reported by the host without a synchronisation: the kernel
// prints it and stops with a device trap (as cuda/embedding.cu and PyTorch's device asserts do).
#include <cstdio>

#include "kernels/index_layout.hpp"
#include "cuda/loops.cuh"

namespace ampgrad::cuda {

namespace {

// index[offset] as int64, checked against the layout's dim size.
template <typename I>
__device__ __forceinline__ int64_t checked_index(const IndexAlongDim& L, const I* index, int64_t offset) {
    const int64_t k = static_cast<int64_t>(index[offset]);
    if (!L.in_range(k)) {
        printf("ampgrad cuda index kernel: index %lld is out of bounds for dimension %d with size %lld\n",
               static_cast<long long>(k), L.dim, static_cast<long long>(L.dim_size));
        __trap();
    }
    return k;
}

// ---- kernels ----

template <typename T, typename I>
__global__ void gather_kernel(IndexAlongDim L, int64_t numel, T* out, const T* self, const I* index) {
    for (int64_t p = first_index(); p < numel; p += grid_stride()) {
        const IndexOffsets o = L.offsets(p, false);
        out[o.other] = self[o.data + checked_index(L, index, o.index) * L.data_strides[L.dim]];
    }
}

template <typename T, typename I>
__global__ void scatter_kernel(IndexAlongDim L, int64_t slices, T* self, const I* index, const T* src,
                               bool accumulate) {
    const int64_t length = L.sizes[L.dim];
    for (int64_t s = first_index(); s < slices; s += grid_stride()) {
        const IndexOffsets o = L.offsets(s, true);
        for (int64_t j = 0; j < length; ++j) {
            const int64_t k = checked_index(L, index, o.index + j * L.index_strides[L.dim]);
            T& dst = self[o.data + k * L.data_strides[L.dim]];
            const T value = src[o.other + j * L.other_strides[L.dim]];
            dst = accumulate ? store_compute<T>(load_compute(dst) + load_compute(value)) : value;
        }
    }
}

// Calls fn(I{}) with the C++ type of an int64/int32 index.
template <typename Fn>
void dispatch_index(const char* kernel, const Tensor& index, Fn&& fn) {
    if (index.dtype() == kInt64) fn(int64_t{});
    else if (index.dtype() == kInt32) fn(int32_t{});
    else throw DTypeError(fmt::format("cuda {}: index must be int64 or int32, got {}", kernel, index.describe()));
}

}  // namespace

// ---- launchers ----

void gather(const Tensor& out, const Tensor& self, const Tensor& index, int64_t dim) {
    AMPGRAD_CHECK(out.sizes() == index.sizes() && out.dtype() == self.dtype(),
                  "gather kernel: out {} must have index {}'s shape and self {}'s dtype", out.describe(),
                  index.describe(), self.describe());
    const IndexAlongDim L = make_index_layout("gather kernel", self, index, out, dim);
    const int device = self.device().index;
    require_on_device("gather", device, {&out, &self, &index});
    const int64_t numel = index.numel();
    if (numel == 0) return;
    DeviceGuard guard(device);
    dispatch_index("gather", index, [&](auto index_tag) {
        using I = decltype(index_tag);
        dispatch_all(self.dtype(), "gather", [&](auto tag) {
            using T = decltype(tag);
            gather_kernel<T, I><<<grid_for(numel), kBlockSize, 0, current_stream()>>>(
                L, numel, device_ptr<T>(out), device_ptr<const T>(self), device_ptr<const I>(index));
            CUDA_CHECK(cudaGetLastError());
        });
    });
}

void scatter(const Tensor& self, const Tensor& index, const Tensor& src, int64_t dim, bool accumulate) {
    AMPGRAD_CHECK(src.dtype() == self.dtype(), "scatter kernel: src {} must have self {}'s dtype", src.describe(),
                  self.describe());
    const IndexAlongDim L = make_index_layout("scatter kernel", self, index, src, dim);
    const int device = self.device().index;
    require_on_device("scatter", device, {&self, &index, &src});
    const int64_t slices = L.slices(index.numel());
    if (slices == 0) return;
    DeviceGuard guard(device);
    dispatch_index("scatter", index, [&](auto index_tag) {
        using I = decltype(index_tag);
        dispatch_all(self.dtype(), "scatter", [&](auto tag) {
            using T = decltype(tag);
            scatter_kernel<T, I><<<grid_for(slices), kBlockSize, 0, current_stream()>>>(
                L, slices, device_ptr<T>(self), device_ptr<const I>(index), device_ptr<const T>(src), accumulate);
            CUDA_CHECK(cudaGetLastError());
        });
    });
}

AMPGRAD_REGISTER_KERNEL(kernels::gather, kCUDA, gather);
AMPGRAD_REGISTER_KERNEL(kernels::scatter, kCUDA, scatter);

}  // namespace ampgrad::cuda

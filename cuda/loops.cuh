// loops.cuh: the CUDA backend's iteration machinery (the GPU twin of cpu/loops.hpp).
//   - dispatch_float / dispatch_all: a runtime DType to the device storage type (__half, ...),
//     through core/dispatch.hpp (shared with cpu/loops.hpp);
//   - OffsetCalc<N>: the element offset of each of N same-shaped strided operands at a linear
//     (row-major) index, after merging the dims that are contiguous in every operand;
//   - grid-stride loop helpers.
#pragma once
#include <array>

#include "core/dispatch.hpp"
#include "core/tensor.hpp"
#include "core/kernels.hpp"
#include "cuda/common.cuh"

namespace ampgrad::cuda {

// Device storage types of f16/bf16 for core/dispatch.hpp.
using DeviceStorage = StorageTypes<__half, __nv_bfloat16>;

// Calls fn(T{}) with T the device type of a floating dtype.
template <typename Fn>
decltype(auto) dispatch_float(DType dtype, const char* kernel, Fn&& fn) {
    return dispatch_float_as<DeviceStorage>(dtype, "cuda ", kernel, std::forward<Fn>(fn));
}

// Calls fn(T{}) for any of the seven dtypes.
template <typename Fn>
decltype(auto) dispatch_all(DType dtype, const char* kernel, Fn&& fn) {
    return dispatch_all_as<DeviceStorage>(dtype, "cuda ", kernel, std::forward<Fn>(fn));
}

// ---- strided indexing ----

inline constexpr int kMaxDims = 16;

template <int N>
struct Offsets { int64_t at[N]; };

// Passed to kernels by value (a few hundred bytes of kernel parameters).
template <int N>
struct OffsetCalc {
    int ndim = 1;                          // after merging; 1 for contiguous operands
    int64_t sizes[kMaxDims] = {};
    int64_t strides[N][kMaxDims] = {};     // in elements; 0 where broadcast

    __device__ __forceinline__ Offsets<N> get(int64_t i) const {
        Offsets<N> o;
        if (ndim == 1) {                    // the common case: no division at all
            for (int k = 0; k < N; ++k) o.at[k] = i * strides[k][0];
            return o;
        }
        for (int k = 0; k < N; ++k) o.at[k] = 0;
        for (int d = ndim - 1; d >= 0; --d) {
            int64_t idx = i % sizes[d];
            i /= sizes[d];
            for (int k = 0; k < N; ++k) o.at[k] += idx * strides[k][d];
        }
        return o;
    }
};

// Build the calculator for N tensors of identical shape (operand 0 is usually the output).
template <int N>
OffsetCalc<N> make_offset_calc(const std::array<const Tensor*, N>& ts) {
    OffsetCalc<N> calc;
    calc.ndim = 0;
    const Shape& shape = ts[0]->sizes();
    AMPGRAD_CHECK(shape.size() <= kMaxDims, "tensor of {} dims exceeds kMaxDims={}", shape.size(), kMaxDims);
    for (int k = 0; k < N; ++k)
        AMPGRAD_CHECK(ts[k]->sizes() == shape, "operand {} is {} but operand 0 is {}", k, ts[k]->describe(),
                      ts[0]->describe());
    // Drop size-1 dims, then merge neighbours that are contiguous with each other in all operands.
    for (size_t d = 0; d < shape.size(); ++d) {
        if (shape[d] == 1) continue;
        int last = calc.ndim - 1;
        bool mergeable = calc.ndim > 0;
        for (int k = 0; k < N && mergeable; ++k)
            mergeable = calc.strides[k][last] == ts[k]->strides()[d] * shape[d];
        if (mergeable) {
            calc.sizes[last] *= shape[d];
            for (int k = 0; k < N; ++k) calc.strides[k][last] = ts[k]->strides()[d];
            continue;
        }
        calc.sizes[calc.ndim] = shape[d];
        for (int k = 0; k < N; ++k) calc.strides[k][calc.ndim] = ts[k]->strides()[d];
        ++calc.ndim;
    }
    if (calc.ndim == 0) {                   // a scalar or all-ones shape: one element at offset 0
        calc.ndim = 1;
        calc.sizes[0] = 1;
    }
    return calc;
}

// ---- grid-stride loops: for (int64_t i = first_index(); i < n; i += grid_stride()) ----

__device__ __forceinline__ int64_t first_index() {
    return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_stride() { return static_cast<int64_t>(blockDim.x) * gridDim.x; }

// Typed element pointer of a tensor (element 0 of its view).
template <typename T>
T* device_ptr(const Tensor& t) { return static_cast<T*>(t.raw_data()); }

}  // namespace ampgrad::cuda

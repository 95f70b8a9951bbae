// loops.cuh: the CUDA backend's iteration machinery (the GPU twin of cpu/loops.hpp).
//   - dispatch_float / dispatch_all: a runtime DType to the device storage type (__half, ...),
//     through core/dispatch.hpp (shared with cpu/loops.hpp);
//   - OffsetCalc<N>: the element offset of each of N same-shaped strided operands at a linear
//     (row-major) index, after merging the dims that are contiguous in every operand;
//   - grid-stride loop helpers, and 16-byte vectorised access for contiguous operands.
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>

#include "core/dispatch.hpp"
#include "core/tensor.hpp"
#include "kernels/kernels.hpp"
#include "cuda/common.cuh"

namespace ampgrad::cuda {

// Device storage types of f16/bf16 for core/dispatch.hpp.
using DeviceStorage = StorageTypes<__half, __nv_bfloat16>;

// Calls fn(T{}) with T the device type of a floating dtype.
template <typename Fn>
decltype(auto) dispatch_float(DType dtype, const char* kernel, Fn&& fn) {
    return dispatch_float_as<DeviceStorage>(dtype, "cuda ", kernel, std::forward<Fn>(fn));
}

// Calls fn(T{}) for any of the seven non-fp8 dtypes (an fp8 dtype is a DTypeError: core/dispatch.hpp).
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

// ---- 16-byte vectorised access ----
// When every operand is one contiguous run (no broadcast, no stride) and starts on a 16-byte
// boundary, a thread moves kVecWidth<T> elements with one 128-bit load or store instead of several
// narrow ones: 8 f16/bf16, 4 f32, 2 f64. The last n % kVecWidth<T> elements go one by one.
template <typename T>
inline constexpr int kVecWidth = 16 / static_cast<int>(sizeof(T));

template <typename T>
struct alignas(16) Vec16 {
    T v[kVecWidth<T>];
};

// True when calc walks each of its operands as one run of stride 1 and every pointer is 16-byte aligned.
template <int N>
bool vectorizable(const OffsetCalc<N>& calc, std::initializer_list<const void*> ptrs) {
    if (calc.ndim != 1) return false;
    for (int k = 0; k < N; ++k)
        if (calc.strides[k][0] != 1 && calc.sizes[0] != 1) return false;
    for (const void* p : ptrs)
        if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
    return true;
}

// Blocks for a vectorised loop over n elements: one thread per vector (at least one block).
template <typename T>
int grid_for_vectors(int64_t n) { return grid_for(n / kVecWidth<T> > 0 ? n / kVecWidth<T> : 1); }

}  // namespace ampgrad::cuda

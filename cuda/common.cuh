// common.cuh: what every cuda/*.cu file shares: the vendor status checks (CUDA_CHECK,
// CUBLAS_CHECK: the vendor tier of core/error.hpp), launch sizing for grid-stride loops, the stream kernels
// run on, and the device-side fp16/bf16 load/store that mirrors compute_t<T> in cpu/loops.hpp.
// device checks shared by the kernels. Not here: strided indexing (cuda/loops.cuh).
#pragma once
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "core/allocator.hpp"
#include "core/dispatch.hpp"
#include "core/error.hpp"
#include "core/tensor.hpp"

namespace ampgrad::cuda {

// ---- vendor status checks: throw DeviceError naming the call, the vendor's message and file:line ----

[[noreturn]] void throw_cuda_error(cudaError_t status, const char* expr, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* expr, const char* file, int line);

// ---- devices (backend.cu, allocator.cu) ----

int count_devices();                           // GPUs the runtime reports (0 without a driver or GPU)
// Throws DeviceError unless `index` names a usable GPU: "cuda:0: no CUDA device is available (...)"
// or "cuda:3: device index out of range (2 devices)".
void require_device(int index);
Allocator& cuda_allocator(int index);          // checks the device first
Allocator& cuda_pinned_host_allocator();       // page-locked host memory (Tensor::pin_memory)

// Throws DeviceError unless every tensor lives on cuda:<index> (kernels never read host memory).
void require_on_device(const char* kernel, int index, std::initializer_list<const Tensor*> ts);

// DTypeError "cuda <kernel>: unsupported dtype ..." (core/dispatch.hpp).
[[noreturn]] inline void throw_bad_dtype(const char* kernel, DType dtype, const char* expected) {
    ampgrad::throw_bad_dtype("cuda ", kernel, dtype, expected);
}

}  // namespace ampgrad::cuda

// Usage: CUDA_CHECK(cudaMemcpy(...)); after every launch: CUDA_CHECK(cudaGetLastError());
#define CUDA_CHECK(expr)                                                                  \
    do {                                                                                  \
        cudaError_t ampgrad_status_ = (expr);                                             \
        if (ampgrad_status_ != cudaSuccess) [[unlikely]]                                  \
            ::ampgrad::cuda::throw_cuda_error(ampgrad_status_, #expr, __FILE__, __LINE__); \
    } while (0)

#define CUBLAS_CHECK(expr)                                                                  \
    do {                                                                                    \
        cublasStatus_t ampgrad_status_ = (expr);                                            \
        if (ampgrad_status_ != CUBLAS_STATUS_SUCCESS) [[unlikely]]                          \
            ::ampgrad::cuda::throw_cublas_error(ampgrad_status_, #expr, __FILE__, __LINE__); \
    } while (0)

namespace ampgrad::cuda {

// ---- launches ----

inline constexpr int kBlockSize = 256;
inline constexpr int64_t kMaxBlocks = 65536;     // grid-stride loops cover the rest

// Blocks for a grid-stride loop over n elements (never 0: callers return early when n == 0).
inline int grid_for(int64_t n) {
    int64_t blocks = (n + kBlockSize - 1) / kBlockSize;
    return static_cast<int>(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

// The stream every kernel and copy is issued on: this thread's current stream of the current
// device (core/stream.hpp; the device's default stream, id 0, until a StreamGuard or
// set_current_stream picks another). Defined in cuda/stream.cu.
cudaStream_t current_stream();
// The cudaStream_t behind a Stream id: the id itself, or for id 0 the device's default stream, a
// non-blocking stream (never the legacy NULL stream, which serialises against all others).
cudaStream_t to_cuda_stream(int device_index, uint64_t id);

// Makes `index` the current device for the lifetime of the guard, restoring the previous one.
class DeviceGuard {
public:
    explicit DeviceGuard(int index);
    ~DeviceGuard();
    DeviceGuard(const DeviceGuard&) = delete;
    DeviceGuard& operator=(const DeviceGuard&) = delete;

private:
    int previous_ = -1;
};

// ---- device-side scalar types: the storage type of each DType, and the type arithmetic runs in ----
// f16 and bf16 load to fp32, compute in fp32 and round once on store (as cpu/loops.hpp's compute_t).

template <typename T> struct DeviceCompute { using type = T; };
template <> struct DeviceCompute<__half> { using type = float; };
template <> struct DeviceCompute<__nv_bfloat16> { using type = float; };
template <typename T> using device_compute_t = typename DeviceCompute<T>::type;

template <typename T>
__device__ __forceinline__ device_compute_t<T> load_compute(T v) {
    if constexpr (std::is_same_v<T, __half>) return __half2float(v);
    else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(v);
    else return v;
}

// Rounds a compute value to the storage type T (round to nearest even for f16/bf16).
template <typename T, typename C>
__device__ __forceinline__ T store_compute(C v) {
    if constexpr (std::is_same_v<T, __half>) return __float2half_rn(static_cast<float>(v));
    else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __float2bfloat16_rn(static_cast<float>(v));
    else return static_cast<T>(v);
}

}  // namespace ampgrad::cuda

// dispatch.hpp: turn a runtime DType into a C++ storage type, once for every backend.
// cpu/loops.hpp and cuda/loops.cuh wrap these with their own storage types for f16/bf16
// (ampgrad::Half/BFloat16 on the host, __half/__nv_bfloat16 on the GPU):
//
//     dispatch_float_as<HostStorage>(x.dtype(), "softmax", [&](auto tag) {
//         using T = decltype(tag);            // float, double, Half or BFloat16
//         ...
//     });
#pragma once
#include <cstdint>
#include <utility>

#include "core/dtype.hpp"

namespace ampgrad {

// The storage types a backend uses for the two 16-bit floating dtypes, and the prefix its dtype
// errors carry ("" on the host, "cuda " on the GPU).
template <class HalfT, class BFloat16T>
struct StorageTypes {
    using half = HalfT;
    using bfloat16 = BFloat16T;
};
using HostStorage = StorageTypes<Half, BFloat16>;

// DTypeError: "<prefix><kernel>: unsupported dtype <dtype>; expected <expected>"
[[noreturn]] void throw_bad_dtype(const char* prefix, const char* kernel, DType dtype, const char* expected);

// Calls fn(T{}) with T the storage type of a floating dtype (f32, f64, f16, bf16).
template <class Storage, class Fn>
decltype(auto) dispatch_float_as(DType dtype, const char* prefix, const char* kernel, Fn&& fn) {
    switch (dtype) {
        case kFloat32: return fn(float{});
        case kFloat64: return fn(double{});
        case kFloat16: return fn(typename Storage::half{});
        case kBFloat16: return fn(typename Storage::bfloat16{});
        default: throw_bad_dtype(prefix, kernel, dtype, "a floating dtype (f32, f64, f16, bf16)");
    }
}

// Calls fn(T{}) for any of the seven non-fp8 dtypes; an fp8 or u8 dtype is a DTypeError naming the kernel.
template <class Storage, class Fn>
decltype(auto) dispatch_all_as(DType dtype, const char* prefix, const char* kernel, Fn&& fn) {
    switch (dtype) {
        case kFloat32: return fn(float{});
        case kFloat64: return fn(double{});
        case kFloat16: return fn(typename Storage::half{});
        case kBFloat16: return fn(typename Storage::bfloat16{});
        case kInt64: return fn(int64_t{});
        case kInt32: return fn(int32_t{});
        case kBool: return fn(bool{});
        case kFloat8_e4m3fn: case kFloat8_e5m2:
            throw_bad_dtype(prefix, kernel, dtype, "a dtype other than fp8 (fp8 tensors support casts, copies and "
                                                   "views only: docs/fp8.md)");
        case kUInt8:
            throw_bad_dtype(prefix, kernel, dtype, "a dtype other than u8 (u8 tensors hold bytes such as NF4 codes: "
                                                   "they support casts, copies and views only: docs/nf4.md)");
    }
    throw_bad_dtype(prefix, kernel, dtype, "a known dtype");
}

// Calls fn(T{}) for any of the ten dtypes: the seven above and the storage types Float8_e4m3fn,
// Float8_e5m2 (core/float8.hpp, the same on the host and the device) and uint8_t. Only the
// kernels that move or convert values (copy, fill) dispatch this way.
template <class Storage, class Fn>
decltype(auto) dispatch_all_with_float8_as(DType dtype, const char* prefix, const char* kernel, Fn&& fn) {
    if (dtype == kFloat8_e4m3fn) return fn(Float8_e4m3fn{});
    if (dtype == kFloat8_e5m2) return fn(Float8_e5m2{});
    if (dtype == kUInt8) return fn(uint8_t{});
    return dispatch_all_as<Storage>(dtype, prefix, kernel, std::forward<Fn>(fn));
}

}  // namespace ampgrad

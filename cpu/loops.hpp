// loops.hpp: the CPU backend's iteration machinery (a small TensorIterator).
//   - dispatch_float / dispatch_all: turn a runtime DType into a C++ type (Half, BFloat16, ...),
//     through core/dispatch.hpp (shared with cuda/loops.cuh);
//   - compute_t<T>: the type arithmetic runs in (fp32 for Half/BFloat16, as tensor cores do);
//   - for_each_run: walk N same-shaped strided tensors as 1-d runs, split across OpenMP threads,
//     after merging dims that are contiguous in every operand.
// Kernels know nothing of autograd; they see pointers, strides and counts.
#pragma once
#include <array>
#include <cstdint>
#include <type_traits>

#include "core/dispatch.hpp"
#include "core/error.hpp"
#include "core/tensor.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace ampgrad::cpu {

#ifdef _OPENMP
inline int ampgrad_omp_num_threads() { return omp_get_num_threads(); }
inline int ampgrad_omp_thread_num() { return omp_get_thread_num(); }
#else
inline int ampgrad_omp_num_threads() { return 1; }
inline int ampgrad_omp_thread_num() { return 0; }
#endif

template <typename T> struct ComputeType { using type = T; };
template <> struct ComputeType<Half> { using type = float; };
template <> struct ComputeType<BFloat16> { using type = float; };
template <typename T> using compute_t = typename ComputeType<T>::type;

// DTypeError naming the kernel (core/dispatch.hpp).
[[noreturn]] inline void throw_bad_dtype(const char* kernel, DType dtype, const char* expected) {
    ampgrad::throw_bad_dtype("", kernel, dtype, expected);
}

// Calls fn(T{}) with T the C++ type of a floating dtype (core/dispatch.hpp, host storage types).
template <typename Fn>
decltype(auto) dispatch_float(DType dtype, const char* kernel, Fn&& fn) {
    return dispatch_float_as<HostStorage>(dtype, "", kernel, std::forward<Fn>(fn));
}

// Calls fn(T{}) for any of the seven non-fp8 dtypes (an fp8 dtype is a DTypeError: core/dispatch.hpp).
template <typename Fn>
decltype(auto) dispatch_all(DType dtype, const char* kernel, Fn&& fn) {
    return dispatch_all_as<HostStorage>(dtype, "", kernel, std::forward<Fn>(fn));
}

inline constexpr int kMaxDims = 16;
inline constexpr int64_t kGrainSize = 32768;     // elements per thread below which we stay serial

template <int N>
struct RunLayout {
    int ndim = 0;                                  // after merging; the last dim is the run
    std::array<int64_t, kMaxDims> sizes{};
    std::array<std::array<int64_t, kMaxDims>, N> strides{};   // bytes
    std::array<char*, N> base{};
};

// Build the layout for N tensors of identical shape (operand 0 is usually the output).
template <int N>
RunLayout<N> make_run_layout(const std::array<const Tensor*, N>& ts) {
    RunLayout<N> L;
    const Shape& shape = ts[0]->sizes();
    AMPGRAD_CHECK(shape.size() <= kMaxDims, "tensor of {} dims exceeds kMaxDims={}", shape.size(), kMaxDims);
    for (int k = 0; k < N; ++k) {
        AMPGRAD_CHECK(ts[k]->sizes() == shape, "operand {} is {} but operand 0 is {}", k, ts[k]->shape_str(),
                      ts[0]->shape_str());
        L.base[k] = static_cast<char*>(ts[k]->raw_data());
    }
    // Drop size-1 dims, then merge neighbours that are contiguous with each other in all operands.
    for (size_t d = 0; d < shape.size(); ++d) {
        if (shape[d] == 1) continue;
        if (L.ndim > 0) {
            bool mergeable = true;
            for (int k = 0; k < N; ++k) {
                int64_t es = static_cast<int64_t>(ts[k]->element_size());
                if (L.strides[k][L.ndim - 1] != ts[k]->strides()[d] * es * shape[d]) mergeable = false;
            }
            if (mergeable) {
                L.sizes[L.ndim - 1] *= shape[d];
                for (int k = 0; k < N; ++k)
                    L.strides[k][L.ndim - 1] = ts[k]->strides()[d] * static_cast<int64_t>(ts[k]->element_size());
                continue;
            }
        }
        L.sizes[L.ndim] = shape[d];
        for (int k = 0; k < N; ++k)
            L.strides[k][L.ndim] = ts[k]->strides()[d] * static_cast<int64_t>(ts[k]->element_size());
        ++L.ndim;
    }
    if (L.ndim == 0) {                      // a scalar or all-ones shape: one run of one element
        L.ndim = 1;
        L.sizes[0] = 1;
        for (int k = 0; k < N; ++k) L.strides[k][0] = 0;
    }
    return L;
}

// Calls run(ptrs, strides_in_bytes, n) over 1-d runs covering every element exactly once.
template <int N, typename RunFn>
void for_each_run(const RunLayout<N>& L, RunFn&& run) {
    const int inner = L.ndim - 1;
    const int64_t run_len = L.sizes[inner];
    int64_t outer = 1;
    for (int d = 0; d < inner; ++d) outer *= L.sizes[d];
    std::array<int64_t, N> inner_stride;
    for (int k = 0; k < N; ++k) inner_stride[k] = L.strides[k][inner];

    // Split the flat element range [0, outer*run_len) into per-thread chunks. A chunk finds its first
    // run's multi-index with divisions once, then steps from run to run like an odometer: the
    // divisions per run cost more than a short run itself (a (B,H,T,32) head transpose: 128-byte runs).
    const int64_t total = outer * run_len;
    auto do_range = [&](int64_t begin, int64_t end) {
        int64_t col = begin % run_len, rem = begin / run_len;
        std::array<int64_t, kMaxDims> idx{};
        std::array<char*, N> row_start = L.base;   // the operands at the current run's column 0
        for (int d = inner - 1; d >= 0; --d) {
            idx[d] = rem % L.sizes[d];
            rem /= L.sizes[d];
            for (int k = 0; k < N; ++k) row_start[k] += idx[d] * L.strides[k][d];
        }
        while (begin < end) {
            const int64_t n = std::min(run_len - col, end - begin);
            std::array<char*, N> p = row_start;
            for (int k = 0; k < N; ++k) p[k] += col * inner_stride[k];
            run(p, inner_stride, n);
            begin += n;
            col = 0;
            if (begin >= end) break;                 // no step past the chunk's last run
            for (int d = inner - 1; d >= 0; --d) {   // the next run: carry through the outer dims
                for (int k = 0; k < N; ++k) row_start[k] += L.strides[k][d];
                if (++idx[d] < L.sizes[d]) break;
                for (int k = 0; k < N; ++k) row_start[k] -= L.strides[k][d] * L.sizes[d];
                idx[d] = 0;
            }
        }
    };
    if (total < kGrainSize) { do_range(0, total); return; }
#pragma omp parallel
    {
        int nt = ampgrad_omp_num_threads(), tid = ampgrad_omp_thread_num();
        int64_t chunk = (total + nt - 1) / nt;
        int64_t b = std::min(total, tid * chunk), e = std::min(total, b + chunk);
        if (b < e) do_range(b, e);
    }
}

// Parallel for over [0, n) in chunks of at least `grain`, for kernels that index rows directly.
template <typename Fn>
void parallel_for(int64_t n, int64_t grain, Fn&& fn) {
    if (n <= grain) { if (n > 0) fn(int64_t{0}, n); return; }
#pragma omp parallel
    {
        int nt = ampgrad_omp_num_threads(), tid = ampgrad_omp_thread_num();
        int64_t chunk = (n + nt - 1) / nt;
        int64_t b = std::min(n, tid * chunk), e = std::min(n, b + chunk);
        if (b < e) fn(b, e);
    }
}

}  // namespace ampgrad::cpu

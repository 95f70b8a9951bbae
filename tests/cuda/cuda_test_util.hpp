// cuda_test_util.hpp: helpers for the CUDA-vs-CPU kernel tests (tests/cuda/*_test.cpp). Each test
// runs one kernel on the CPU and on cuda:0 with the same inputs and compares; the tests
// call the backends directly, so they check kernels only, not the autograd ops above them.
// Without a usable GPU every test case is reported as skipped (skip_without_gpu()).
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ampgrad/ampgrad.h"
#include "kernels/attention_gemm.hpp"
#include "tests/support/check_close.hpp"

namespace ampgrad::testing {

// Decorator: TEST_CASE("..." * skip_without_gpu()) is skipped when no GPU can be used.
inline doctest::skip skip_without_gpu() { return doctest::skip(!cuda::is_available()); }

inline const Device kGpu(kCUDA, 0);
inline const Device kHost(kCPU);
inline const std::vector<DType> kFloatDTypes = {kFloat32, kFloat64, kFloat16, kBFloat16};
inline const std::vector<DType> kAllDTypes = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kBool};

// The attention path (kernels/attention_gemm.hpp) for one scope: the CUDA attention tests run the GPU
// under each path and the CPU under the fused kernel, their reference.
struct ScopedAttentionPath {
    AttentionPath before;
    explicit ScopedAttentionPath(AttentionPath path) : before(attention_path()) { set_attention_path(path); }
    ~ScopedAttentionPath() { set_attention_path(before); }
    ScopedAttentionPath(const ScopedAttentionPath&) = delete;
    ScopedAttentionPath& operator=(const ScopedAttentionPath&) = delete;
};
inline const std::vector<AttentionPath> kAttentionPaths = {AttentionPath::kFused, AttentionPath::kGemm};

// Attention forward and backward on the path attention_path() picks now, as the op does
// (autograd/ops/attention_fused.cpp): the kernels:: slots hold only the fused kernels, so a test that
// called them under kGemm would run the fused kernel twice.
inline void attention_forward_on_path(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                                      const Tensor& v, double scale, bool causal) {
    if (attention_uses_gemm(q, k)) attention_forward_gemm(out, lse, q, k, v, scale, causal);
    else kernels::attention_forward(out, lse, q, k, v, scale, causal);
}
inline void attention_backward_on_path(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                                       const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                                       const Tensor& v, double scale, bool causal) {
    if (attention_uses_gemm(q, k)) attention_backward_gemm(dq, dk, dv, dout, out, lse, q, k, v, scale, causal);
    else kernels::attention_backward(dq, dk, dv, dout, out, lse, q, k, v, scale, causal);
}

// A contiguous copy of t (any device, any strides) on `device`, same dtype. Transfers between
// host and GPU are the CUDA backend's job whichever side the GPU is on.
inline Tensor copy_to(const Tensor& t, Device device, std::optional<DType> dtype = std::nullopt) {
    Tensor out = make_empty(t.sizes(), dtype.value_or(t.dtype()), device);
    kernels::copy(out, t);
    return out;
}
inline Tensor to_gpu(const Tensor& t) { return copy_to(t, kGpu); }
inline Tensor to_host(const Tensor& t) { return copy_to(t, kHost); }

// Seeded host data of any dtype: normals for floats, integers in [-5, 5] for ints, 0/1 for bool.
inline Tensor sample(const Shape& shape, DType dtype, uint64_t seed) {
    manual_seed(seed);
    if (is_floating(dtype)) return randn(shape, TensorOptions(dtype));
    Tensor ints = randint(dtype == kBool ? 0 : -5, dtype == kBool ? 2 : 6, shape, TensorOptions(kInt64));
    return copy_to(ints, kHost, dtype);
}

// Host values of t as doubles, row-major (exact for every dtype except i64 beyond 2^53).
inline std::vector<double> host_values(const Tensor& t) { return to_host(t).to_vector<double>(); }

// "" if actual and expected hold the same values (NaN equals NaN, -0 equals 0), else the first mismatch.
inline std::string compare_exact(const Tensor& actual, const Tensor& expected) {
    if (actual.sizes() != expected.sizes())
        return fmt::format("shape mismatch: actual {}, expected {}", actual.describe(), expected.describe());
    std::vector<double> a = host_values(actual), e = host_values(expected);
    for (size_t i = 0; i < a.size(); ++i) {
        if (a[i] == e[i] || (std::isnan(a[i]) && std::isnan(e[i]))) continue;
        return fmt::format("flat index {}: actual {:.17g}, expected {:.17g} ({} vs {})", i, a[i], e[i],
                           actual.describe(), expected.describe());
    }
    return {};
}

}  // namespace ampgrad::testing

#define CHECK_EXACT(actual, expected)                                                           \
    do {                                                                                        \
        std::string ampgrad_exact_ = ::ampgrad::testing::compare_exact(actual, expected);       \
        CHECK_MESSAGE(ampgrad_exact_.empty(), ampgrad_exact_);                                  \
    } while (0)

// Tolerance comparison of a GPU result against the CPU one (both brought to the host first).
#define CHECK_GPU_CLOSE(gpu, cpu, tol) CHECK_CLOSE(::ampgrad::testing::to_host(gpu), cpu, tol)

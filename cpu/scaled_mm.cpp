// scaled_mm.cpp: the FP8 scaled GEMM on the CPU, an exact emulation of what the tensor cores compute
// (the GPU twin: cuda/scaled_mm.cu). Every fp8 value is exact in f32, so decoding first loses
// nothing; the products accumulate in f32 in k order (a row of outputs at a time, so the loop over
// the columns vectorises without changing a rounding), then
//   out[i,j] = round_to_out(acc * (scale_a[i] * scale_b[j]) + bias[j])
// and amax = max |acc * scales + bias| in f32, before the rounding to out's dtype (as cuBLASLt's AMAX_D). The rules on the operands are checked by the op
// (autograd/ops/scaled_mm.cpp); this file only computes.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/kernels.hpp"
#include "cpu/loops.hpp"

namespace ampgrad::cpu {

namespace {

// The fp8 codes of a (R,C) matrix with element (r,c) at r*row_stride + c*col_stride, as f32 (R,C) row-major.
std::vector<float> decode_matrix(const Tensor& t, int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
    std::vector<float> values(static_cast<size_t>(rows * cols));
    const auto* codes = static_cast<const uint8_t*>(t.raw_data());
    const bool e4m3 = t.dtype() == kFloat8_e4m3fn;
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
            const uint8_t code = codes[r * row_stride + c * col_stride];
            values[static_cast<size_t>(r * cols + c)] = e4m3 ? fp8::decode<fp8::E4M3fn>(code) : fp8::decode<fp8::E5M2>(code);
        }
    return values;
}

// One scale per row (rowwise, numel == count) or one for all (tensorwise).
float scale_at(const float* scale, int64_t numel, int64_t index) { return numel == 1 ? scale[0] : scale[index]; }

// Row i of the output: acc[j] = sum_k a[i,k] * b[k,j], each acc[j] summed in k order (the same
// roundings as one dot product at a time; the loop over j is the one the compiler vectorises).
void accumulate_row(const float* a_row, const float* b_kn, int64_t K, int64_t N, float* acc) {
    std::fill(acc, acc + N, 0.0f);
    for (int64_t k = 0; k < K; ++k) {
        const float a_ik = a_row[k];
        const float* b_row = b_kn + k * N;
        for (int64_t j = 0; j < N; ++j) acc[j] += a_ik * b_row[j];
    }
}

template <typename Out>
void scaled_mm_typed(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& scale_a, const Tensor& scale_b,
                     const Tensor& bias, const Tensor& amax) {
    const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
    const std::vector<float> a_f32 = decode_matrix(a, M, K, a.stride(0), a.stride(1));      // (M,K)
    const std::vector<float> b_f32 = decode_matrix(b, K, N, b.stride(0), b.stride(1));      // (K,N) row-major
    const float* sa = scale_a.data_ptr<float>();
    const float* sb = scale_b.data_ptr<float>();
    const Out* bias_p = bias.defined() ? bias.data_ptr<Out>() : nullptr;
    Out* out_p = out.data_ptr<Out>();                                                        // (M,N)
    std::vector<float> row_max_abs(static_cast<size_t>(M), 0.0f);                           // (M): NaN if any is
#pragma omp parallel if (M * N * K > kGrainSize)
    {
        std::vector<float> acc(static_cast<size_t>(N));                                     // (N) one output row
#pragma omp for
        for (int64_t i = 0; i < M; ++i) {
            accumulate_row(a_f32.data() + i * K, b_f32.data(), K, N, acc.data());
            float max_abs = 0.0f;
            for (int64_t j = 0; j < N; ++j) {
                float value = acc[static_cast<size_t>(j)] * (scale_at(sa, scale_a.numel(), i) * scale_at(sb, scale_b.numel(), j));
                if (bias_p) value += static_cast<float>(bias_p[j]);
                out_p[i * N + j] = static_cast<Out>(value);
                const float magnitude = std::fabs(value);
                if (std::isnan(magnitude) || magnitude > max_abs) max_abs = std::isnan(max_abs) ? max_abs : magnitude;
            }
            row_max_abs[static_cast<size_t>(i)] = max_abs;
        }
    }
    if (!amax.defined()) return;
    float max_abs = 0.0f;
    for (float m : row_max_abs)
        if (std::isnan(m) || m > max_abs) max_abs = std::isnan(max_abs) ? max_abs : m;
    *static_cast<float*>(amax.raw_data()) = max_abs;
}

void scaled_mm(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& scale_a, const Tensor& scale_b,
               const Tensor& bias, const Tensor& amax) {
    AMPGRAD_CHECK(is_float8(a.dtype()) && is_float8(b.dtype()) && out.is_contiguous(),
                  "cpu scaled_mm got out {}, a {}, b {}", out.describe(), a.describe(), b.describe());
    switch (out.dtype()) {
        case kFloat32: return scaled_mm_typed<float>(out, a, b, scale_a, scale_b, bias, amax);
        case kFloat16: return scaled_mm_typed<Half>(out, a, b, scale_a, scale_b, bias, amax);
        case kBFloat16: return scaled_mm_typed<BFloat16>(out, a, b, scale_a, scale_b, bias, amax);
        default: throw_bad_dtype("scaled_mm", out.dtype(), "an f32, f16 or bf16 output");
    }
}

}  // namespace

AMPGRAD_REGISTER_KERNEL(kernels::scaled_mm, kCPU, scaled_mm);

}  // namespace ampgrad::cpu

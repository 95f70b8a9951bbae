// scaled_mm.cpp: the FP8 scaled GEMM on the CPU, an exact emulation of what the tensor cores compute
// (the GPU twin: cuda/scaled_mm.cu). Every fp8 value is exact in f32, so decoding first loses
// nothing; the products accumulate in f32 in k order, then
//   out[i,j] = round_to_out(acc * (scale_a[i] * scale_b[j]) + bias[j])
// and amax = max |acc * scales + bias| in f32, before the rounding to out's dtype (as cuBLASLt's AMAX_D). The rules on the operands are checked by the op
// (autograd/ops/scaled_mm.cpp); this file only computes.
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

template <typename Out>
void scaled_mm_typed(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& scale_a, const Tensor& scale_b,
                     const Tensor& bias, const Tensor& amax) {
    const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
    const std::vector<float> a_f32 = decode_matrix(a, M, K, a.stride(0), a.stride(1));      // (M,K)
    const std::vector<float> bt_f32 = decode_matrix(b, N, K, b.stride(1), b.stride(0));     // (N,K): b transposed
    const float* sa = scale_a.data_ptr<float>();
    const float* sb = scale_b.data_ptr<float>();
    const Out* bias_p = bias.defined() ? bias.data_ptr<Out>() : nullptr;
    Out* out_p = out.data_ptr<Out>();                                                        // (M,N)
    std::vector<float> row_max_abs(static_cast<size_t>(M), 0.0f);                           // (M): NaN if any is
#pragma omp parallel for if (M * N * K > kGrainSize)
    for (int64_t i = 0; i < M; ++i) {
        float max_abs = 0.0f;
        const float* a_row = a_f32.data() + i * K;
        for (int64_t j = 0; j < N; ++j) {
            const float* b_col = bt_f32.data() + j * K;
            float acc = 0.0f;
            for (int64_t k = 0; k < K; ++k) acc += a_row[k] * b_col[k];
            float value = acc * (scale_at(sa, scale_a.numel(), i) * scale_at(sb, scale_b.numel(), j));
            if (bias_p) value += static_cast<float>(bias_p[j]);
            out_p[i * N + j] = static_cast<Out>(value);
            const float magnitude = std::fabs(value);
            if (std::isnan(magnitude) || magnitude > max_abs) max_abs = std::isnan(max_abs) ? max_abs : magnitude;
        }
        row_max_abs[static_cast<size_t>(i)] = max_abs;
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

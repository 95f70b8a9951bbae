// scaled_mm.cpp: the FP8 scaled GEMM on the CPU, an emulation of what the tensor cores compute (the
// GPU twin: cuda/scaled_mm.cu). Every fp8 value is exact in f32, and so is the product of two (at most
// 4+4 significant bits), so decoding first loses nothing: the operands are decoded once (a 256-entry
// table per format) and multiplied by the f32 GEMM (cpu/gemm.hpp's gemm_f32: oneDNN's sgemm or Eigen,
// with fixed row tiles in the deterministic mode), which accumulates in f32 as the tensor cores do.
// Only the order of the f32 sums is the library's (cuBLASLt does not promise one either). Then
//   out[i,j] = round_to_out(acc * (scale_a[i] * scale_b[j]) + bias[j])
// and amax = max |out| of the stored (rounded) values, NaN if any is NaN. The rules on the operands
// are checked by the op (autograd/ops/scaled_mm.cpp); this file only computes.
#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <vector>

#include "kernels/kernels.hpp"
#include "cpu/gemm.hpp"
#include "cpu/loops.hpp"

namespace ampgrad::cpu {

namespace {

// The f32 value of every code of an fp8 format, indexed by the code.
using DecodeTable = std::array<float, 256>;

template <typename Format>
DecodeTable make_decode_table() {
    DecodeTable table{};
    for (int code = 0; code < 256; ++code) table[static_cast<size_t>(code)] = fp8::decode<Format>(static_cast<uint8_t>(code));
    return table;
}

const DecodeTable& decode_table(DType dtype) {
    static const DecodeTable e4m3 = make_decode_table<fp8::E4M3fn>();
    static const DecodeTable e5m2 = make_decode_table<fp8::E5M2>();
    return dtype == kFloat8_e4m3fn ? e4m3 : e5m2;
}

// The fp8 codes of a matrix stored with `rows` lines of `cols` contiguous codes (line r at r*line_stride),
// as a dense f32 (rows, cols) buffer in the same order.
std::vector<float> decode_lines(const Tensor& t, int64_t rows, int64_t cols, int64_t line_stride) {
    std::vector<float> values(static_cast<size_t>(rows * cols));
    const auto* codes = static_cast<const uint8_t*>(t.raw_data());
    const DecodeTable& table = decode_table(t.dtype());
    const int64_t grain_rows = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(cols, 1));
    parallel_for(rows, grain_rows, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
            const uint8_t* line = codes + r * line_stride;
            float* out = values.data() + r * cols;
            for (int64_t c = 0; c < cols; ++c) out[c] = table[line[c]];
        }
    });
    return values;
}

// acc (M,N) = a (M,K) row-major . b (K,N) column-major, both decoded to f32 and multiplied in f32.
std::unique_ptr<float[]> decoded_product(const Tensor& a, const Tensor& b) {
    const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
    const std::vector<float> a_f32 = decode_lines(a, M, K, a.stride(0));   // (M,K) row-major
    const std::vector<float> b_f32 = decode_lines(b, N, K, b.stride(1));   // (N,K) row-major = (K,N) column-major
    std::unique_ptr<float[]> acc(new float[static_cast<size_t>(M * N)]);   // (M,N), written by the GEMM (beta 0)
    const MatrixBatch<float> a_rows{a_f32.data(), 0, M, K, K, 1};
    const MatrixBatch<float> b_columns{b_f32.data(), 0, K, N, 1, K};
    gemm_f32(acc.get(), 1, M, N, a_rows, false, b_columns, false, 1.0f, 0.0f);
    return acc;
}

template <typename Out>
void scaled_mm_typed(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& scale_a, const Tensor& scale_b,
                     const Tensor& bias, const Tensor& amax) {
    const int64_t M = a.size(0), N = b.size(1);
    const std::unique_ptr<float[]> acc = decoded_product(a, b);                                   // (M,N)
    const float* sa = scale_a.data_ptr<float>();
    const float* sb = scale_b.data_ptr<float>();
    const Out* bias_p = bias.defined() ? bias.data_ptr<Out>() : nullptr;
    Out* out_p = out.data_ptr<Out>();                                                        // (M,N)
    std::vector<float> row_max_abs(static_cast<size_t>(M), 0.0f);                           // (M): NaN if any is
    const bool scale_per_row = scale_a.numel() != 1, scale_per_column = scale_b.numel() != 1;   // rowwise
    const int64_t grain_rows = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(N, 1));
    parallel_for(M, grain_rows, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
            const float* acc_row = acc.get() + i * N;
            const float sa_i = scale_per_row ? sa[i] : sa[0];
            float max_abs = 0.0f;
            for (int64_t j = 0; j < N; ++j) {
                float value = acc_row[j] * (sa_i * (scale_per_column ? sb[j] : sb[0]));
                if (bias_p) value += static_cast<float>(bias_p[j]);
                out_p[i * N + j] = static_cast<Out>(value);
                const float magnitude = std::fabs(static_cast<float>(out_p[i * N + j]));   // as stored
                if (std::isnan(magnitude) || magnitude > max_abs) max_abs = std::isnan(max_abs) ? max_abs : magnitude;
            }
            row_max_abs[static_cast<size_t>(i)] = max_abs;
        }
    });
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

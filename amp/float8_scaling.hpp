// float8_scaling.hpp: fp8 *current scaling* (torchao's Float8LinearConfig recipes "tensorwise" and
// "rowwise"): each tensor is quantized with a scale from its own amax just before its GEMM, and
// F::scaled_mm takes the inverse scales. Forward only; delayed scaling (Transformer Engine's
// DelayedScaling, with an amax history) and the autocast mode are issue 38's next items (docs/fp8.md).
//
//   amp::Float8Tensor xq = amp::quantize_float8(x, kFloat8_e4m3fn, amp::Float8Scaling::kTensorwise);
//   Tensor y = amp::linear_float8(x, w, amp::Float8Scaling::kRowwise, kBFloat16);   // x (M,K), w (N,K)
#pragma once
#include "core/tensor.hpp"

namespace ampgrad::amp {

enum class Float8Scaling {
    kTensorwise,   // one scale per tensor
    kRowwise,      // one scale per row (over the last dim), rounded down to a power of two (torchao's default)
};

// x ≈ data / scale: data in an fp8 dtype, scale f32 with one element (tensorwise) or (R,1) (rowwise).
struct Float8Tensor {
    Tensor data;
    Tensor scale;
};

// torchao's amax_to_scale: scale = fp8_max / max(amax, 1e-12), computed in f64 and stored as f32;
// optionally rounded down to a power of two. amax: f32, any shape; the result has its shape.
Tensor amax_to_scale(const Tensor& amax, DType fp8_dtype, bool round_to_power_of_2);

// x (R,C), any float dtype -> fp8 with the scale from its own amax (over everything, or over each
// row): data = saturate(x.to(f32) * scale), as torchao's hp_tensor_and_scale_to_float8.
Float8Tensor quantize_float8(const Tensor& x, DType fp8_dtype, Float8Scaling scaling);

// y (M,N) = x (M,K) @ w (N,K)^T in fp8: x and w quantized to e4m3fn with current scaling, then
// F::scaled_mm with the inverse scales, out_dtype f32/f16/bf16 (bf16 only for rowwise). Forward only.
Tensor linear_float8(const Tensor& x, const Tensor& w, Float8Scaling scaling, DType out_dtype);

}  // namespace ampgrad::amp

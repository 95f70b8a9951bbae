// float8_scaling.cpp: fp8 current scaling (amp/float8_scaling.hpp): amax -> scale -> saturating cast,
// written with tensor ops so that nothing waits for the device. Semantics are torchao's
// (torchao.float8: float8_utils.amax_to_scale, float8_scaling_utils.hp_tensor_to_float8_dynamic).
#include "amp/float8_scaling.hpp"

#include "autograd/grad_mode.hpp"
#include "autograd/ops/fp8_linear.hpp"
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"

namespace ampgrad::amp {

Tensor amax_to_scale(const Tensor& amax, DType fp8_dtype, bool round_to_power_of_2) {
    return fp8_amax_to_scale(amax, fp8_dtype, round_to_power_of_2);   // autograd/ops/fp8_linear.cpp
}

Float8Tensor quantize_float8(const Tensor& x, DType fp8_dtype, Float8Scaling scaling) {
    if (x.dim() != 2)
        throw ShapeError(fmt::format("quantize_float8: expected a 2-D tensor (R,C), got {}", x.describe()));
    NoGradGuard no_grad;
    Tensor x_f32 = x.to(kFloat32);                                                   // (R,C)
    const bool rowwise = scaling == Float8Scaling::kRowwise;
    Tensor amax_x = rowwise ? amax(abs(x_f32), {1}, /*keepdim=*/true) : max(abs(x_f32));   // (R,1) or ()
    Tensor scale = amax_to_scale(amax_x, fp8_dtype, /*round_to_power_of_2=*/rowwise);
    return {fp8_quantize_with_scale(x_f32, scale, fp8_dtype), scale};
}

Tensor linear_float8(const Tensor& x, const Tensor& w, Float8Scaling scaling, DType out_dtype) {
    if (x.dim() != 2 || w.dim() != 2 || x.size(1) != w.size(1))
        throw ShapeError(fmt::format("linear_float8: expected x (M,K) and w (N,K), got x {}, w {}", x.describe(),
                                     w.describe()));
    NoGradGuard no_grad;
    Float8Tensor xq = quantize_float8(x, kFloat8_e4m3fn, scaling);                 // (M,K), scale (M,1) or ()
    Float8Tensor wq = quantize_float8(w, kFloat8_e4m3fn, scaling);                 // (N,K), scale (N,1) or ()
    Tensor w_scale_inv = reciprocal(wq.scale);
    if (scaling == Float8Scaling::kRowwise) w_scale_inv = w_scale_inv.t();          // (1,N)
    return F::scaled_mm(xq.data, wq.data.t(), reciprocal(xq.scale), w_scale_inv, out_dtype);   // (M,N)
}

}  // namespace ampgrad::amp

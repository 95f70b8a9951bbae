// float8_scaling.cpp: fp8 current scaling (amp/float8_scaling.hpp): amax -> scale -> saturating cast,
// written with tensor ops so that nothing waits for the device. Semantics are torchao's
// (torchao.float8: float8_utils.amax_to_scale, float8_scaling_utils.hp_tensor_to_float8_dynamic).
#include "amp/float8_scaling.hpp"

#include "autograd/grad_mode.hpp"
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"

namespace ampgrad::amp {

namespace {

constexpr double kAmaxFloor = 1e-12;   // torchao's EPS: an all-zero tensor gets a finite scale

double float8_max(DType fp8_dtype) {
    switch (fp8_dtype) {
        case kFloat8_e4m3fn: return kFloat8E4M3fnMax;
        case kFloat8_e5m2: return kFloat8E5M2Max;
        default:
            throw DTypeError(fmt::format("float8 scaling: the target must be float8_e4m3fn or float8_e5m2, got {}",
                                         dtype_name(fp8_dtype)));
    }
}

// The largest power of two <= s (s > 0, f64), exactly: log() may miss an exact power by an ulp, so the
// estimate is corrected by one step either way.
Tensor round_down_to_power_of_2(const Tensor& s) {
    Tensor p = exp2(floor(log(s) / 0.6931471805599453));
    p = where(p > s, p / 2.0, p);
    return where(p * 2.0 <= s, p * 2.0, p);
}

}  // namespace

Tensor amax_to_scale(const Tensor& amax, DType fp8_dtype, bool round_to_power_of_2) {
    const double max_value = float8_max(fp8_dtype);
    Tensor amax_f64 = clamp(amax.to(kFloat64), kAmaxFloor, std::nullopt);
    Tensor scale = full_like(amax_f64, max_value) / amax_f64;                       // f64, exact division
    scale = scale.to(kFloat32);
    return round_to_power_of_2 ? round_down_to_power_of_2(scale.to(kFloat64)).to(kFloat32) : scale;
}

Float8Tensor quantize_float8(const Tensor& x, DType fp8_dtype, Float8Scaling scaling) {
    if (x.dim() != 2)
        throw ShapeError(fmt::format("quantize_float8: expected a 2-D tensor (R,C), got {}", x.describe()));
    NoGradGuard no_grad;
    Tensor x_f32 = x.to(kFloat32);                                                   // (R,C)
    const bool rowwise = scaling == Float8Scaling::kRowwise;
    Tensor amax_x = rowwise ? amax(abs(x_f32), {1}, /*keepdim=*/true) : max(abs(x_f32));   // (R,1) or ()
    Tensor scale = amax_to_scale(amax_x, fp8_dtype, /*round_to_power_of_2=*/rowwise);
    return {to_float8_saturated(x_f32 * scale, fp8_dtype), scale};
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

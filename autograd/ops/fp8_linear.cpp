// fp8_linear.cpp: F::fp8_linear (autograd/ops/fp8_linear.hpp; docs/fp8.md §6-8). One function holds
// the forward and the backward; the three GEMMs are F::scaled_mm calls, so the layout rules are
// torch._scaled_mm's: a (M,K) row-major, b (K,N) column-major, i.e. b is the .t() of a contiguous
// (N,K). Each operand is therefore quantised from the contiguous matrix whose rows are its K:
//   forward  y  (M,N) = x (M,K)           . [w (N,K)]^T
//   dgrad    dx (M,K) = g (M,N)           . [w^T (K,N)]^T      (Transformer Engine's "NN" dgrad)
//   wgrad    dw (N,K) = g^T (N,M)         . [x^T (K,M)]^T      (TE's "NT" wgrad)
// With one scale per tensor the transposes change nothing but the layout; with rowwise scales they
// change which axis the scales run along (torchao's float8_linear.py matmul_with_hp_or_float8_args:
// "dim0" casts for the forward and dgrad, "dim1" casts for the wgrad).
// The amaxes are recorded only with grad mode on: evaluation under no_grad never moves the scales.
#include "autograd/ops/fp8_linear.hpp"

#include "autograd/grad_mode.hpp"
#include "autograd/ops/op_utils.hpp"
#include "autograd/ops/ops.hpp"
#include "autograd/record.hpp"

namespace ampgrad {

using autograd::BackwardContext;
using autograd::record;

namespace {

constexpr std::string_view kOp = "fp8_linear";
constexpr double kAmaxFloor = 1e-12;   // torchao's EPS: an all-zero tensor gets a finite scale

// The largest power of two <= s (s > 0, f64), exactly: log() may miss an exact power by an ulp, so
// the estimate is corrected by one step either way.
Tensor round_down_to_power_of_2(const Tensor& s) {
    Tensor p = exp2(floor(log(s) / 0.6931471805599453));
    p = where(p > s, p / 2.0, p);
    return where(p * 2.0 <= s, p * 2.0, p);
}

// An operand ready for scaled_mm: the fp8 codes and the inverse scale (one element, or (R,1)).
struct Quantized {
    Tensor data;        // (R,C) fp8, row-major
    Tensor scale_inv;   // () or (R,1) f32
};

// x (R,C) contiguous, quantised for `role` by the state's recipe. `delayed_scale` (one element) is the
// role's scale under kDelayed, captured when the forward ran.
Quantized quantize_operand(const Tensor& x, Fp8Role role, const Fp8LinearState& state, const Tensor& delayed_scale) {
    const DType dtype = state.dtype(role);
    Tensor scale;
    if (state.scaling == Fp8Scaling::kDelayed) scale = delayed_scale;
    else if (state.scaling == Fp8Scaling::kTensorwise) scale = fp8_amax_to_scale(max(abs(x)).to(kFloat32), dtype, false);
    else scale = fp8_amax_to_scale(amax(abs(x), {1}, /*keepdim=*/true).to(kFloat32), dtype, true);   // (R,1)
    return {fp8_quantize_with_scale(x, scale, dtype), reciprocal(scale)};
}

// scaled_mm's scale_b for b = data.t(): a rowwise (R,1) becomes (1,R); one element stays.
Tensor as_column_scale(const Tensor& scale_inv) { return scale_inv.numel() == 1 ? scale_inv : scale_inv.t(); }

// a (P,C) . b (Q,C)^T -> (P,Q) in out_dtype: both quantised along their rows C.
Tensor fp8_gemm(const Quantized& a, const Quantized& b, DType out_dtype) {
    return F::scaled_mm(a.data, b.data.t(), a.scale_inv, as_column_scale(b.scale_inv), out_dtype);
}

// amax[role] = max(amax[role], max |x|), on the device.
void record_amax(const Fp8LinearState& state, Fp8Role role, const Tensor& x) {
    Tensor slot = state.amax.select(0, static_cast<int64_t>(role));   // () view
    slot.copy_(maximum(slot, max(abs(x)).to(kFloat32)));
}

Tensor delayed_scale_of(const Fp8LinearState& state, Fp8Role role) {
    if (state.scaling != Fp8Scaling::kDelayed) return {};
    return state.scale.select(0, static_cast<int64_t>(role)).clone();   // () the scale this step uses
}

void check_operands(const Tensor& x, const Tensor& w, const std::shared_ptr<Fp8LinearState>& state, DType out_dtype) {
    ops::check_defined(kOp, x, "x");
    ops::check_defined(kOp, w, "w");
    if (!state || !state->amax.defined() || (state->scaling == Fp8Scaling::kDelayed && !state->scale.defined()))
        throw ValueError(fmt::format("{}: the Fp8LinearState is missing or has no amax/scale tensors (make it with "
                                     "Fp8LinearState::make)", kOp));
    ops::check_same_device(kOp, {&x, &w, &state->amax});
    if (x.dim() != 2 || w.dim() != 2 || x.size(1) != w.size(1))
        throw ShapeError(fmt::format("{}: expected x (M,K) and w (N,K), got x {}, w {}", kOp, x.describe(), w.describe()));
    if (!is_floating(x.dtype()) || is_float8(x.dtype()) || !is_floating(w.dtype()) || is_float8(w.dtype()))
        throw DTypeError(fmt::format("{}: x and w must be f32, f64, f16 or bf16, got x {}, w {}", kOp, x.describe(),
                                     w.describe()));
    if (!F::fp8_linear_supports(x.size(0), x.size(1), w.size(0)))
        throw ShapeError(fmt::format("{}: M, K and N must be multiples of 16 (torch._scaled_mm's rule, for the forward, "
                                     "dgrad and wgrad GEMMs) but x is {}, w is {}", kOp, x.describe(), w.describe()));
    if (state->scaling == Fp8Scaling::kRowwise && out_dtype != kBFloat16)
        throw DTypeError(fmt::format("{}: rowwise scaling gives a bf16 output only, got out_dtype {}", kOp,
                                     dtype_name(out_dtype)));
}

}  // namespace

std::string_view fp8_role_name(Fp8Role role) {
    switch (role) {
        case Fp8Role::kInput: return "input";
        case Fp8Role::kWeight: return "weight";
        case Fp8Role::kGradOutput: return "grad_output";
    }
    return "?";
}

std::string_view fp8_scaling_name(Fp8Scaling scaling) {
    switch (scaling) {
        case Fp8Scaling::kDelayed: return "delayed";
        case Fp8Scaling::kTensorwise: return "tensorwise";
        case Fp8Scaling::kRowwise: return "rowwise";
    }
    return "?";
}

double fp8_max(DType fp8_dtype) {
    switch (fp8_dtype) {
        case kFloat8_e4m3fn: return kFloat8E4M3fnMax;
        case kFloat8_e5m2: return kFloat8E5M2Max;
        default:
            throw DTypeError(fmt::format("float8 scaling: the target must be float8_e4m3fn or float8_e5m2, got {}",
                                         dtype_name(fp8_dtype)));
    }
}

Fp8LinearState Fp8LinearState::make(Fp8Scaling scaling, Device device) {
    Fp8LinearState s;
    s.scaling = scaling;
    if (scaling == Fp8Scaling::kRowwise) s.dtypes = {kFloat8_e4m3fn, kFloat8_e4m3fn, kFloat8_e4m3fn};
    s.scale = ones({kFp8Roles}, TensorOptions().device(device));
    s.amax = zeros({kFp8Roles}, TensorOptions().device(device));
    return s;
}

Tensor fp8_amax_to_scale(const Tensor& amax, DType fp8_dtype, bool round_to_power_of_2) {
    const double max_value = fp8_max(fp8_dtype);
    NoGradGuard no_grad;
    Tensor amax_f64 = clamp(amax.to(kFloat64), kAmaxFloor, std::nullopt);
    Tensor scale = (full_like(amax_f64, max_value) / amax_f64).to(kFloat32);           // f64, exact division
    return round_to_power_of_2 ? round_down_to_power_of_2(scale.to(kFloat64)).to(kFloat32) : scale;
}

Tensor fp8_quantize_with_scale(const Tensor& x, const Tensor& scale, DType fp8_dtype) {
    NoGradGuard no_grad;
    return to_float8_saturated(x.to(kFloat32) * scale, fp8_dtype);
}

namespace nn::functional {

bool fp8_linear_supports(int64_t M, int64_t K, int64_t N) {
    return M > 0 && K > 0 && N > 0 && M % 16 == 0 && K % 16 == 0 && N % 16 == 0;
}

Tensor fp8_linear(const Tensor& x, const Tensor& w, const std::shared_ptr<Fp8LinearState>& state, DType out_dtype) {
    check_operands(x, w, state, out_dtype);
    const Tensor x_scale = delayed_scale_of(*state, Fp8Role::kInput);
    const Tensor w_scale = delayed_scale_of(*state, Fp8Role::kWeight);
    Tensor y;
    const bool training = GradMode::is_enabled();   // evaluation under no_grad leaves the amaxes alone
    {
        NoGradGuard no_grad;
        if (training) {
            record_amax(*state, Fp8Role::kInput, x);
            record_amax(*state, Fp8Role::kWeight, w);
        }
        const Quantized xq = quantize_operand(x.contiguous(), Fp8Role::kInput, *state, x_scale);    // (M,K)
        const Quantized wq = quantize_operand(w.contiguous(), Fp8Role::kWeight, *state, w_scale);   // (N,K)
        y = fp8_gemm(xq, wq, out_dtype);                                                            // (M,N)
    }
    return record(kOp, y, {x, w}, {x, w}, [state, x_scale, w_scale](BackwardContext& ctx, const tensor_list& grads) {
        const Tensor x = ctx.saved(0), w = ctx.saved(1);                                           // (M,K), (N,K)
        NoGradGuard no_grad;
        const Tensor g = grads[0].contiguous();                                                    // (M,N)
        record_amax(*state, Fp8Role::kGradOutput, g);
        const Tensor g_scale = delayed_scale_of(*state, Fp8Role::kGradOutput);
        tensor_list d(2);
        if (ctx.needs_input_grad(0)) {   // dgrad (M,K) = g (M,N) . w (N,K)
            const Quantized gq = quantize_operand(g, Fp8Role::kGradOutput, *state, g_scale);             // (M,N)
            const Quantized wtq = quantize_operand(w.t().contiguous(), Fp8Role::kWeight, *state, w_scale);   // (K,N)
            d[0] = fp8_gemm(gq, wtq, g.dtype()).to(x.dtype());
        }
        if (ctx.needs_input_grad(1)) {   // wgrad (N,K) = g^T (N,M) . x (M,K)
            const Quantized gtq = quantize_operand(g.t().contiguous(), Fp8Role::kGradOutput, *state, g_scale);   // (N,M)
            const Quantized xtq = quantize_operand(x.t().contiguous(), Fp8Role::kInput, *state, x_scale);        // (K,M)
            d[1] = fp8_gemm(gtq, xtq, g.dtype()).to(w.dtype());
        }
        return d;
    });
}

}  // namespace nn::functional

namespace fp8_autocast {

namespace {
thread_local bool fp8_enabled = false;
}  // namespace

bool enabled() { return fp8_enabled; }
Scope::Scope(bool enabled) : previous_(fp8_enabled) { fp8_enabled = enabled; }
Scope::~Scope() { fp8_enabled = previous_; }

}  // namespace fp8_autocast

}  // namespace ampgrad

// reduce_stats.cpp: the reductions PyTorch-trained models reach for beyond sum/mean/max/min:
// prod, var/std with a correction over several dims, logsumexp over several
// dims and the vector p-norm. Each backward is written in differentiable ops (double backward
// works); the formulas follow PyTorch's derivatives (tools/autograd/derivatives.yaml and
// FunctionsManual.cpp: prod_backward, std_backward, linalg_vector_norm_backward).
#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/ops/autocast_hook.hpp"
#include "autograd/ops/op_utils.hpp"
#include "autograd/ops/ops.hpp"
#include "autograd/ops/reduce_utils.hpp"
#include "autograd/record.hpp"

namespace ampgrad {

using autograd::BackwardContext;
using autograd::record;

namespace {

// The compute dtype of the statistics: f16/bf16 are computed in f32 and rounded once (PyTorch's
// kernels accumulate half types in f32 too).
DType stat_dtype(DType d) { return d == kFloat16 || d == kBFloat16 ? kFloat32 : d; }

// sign of x (0 at 0 and at nan, as PyTorch's sgn) as a constant of x (its derivative is 0)
Tensor sgn(const Tensor& x) {
    NoGradGuard no_grad;
    return where(gt(x, zeros_like(x)), ones_like(x), where(lt(x, zeros_like(x)), -ones_like(x), 0.0));
}

}  // namespace

// ---- prod over one dim. d/dx_i = product of the others. As PyTorch's prod_backward: without any
// zero, result / x_i (so a NaN or inf in the slice gives NaN gradients there, as PyTorch); with a
// zero, the product of the elements before x_i times the product of those after it, which is what
// PyTorch's prod_safe_zeros_backward computes with two cumprods (so 0 * inf = NaN where it has one),
// in differentiable ops, so second derivatives at zeros are right too.
namespace {

// Inclusive products along the last dim (*,n) by doubling (Hillis and Steele): after the step of
// span d, y_i holds x_{i-2d+1} ... x_i. log2(n) multiplies of (*,n): O(n log n), not an (n,n) table.
Tensor inclusive_products(const Tensor& x) {                                 // (*,n) -> (*,n)
    const int64_t n = x.size(-1);
    Tensor y = x;
    for (int64_t d = 1; d < n; d *= 2)
        y = cat({narrow(y, -1, 0, d), narrow(y, -1, d, n - d) * narrow(y, -1, 0, n - d)}, -1);
    return y;
}

// (1, y_0, ..., y_{n-2}): the products of the elements strictly before each position.
Tensor exclusive_from_inclusive(const Tensor& inclusive) {
    const int64_t n = inclusive.size(-1);
    return cat({ones_like(narrow(inclusive, -1, 0, 1)), narrow(inclusive, -1, 0, n - 1)}, -1);
}

// The product of the others at every position of dim. The prefixes are multiplied in f64 and each
// rounded once to x's dtype (the doubling order rounds more often than a running product: in f32,
// 200,000 factors near 1 drift by 5e-4, in f64 by nothing visible), as the forward multiplies in
// double; PyTorch's CPU cumprod also accumulates f16/bf16 in float and stores each prefix rounded.
Tensor prod_others(const Tensor& x, int64_t dim) {                           // x (..., n at dim, ...)
    const DType dtype = x.dtype();
    Tensor xt = transpose(x, dim, -1).to(kFloat64);                          // (*,n)
    Tensor before = exclusive_from_inclusive(inclusive_products(xt));                    // (*,n)
    Tensor after = flip(exclusive_from_inclusive(inclusive_products(flip(xt, {-1}))), {-1});   // (*,n)
    return transpose(before.to(dtype) * after.to(dtype), dim, -1);
}

int64_t zero_count(const Tensor& x) {
    NoGradGuard no_grad;
    return sum(eq(x, zeros_like(x)).to(kInt64)).item<int64_t>();              // one host sync
}

// whole: the product of every element (prod(x)), whose backward, as PyTorch's prod_backward for it,
// is all zeros when the input holds two zeros or more and no graph is being built (every product
// of the others holds a zero; PyTorch skips its cumprod path there, so an inf beside the zeros gives 0,
// not NaN). With create_graph it takes the products of the others, as the one-dim form always does.
Tensor prod_over(const Tensor& x_in, int64_t dim_in, bool keepdim, bool whole) {
    Tensor x = x_in;
    AMPGRAD_AUTOCAST("prod", &x);
    ops::check_defined("prod", x, "input");
    int64_t dim = ops::wrap_dim("prod", dim_in, x.dim());
    DType out_dtype = is_floating(x.dtype()) ? x.dtype() : kInt64;
    if (x.dim() == 0) return x.dtype() == out_dtype ? x.clone() : x.to(out_dtype);
    std::vector<int64_t> dims{dim};
    Tensor out = ops::reduce_raw(ReduceOp::kProd, x, dims, keepdim, out_dtype);
    return record("prod", out, {x}, {x, out}, [dim, keepdim, whole](BackwardContext& ctx, const tensor_list& g) {
        Tensor xs = ctx.saved(0), gk = g[0];
        if (!keepdim) gk = unsqueeze(gk, dim);
        if (xs.numel() == 0) return tensor_list{zeros_like(xs)};
        const int64_t zeros = zero_count(xs);
        if (whole && zeros > 1 && !GradMode::is_enabled()) return tensor_list{zeros_like(xs)};
        if (zeros > 0) return tensor_list{gk * prod_others(xs, dim)};
        // result / x; under create_graph the result is formed again so that it is differentiable
        Tensor y = GradMode::is_enabled() ? prod(xs, dim, true) : ctx.saved(1);
        if (!keepdim && !GradMode::is_enabled()) y = unsqueeze(y, dim);
        return tensor_list{gk * (y / xs)};
    });
}
}  // namespace

Tensor prod(const Tensor& x, int64_t dim, bool keepdim) { return prod_over(x, dim, keepdim, /*whole=*/false); }

Tensor prod(const Tensor& x) {
    if (x.dim() == 0) return prod(x, 0, false);
    return reshape(prod_over(reshape(x, {-1}), 0, false, /*whole=*/true), {});
}

// ---- var / std: sum((x - mean)^2) / max(0, n - correction), over several dims. Backward is
// PyTorch's var_backward, (2 / divisor) g (x - mean(x)), in differentiable ops: the mean's own
// derivative is left out (it sums to zero), which keeps one inf from turning every gradient nan.
namespace {
// x - mean(x) over d, with the mean corrected once by the mean of the residuals (the corrected
// two-pass algorithm): a slice of equal values gets exactly 0, as PyTorch's Welford does, where
// sum / n may miss the value by an ulp and leave a variance of 1e-34 (std 1e-17), whose gradient
// (x - mean) / (n std) is O(1) instead of PyTorch's 0 (difftest seed 98). For the forward's
// statistics only: the backward keeps PyTorch's x - mean(x), whose NaN and inf patterns it matches.
Tensor centered_on_mean(const Tensor& x, const Shape& d) {
    if (d.empty()) return x - x;
    Tensor m = mean(x, d, true);
    Tensor residual = x - m;
    return residual - mean(residual, d, true);
}
}  // namespace

Tensor var(const Tensor& x, const Shape& dims_in, double correction, bool keepdim) {
    ops::check_defined("var", x, "input");
    ops::check_floating("var", x);
    std::vector<int64_t> dims = ops::reduce_dims("var", x, dims_in);
    Shape d(dims.begin(), dims.end());
    const double n_minus_c = static_cast<double>(ops::reduced_count(x, dims)) - correction;
    const double divisor = std::max(0.0, n_minus_c);        // the forward's; backward uses n - c as is
    Tensor out;
    {
        NoGradGuard no_grad;
        Tensor xc = to_dtype(x, stat_dtype(x.dtype()));
        Tensor centered = centered_on_mean(xc, d);
        out = d.empty() ? centered * centered / divisor : sum(centered * centered, d, keepdim) / divisor;
        out = to_dtype(out, x.dtype());
    }
    // PyTorch's var_backward over the whole tensor (a 0-d input, or no dims) with n - c <= 0:
    // g * (nan where x == mean(x), else inf), a constant factor, so no second gradient flows to x.
    const bool whole = x.dim() == 0 || dims_in.empty();
    return record("var", out, {x}, {x}, [dims, d, keepdim, n_minus_c, whole](BackwardContext& ctx, const tensor_list& g) {
        Tensor xs = ctx.saved(0), gk = ops::restore_dims(g[0], dims, keepdim);
        if (whole && n_minus_c <= 0) {
            Tensor factor;
            {
                NoGradGuard no_grad;
                Tensor is_mean = eq(xs, mean(xs));
                factor = where(is_mean, full_like(xs, std::nan("")), std::numeric_limits<double>::infinity());
            }
            return tensor_list{gk * factor};
        }
        Tensor centered = d.empty() ? xs - xs : xs - mean(xs, d, true);
        return tensor_list{gk * centered * (2.0 / n_minus_c)};
    });
}

// std: backward (g / 2 std, 0 where std == 0) times var's gradient, as PyTorch's std_backward
Tensor std(const Tensor& x, const Shape& dims_in, double correction, bool keepdim) {
    ops::check_defined("std", x, "input");
    ops::check_floating("std", x);
    std::vector<int64_t> dims = ops::reduce_dims("std", x, dims_in);
    const double divisor = static_cast<double>(ops::reduced_count(x, dims)) - correction;   // as PyTorch's backward
    Tensor out;
    {
        NoGradGuard no_grad;
        out = to_dtype(sqrt(var(to_dtype(x, stat_dtype(x.dtype())), dims_in, correction, keepdim)), x.dtype());
    }
    return record("std", out, {x}, {x, out}, [dims, keepdim, divisor](BackwardContext& ctx, const tensor_list& g) {
        Tensor xs = ctx.saved(0), s = ops::restore_dims(ctx.saved(1), dims, keepdim), gk = ops::restore_dims(g[0], dims, keepdim);
        Tensor is_zero = eq(s, zeros_like(s));
        Tensor dvar = where(is_zero, zeros_like(gk), gk / (s * 2.0));
        Shape d(dims.begin(), dims.end());
        Tensor centered = d.empty() ? xs - xs : xs - mean(xs, d, true);
        return tensor_list{dvar * centered * (2.0 / divisor)};
    });
}

// ---- logsumexp over several dims: m + log(sum(exp(x - m))), m = max (-inf if empty). Backward is
// PyTorch's, g exp(x - out), in differentiable ops.
Tensor logsumexp(const Tensor& x_in, const Shape& dims_in, bool keepdim) {
    Tensor x = x_in;
    AMPGRAD_AUTOCAST("logsumexp", &x);
    ops::check_defined("logsumexp", x, "input");
    ops::check_floating("logsumexp", x);
    std::vector<int64_t> dims = ops::reduce_dims("logsumexp", x, dims_in);
    Shape d(dims.begin(), dims.end());
    Tensor out;
    {
        NoGradGuard no_grad;
        Tensor xc = to_dtype(x, stat_dtype(x.dtype()));
        Tensor m = x.numel() == 0 ? zeros(ops::kept_shape(x, dims), xc.options()) : amax(xc, d, true);
        m = where(isfinite(m), m, 0.0);                    // all -inf rows: keep -inf, not nan
        out = to_dtype(log(sum(exp(xc - m), d, true)) + m, x.dtype());   // keepdim
        if (!keepdim) out = reshape(out, ops::dropped_shape(x, dims));
    }
    return record("logsumexp", out, {x}, {x, out}, [dims, keepdim](BackwardContext& ctx, const tensor_list& g) {
        Tensor y = ops::restore_dims(ctx.saved(1), dims, keepdim), gk = ops::restore_dims(g[0], dims, keepdim);
        return tensor_list{gk * exp(ctx.saved(0) - y)};
    });
}

// ---- vector p-norm: (sum |x|^p)^(1/p); max|x| for inf, min|x| for -inf, count of non-zeros for 0 ----
namespace {
Tensor norm_forward(const Tensor& x, double p, const Shape& d, bool keepdim) {
    NoGradGuard no_grad;
    Tensor a = abs(to_dtype(x, stat_dtype(x.dtype())));
    Tensor out;
    if (std::isinf(p)) out = p > 0 ? amax(a, d, keepdim) : amin(a, d, keepdim);
    else if (p == 0.0) out = sum(ne(a, zeros_like(a)).to(a.dtype()), d, keepdim);
    else if (p == 1.0) out = sum(a, d, keepdim);
    else if (p == 2.0) out = sqrt(sum(a * a, d, keepdim));
    else out = pow(sum(pow(a, p), d, keepdim), 1.0 / p);
    return to_dtype(out, x.dtype());
}

// PyTorch's linalg_vector_norm_backward; x (*), n and g in the keepdim shape
Tensor norm_backward(const Tensor& x, const Tensor& n, const Tensor& g, double p, const Shape& d) {
    Tensor n_zero = eq(n, zeros_like(n));
    if (p == 0.0) return zeros_like(x);
    if (p == 1.0) return sgn(x) * g;
    if (p == 2.0) return where(n_zero, zeros_like(x), x / n) * g;
    if (std::isinf(p)) {
        Tensor a = abs(x);
        Tensor mask = (eq(a, n) | ne(a, a)).to(x.dtype());
        return sgn(x) * (g / sum(mask, d, true) * mask);
    }
    if (p < 1.0) {
        Tensor scaled = where(eq(x, zeros_like(x)), zeros_like(x), sgn(x) * pow(abs(x), p - 1.0));
        return scaled * g * pow(n, 1.0 - p);
    }
    Tensor scale = where(n_zero, zeros_like(g), g / pow(n, p - 1.0));
    Tensor scaled = p < 2.0 ? sgn(x) * pow(abs(x), p - 1.0) : x * pow(abs(x), p - 2.0);
    return scaled * scale;
}
}  // namespace

Tensor norm(const Tensor& x_in, double p, const Shape& dims_in, bool keepdim) {
    Tensor x = x_in;
    AMPGRAD_AUTOCAST("norm", &x);
    ops::check_defined("norm", x, "input");
    ops::check_floating("norm", x);
    if (std::isnan(p)) throw ValueError(fmt::format("norm: the order p must not be nan (input is {})", x.describe()));
    std::vector<int64_t> dims = ops::reduce_dims("norm", x, dims_in);
    Shape d(dims.begin(), dims.end());
    if (std::isinf(p) && x.numel() == 0 && ops::reduced_count(x, dims) == 0)
        throw ValueError(fmt::format("norm: the {}-norm of an empty reduction is undefined (input is {})", p,
                                     x.describe()));
    Tensor out = norm_forward(x, p, d, keepdim);
    return record("norm", out, {x}, {x, out}, [dims, d, keepdim, p](BackwardContext& ctx, const tensor_list& g) {
        Tensor n = ops::restore_dims(ctx.saved(1), dims, keepdim), gk = ops::restore_dims(g[0], dims, keepdim);
        return tensor_list{norm_backward(ctx.saved(0), n, gk, p, d)};
    });
}

}  // namespace ampgrad

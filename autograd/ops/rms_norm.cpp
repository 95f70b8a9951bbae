// rms_norm.cpp: RMSNorm over the trailing `normalized_shape` dims, y = x / sqrt(mean(x^2) + eps) * w
// (torch.nn.functional.rms_norm). The input is flattened to (N,C) rows (C = numel of
// normalized_shape) for the fused kernels, which save each row's rstd for backward. Under
// create_graph, backward is instead written with differentiable ops (recomputing rstd from x), so
// double backward works, as layer_norm.cpp. Derivation: docs/ops/rmsnorm.md.
#include <limits>

#include "autograd/ops/autocast_hook.hpp"
#include "autograd/ops/op_utils.hpp"
#include "autograd/ops/ops.hpp"
#include "autograd/record.hpp"

namespace ampgrad::nn::functional {

using autograd::BackwardContext;
using autograd::record;

namespace {

void check_rms_norm_args(const Tensor& x, const Shape& normalized_shape, const Tensor& weight) {
    ops::check_defined("rms_norm", x, "input");
    ops::check_floating("rms_norm", x);
    ops::check_same_device("rms_norm", {&x, &weight});
    size_t k = normalized_shape.size();
    bool trailing = k >= 1 && k <= x.sizes().size() &&
                    std::equal(normalized_shape.begin(), normalized_shape.end(), x.sizes().end() - k);
    if (!trailing)
        throw ShapeError(fmt::format("rms_norm: normalized_shape {} does not match the trailing dims of input {}; "
                                     "expected input.shape[-{}:] == {}",
                                     shape_str(normalized_shape), x.describe(), k, shape_str(normalized_shape)));
    if (!weight.defined()) return;
    if (weight.sizes() != normalized_shape)
        throw ShapeError(fmt::format("rms_norm: weight must have normalized_shape {}: weight is {}",
                                     shape_str(normalized_shape), weight.describe()));
    if (weight.dtype() != x.dtype())
        throw DTypeError(fmt::format("rms_norm: dtypes differ: input is {}, weight is {}; expected one dtype",
                                     x.describe(), weight.describe()));
}

// The default eps: the machine epsilon of the compute type, as PyTorch's rms_norm takes
// numeric_limits<opmath_type<scalar_t>>::epsilon(): f32's for f16/bf16/f32 (its docs say
// finfo(x.dtype).eps, but a bf16 row of 0.01 normalises to 1 there, not to 0.75)
double default_eps(DType dtype) {
    return dtype == kFloat64 ? std::numeric_limits<double>::epsilon() : std::numeric_limits<float>::epsilon();
}

// dx and dweight from differentiable ops (the create_graph path). x, dy: (N,C); w: (C) or undefined.
// f16/bf16 compute in f32, as PyTorch's composite rms_norm upcasts to the opmath type (in bf16,
// 1 - xhat^2 cancels to nothing); the engine casts the gradients back to the inputs' dtypes.
tensor_list rms_norm_backward_composite(const Tensor& x_in, const Tensor& w_in, const Tensor& dy_in, double eps,
                                        std::array<bool, 2> needed) {
    const bool upcast = x_in.dtype() == kFloat16 || x_in.dtype() == kBFloat16;
    Tensor x = upcast ? to_dtype(x_in, kFloat32) : x_in;                    // (N,C)
    Tensor dy = upcast ? to_dtype(dy_in, kFloat32) : dy_in;                 // (N,C)
    Tensor w = upcast && w_in.defined() ? to_dtype(w_in, kFloat32) : w_in;  // (C)
    Tensor rstd = rsqrt(mean(x * x, {1}, true) + eps);                       // (N,1)
    Tensor xhat = x * rstd;                                                 // (N,C)
    tensor_list d(2);
    if (needed[0]) {
        Tensor g = w.defined() ? dy * w : dy;                               // (N,C)
        d[0] = rstd * (g - xhat * mean(g * xhat, {1}, true));
    }
    if (needed[1]) d[1] = sum(dy * xhat, {0});                              // (C)
    return d;
}

}  // namespace

Tensor rms_norm(const Tensor& x_in, const Shape& normalized_shape, const Tensor& weight_in, std::optional<double> eps_in) {
    Tensor x = x_in, weight = weight_in;
    AMPGRAD_AUTOCAST("rms_norm", &x, &weight);
    check_rms_norm_args(x, normalized_shape, weight);
    const double eps = eps_in.value_or(default_eps(x.dtype()));
    const int64_t C = shape_numel(normalized_shape);
    const int64_t N = C == 0 ? 0 : x.numel() / C;
    const DType stat = x.dtype() == kFloat64 ? kFloat64 : kFloat32;

    Tensor y, rstd_rows;
    {
        NoGradGuard no_grad;
        Tensor x_rows = x.contiguous().view({N, C});                              // (N,C)
        Tensor y_rows = make_empty({N, C}, x.dtype(), x.device());                // (N,C)
        rstd_rows = make_empty({N}, stat, x.device());                            // (N)
        Tensor w = weight.defined() ? weight.contiguous().view({C}) : Tensor();   // (C)
        kernels::rms_norm(y_rows, rstd_rows, x_rows, w, eps);
        y = y_rows.view(x.sizes());
    }

    return record("rms_norm", y, {x, weight}, {x, weight, rstd_rows},
                  [N, C, eps](BackwardContext& ctx, const tensor_list& g) {
        Tensor x = ctx.saved(0), w = ctx.saved(1);
        std::array<bool, 2> needed = {ctx.needs_input_grad(0), ctx.needs_input_grad(1)};
        Tensor dy = (g[0].dtype() == x.dtype() ? g[0] : g[0].to(x.dtype())).reshape({N, C});   // (N,C)
        Tensor w_rows = w.defined() ? w.reshape({C}).contiguous() : Tensor();                    // (C)
        tensor_list d;
        if (GradMode::is_enabled()) {                                                            // create_graph
            d = rms_norm_backward_composite(x.reshape({N, C}), w_rows, dy, eps, needed);
        } else {
            d = {needed[0] ? make_empty({N, C}, x.dtype(), x.device()) : Tensor(),             // (N,C)
                 needed[1] ? make_empty({C}, x.dtype(), x.device()) : Tensor()};               // (C)
            kernels::rms_norm_backward(d[0], d[1], dy.contiguous(), x.contiguous().view({N, C}), ctx.saved(2), w_rows);
        }
        for (size_t i = 0; i < 2; ++i)                     // back to the shapes of x and weight
            if (d[i].defined()) d[i] = d[i].reshape(ctx.input_meta(i).shape);
        return d;
    });
}

}  // namespace ampgrad::nn::functional

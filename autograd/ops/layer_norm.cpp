// layer_norm.cpp: LayerNorm over the trailing `normalized_shape` dims. The input is flattened to
// (N,C) rows (C = numel of normalized_shape) for the fused kernels, which save each row's mean
// and rstd for backward. Under create_graph, backward is instead written with differentiable ops
// (recomputing mean and rstd from x), so double backward works. Derivation: docs/ops/layernorm.md.
#include "autograd/ops/autocast_hook.hpp"
#include "autograd/ops/op_utils.hpp"
#include "autograd/ops/ops.hpp"
#include "autograd/record.hpp"

namespace ampgrad::nn::functional {

using autograd::BackwardContext;
using autograd::record;

namespace {

void check_layer_norm_args(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias) {
    ops::check_defined("layer_norm", x, "input");
    ops::check_floating("layer_norm", x);
    ops::check_same_device("layer_norm", {&x, &weight, &bias});
    size_t k = normalized_shape.size();
    bool trailing = k >= 1 && k <= x.sizes().size() &&
                    std::equal(normalized_shape.begin(), normalized_shape.end(), x.sizes().end() - k);
    if (!trailing)
        throw ShapeError(fmt::format("layer_norm: normalized_shape {} does not match the trailing dims of input {}; "
                                     "expected input.shape[-{}:] == {}",
                                     shape_str(normalized_shape), x.describe(), k, shape_str(normalized_shape)));
    for (auto [t, arg] : {std::pair{&weight, "weight"}, std::pair{&bias, "bias"}}) {
        if (!t->defined()) continue;
        if (t->sizes() != normalized_shape)
            throw ShapeError(fmt::format("layer_norm: {} must have normalized_shape {}: {} is {}", arg,
                                         shape_str(normalized_shape), arg, t->describe()));
        if (t->dtype() != x.dtype())
            throw DTypeError(fmt::format("layer_norm: dtypes differ: input is {}, {} is {}; expected one dtype",
                                         x.describe(), arg, t->describe()));
    }
}

// dx, dweight, dbias from differentiable ops (the create_graph path). x, dy: (N,C); w: (C) or undefined
tensor_list layer_norm_backward_composite(const Tensor& x, const Tensor& w, const Tensor& dy, double eps,
                                          std::array<bool, 3> needed) {
    Tensor mu = mean(x, {1}, true);                                         // (N,1)
    Tensor xc = x - mu;                                                     // (N,C)
    Tensor rstd = rsqrt(mean(xc * xc, {1}, true) + eps);                    // (N,1)
    Tensor xhat = xc * rstd;                                                // (N,C)
    tensor_list d(3);
    if (needed[0]) {
        Tensor dxhat = w.defined() ? dy * w : dy;                           // (N,C)
        d[0] = rstd * (dxhat - mean(dxhat, {1}, true) - xhat * mean(dxhat * xhat, {1}, true));
    }
    if (needed[1]) d[1] = sum(dy * xhat, {0});                              // (C)
    if (needed[2]) d[2] = sum(dy, {0});                                     // (C)
    return d;
}

}  // namespace

// y = (x - mean) / sqrt(var + eps) * weight + bias, statistics over the last normalized_shape dims
Tensor layer_norm(const Tensor& x_in, const Shape& normalized_shape, const Tensor& weight_in, const Tensor& bias_in,
                  double eps) {
    Tensor x = x_in, weight = weight_in, bias = bias_in;
    AMPGRAD_AUTOCAST("layer_norm", &x, &weight, &bias);
    check_layer_norm_args(x, normalized_shape, weight, bias);
    const int64_t C = shape_numel(normalized_shape);
    const int64_t N = C == 0 ? 0 : x.numel() / C;
    const DType stat = x.dtype() == kFloat64 ? kFloat64 : kFloat32;

    Tensor y, mean_rows, rstd_rows;
    {
        NoGradGuard no_grad;
        Tensor x_rows = x.contiguous().view({N, C});                          // (N,C)
        Tensor y_rows = make_empty({N, C}, x.dtype(), x.device());            // (N,C)
        mean_rows = make_empty({N}, stat, x.device());                        // (N)
        rstd_rows = make_empty({N}, stat, x.device());                        // (N)
        Tensor w = weight.defined() ? weight.contiguous().view({C}) : Tensor();   // (C)
        Tensor b = bias.defined() ? bias.contiguous().view({C}) : Tensor();       // (C)
        kernels::layer_norm(y_rows, mean_rows, rstd_rows, x_rows, w, b, eps);
        y = y_rows.view(x.sizes());
    }

    return record("layer_norm", y, {x, weight, bias}, {x, weight, mean_rows, rstd_rows},
                  [N, C, eps](BackwardContext& ctx, const tensor_list& g) {
        Tensor x = ctx.saved(0), w = ctx.saved(1);
        std::array<bool, 3> needed = {ctx.needs_input_grad(0), ctx.needs_input_grad(1), ctx.needs_input_grad(2)};
        Tensor dy = (g[0].dtype() == x.dtype() ? g[0] : g[0].to(x.dtype())).reshape({N, C});   // (N,C)
        Tensor w_rows = w.defined() ? w.reshape({C}).contiguous() : Tensor();                    // (C)
        tensor_list d;
        if (GradMode::is_enabled()) {                                                            // create_graph
            // f16/bf16 in f32, as the kernels keep the statistics: in bf16 the recomputed mean of a
            // constant row missed x, and xhat = (x - mean) rstd was far from 0 (difftest seed 68).
            const bool widen = x.dtype() == kFloat16 || x.dtype() == kBFloat16;
            auto wide = [widen](const Tensor& t) { return widen && t.defined() ? t.to(kFloat32) : t; };
            d = layer_norm_backward_composite(wide(x.reshape({N, C})), wide(w_rows), wide(dy), eps, needed);
            for (Tensor& t : d)
                if (widen && t.defined()) t = t.to(x.dtype());
        } else {
            d = {needed[0] ? make_empty({N, C}, x.dtype(), x.device()) : Tensor(),             // (N,C)
                 needed[1] ? make_empty({C}, x.dtype(), x.device()) : Tensor(),                // (C)
                 needed[2] ? make_empty({C}, x.dtype(), x.device()) : Tensor()};               // (C)
            kernels::layer_norm_backward(d[0], d[1], d[2], dy.contiguous(), x.contiguous().view({N, C}),
                                         ctx.saved(2), ctx.saved(3), w_rows);
        }
        for (size_t i = 0; i < 3; ++i)                     // back to the shapes of x, weight, bias
            if (d[i].defined()) d[i] = d[i].reshape(ctx.input_meta(i).shape);
        return d;
    });
}

}  // namespace ampgrad::nn::functional

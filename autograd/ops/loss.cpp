// loss.cpp: the losses, all with mean reduction as in PyTorch's defaults: cross_entropy (fused
// kernels, docs/ops/cross_entropy.md), mse_loss, binary_cross_entropy_with_logits and
// binary_cross_entropy. Each is one graph node whose backward sits beside its forward;
// cross_entropy's fused backward needs a separate differentiable path for create_graph, and
// binary_cross_entropy's first derivatives are nodes of their own, so that its second derivatives
// are PyTorch's formulas (docs/edge_cases.md).
#include <cmath>

#include "autograd/ops/autocast_hook.hpp"
#include "autograd/ops/op_utils.hpp"
#include "autograd/ops/ops.hpp"
#include "autograd/record.hpp"

namespace ampgrad::nn::functional {

using autograd::BackwardContext;
using autograd::record;

namespace {

void check_cross_entropy_args(const Tensor& logits, const Tensor& targets) {
    ops::check_defined("cross_entropy", logits, "input");
    ops::check_defined("cross_entropy", targets, "target");
    ops::check_floating("cross_entropy", logits);
    ops::check_same_device("cross_entropy", {&logits, &targets});
    if (targets.dtype() != kInt64)
        throw DTypeError(fmt::format("cross_entropy: targets must be int64 class indices (or floating class "
                                     "probabilities shaped like the logits) but got {} (logits are {})",
                                     targets.describe(), logits.describe()));
    bool batched = logits.dim() == 2 && targets.dim() == 1 && targets.size(0) == logits.size(0);
    bool single = logits.dim() == 1 && targets.dim() == 0;
    if (!batched && !single)
        throw ShapeError(fmt::format("cross_entropy: expected logits (N,V) with targets (N), or logits (V) with a "
                                     "0-dim target: logits are {}, targets are {}", logits.describe(),
                                     targets.describe()));
}

// The divisor for a gradient: count, or 1 when every row is ignored. Those rows get gradient 0
// (PyTorch's nll_loss backward writes nothing there), and g/0 = inf would make their double
// backward 0 * inf = NaN. The forward loss keeps 0/0 = NaN, as PyTorch's does.
Tensor nonzero_count(const Tensor& count) { return clamp(count, 1.0, std::nullopt); }

// dlogits = (softmax(logits) - onehot(targets)) * g / count, zero on ignored rows (NaN where the row
// is), as differentiable ops (the create_graph path). logits (N,V), targets (N), g and count 0-dim.
Tensor cross_entropy_backward_composite(const Tensor& logits, const Tensor& targets, const Tensor& g,
                                        const Tensor& count, int64_t ignore_index) {
    const int64_t N = logits.size(0), V = logits.size(1);
    Tensor classes = arange(V, TensorOptions(kInt64).device(logits.device())).view({1, V});        // (1,V)
    Tensor target_col = targets.view({N, 1});                                                       // (N,1)
    Tensor onehot = eq(classes, target_col).to(logits.dtype());                                     // (N,V)
    Tensor valid = ne(target_col, ops::wrapped_scalar(static_cast<double>(ignore_index), targets)); // (N,1)
    Tensor scale = (g / nonzero_count(count)).to(logits.dtype());                                   // ()
    Tensor probs = softmax(logits, 1);                                                              // (N,V)
    // ignored rows: softmax * 0, NaN only where a NaN/+inf logit made the row NaN (as the fused kernel
    // and PyTorch's log_softmax backward of a zero gradient)
    return where(valid, (probs - onehot) * scale, probs * 0.0);                                    // (N,V)
}

}  // namespace

// logits (N,V) or (V); targets (N) or () int64 -> mean over rows whose target != ignore_index.
// All rows ignored gives 0/0 = nan, as in PyTorch. Other forms, (N,C,d1,..) logits or probability
// targets, go through the options form (cross_entropy.cpp), which brings (N,C,d1,..) back here as rows.
Tensor cross_entropy(const Tensor& logits_in, const Tensor& targets, int64_t ignore_index) {
    if (logits_in.defined() && targets.defined() &&
        (logits_in.dim() > 2 || is_floating(targets.dtype()) || targets.sizes() == logits_in.sizes()))
        return cross_entropy(logits_in, targets, CrossEntropyOptions{.ignore_index = ignore_index});
    Tensor logits = logits_in;
    AMPGRAD_AUTOCAST("cross_entropy", &logits);
    check_cross_entropy_args(logits, targets);
    const int64_t V = logits.size(-1);
    const int64_t N = logits.dim() == 2 ? logits.size(0) : 1;
    const DType stat = logits.dtype() == kFloat64 ? kFloat64 : kFloat32;

    Tensor loss, lse, count;
    {
        NoGradGuard no_grad;
        Tensor rows = logits.contiguous().view({N, V});                       // (N,V)
        Tensor t = targets.reshape({N});                                      // (N)
        Tensor row_loss = make_empty({N}, stat, logits.device());             // (N)
        lse = make_empty({N}, stat, logits.device());                         // (N)
        kernels::cross_entropy(row_loss, lse, rows, t, ignore_index);
        count = ne(t, ops::wrapped_scalar(static_cast<double>(ignore_index), t)).to(stat).sum();   // ()
        loss = (row_loss.sum() / count).to(logits.dtype());                   // ()
    }

    return record("cross_entropy", loss, {logits}, {logits, targets, lse, count},
                  [N, V, ignore_index](BackwardContext& ctx, const tensor_list& g) {
        Tensor logits = ctx.saved(0).reshape({N, V}), targets = ctx.saved(1).reshape({N});
        Tensor lse = ctx.saved(2), count = ctx.saved(3);
        Tensor dlogits;
        if (GradMode::is_enabled()) {                                         // create_graph
            dlogits = cross_entropy_backward_composite(logits, targets, g[0], count, ignore_index);
        } else {
            Tensor dloss = ops::expand_raw((g[0].to(count.dtype()) / nonzero_count(count)).reshape({1}), {N});  // (N)
            dlogits = make_empty({N, V}, logits.dtype(), logits.device());                       // (N,V)
            kernels::cross_entropy_backward(dlogits, dloss, logits.contiguous(), lse, targets, ignore_index);
        }
        return tensor_list{dlogits.reshape(ctx.input_meta(0).shape)};
    });
}

// mean((input - target)^2); input and target broadcast; both may require grad
Tensor mse_loss(const Tensor& input_in, const Tensor& target_in) {
    Tensor input = input_in, target = target_in;
    AMPGRAD_AUTOCAST("mse_loss", &input, &target);
    ops::check_defined("mse_loss", input, "input");
    ops::check_defined("mse_loss", target, "target");
    ops::check_floating("mse_loss", input);
    ops::check_same_device("mse_loss", {&input, &target});
    if (input.dtype() != target.dtype())
        throw DTypeError(fmt::format("mse_loss: dtypes differ: input is {}, target is {}; expected one dtype",
                                     input.describe(), target.describe()));
    ops::broadcast_shapes("mse_loss", input, target);
    Tensor loss;
    {
        NoGradGuard no_grad;
        Tensor diff = input - target;
        loss = mean(diff * diff);                                             // ()
    }
    return record("mse_loss", loss, {input, target}, {input, target}, [](BackwardContext& ctx, const tensor_list& g) {
        Tensor diff = ctx.saved(0) - ctx.saved(1);                           // broadcast shape
        Tensor d = diff * (g[0] * (2.0 / static_cast<double>(diff.numel())));
        tensor_list grads(2);
        if (ctx.needs_input_grad(0)) grads[0] = d;
        if (ctx.needs_input_grad(1)) grads[1] = -d;
        return grads;
    });
}

namespace {
void check_binary_loss_args(std::string_view op, const Tensor& input, const Tensor& target) {
    ops::check_defined(op, input, "input");
    ops::check_defined(op, target, "target");
    ops::check_floating(op, input);
    ops::check_same_device(op, {&input, &target});
    if (input.sizes() != target.sizes())
        throw ShapeError(fmt::format("{}: target must have the input's shape: input is {}, target is {}", op,
                                     input.describe(), target.describe()));
    if (input.dtype() != target.dtype())
        throw DTypeError(fmt::format("{}: dtypes differ: input is {}, target is {}; expected one dtype", op,
                                     input.describe(), target.describe()));
}
}  // namespace

// mean((1-y) x - log_sigmoid(x)): the stable form of -[y log s(x) + (1-y) log(1-s(x))]
//   dx = (sigmoid(x) - y) / n,  dy = -x / n
Tensor binary_cross_entropy_with_logits(const Tensor& logits_in, const Tensor& target_in) {
    Tensor x = logits_in, y = target_in;
    AMPGRAD_AUTOCAST("binary_cross_entropy_with_logits", &x, &y);
    check_binary_loss_args("binary_cross_entropy_with_logits", x, y);
    Tensor loss;
    {
        NoGradGuard no_grad;
        // (1 - y) x - log_sigmoid(x), log_sigmoid(x) = min(x, 0) - log(1 + exp(-|x|)): PyTorch 2.x's
        // form (aten/src/ATen/native/Loss.cpp). x = inf gives inf for 0 <= y < 1, not inf - inf.
        loss = mean((1.0 - y) * x - clamp(x, std::nullopt, 0.0) + log(exp(-abs(x)) + 1.0));   // ()
    }
    return record("binary_cross_entropy_with_logits", loss, {x, y}, {x, y},
                  [](BackwardContext& ctx, const tensor_list& g) {
        Tensor x = ctx.saved(0), y = ctx.saved(1);
        Tensor scale = g[0] / static_cast<double>(x.numel());                // ()
        tensor_list grads(2);
        if (ctx.needs_input_grad(0)) grads[0] = (sigmoid(x) - y) * scale;
        if (ctx.needs_input_grad(1)) grads[1] = -x * scale;
        return grads;
    });
}

namespace {

// d loss / d p of binary_cross_entropy (mean reduction), p and y of one shape, g the loss's 0-d
// gradient. Its value is PyTorch's binary_cross_entropy_backward (aten/src/ATen/native/Loss.cpp):
// the denominator is std::max(p (1 - p), EPSILON), EPSILON the float 1e-12 (9.9999999600e-13 as a
// double; 0 in f16). It is a node of its own so that its derivatives are PyTorch's, not the exact
// ones: binary_cross_entropy_double_backward{,_target,_grad_output} in
// torch/csrc/autograd/FunctionsManual.cpp shift the denominator by a double 1e-12 instead of
// clamping it (docs/edge_cases.md). Each is written in PyTorch's order of operations, in
// differentiable ops, so that f16 rounds and overflows where PyTorch's does.
Tensor bce_input_backward(const Tensor& p, const Tensor& y, const Tensor& g) {
    Tensor dp;                                                               // p's shape
    {
        NoGradGuard no_grad;
        const double eps = static_cast<double>(1e-12f);
        Tensor d = p * (1.0 - p);
        Tensor den = where(logical_not(lt(d, full_like(d, eps))), d, eps);   // std::max(d, eps)
        dp = (p - y) / den * (g / static_cast<double>(p.numel()));
    }
    return record("binary_cross_entropy_backward", dp, {p, y, g}, {p, y, g},
                  [](BackwardContext& ctx, const tensor_list& gg) {
        Tensor p = ctx.saved(0), y = ctx.saved(1), g = ctx.saved(2);
        const double n = static_cast<double>(p.numel()), eps = 1e-12;
        tensor_list grads(3);
        if (ctx.needs_input_grad(0)) {
            // (p^2 - 2 p y + y) / ((p + eps)^2 (1 - p + eps)^2) * (gg g) / n
            Tensor num = p * p - p * 2.0 * y + y;
            Tensor den = pow(p + eps, 2.0) * pow(rsub(p, 1.0) + eps, 2.0);
            grads[0] = num / den * (gg[0] * g) / n;
        }
        if (ctx.needs_input_grad(1))                                         // -gg g / max((1 - p) p, eps) / n
            grads[1] = -gg[0] * g / clamp(rsub(p, 1.0) * p, eps, std::nullopt) / n;
        if (ctx.needs_input_grad(2))                                         // (p - y) / ((p + eps)(1 - p + eps)) gg / n
            grads[2] = sum_to((p - y) / ((p + eps) * (rsub(p, 1.0) + eps)) * gg[0] / n, g.sizes());
        return grads;
    });
}

// d loss / d y of binary_cross_entropy (mean reduction): -logit(p) g / n, unclamped (+-inf at p = 0
// or 1; computed as log(1 - p) - log(p)). A node of its own for the same reason: its derivative to
// p is that of PyTorch's binary_cross_entropy_target_backward, logit(p).neg() * g / n, through
// logit's backward (logit_backward_kernel, aten/src/ATen/native/cpu/BinaryOpsKernel.cpp), which
// at p = 0 or 1 is `dy * inf` rather than `dy / (p (1 - p))`: the sign of the infinity does not
// depend on the sign of a zero p.
Tensor bce_target_backward(const Tensor& p, const Tensor& g) {
    Tensor dy;                                                               // p's shape
    {
        NoGradGuard no_grad;
        dy = (log(1.0 - p) - log(p)) * (g / static_cast<double>(p.numel()));
    }
    return record("binary_cross_entropy_target_backward", dy, {p, g}, {p, g},
                  [](BackwardContext& ctx, const tensor_list& gg) {
        Tensor p = ctx.saved(0), g = ctx.saved(1);
        const double n = static_cast<double>(p.numel());
        tensor_list grads(2);
        Tensor dneg = gg[0] / n * g;                                         // through div_(n), mul_(g)
        if (ctx.needs_input_grad(0)) {
            Tensor dlogit = -dneg;                                           // through neg_
            Tensor den = p * rsub(p, 1.0);                                   // 0 only at p = +-0 and 1
            grads[0] = where(eq(den, zeros_like(den)), dlogit * INFINITY, dlogit / den);
        }
        if (ctx.needs_input_grad(1)) grads[1] = sum_to(gg[0] / n * -log(p / rsub(p, 1.0)), g.sizes());
        return grads;
    });
}

}  // namespace

// mean(-(y log p + (1-y) log(1-p))) for probabilities p, each log clamped to >= -100 (PyTorch)
//   dp = (p - y) / max(p (1-p), 1e-12) / n,  dy = (log(1-p) - log(p)) / n
Tensor binary_cross_entropy(const Tensor& probs_in, const Tensor& target_in) {
    Tensor p = probs_in, y = target_in;
    AMPGRAD_AUTOCAST("binary_cross_entropy", &p, &y);
    check_binary_loss_args("binary_cross_entropy", p, y);
    Tensor loss;
    {
        NoGradGuard no_grad;
        // PyTorch checks 0 <= v <= 1 per element, so NaN fails too (NaN <= 0.5 is false). One host sync.
        if (p.numel() > 0 && !(max(abs(p - 0.5)).item<double>() <= 0.5))
            throw ValueError(fmt::format("binary_cross_entropy: all elements of input should be between 0 and 1: "
                                         "input is {}", p.describe()));
        if (y.numel() > 0 && !(max(abs(y - 0.5)).item<double>() <= 0.5))
            throw ValueError(fmt::format("binary_cross_entropy: all elements of target should be between 0 and 1: "
                                         "target is {}", y.describe()));
        Tensor log_p = clamp(log(p), -100.0, std::nullopt), log_1mp = clamp(log(1.0 - p), -100.0, std::nullopt);
        loss = mean(-(y * log_p + (1.0 - y) * log_1mp));                    // ()
    }
    return record("binary_cross_entropy", loss, {p, y}, {p, y}, [](BackwardContext& ctx, const tensor_list& g) {
        Tensor p = ctx.saved(0), y = ctx.saved(1);
        tensor_list grads(2);
        if (ctx.needs_input_grad(0)) grads[0] = bce_input_backward(p, y, g[0]);
        if (ctx.needs_input_grad(1)) grads[1] = bce_target_backward(p, g[0]);
        return grads;
    });
}

}  // namespace ampgrad::nn::functional

// activation.cpp: tanh, sigmoid, relu, gelu (erf and tanh approximation) and silu.
// Forward is one backend unary kernel. Backward, dx = dy * f'(x), has two forms side by side:
//  - the fused backend kernel activation_backward (the usual case: grad mode is off in backward);
//  - with create_graph (grad mode on in backward), f'(x) composed of differentiable ops, so
//    higher-order gradients work.
// What is saved for backward is what PyTorch saves (tools/autograd/derivatives.yaml): tanh, sigmoid
// and relu save their output y (f' is a function of y: 1 - y^2, y (1 - y), y > 0), so modifying y
// in place before backward is an error and modifying x is not; gelu and silu save their input x.
// Derivations: docs/ops/gelu.md (gelu, with a table for the others).
#include <cmath>

#include "autograd/ops/op_utils.hpp"
#include "autograd/ops/ops.hpp"
#include "autograd/record.hpp"

namespace ampgrad {

using autograd::BackwardContext;
using autograd::record;

namespace {

constexpr double kSqrt2OverPi = 0.7978845608028654;    // sqrt(2/pi)
constexpr double kInvSqrt2Pi = 0.3989422804014327;     // 1/sqrt(2*pi)
constexpr double kGeluCubic = 0.044715;

Tensor unary_forward(std::string_view op, UnaryOp kind, const Tensor& x) {            // (*)
    ops::check_floating(op, x);
    Tensor y = make_empty(x.sizes(), x.dtype(), x.device());
    kernels::unary(kind, y, x);
    return y;
}

// dx = dy * f'(x) through the fused kernel (no graph). `saved` is x, or y for tanh/sigmoid/relu.
Tensor fused_backward(ActivationGrad kind, const Tensor& saved, const Tensor& dy) {   // (*)
    Tensor dx = make_empty(saved.sizes(), saved.dtype(), saved.device());
    kernels::activation_backward(kind, dx, saved, ops::expand_raw(ops::cast_raw(dy, saved.dtype()), saved.sizes()));
    return dx;
}

enum class Saves { kInput, kOutput };

// Record f(x) = y with backward dy * f'(x): the kernel when grad mode is off, else
// `derivative(saved)`, a composition of differentiable ops. `saves` picks what is kept: x or y.
template <typename Derivative>
Tensor record_activation(std::string_view op, ActivationGrad kind, Saves saves, const Tensor& x, const Tensor& y,
                         Derivative derivative) {
    Tensor keep = saves == Saves::kOutput ? y : x;
    return record(op, y, {x}, {keep}, [kind, derivative](BackwardContext& ctx, const tensor_list& g) {
        Tensor saved = ctx.saved(0);
        if (!GradMode::is_enabled()) return tensor_list{fused_backward(kind, saved, g[0])};
        return tensor_list{g[0] * derivative(saved)};
    });
}

// Phi(x), the standard normal CDF, as its own differentiable op: Phi'(x) = phi(x). Used only by
// gelu's create_graph backward; its forward reuses the gelu-erf kernels (no erf kernel needed):
//   gelu'(x) = Phi(x) + x phi(x)   =>   Phi(x) = gelu'(x) - x phi(x)
Tensor normal_pdf(const Tensor& x) { return exp(square(x) * -0.5) * kInvSqrt2Pi; }

Tensor normal_cdf(const Tensor& x) {
    Tensor cdf;
    {
        NoGradGuard no_grad;
        Tensor gelu_grad = fused_backward(ActivationGrad::kGeluErf, x, ops::wrapped_scalar(1.0, x));
        cdf = gelu_grad - x * normal_pdf(x);
    }
    return record("normal_cdf", cdf, {x}, {x}, [](BackwardContext& ctx, const tensor_list& g) {
        return tensor_list{g[0] * normal_pdf(ctx.saved(0))};
    });
}

// tanh and sigmoid of an integer tensor compute in float32 (PyTorch's int -> float promotion).
Tensor float_input(std::string_view op, const Tensor& x) {
    ops::check_defined(op, x, "input");
    if (x.dtype() == kBool || is_floating(x.dtype())) return x;
    return ops::cast_raw(x, kFloat32);
}

}  // namespace

// tanh' = 1 - y^2, from the saved output y = tanh(x) (PyTorch's tanh_backward(grad, result))
Tensor tanh(const Tensor& x_in) {
    Tensor x = float_input("tanh", x_in);
    Tensor y = unary_forward("tanh", UnaryOp::kTanh, x);
    return record_activation("tanh", ActivationGrad::kTanh, Saves::kOutput, x, y,
                             [](const Tensor& t) { return 1.0 - t * t; });
}

// sigmoid' = y (1 - y), from the saved output y = sigmoid(x) (PyTorch's sigmoid_backward(grad, result))
Tensor sigmoid(const Tensor& x_in) {
    Tensor x = float_input("sigmoid", x_in);
    Tensor y = unary_forward("sigmoid", UnaryOp::kSigmoid, x);
    return record_activation("sigmoid", ActivationGrad::kSigmoid, Saves::kOutput, x, y,
                             [](const Tensor& s) { return s * (1.0 - s); });
}

// relu' = 0 where y = relu(x) <= 0, else 1: 0 at x == 0, and NaN passes the gradient. Read from
// the saved output, as PyTorch's threshold_backward(grad, result, 0). Integer tensors stay integer.
Tensor relu(const Tensor& x) {
    ops::check_defined("relu", x, "input");
    if (x.dtype() != kBool && !is_floating(x.dtype())) return clamp(x, 0.0, std::nullopt);
    Tensor y = unary_forward("relu", UnaryOp::kRelu, x);
    return record_activation("relu", ActivationGrad::kRelu, Saves::kOutput, x, y, [](const Tensor& r) {
        return where(logical_not(le(r, zeros_like(r))), ones_like(r), 0.0);   // 1 at NaN too
    });
}

// gelu(x) = x Phi(x); with the tanh approximation (GPT-2) Phi(x) ~ (1 + tanh(u)) / 2, u = sqrt(2/pi)(x + 0.044715 x^3)
Tensor gelu(const Tensor& x, bool tanh_approximation) {
    ops::check_defined("gelu", x, "input");
    if (tanh_approximation) {
        Tensor y = unary_forward("gelu", UnaryOp::kGeluTanh, x);
        return record_activation("gelu", ActivationGrad::kGeluTanh, Saves::kInput, x, y, [](const Tensor& v) {
            // d/dx [x (1 + tanh u) / 2] = (1 + tanh u) / 2 + x (1 - tanh^2 u) u' / 2
            Tensor t = tanh((v + v * v * v * kGeluCubic) * kSqrt2OverPi);
            Tensor du = (v * v * (3.0 * kGeluCubic) + 1.0) * kSqrt2OverPi;
            return (t + 1.0) * 0.5 + v * (1.0 - t * t) * du * 0.5;
        });
    }
    Tensor y = unary_forward("gelu", UnaryOp::kGeluErf, x);
    return record_activation("gelu", ActivationGrad::kGeluErf, Saves::kInput, x, y, [](const Tensor& v) {
        return normal_cdf(v) + v * normal_pdf(v);                                   // Phi(x) + x phi(x)
    });
}

// torch::gelu(x, approximate): "none" (erf) or "tanh"; anything else is refused, not read as a bool.
Tensor gelu(const Tensor& x, std::string_view approximate) {
    if (approximate != "none" && approximate != "tanh")
        throw ValueError(fmt::format("gelu: approximate must be \"none\" or \"tanh\", got \"{}\"", approximate));
    return gelu(x, approximate == "tanh");
}
Tensor gelu(const Tensor& x, const char* approximate) { return gelu(x, std::string_view(approximate)); }

// silu(x) = x s(x);  silu' = s (1 + x (1 - s))
Tensor silu(const Tensor& x) {
    ops::check_defined("silu", x, "input");
    Tensor y = unary_forward("silu", UnaryOp::kSilu, x);
    return record_activation("silu", ActivationGrad::kSilu, Saves::kInput, x, y, [](const Tensor& v) {
        Tensor s = sigmoid(v);
        return s * (1.0 + v * (1.0 - s));
    });
}

}  // namespace ampgrad

namespace ampgrad::nn::functional {
Tensor relu(const Tensor& x) { return ampgrad::relu(x); }
Tensor gelu(const Tensor& x, bool t) { return ampgrad::gelu(x, t); }
Tensor gelu(const Tensor& x, const GELUFuncOptions& o) { return ampgrad::gelu(x, std::string_view(o.approximate_)); }
Tensor gelu(const Tensor& x, const char* approximate) { return ampgrad::gelu(x, approximate); }
Tensor silu(const Tensor& x) { return ampgrad::silu(x); }
}  // namespace ampgrad::nn::functional

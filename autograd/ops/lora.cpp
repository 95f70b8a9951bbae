// lora.cpp: the LoRA adapter op (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language
// Models"; Hugging Face PEFT's peft/tuners/lora/layer.py Linear.forward), one forward with its backward:
//   out = y + scale * (x A^T) B^T          y (*,N), x (*,K), A (r,K), B (N,r) -> (*,N)
// y is the frozen base layer's output and x the adapter's input (after dropout). The product B A
// (N,K) is never formed: the adapter costs two thin GEMMs through the rank-r bottleneck h = x A^T.
// Backward (docs/lora.md §2), with g = dL/dout and gh = scale * g B:
//   dy = g,  dB = scale * g^T h (N,r),  dA = gh^T x (r,K),  dx = gh A (*,K)
#include "autograd/ops/lora.hpp"

#include "autograd/grad_mode.hpp"
#include "autograd/ops/autocast_hook.hpp"
#include "autograd/ops/op_utils.hpp"
#include "autograd/ops/ops.hpp"
#include "autograd/record.hpp"

namespace ampgrad::nn::functional {

using autograd::BackwardContext;
using autograd::record;

namespace {

void check_lora_operands(const Tensor& y, const Tensor& x, const Tensor& a, const Tensor& b) {
    ops::check_defined("lora_linear", y, "y");
    ops::check_defined("lora_linear", x, "x");
    ops::check_defined("lora_linear", a, "lora_A");
    ops::check_defined("lora_linear", b, "lora_B");
    ops::check_same_device("lora_linear", {&y, &x, &a, &b});
    if (x.dtype() != a.dtype() || x.dtype() != b.dtype() || y.dtype() != x.dtype())
        throw DTypeError(fmt::format("lora_linear: dtypes differ: y is {}, x is {}, lora_A is {}, lora_B is {}; "
                                     "cast them to one dtype (or run under autocast)",
                                     y.describe(), x.describe(), a.describe(), b.describe()));
    ops::check_floating("lora_linear", x);
    bool shapes_fit = x.dim() >= 1 && a.dim() == 2 && b.dim() == 2 && y.dim() == x.dim() &&
                      a.size(1) == x.size(-1) && b.size(1) == a.size(0) && y.size(-1) == b.size(0);
    for (int64_t d = 0; shapes_fit && d + 1 < x.dim(); ++d) shapes_fit = y.size(d) == x.size(d);
    if (!shapes_fit)
        throw ShapeError(fmt::format("lora_linear: expected y (*,N), x (*,K), lora_A (r,K), lora_B (N,r) but got "
                                     "y is {}, x is {}, lora_A is {}, lora_B is {}",
                                     y.describe(), x.describe(), a.describe(), b.describe()));
}

}  // namespace

Tensor lora_linear(const Tensor& y_in, const Tensor& x_in, const Tensor& a_in, const Tensor& b_in, double scale) {
    Tensor y = y_in, x = x_in, a = a_in, b = b_in;
    AMPGRAD_AUTOCAST("lora_linear", &y, &x, &a, &b);
    check_lora_operands(y, x, a, b);
    const int64_t k = x.size(-1), n = b.size(0);
    const int64_t rows = x.numel() / std::max<int64_t>(k, 1);
    Tensor h, out;
    {
        NoGradGuard no_grad;
        h = linear(reshape(x, {rows, k}), a);                            // (R,r) = x A^T
        out = add(y, reshape(linear(h, b), y.sizes()), scale);           // (*,N) = y + scale * h B^T
    }
    return record("lora_linear", out, {y, x, a, b}, {x, a, b, h},
                  [scale, rows, k, n](BackwardContext& ctx, const tensor_list& g) {
                      tensor_list d(4);
                      Tensor g2 = reshape(g[0], {rows, n});                                   // (R,N)
                      Tensor x2 = reshape(ctx.saved(0), {rows, k});                           // (R,K)
                      // double backward needs h as a function of x and A; first order reuses it
                      Tensor h = GradMode::is_enabled() ? linear(x2, ctx.saved(1)) : ctx.saved(3);   // (R,r)
                      if (ctx.needs_input_grad(0)) d[0] = g[0];                                // (*,N)
                      Tensor gh = mul(mm(g2, ctx.saved(2)), scale);                           // (R,r)
                      if (ctx.needs_input_grad(1)) d[1] = reshape(mm(gh, ctx.saved(1)), ctx.input_meta(1).shape);
                      if (ctx.needs_input_grad(2)) d[2] = mm(gh.t(), x2);                     // (r,K)
                      if (ctx.needs_input_grad(3)) d[3] = mul(mm(g2.t(), h), scale);          // (N,r)
                      return d;
                  });
}

}  // namespace ampgrad::nn::functional

// dropout.cpp: inverted dropout. In training each element is kept with probability 1-p and
// scaled by 1/(1-p), so the expected output equals the input and eval mode is the identity.
// The keep mask comes from Philox uniforms at a (seed, offset) reserved from the default
// generator, so manual_seed(s) reproduces it on any device; backward reuses the saved mask.
#include <cmath>

#include "autograd/ops/op_utils.hpp"
#include "autograd/ops/ops.hpp"
#include "autograd/record.hpp"
#include "core/philox.hpp"

namespace ampgrad::nn::functional {

using autograd::BackwardContext;
using autograd::record;

// x (*) -> (*): x * keep / (1 - p), keep ~ Bernoulli(1 - p)
Tensor dropout(const Tensor& x, double p, bool training) {
    ops::check_defined("dropout", x, "input");
    if (!(p >= 0.0 && p <= 1.0))
        throw ValueError(fmt::format("dropout: dropout probability has to be between 0 and 1, but got {} (input is {})", p,
                                     x.describe()));
    if (!training || p == 0.0 || x.numel() == 0) return x;
    ops::check_floating("dropout", x);
    if (p == 1.0) return x * 0.0;                          // everything dropped; the gradient is 0 too

    const double scale = 1.0 / (1.0 - p);
    Tensor keep, out;
    {
        NoGradGuard no_grad;
        Tensor u = make_empty(x.sizes(), kFloat32, x.device());                 // (*) uniform [0,1)
        uint64_t seed = get_rng_state().seed;
        uint64_t offset = generator_reserve_elements(x.numel());
        kernels::random_uniform(u, seed, offset, 0.0, 1.0);
        keep = u < (1.0 - p);                                                   // (*) bool
        out = where(keep, x * scale, 0.0);                                      // (*)
    }
    return record("dropout", out, {x}, {keep}, [scale](BackwardContext& ctx, const tensor_list& g) {
        return tensor_list{where(ctx.saved(0), g[0] * scale, 0.0)};
    });
}

}  // namespace ampgrad::nn::functional

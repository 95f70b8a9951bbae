// mask.cpp: the mask and repeat ops a model writer reaches for: chunk, tril, triu, masked_fill and
// repeat_interleave. Each is composed of differentiable ops that every backend already runs (narrow,
// where, expand, reshape), so each forward and its backward sit in those ops' functions, and the
// gradients are PyTorch's: tril/triu pass the gradient through the kept triangle (grad.tril(k)),
// masked_fill where the mask is false, repeat_interleave sums each element's repeats.
// Derivations and PyTorch's rules: docs/ops/masks.md.
#include "autograd/grad_mode.hpp"
#include "autograd/ops/autocast_hook.hpp"
#include "autograd/ops/op_utils.hpp"
#include "autograd/ops/ops.hpp"

namespace ampgrad {

namespace {

// (M,N) bool: true where col - row <= diagonal (tril) or >= diagonal (triu)
Tensor triangle(std::string_view op, const Tensor& x, int64_t diagonal, bool lower) {
    ops::check_defined(op, x, "input");
    if (x.dim() < 2)
        throw ShapeError(fmt::format("{}: input must have at least 2 dims (*,M,N), got {}", op, x.describe()));
    NoGradGuard no_grad;
    TensorOptions index = TensorOptions(kInt64).device(x.device());
    Tensor rows = unsqueeze(arange(x.size(-2), index), 1);                      // (M,1)
    Tensor cols = unsqueeze(arange(x.size(-1), index), 0);                      // (1,N)
    Tensor offset = cols - rows - full({}, static_cast<double>(diagonal), index);   // (M,N): col - row - diagonal
    Tensor zero = zeros({}, index);
    return lower ? le(offset, zero) : ge(offset, zero);
}

// where(keep, x, 0) in x's dtype (a bool x stays bool)
Tensor keep_or_zero(const Tensor& keep, const Tensor& x) {
    return where(keep, x, zeros({}, TensorOptions(x.dtype()).device(x.device())));
}

}  // namespace

tensor_list chunk(const Tensor& x_in, int64_t chunks, int64_t dim_in) {
    Tensor x = x_in;
    ops::check_defined("chunk", x, "input");
    AMPGRAD_AUTOCAST("chunk", &x);
    if (x.dim() == 0) throw IndexError(fmt::format("chunk: expected at least a 1-dim tensor, got {}", x.describe()));
    if (chunks <= 0) throw ValueError(fmt::format("chunk: chunks must be positive, got {} for {}", chunks, x.describe()));
    const int64_t dim = ops::wrap_dim("chunk", dim_in, x.dim());
    const int64_t size = x.size(dim);
    if (size == 0) {                                                             // `chunks` empty views, as PyTorch
        tensor_list pieces;
        for (int64_t i = 0; i < chunks; ++i) pieces.push_back(narrow(x, dim, 0, 0));
        return pieces;
    }
    return split(x, (size + chunks - 1) / chunks, dim);
}

Tensor tril(const Tensor& x_in, int64_t diagonal) {
    Tensor x = x_in;
    AMPGRAD_AUTOCAST("tril", &x);
    return keep_or_zero(triangle("tril", x, diagonal, true), x);
}

Tensor triu(const Tensor& x_in, int64_t diagonal) {
    Tensor x = x_in;
    AMPGRAD_AUTOCAST("triu", &x);
    return keep_or_zero(triangle("triu", x, diagonal, false), x);
}

Tensor masked_fill(const Tensor& x_in, const Tensor& mask, double value) {
    Tensor x = x_in;
    ops::check_defined("masked_fill", x, "input");
    ops::check_defined("masked_fill", mask, "mask");
    AMPGRAD_AUTOCAST("masked_fill", &x);
    ops::check_same_device("masked_fill", {&x, &mask});
    if (mask.dtype() != kBool)
        throw DTypeError(fmt::format("masked_fill: mask must be bool, got {}", mask.describe()));
    Tensor fill = full({}, value, TensorOptions(x.dtype()).device(x.device()));   // value in x's dtype
    return where(mask, fill, x);
}

// x (*) -> unsqueeze after dim, expand the new dim to `repeats`, merge it into dim: (..., size * repeats, ...)
Tensor repeat_interleave(const Tensor& x_in, int64_t repeats, std::optional<int64_t> dim_in) {
    Tensor x = x_in;
    ops::check_defined("repeat_interleave", x, "input");
    AMPGRAD_AUTOCAST("repeat_interleave", &x);
    if (repeats < 0)
        throw ValueError(fmt::format("repeat_interleave: repeats must be non-negative, got {} for {}", repeats,
                                     x.describe()));
    if (!dim_in) x = reshape(x, {x.numel()});                                    // (numel)
    const int64_t dim = ops::wrap_dim("repeat_interleave", dim_in.value_or(0), std::max<int64_t>(x.dim(), 1));
    if (x.dim() == 0) x = reshape(x, {1});
    Shape expanded = x.sizes();
    expanded.insert(expanded.begin() + dim + 1, repeats);                       // (..., size, repeats, ...)
    Shape merged = x.sizes();
    merged[static_cast<size_t>(dim)] *= repeats;                                // (..., size * repeats, ...)
    return reshape(expand(unsqueeze(x, dim + 1), expanded), merged);
}

}  // namespace ampgrad

// reorder.cpp: the copies that reorder or tile elements: repeat (Tensor.repeat), flip, roll and
// cumsum. repeat and roll are composed of differentiable views (expand + reshape; narrow + cat), so
// their backward is those ops' (a sum over the tiles; the opposite roll). flip gathers each row
// through a reversed index (its backward is flip again); cumsum runs the row scan kernel, and its
// backward is the reversed running sum of the reversed gradient. Derivations: docs/ops/reorder.md.
#include <algorithm>

#include "autograd/grad_mode.hpp"
#include "autograd/ops/along_dim.hpp"
#include "autograd/ops/autocast_hook.hpp"
#include "autograd/ops/op_utils.hpp"
#include "autograd/ops/ops.hpp"
#include "autograd/record.hpp"
#include "kernels/kernels.hpp"

namespace ampgrad {

using autograd::BackwardContext;
using autograd::record;

namespace {

// Wraps every dim of `dims` against x and rejects a dim named twice (flip's rule).
std::vector<int64_t> unique_dims(std::string_view op, const Shape& dims, const Tensor& x) {
    std::vector<int64_t> wrapped;
    for (int64_t d : dims) {
        const int64_t w = ops::wrap_dim(op, d, x.dim());
        if (std::find(wrapped.begin(), wrapped.end(), w) != wrapped.end())
            throw ValueError(fmt::format("{}: dim {} appears multiple times in the list of dims {} for {}", op, w,
                                         shape_str(dims), x.describe()));
        wrapped.push_back(w);
    }
    return wrapped;
}

// rows (R,N) -> running sums along N (R,N)
Tensor cumsum_rows(const Tensor& rows) {
    Tensor out = make_empty(rows.sizes(), rows.dtype(), rows.device());            // (R,N)
    {
        NoGradGuard no_grad;
        kernels::cumsum(out, rows.detach().contiguous());
    }
    return record("cumsum", out, {rows}, {}, [](BackwardContext&, const tensor_list& g) {
        Tensor reverse = ops::reversed_index(g[0].size(1), g[0].device());          // (1,N)
        Tensor reversed_sums = cumsum_rows(ops::take_along_last(g[0], reverse));     // (R,N)
        return tensor_list{ops::take_along_last(reversed_sums, reverse)};            // (R,N)
    });
}

}  // namespace

// x (S0..Sm-1) padded to (1,..,1,S0..) then viewed (1,P0,1,P1,..), expanded (r0,P0,r1,P1,..) and
// merged (r0*P0, r1*P1, ..): tile i of dim k holds x itself, as Tensor.repeat.
Tensor repeat(const Tensor& x_in, const Shape& repeats) {
    Tensor x = x_in;
    ops::check_defined("repeat", x, "input");
    AMPGRAD_AUTOCAST("repeat", &x);
    if (static_cast<int64_t>(repeats.size()) < x.dim())
        throw ValueError(fmt::format("repeat: the number of repeats ({}) can not be smaller than the number of dims "
                                     "of {}", shape_str(repeats), x.describe()));
    for (int64_t r : repeats)
        if (r < 0) throw ValueError(fmt::format("repeat: repeats must be non-negative, got {}", shape_str(repeats)));
    Shape padded(repeats.size() - static_cast<size_t>(x.dim()), 1);
    padded.insert(padded.end(), x.sizes().begin(), x.sizes().end());
    Shape interleaved, expanded, merged;
    for (size_t i = 0; i < repeats.size(); ++i) {
        interleaved.insert(interleaved.end(), {1, padded[i]});
        expanded.insert(expanded.end(), {repeats[i], padded[i]});
        merged.push_back(repeats[i] * padded[i]);
    }
    return reshape(expand(reshape(x, interleaved), expanded), merged);
}

Tensor flip(const Tensor& x_in, const Shape& dims) {
    Tensor x = x_in;
    ops::check_defined("flip", x, "input");
    AMPGRAD_AUTOCAST("flip", &x);
    Tensor y = x;
    for (int64_t dim : unique_dims("flip", dims, x)) {
        if (x.dim() == 0 || x.size(dim) <= 1) continue;                            // nothing to reverse
        ops::RowLayout layout;
        Tensor rows = ops::to_rows(y, dim, layout);                                 // (R,N)
        y = ops::from_rows(ops::take_along_last(rows, ops::reversed_index(rows.size(1), x.device())), layout);
    }
    return y.is_same(x) ? clone(x) : y;
}

// Along each dim, the last `shift` elements move to the front: cat(x[n-s:], x[:n-s]).
Tensor roll(const Tensor& x_in, const Shape& shifts, const Shape& dims) {
    Tensor x = x_in;
    ops::check_defined("roll", x, "input");
    AMPGRAD_AUTOCAST("roll", &x);
    if (shifts.empty() || (dims.empty() ? shifts.size() != 1 : shifts.size() != dims.size()))
        throw ValueError(fmt::format("roll: shifts and dims must align: shifts {}, dims {}", shape_str(shifts),
                                     shape_str(dims)));
    if (dims.empty()) return reshape(roll(reshape(x, {x.numel()}), shifts, {0}), x.sizes());
    Tensor y = x;
    for (size_t i = 0; i < dims.size(); ++i) {
        const int64_t dim = ops::wrap_dim("roll", dims[i], x.dim());
        const int64_t n = x.dim() == 0 ? 1 : x.size(dim);
        if (n == 0) continue;
        const int64_t s = ((shifts[i] % n) + n) % n;
        if (s == 0) continue;
        y = cat({narrow(y, dim, n - s, s), narrow(y, dim, 0, n - s)}, dim);
    }
    return y.is_same(x) ? clone(x) : y;
}

Tensor cumsum(const Tensor& x_in, int64_t dim_in, std::optional<DType> dtype) {
    Tensor x = x_in;
    ops::check_defined("cumsum", x, "input");
    AMPGRAD_AUTOCAST("cumsum", &x);
    const int64_t dim = ops::wrap_dim("cumsum", dim_in, x.dim());
    if (dtype) x = to_dtype(x, *dtype);
    else if (!is_floating(x.dtype())) x = to_dtype(x, kInt64);                      // as torch: ints sum in int64
    if (x.dtype() == kBool) throw DTypeError(fmt::format("cumsum: cannot sum in bool ({})", x.describe()));
    ops::RowLayout layout;
    return ops::from_rows(cumsum_rows(ops::to_rows(x, dim, layout)), layout);
}

}  // namespace ampgrad

// index_derived.cpp: the indexing ops built on gather and index_select (autograd/ops/index.cpp):
//   take_along_dim(x, indices, dim): broadcast x and indices in every dim but dim, wrap negative
//     indices, gather (its backward scatter-adds, and expand's sums the broadcast back);
//   F::one_hot(x, num_classes): (*) int64 -> (*,num_classes), a comparison with arange;
//   repeat_interleave(repeats): the index [0]*r0 + [1]*r1 + ..., built on the host (its length is
//     the sum of the repeats, which the host must know to allocate, as in PyTorch);
//   repeat_interleave(x, repeats, dim): index_select of x with that index (backward: index_add).
// PyTorch 2.15's rules and messages; docs/ops/index.md.
#include <numeric>

#include "autograd/grad_mode.hpp"
#include "autograd/ops/autocast_hook.hpp"
#include "autograd/ops/index_utils.hpp"
#include "autograd/ops/op_utils.hpp"
#include "autograd/ops/ops.hpp"

namespace ampgrad {

namespace {

// The shape of `t` with `size` at dim.
Shape with_size_at(const Shape& shape, int64_t dim, int64_t size) {
    Shape out = shape;
    out[static_cast<size_t>(dim)] = size;
    return out;
}

// take_along_dim's broadcast of x (*) and indices (*) in every dim but dim: the two target shapes
std::pair<Shape, Shape> broadcast_except(const Tensor& x, const Tensor& indices, int64_t dim) {
    Shape x_dims = with_size_at(x.sizes(), dim, 1), i_dims = with_size_at(indices.sizes(), dim, 1);
    Shape common = ops::broadcast_shapes("take_along_dim", x_dims, i_dims);
    return {with_size_at(common, dim, x.size(dim)), with_size_at(common, dim, indices.size(dim))};
}

// repeats (N) int64/int32 as host int64 values
std::vector<int64_t> read_repeats(const Tensor& repeats) {
    if (repeats.dtype() != kInt64 && repeats.dtype() != kInt32)
        throw DTypeError(fmt::format("repeat_interleave: repeats must be int64 or int32, got {}", repeats.describe()));
    return repeats.to_vector<int64_t>();
}

// ValueError for a negative count (checked after a single count is broadcast: PyTorch accepts a
// negative one repeated over an empty dim)
void check_non_negative(const std::vector<int64_t>& counts, const Tensor& repeats) {
    for (int64_t r : counts)
        if (r < 0)
            throw ValueError(fmt::format("repeat_interleave: repeats can not be negative, got {} in {}", r,
                                         repeats.describe()));
}

// [0]*r0 + [1]*r1 + ... on the host
std::vector<int64_t> repeated_positions(const std::vector<int64_t>& repeats) {
    std::vector<int64_t> positions;
    positions.reserve(static_cast<size_t>(std::accumulate(repeats.begin(), repeats.end(), int64_t{0})));
    for (size_t i = 0; i < repeats.size(); ++i) positions.insert(positions.end(), static_cast<size_t>(repeats[i]),
                                                                 static_cast<int64_t>(i));
    return positions;
}

}  // namespace

Tensor take_along_dim(const Tensor& x_in, const Tensor& indices, std::optional<int64_t> dim_in) {
    Tensor x = x_in;
    ops::check_defined("take_along_dim", x, "input");
    ops::check_defined("take_along_dim", indices, "indices");
    AMPGRAD_AUTOCAST("take_along_dim", &x);
    ops::check_same_device("take_along_dim", {&x, &indices});
    if (indices.dtype() != kInt64)
        throw DTypeError(fmt::format("take_along_dim: indices must be int64, got {}", indices.describe()));
    Tensor xe, idx;
    int64_t dim = 0;
    if (!dim_in) {                                                            // over the flattened tensors
        xe = reshape(x, {x.numel()});
        idx = reshape(indices, {indices.numel()});
    } else {
        if (x.dim() != indices.dim())
            throw ShapeError(fmt::format("take_along_dim: input {} and indices {} must have the same number of dims",
                                         x.describe(), indices.describe()));
        if (x.dim() == 0)
            throw IndexError(fmt::format("take_along_dim: dimension {} is out of range for the 0-d input {}", *dim_in,
                                         x.describe()));
        dim = ops::wrap_dim("take_along_dim", *dim_in, x.dim());
        auto [x_shape, i_shape] = broadcast_except(x, indices, dim);
        {
            NoGradGuard no_grad;                                              // negative: count from the end
            Tensor size = full({}, static_cast<double>(x.size(dim)), indices.options());
            idx = ops::expand_raw(where(lt(indices, zeros({}, indices.options())), indices + size, indices), i_shape);
        }
        xe = x.sizes() == x_shape ? x : expand(x, x_shape);                   // (broadcast x)
    }
    try {                                                                     // gather checks the bounds
        return gather(xe, dim, idx);
    } catch (const IndexError& e) {
        throw IndexError(fmt::format("take_along_dim: {} (indices {})", e.what(), indices.describe()));
    }
}

Tensor repeat_interleave(const Tensor& repeats) {
    ops::check_defined("repeat_interleave", repeats, "repeats");
    if (repeats.dim() != 1)
        throw ShapeError(fmt::format("repeat_interleave: repeats must be 1-d, got {}", repeats.describe()));
    std::vector<int64_t> counts = read_repeats(repeats);
    check_non_negative(counts, repeats);
    std::vector<int64_t> positions = repeated_positions(counts);
    const int64_t n = static_cast<int64_t>(positions.size());
    return to_dtype(tensor(positions, {n}, TensorOptions(kInt64)), repeats.dtype()).to(repeats.device());
}

Tensor repeat_interleave(const Tensor& x_in, const Tensor& repeats, std::optional<int64_t> dim_in,
                         std::optional<int64_t> output_size) {
    Tensor x = x_in;
    ops::check_defined("repeat_interleave", x, "input");
    ops::check_defined("repeat_interleave", repeats, "repeats");
    AMPGRAD_AUTOCAST("repeat_interleave", &x);
    ops::check_same_device("repeat_interleave", {&x, &repeats});
    if (repeats.dim() > 1)
        throw ShapeError(fmt::format("repeat_interleave: repeats must be 0-d or 1-d, got {}", repeats.describe()));
    if (!dim_in) x = reshape(x, {x.numel()});                                // (numel)
    if (x.dim() == 0)
        throw IndexError(fmt::format("repeat_interleave: dimension {} is out of range for the 0-d input {}", *dim_in,
                                     x.describe()));
    const int64_t dim = ops::wrap_dim("repeat_interleave", dim_in.value_or(0), x.dim());
    std::vector<int64_t> counts = read_repeats(repeats);
    if (counts.size() == 1) counts.assign(static_cast<size_t>(x.size(dim)), counts[0]);   // one for every slice
    if (static_cast<int64_t>(counts.size()) != x.size(dim))
        throw ShapeError(fmt::format("repeat_interleave: repeats must have the same size as the input along dim, "
                                     "but got repeats {} and input {} at dim {}", repeats.describe(), x.describe(),
                                     dim));
    check_non_negative(counts, repeats);
    std::vector<int64_t> positions = repeated_positions(counts);
    const int64_t n = static_cast<int64_t>(positions.size());
    if (output_size && *output_size != n)
        throw ValueError(fmt::format("repeat_interleave: output_size {} does not match the sum of the repeats, {}",
                                     *output_size, n));
    return index_select(x, dim, tensor(positions, {n}, TensorOptions(kInt64).device(x.device())));
}

namespace nn::functional {

Tensor one_hot(const Tensor& x, int64_t num_classes) {
    ops::check_defined("one_hot", x, "input");
    if (x.dtype() != kInt64)
        throw DTypeError(fmt::format("one_hot: input must be an int64 tensor of class indices, got {}", x.describe()));
    if (num_classes < -1)
        throw ValueError(fmt::format("one_hot: num_classes must be -1 (inferred) or non-negative, got {}", num_classes));
    if (num_classes <= 0 && x.numel() == 0)                                   // PyTorch: 0 is not inferable either
        throw ValueError(fmt::format("one_hot: can not infer the number of classes from the empty input {}",
                                     x.describe()));
    NoGradGuard no_grad;
    if (x.numel() > 0) {
        const int64_t lowest = min(x).item<int64_t>(), highest = max(x).item<int64_t>();
        if (lowest < 0)
            throw ValueError(fmt::format("one_hot: class values must be non-negative, got {} in {}", lowest,
                                         x.describe()));
        if (num_classes == -1) num_classes = highest + 1;
        if (highest >= num_classes)
            throw ValueError(fmt::format("one_hot: class values must be smaller than num_classes = {}, got {} in {}",
                                         num_classes, highest, x.describe()));
    }
    Tensor classes = arange(num_classes, TensorOptions(kInt64).device(x.device()));   // (num_classes)
    return to_dtype(eq(unsqueeze(x, -1), classes), kInt64);                            // (*,num_classes)
}

}  // namespace nn::functional

}  // namespace ampgrad

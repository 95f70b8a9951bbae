// embedding.cpp: embedding lookup, out[i] = weight[indices[i]], and its backward, the
// scatter-add of the output gradient into a (V,C) table. The backward is itself an op whose
// backward is the lookup again (the two are transposes of each other), so double backward works.
#include "autograd/ops/op_utils.hpp"
#include "autograd/ops/ops.hpp"
#include "autograd/record.hpp"

namespace ampgrad::nn::functional {

using autograd::BackwardContext;
using autograd::record;

namespace {

// dweight (V,C) = sum of the rows of dout (*,C) at `indices` (*), as a differentiable op.
Tensor embedding_backward(const Tensor& dout, const Tensor& indices, int64_t V) {
    const int64_t C = dout.size(-1);
    Tensor dweight = zeros({V, C}, dout.options());                          // (V,C)
    {
        NoGradGuard no_grad;
        Tensor idx = indices.reshape({-1});                                   // (N)
        Tensor rows = dout.contiguous().view({idx.numel(), C});               // (N,C)
        kernels::embedding_backward(dweight, idx, rows);
    }
    return record("embedding_backward", dweight, {dout}, {indices}, [](BackwardContext& ctx, const tensor_list& g) {
        return tensor_list{embedding(ctx.saved(0), g[0])};                    // (*,C)
    });
}

}  // namespace

// indices (*) int64/int32, weight (V,C) -> (*,C); no gradient reaches row padding_idx (PyTorch's
// padding_idx: the forward still reads that row)
Tensor embedding(const Tensor& indices, const Tensor& weight, std::optional<int64_t> padding_idx) {
    ops::check_defined("embedding", indices, "indices");
    ops::check_defined("embedding", weight, "weight");
    ops::check_same_device("embedding", {&indices, &weight});
    if (indices.dtype() != kInt64 && indices.dtype() != kInt32)
        throw DTypeError(fmt::format("embedding: indices must be int64 or int32 but got {} (weight is {})",
                                     indices.describe(), weight.describe()));
    if (weight.dim() != 2)
        throw ShapeError(fmt::format("embedding: weight must be 2-d (V,C) but got {}", weight.describe()));
    ops::check_floating("embedding", weight);
    const int64_t V = weight.size(0), C = weight.size(1);
    if (padding_idx && (*padding_idx >= V || *padding_idx < -V))
        throw ValueError(fmt::format("embedding: padding_idx {} must be within num_embeddings {} (weight is {})",
                                     *padding_idx, V, weight.describe()));
    const int64_t pad = padding_idx ? (*padding_idx < 0 ? *padding_idx + V : *padding_idx) : -1;

    Shape out_shape = indices.sizes();
    out_shape.push_back(C);
    Tensor out;
    {
        NoGradGuard no_grad;
        Tensor idx = indices.reshape({-1});                                   // (N)
        Tensor rows = make_empty({idx.numel(), C}, weight.dtype(), weight.device());   // (N,C)
        kernels::embedding(rows, idx, weight.contiguous());
        out = rows.view(out_shape);                                           // (*,C)
    }
    return record("embedding", out, {weight}, {indices}, [V, pad](BackwardContext& ctx, const tensor_list& g) {
        Tensor dweight = embedding_backward(g[0], ctx.saved(0), V);           // (V,C)
        if (pad < 0) return tensor_list{dweight};
        Tensor is_pad = eq(arange(V, TensorOptions(kInt64).device(dweight.device())).view({V, 1}),
                           full({}, static_cast<double>(pad), TensorOptions(kInt64).device(dweight.device())));
        return tensor_list{where(is_pad, zeros_like(dweight), dweight)};      // (V,C), row pad zero
    });
}

}  // namespace ampgrad::nn::functional

// embedding.cpp: nn::Embedding (the lookup and its scatter-add backward are F::embedding).
#include "nn/embedding.hpp"

#include "autograd/grad_mode.hpp"
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"
#include "nn/init.hpp"

namespace ampgrad::nn {

Embedding::Embedding(int64_t v, int64_t c, TensorOptions options, std::optional<int64_t> padding)
    : Module("Embedding"), num_embeddings(v), embedding_dim(c) {
    if (v < 0 || c < 0)
        throw ValueError(fmt::format("Embedding: sizes must be non-negative, got num_embeddings={} embedding_dim={}",
                                     v, c));
    if (padding && (*padding >= v || *padding < -v))        // PyTorch's "Padding_idx must be within num_embeddings"
        throw ValueError(fmt::format("Embedding: padding_idx {} must be within num_embeddings {}", *padding, v));
    if (padding) padding_idx = *padding < 0 ? *padding + v : *padding;
    weight = register_parameter("weight", empty({v, c}, options.requires_grad(false)));
    if (!init::skipping_init()) reset_parameters();   // deferred: loaded later (nn/init.hpp)
}

// As PyTorch's reset_parameters + _fill_padding_idx_with_zero.
void Embedding::reset_parameters() {
    init::normal_(weight, 0.0, 1.0);
    if (padding_idx) {
        NoGradGuard no_grad;
        init::zeros_(weight.narrow(0, *padding_idx, 1));        // (1,C)
    }
}

Tensor Embedding::forward(const Tensor& indices) const {
    return with_forward_hooks(indices, [&](const Tensor& in) { return F::embedding(in, weight, padding_idx); });   // (*) -> (*,C)
}

}  // namespace ampgrad::nn

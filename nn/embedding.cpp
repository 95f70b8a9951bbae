// embedding.cpp: nn::Embedding (the lookup and its scatter-add backward are F::embedding).
#include "nn/embedding.hpp"

#include "autograd/ops/ops.hpp"
#include "core/error.hpp"
#include "nn/init.hpp"

namespace ampgrad::nn {

Embedding::Embedding(int64_t v, int64_t c, TensorOptions options)
    : Module("Embedding"), num_embeddings(v), embedding_dim(c) {
    if (v < 0 || c < 0)
        throw ValueError(fmt::format("Embedding: sizes must be non-negative, got num_embeddings={} embedding_dim={}",
                                     v, c));
    weight = register_parameter("weight", empty({v, c}, options.requires_grad(false)));
    reset_parameters();
}

void Embedding::reset_parameters() { init::normal_(weight, 0.0, 1.0); }

Tensor Embedding::forward(const Tensor& indices) const {
    return with_forward_hooks(indices, [&](const Tensor& in) { return F::embedding(in, weight); });   // (*) -> (*,C)
}

}  // namespace ampgrad::nn

// embedding.hpp: nn::Embedding, a (V,C) table looked up by integer indices; weight ~ N(0,1)
// as in PyTorch.
//
//   auto wte = std::make_shared<nn::Embedding>(V, C);
//   Tensor x = wte->forward(idx);                   // (B,T) int64 -> (B,T,C)
//
// With padding_idx (PyTorch's nn.Embedding(V, C, padding_idx=p)), row p starts as zeros and gets no
// gradient, so it stays whatever it is set to; a negative p counts from the end (stored wrapped).
//   nn::Embedding tok(V, C, {}, /*padding_idx=*/0);
#pragma once
#include <optional>

#include "nn/module.hpp"

namespace ampgrad::nn {

class Embedding : public Module {
public:
    Embedding(int64_t num_embeddings, int64_t embedding_dim, TensorOptions options = {},
              std::optional<int64_t> padding_idx = std::nullopt);
    Tensor forward(const Tensor& indices) const;   // (*) -> (*,C)
    void reset_parameters();                       // N(0,1), then row padding_idx zeroed

    int64_t num_embeddings, embedding_dim;
    std::optional<int64_t> padding_idx;            // in [0, V) when set
    Tensor weight;                                 // (V,C)
};

}  // namespace ampgrad::nn

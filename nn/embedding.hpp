// embedding.hpp: nn::Embedding, a (V,C) table looked up by integer indices; weight ~ N(0,1)
// as in PyTorch.
//
//   auto wte = std::make_shared<nn::Embedding>(V, C);
//   Tensor x = wte->forward(idx);                   // (B,T) int64 -> (B,T,C)
#pragma once
#include "nn/module.hpp"

namespace ampgrad::nn {

class Embedding : public Module {
public:
    Embedding(int64_t num_embeddings, int64_t embedding_dim, TensorOptions options = {});
    Tensor forward(const Tensor& indices) const;   // (*) -> (*,C)
    void reset_parameters();

    int64_t num_embeddings, embedding_dim;
    Tensor weight;                                 // (V,C)
};

}  // namespace ampgrad::nn

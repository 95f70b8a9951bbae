// layer_norm.hpp: nn::LayerNorm over the trailing `normalized_shape` dims, with weight = 1 and
// bias = 0 when elementwise_affine (PyTorch's defaults).
//
//   auto ln = std::make_shared<nn::LayerNorm>(Shape{C});
//   Tensor y = ln->forward(x);                      // (B,T,C) -> (B,T,C)
#pragma once
#include "nn/module.hpp"

namespace ampgrad::nn {

class LayerNorm : public Module {
public:
    LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true, bool bias = true,
              TensorOptions options = {});
    Tensor forward(const Tensor& x) const;   // (*,normalized_shape) -> same
    void reset_parameters();

    Shape normalized_shape;
    double eps;
    Tensor weight;                           // normalized_shape, undefined without affine
    Tensor bias;                             // normalized_shape, undefined without affine or bias
};

}  // namespace ampgrad::nn

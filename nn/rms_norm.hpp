// rms_norm.hpp: nn::RMSNorm over the trailing `normalized_shape` dims, with weight = 1 when
// elementwise_affine, and eps defaulting to the machine epsilon of the compute type (f32 for f16/bf16), as torch.nn.RMSNorm.
//
//   auto norm = std::make_shared<nn::RMSNorm>(Shape{C}, 1e-5);
//   Tensor y = norm->forward(x);                    // (B,T,C) -> (B,T,C)
#pragma once
#include <optional>

#include "nn/module.hpp"

namespace ampgrad::nn {

class RMSNorm : public Module {
public:
    explicit RMSNorm(Shape normalized_shape, std::optional<double> eps = std::nullopt, bool elementwise_affine = true,
                     TensorOptions options = {});
    Tensor forward(const Tensor& x) const;   // (*,normalized_shape) -> same
    void reset_parameters();

    Shape normalized_shape;
    std::optional<double> eps;
    Tensor weight;                           // normalized_shape, undefined without affine
};

}  // namespace ampgrad::nn

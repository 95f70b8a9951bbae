// linear.hpp: nn::Linear, y = x W^T + b, with PyTorch's default initialisation
// (kaiming_uniform with a = sqrt(5), i.e. W and b ~ U(-1/sqrt(in), 1/sqrt(in))).
//
//   auto fc = std::make_shared<nn::Linear>(4, 8);   // weight (8,4), bias (8)
//   Tensor y = fc->forward(x);                      // (B,4) -> (B,8)
#pragma once
#include "nn/module.hpp"

namespace ampgrad::nn {

class Linear : public Module {
public:
    // `options` sets the parameters' dtype and device (f32 cpu by default).
    Linear(int64_t in_features, int64_t out_features, bool bias = true, TensorOptions options = {});
    Tensor forward(const Tensor& x) const;   // (*,in) -> (*,out)
    void reset_parameters();                 // redraws weight and bias from the default generator

    int64_t in_features, out_features;
    Tensor weight;                           // (out,in)
    Tensor bias;                             // (out), undefined without bias
};

}  // namespace ampgrad::nn

// linear.hpp: nn::Linear, y = x W^T + b, with PyTorch's default initialisation
// (kaiming_uniform with a = sqrt(5), i.e. W and b ~ U(-1/sqrt(in), 1/sqrt(in))).
//
//   auto fc = std::make_shared<nn::Linear>(4, 8);   // weight (8,4), bias (8)
//   Tensor y = fc->forward(x);                      // (B,4) -> (B,8)
#pragma once
#include <memory>

#include "nn/module.hpp"

namespace ampgrad::nn {

struct LoraAdapter;   // nn/lora.hpp

class Linear : public Module {
public:
    // `options` sets the parameters' dtype and device (f32 cpu by default).
    Linear(int64_t in_features, int64_t out_features, bool bias = true, TensorOptions options = {});
    // (*,in) -> (*,out): base_forward(x), plus the LoRA adapter's update when one is attached (nn/lora.hpp)
    Tensor forward(const Tensor& x) const;
    void reset_parameters();                 // redraws weight and bias from the default generator

    int64_t in_features, out_features;
    Tensor weight;                           // (out,in)
    Tensor bias;                             // (out), undefined without bias
    std::shared_ptr<LoraAdapter> lora;       // null unless nn::attach_lora added one (submodules lora_A, lora_B)

protected:
    Tensor base_forward(const Tensor& x) const;   // the frozen path: F::linear(x, weight, bias)
};

}  // namespace ampgrad::nn

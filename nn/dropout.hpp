// dropout.hpp: nn::Dropout(p): during training zeroes each element with probability p and scales
// the rest by 1/(1-p); the identity in eval mode (module.eval()).
#pragma once
#include "nn/module.hpp"

namespace ampgrad::nn {

class Dropout : public Module {
public:
    explicit Dropout(double p = 0.5);
    Tensor forward(const Tensor& x) const;   // (*) -> (*)

    double p;
};

}  // namespace ampgrad::nn

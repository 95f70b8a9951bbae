// activation.hpp: the activations as parameter-free modules, libtorch's nn::ReLU, nn::GELU,
// nn::Tanh, nn::Sigmoid and nn::SiLU, for nn::Sequential. Each forward is the op of the same name
// (autograd/ops/activation.cpp) behind the module's forward hooks; the shape is unchanged, (*) -> (*).
//
//   auto mlp = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(4, 8),
//                                               std::make_shared<nn::GELU>("tanh"),
//                                               std::make_shared<nn::Linear>(8, 2));
#pragma once
#include <string>

#include "nn/module.hpp"

namespace ampgrad::nn {

class ReLU : public Module {
public:
    ReLU() : Module("ReLU") {}
    Tensor forward(const Tensor& x) const;
};

class GELU : public Module {
public:
    // approximate: "none" (the exact erf form, the default) or "tanh"; ValueError otherwise.
    explicit GELU(std::string approximate = "none");
    Tensor forward(const Tensor& x) const;

    std::string approximate;
};

class Tanh : public Module {
public:
    Tanh() : Module("Tanh") {}
    Tensor forward(const Tensor& x) const;
};

class Sigmoid : public Module {
public:
    Sigmoid() : Module("Sigmoid") {}
    Tensor forward(const Tensor& x) const;
};

class SiLU : public Module {
public:
    SiLU() : Module("SiLU") {}
    Tensor forward(const Tensor& x) const;
};

}  // namespace ampgrad::nn

// lora.hpp: the LoRA adapter op (autograd/ops/lora.cpp), declared beside ops.hpp: nn/lora.hpp and
// tests include it (ampgrad/ampgrad.h reaches it through nn/lora.hpp).
#pragma once
#include "core/tensor.hpp"

namespace ampgrad::nn::functional {

// out = y + scale * (x A^T) B^T, never forming B A; y (*,N) the frozen base output, x (*,K) the
// adapter's input (after dropout), A (r,K), B (N,r) -> (*,N). Gradients for all four.
Tensor lora_linear(const Tensor& y, const Tensor& x, const Tensor& lora_A, const Tensor& lora_B, double scale);

}  // namespace ampgrad::nn::functional

// init.hpp: in-place parameter initialisers (torch.nn.init), drawing from ampgrad's seeded Philox
// generator, so manual_seed(s) reproduces a model's initial weights on any device.
// They run without recording autograd and bump the tensor's version counter.
#pragma once
#include "core/tensor.hpp"

namespace ampgrad::nn::init {

void uniform_(const Tensor& t, double lo = 0.0, double hi = 1.0);     // U(lo, hi)
void normal_(const Tensor& t, double mean = 0.0, double std = 1.0);   // N(mean, std^2)
void constant_(const Tensor& t, double value);
void zeros_(const Tensor& t);
void ones_(const Tensor& t);
// fan_in of a weight laid out (out_features, in_features, *kernel) as PyTorch does.
int64_t fan_in(const Tensor& weight);

}  // namespace ampgrad::nn::init

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

// Deferred initialisation (ampgrad's form of PyTorch's skip_init / meta-device build). While a
// SkipInitGuard lives on this thread, nn::Linear, nn::Embedding, nn::LayerNorm and models::GPT
// allocate their parameters (uninitialised, as empty()) and skip reset_parameters(): no random draw,
// no fill. Load them next (io::load_state_dict reads straight into them) or call reset_parameters().
// The initialisers above still work inside the guard; only the modules' constructors look at it.
//
//   nn::init::SkipInitGuard skip;
//   auto model = std::make_shared<models::GPT>(cfg);      // allocated once, not initialised
//   io::load_state_dict(*model, "model.safetensors");     // initialised once, by the load
class SkipInitGuard {
public:
    SkipInitGuard();
    ~SkipInitGuard();
    SkipInitGuard(const SkipInitGuard&) = delete;
    SkipInitGuard& operator=(const SkipInitGuard&) = delete;
};
bool skipping_init();   // true while a SkipInitGuard lives on this thread

}  // namespace ampgrad::nn::init

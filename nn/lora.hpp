// lora.hpp: a LoRA adapter attached to an nn::Linear (Hu et al. 2021; Hugging Face PEFT's LoraLayer).
// The Linear's frozen weight W (out,in) gains a trainable low-rank update:
//   y = x W^T + b + scale * (dropout(x) A^T) B^T,   A (r,in), B (out,r), scale = alpha/r (or alpha/sqrt(r))
// A and B are registered as the Linear's submodules `lora_A` and `lora_B`, so their parameters are named
// as PEFT names them (`...q_proj.lora_A.weight`). The maths and the memory budget: docs/lora.md.
//
//   auto fc = std::make_shared<nn::Linear>(64, 64);
//   nn::attach_lora(*fc, nn::LoraOptions{.r = 8, .alpha = 16});   // W frozen, B = 0: output unchanged
//   fc->lora->merge(*fc);                                         // W += scale * B A (inference)
#pragma once
#include <memory>
#include <string>

#include "autograd/ops/lora.hpp"
#include "nn/linear.hpp"

namespace ampgrad::nn {

// How PEFT's `init_lora_weights` initialises A and B (B starts at zero unless kNone).
enum class LoraInit {
    kKaiming,    // true (PEFT's default): A ~ kaiming_uniform(a=sqrt(5)), B = 0
    kGaussian,   // "gaussian": A ~ N(0, 1/r^2), B = 0
    kNone,       // false: A and B keep nn.Linear's default draw (B != 0; for tests)
};
LoraInit lora_init_from_string(const std::string& text);   // "true"/"gaussian"/"false"; ValueError otherwise
std::string lora_init_to_string(LoraInit init);

struct LoraOptions {
    int64_t r = 8;                 // the rank
    double alpha = 8.0;            // PEFT's lora_alpha
    double dropout = 0.0;          // on the adapter's input only
    bool use_rslora = false;       // scale = alpha / sqrt(r) (rsLoRA, Kalajdzievski 2023) instead of alpha / r
    LoraInit init = LoraInit::kKaiming;
    double scale() const;          // alpha/r or alpha/sqrt(r)
};

// The adapter state a Linear holds (nn::Linear::lora). lora_A and lora_B are also the Linear's
// registered submodules, so they appear in named_parameters(), state_dict() and ZeRO's hooks.
struct LoraAdapter {
    LoraOptions options;
    std::shared_ptr<Linear> lora_A;   // weight (r,in)
    std::shared_ptr<Linear> lora_B;   // weight (out,r)
    bool merged = false;              // true while scale * B A is folded into the base weight

    // out = y + scale * (dropout(x) A^T) B^T, one autograd op (F::lora_linear); y (*,out), x (*,in)
    Tensor forward(const Tensor& y, const Tensor& x, bool training) const;
    void reset_parameters();          // draws A and B as options.init says
    // W += scale * B A / W -= scale * B A, in W's dtype, computed in f32 (f64 for an f64 W). In f32 an
    // unmerge restores W to rounding (one ulp of |W| + |scale B A|); in f16/bf16 W keeps the rounding of
    // each fold, so merge for inference and keep the unmerged weights for training (docs/lora.md §3).
    void merge(Linear& base);
    void unmerge(Linear& base);
};

// Adds an adapter to `linear` (freezes its weight and bias, which PEFT's bias="none" leaves frozen).
// A and B take the base weight's dtype and device. ValueError if it already has one or r < 1.
void attach_lora(Linear& linear, const LoraOptions& options);

}  // namespace ampgrad::nn

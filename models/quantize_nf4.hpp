// quantize_nf4.hpp: QLoRA's frozen base, model-wide: every nn::Linear of a model but the excluded
// ones (QLoRA keeps the lm_head dense) gets its weight in NF4 (nn::Linear::quantize_nf4), and the
// summary says how many bytes per parameter the base weights take (docs/nf4.md).
//
//   NF4Summary s = models::quantize_base_nf4(*model);            // all Linear layers but "lm_head"
//   s.bytes_per_parameter();                                      // 0.5625 (block 64), ~0.52 (double quant)
#pragma once
#include <string>
#include <vector>

#include "autograd/ops/nf4.hpp"
#include "nn/module.hpp"

namespace ampgrad::models {

struct NF4Summary {
    int64_t layers = 0;        // Linear layers quantised by this call
    int64_t parameters = 0;    // weight elements they hold
    int64_t bytes = 0;         // bytes of their NF4 codes and scales
    // bytes / parameters: 4 bits + 32 / block_size bits for the absmax (0.5625 for block 64), or with
    // double quantisation 4 + 8 / 64 + 32 / (64 * 256) bits (~0.5157).
    double bytes_per_parameter() const { return parameters > 0 ? static_cast<double>(bytes) / parameters : 0.0; }
};

// Quantises the weight of every nn::Linear in `model` (found by named_modules) whose dotted name is
// not in `exclude` and does not end in "." + an excluded name. Linear layers already in NF4 are
// skipped. Returns what it quantised.
NF4Summary quantize_base_nf4(nn::Module& model, const std::vector<std::string>& exclude = {"lm_head"},
                             NF4Options options = {});

// Every NF4 Linear of `model` back to a dense weight (nn::Linear::dequantize: the dequantised values,
// in the dtype the weight had), e.g. before merging LoRA adapters into it. Returns how many.
int64_t dequantize_base_nf4(nn::Module& model);

}  // namespace ampgrad::models

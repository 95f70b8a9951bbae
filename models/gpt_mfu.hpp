// gpt_mfu.hpp: model-FLOPs utilisation (MFU) of a GPT training step, by llm.c's convention
// (karpathy/llm.c, train_gpt2.cu, gpt2_estimate_mfu): 6 N + 6 L C T FLOPs per token, where N is
// every parameter (the tied head once, padded vocabulary rows and position embeddings included)
// and the second term is attention's two matmuls; divided by the device's dense bf16 peak
// (core/device_properties.hpp). GPTConfig::flops_per_token is nanoGPT's estimate (6 N' + 12 L C T,
// N' without wpe) and stays what `ampgrad info` prints; MFU figures use this one, so that they
// compare with llm.c's.
//
//   std::optional<double> mfu = models::gpt_mfu(cfg, tokens_per_s, Device(kCUDA, 0));   // 0.41
#pragma once
#include <optional>

#include "core/device_properties.hpp"
#include "models/gpt.hpp"

namespace ampgrad::models {

inline double llmc_flops_per_token(const GPTConfig& cfg) {
    const double n = static_cast<double>(cfg.num_parameters());
    return 6.0 * n + 6.0 * static_cast<double>(cfg.n_layer * cfg.n_embd * cfg.block_size);
}

// The fraction of `device`'s dense bf16 peak that tokens_per_s achieves; nullopt where the peak is
// unknown (a CPU, an unlisted GPU).
inline std::optional<double> gpt_mfu(const GPTConfig& cfg, double tokens_per_s, Device device) {
    if (device.is_cpu()) return std::nullopt;
    const std::optional<double> peak = peak_dense_bf16_flops(device_properties(device).name);
    if (!peak) return std::nullopt;
    return tokens_per_s * llmc_flops_per_token(cfg) / *peak;
}

}  // namespace ampgrad::models

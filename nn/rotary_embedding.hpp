// rotary_embedding.hpp: nn::RotaryEmbedding builds the cos and sin tables that
// F::apply_rotary_emb rotates queries and keys by, as Hugging Face's LlamaRotaryEmbedding:
// inv_freq[i] = 1 / theta^(2i/HS), optionally rescaled by Llama 3's rope_scaling, and for each
// position p the angles p * inv_freq, laid out for the half-split (cat(freqs, freqs)) or the
// interleaved (each frequency twice in a row) convention.
//
//   nn::RotaryEmbedding rope(HS, 500000.0, nn::Llama3RopeScaling{32.0, 1.0, 4.0, 8192});
//   auto [cos, sin] = rope.forward(position_ids, q.dtype());      // (B,T) -> (B,T,HS) each
//   q = F::apply_rotary_emb(q, cos.unsqueeze(1), sin.unsqueeze(1)); // q (B,NH,T,HS)
#pragma once
#include <optional>
#include <utility>

#include "nn/module.hpp"

namespace ampgrad::nn {

// rope_scaling with "rope_type": "llama3", field for field from the model's config.json (Llama 3.1
// uses factor 8, Llama 3.2 factor 32: there is no default on purpose).
struct Llama3RopeScaling {
    double factor = 0.0;
    double low_freq_factor = 0.0;
    double high_freq_factor = 0.0;
    int64_t original_max_position_embeddings = 0;
    bool operator==(const Llama3RopeScaling&) const = default;
};

class RotaryEmbedding : public Module {
public:
    // head_dim: HS (even); theta: config.rope_theta
    explicit RotaryEmbedding(int64_t head_dim, double theta = 10000.0,
                             std::optional<Llama3RopeScaling> scaling = std::nullopt, bool interleaved = false);
    // position_ids (B,T) or (T), integer -> (cos, sin), each (B,T,HS) or (T,HS), computed in f32 (as
    // transformers does) and returned in `dtype` on position_ids' device; dtype kFloat64 computes in
    // f64 throughout, so a float64 model is float64 to the end. Not differentiable (model constants).
    std::pair<Tensor, Tensor> forward(const Tensor& position_ids, DType dtype = kFloat32) const;

    // inv_freq (with the scaling) computed in `dtype`: kFloat32 is the buffer's, kFloat64 for f64 tables.
    Tensor inverse_frequencies(DType dtype) const;

    int64_t head_dim;
    double theta;
    std::optional<Llama3RopeScaling> scaling;
    bool interleaved;
    // (HS/2) f32 on the CPU, after scaling. A plain member, not a buffer: like Hugging Face's
    // non-persistent inv_freq it is not in state_dict(), and it stays f32 when the module is cast.
    Tensor inv_freq;
};

// Llama 3's frequency rescaling (transformers' _compute_llama3_parameters): wavelengths below
// original/high_freq_factor keep their frequency, those above original/low_freq_factor are divided
// by factor, and those between are interpolated smoothly. inv_freq: (HS/2) f32 -> (HS/2) f32.
Tensor llama3_scale_inv_freq(const Tensor& inv_freq, const Llama3RopeScaling& scaling);

}  // namespace ampgrad::nn

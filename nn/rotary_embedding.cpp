// rotary_embedding.cpp: nn::RotaryEmbedding's tables, with the same f32 steps as transformers'
// LlamaRotaryEmbedding (models/llama/modeling_llama.py) and _compute_llama3_parameters
// (modeling_rope_utils.py), so the tables agree with theirs to the last bit or two.
#include "nn/rotary_embedding.hpp"

#include <numbers>

#include "autograd/grad_mode.hpp"
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"

namespace ampgrad::nn {

namespace {

void check_scaling(const Llama3RopeScaling& s) {
    if (!(s.factor > 0.0) || !(s.low_freq_factor > 0.0) || !(s.high_freq_factor > s.low_freq_factor) ||
        s.original_max_position_embeddings <= 0)
        throw ValueError(fmt::format("RotaryEmbedding: llama3 rope_scaling needs factor > 0, 0 < low_freq_factor < "
                                     "high_freq_factor and original_max_position_embeddings > 0; got factor {}, "
                                     "low_freq_factor {}, high_freq_factor {}, original_max_position_embeddings {}",
                                     s.factor, s.low_freq_factor, s.high_freq_factor,
                                     s.original_max_position_embeddings));
}

}  // namespace

Tensor llama3_scale_inv_freq(const Tensor& inv_freq, const Llama3RopeScaling& s) {
    check_scaling(s);
    NoGradGuard no_grad;
    const double old_context = static_cast<double>(s.original_max_position_embeddings);
    const double low_freq_wavelen = old_context / s.low_freq_factor;
    const double high_freq_wavelen = old_context / s.high_freq_factor;
    Tensor wavelen = reciprocal(inv_freq) * (2.0 * std::numbers::pi);                       // (HS/2)
    Tensor scaled = where(wavelen > low_freq_wavelen, inv_freq / s.factor, inv_freq);      // (HS/2)
    Tensor smooth = (reciprocal(wavelen) * old_context - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
    Tensor smoothed = (1.0 - smooth) * scaled / s.factor + smooth * scaled;                 // (HS/2)
    Tensor medium = logical_not(wavelen < high_freq_wavelen) & logical_not(wavelen > low_freq_wavelen);
    return where(medium, smoothed, scaled);
}

RotaryEmbedding::RotaryEmbedding(int64_t head_dim_, double theta_, std::optional<Llama3RopeScaling> scaling_,
                                 bool interleaved_)
    : Module("RotaryEmbedding"), head_dim(head_dim_), theta(theta_), scaling(scaling_), interleaved(interleaved_) {
    if (head_dim <= 0 || head_dim % 2 != 0)
        throw ValueError(fmt::format("RotaryEmbedding: head_dim must be even and positive, got {}", head_dim));
    if (!(theta > 0.0)) throw ValueError(fmt::format("RotaryEmbedding: theta must be positive, got {}", theta));
    inv_freq = inverse_frequencies(kFloat32);                                                // (HS/2)
}

// 1 / theta^(arange(0, HS, 2) / HS), then Llama 3's rescaling: in f32 as transformers'
// _compute_default_rope_parameters, or wholly in f64 for a float64 model.
Tensor RotaryEmbedding::inverse_frequencies(DType dtype) const {
    NoGradGuard no_grad;
    Tensor exponents = arange(0.0, static_cast<double>(head_dim), 2.0, TensorOptions(dtype)) / static_cast<double>(head_dim);
    Tensor freq = reciprocal(pow(theta, exponents));                                         // (HS/2)
    return scaling ? llama3_scale_inv_freq(freq, *scaling) : freq;
}

std::pair<Tensor, Tensor> RotaryEmbedding::forward(const Tensor& position_ids, DType dtype) const {
    if (!position_ids.defined() || is_floating(position_ids.dtype()) || position_ids.dtype() == kBool ||
        position_ids.dim() < 1 || position_ids.dim() > 2)
        throw DTypeError(fmt::format("RotaryEmbedding: position_ids must be integer (B,T) or (T), got {}",
                                     position_ids.defined() ? position_ids.describe() : "an undefined tensor"));
    NoGradGuard no_grad;
    // f64 tables are computed in f64 throughout; every other dtype gets transformers' f32 tables, cast.
    const DType compute = dtype == kFloat64 ? kFloat64 : kFloat32;
    Tensor freq = compute == kFloat64 ? inverse_frequencies(kFloat64) : inv_freq;
    if (freq.device() != position_ids.device()) freq = freq.to(position_ids.device());
    Tensor freqs = unsqueeze(to_dtype(position_ids, compute), -1) * freq;                   // (B,T,HS/2)
    Shape table_shape = freqs.sizes();
    table_shape.back() = head_dim;
    Tensor angles = interleaved ? stack({freqs, freqs}, -1).reshape(table_shape)           // (B,T,HS): f0 f0 f1 f1 ...
                                : cat({freqs, freqs}, -1);                                  // (B,T,HS): f0 f1 ... f0 f1 ...
    return {to_dtype(cos(angles), dtype), to_dtype(sin(angles), dtype)};
}

}  // namespace ampgrad::nn

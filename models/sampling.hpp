// sampling.hpp: drawing the next token from logits (temperature, top-k), on the host, from the
// default generator. (Stand-in until ampgrad::F::sample_from_logits is available everywhere.)
#pragma once
#include <optional>

#include "core/tensor.hpp"

namespace ampgrad::models {

// logits (B,V) -> int64 (B,1): softmax(logits / temperature) over the top_k largest (all when
// unset); temperature 0 picks the largest.
Tensor sample_from_logits(const Tensor& logits, double temperature = 1.0, std::optional<int64_t> top_k = std::nullopt);

}  // namespace ampgrad::models

// causal_lm.hpp: what incremental generation (models/generation.hpp) needs from a decoder-only
// language model, so that one generation loop serves the GPT (models/gpt.hpp) and any later model
// (e.g. a Llama): a key/value cache of the right shape and a forward pass over new tokens that
// reads and extends it.
#pragma once
#include <cstdint>

#include "models/kv_cache.hpp"

namespace ampgrad::models {

class CausalLM {
public:
    virtual ~CausalLM() = default;
    // The longest sequence the model can position (a cache may not be longer).
    virtual int64_t max_positions() const = 0;
    virtual int64_t vocab_size() const = 0;
    // A cache for `batch` rows of up to max_length tokens, in the model's dtype and device.
    virtual KVCache make_cache(int64_t batch, int64_t max_length) const = 0;
    // idx (B,T) int64 new tokens, valid (B,T) bool (undefined: no padding) -> logits (B,T,V);
    // appends the tokens to the cache (one begin_step/end_step). Inference only: no dropout, no graph.
    virtual Tensor forward_cached(const Tensor& idx, KVCache& cache, const Tensor& valid = {}) const = 0;
};

}  // namespace ampgrad::models

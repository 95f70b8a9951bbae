// kv_cache.hpp: the key/value cache of incremental (autoregressive) decoding, shared by every
// decoder-only model (GPT now, Llama after issue 25). Each layer's keys and values are
// preallocated once at the longest length, (B,NKV,Tmax,HS), and the keys of new tokens are written
// in place at the current position: one decoding step costs the same at position 5 as at 500
// (apart from attention's reads), with no concatenation or reallocation. docs/generation.md
// explains it; transformers' StaticLayer (src/transformers/cache_utils.py) is the same idea.
//
//   KVCache cache(n_layer, B, NKV, Tmax, HS, weight.options());
//   Tensor pos = cache.begin_step(valid);        // (B,T) bool, 1 = real token -> position ids (B,T)
//   ... each layer l:  y = cache.attend(l, q, k, v);   // q (B,NH,T,HS), k/v (B,NKV,T,HS) -> (B,NH,T,HS)
//   cache.end_step();                            // length() += T
//
// Padding: rows of a batch may be left-padded (valid false). Padding keys are masked out of every
// query, and position ids count only a row's real tokens (transformers' rule with left padding:
// position = cumsum(attention_mask) - 1, padding positions 0).
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.hpp"

namespace ampgrad::models {

class KVCache {
public:
    // ValueError unless every size is positive.
    KVCache(int64_t n_layers, int64_t batch, int64_t n_kv_heads, int64_t max_length, int64_t head_size,
            TensorOptions options);

    // Starts a step of T new tokens per row; valid (B,T) bool (undefined: all real). Builds the
    // attention mask the layers share and returns the new tokens' position ids (B,T) int64.
    // ValueError when length() + T exceeds max_length(), or a step is already open.
    Tensor begin_step(const Tensor& valid, int64_t T);
    // Writes k, v (B,NKV,T,HS) of layer `layer` at positions [length, length+T) and returns the
    // attention of q (B,NH,T,HS) over keys 0..length+T-1 (query t at position length+t sees keys
    // up to its own position, never padding): (B,NH,T,HS). NH may be a multiple of NKV (GQA).
    Tensor attend(int64_t layer, const Tensor& q, const Tensor& k, const Tensor& v);
    // Closes the step: the T tokens become part of the cached context.
    void end_step();
    // Drops the open step (e.g. a layer threw): the cache is as before begin_step.
    void abort_step();
    // Forgets every token (the storage is kept).
    void reset();

    int64_t length() const { return length_; }          // tokens cached per row (padding included)
    int64_t max_length() const { return max_length_; }
    int64_t batch() const { return batch_; }
    int64_t num_layers() const { return static_cast<int64_t>(keys_.size()); }
    const Tensor& keys(int64_t layer) const { return keys_.at(static_cast<size_t>(layer)); }     // (B,NKV,Tmax,HS)
    const Tensor& values(int64_t layer) const { return values_.at(static_cast<size_t>(layer)); } // (B,NKV,Tmax,HS)

private:
    void check_layer_input(int64_t layer, const Tensor& q, const Tensor& k, const Tensor& v) const;
    Tensor build_mask(int64_t T) const;                 // (B,1,T,S) bool, S = length + T

    std::vector<Tensor> keys_, values_;                  // per layer (B,NKV,Tmax,HS)
    std::vector<uint8_t> valid_;                         // (B,Tmax) on the host: 1 = a real token
    std::vector<int64_t> real_count_;                    // (B) real tokens cached per row
    std::vector<int64_t> real_count_before_;             // (B) real_count_ when the open step began
    bool any_padding_before_ = false;
    int64_t batch_, max_length_, length_ = 0;
    int64_t step_ = 0;                                   // T of the open step, 0 when none
    bool any_padding_ = false;
    Tensor mask_;                                        // this step's (B,1,T,S) mask, or undefined
    bool causal_ = false;                                // this step: SDPA's is_causal instead of a mask
};

}  // namespace ampgrad::models

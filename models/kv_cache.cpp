// kv_cache.cpp: the preallocated key/value cache of incremental decoding (models/kv_cache.hpp).
// The keys of a step's T new tokens are copied into the layer's (B,NKV,Tmax,HS) buffer at
// [length, length+T); attention then reads a narrowed view of the first length+T positions.
// Masks: with no padding, a one-token step needs none (its query is the newest position: every
// cached key is visible) and the first step is plain causal attention (both take SDPA's fused
// kernel); otherwise one (B,1,T,S) bool mask, built on the host once per step, hides later
// positions and padding keys from each query.
#include "models/kv_cache.hpp"

#include "autograd/grad_mode.hpp"
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"

namespace ampgrad::models {

KVCache::KVCache(int64_t n_layers, int64_t batch, int64_t n_kv_heads, int64_t max_length, int64_t head_size,
                 TensorOptions options)
    : batch_(batch), max_length_(max_length) {
    if (n_layers <= 0 || batch <= 0 || n_kv_heads <= 0 || max_length <= 0 || head_size <= 0)
        throw ValueError(fmt::format("KVCache: every size must be positive, but got layers {}, batch {}, kv heads {}, "
                                     "max_length {}, head size {}", n_layers, batch, n_kv_heads, max_length, head_size));
    for (int64_t l = 0; l < n_layers; ++l) {
        keys_.push_back(zeros({batch, n_kv_heads, max_length, head_size}, options));     // (B,NKV,Tmax,HS)
        values_.push_back(zeros({batch, n_kv_heads, max_length, head_size}, options));   // (B,NKV,Tmax,HS)
    }
    valid_.assign(static_cast<size_t>(batch * max_length), 0);
    real_count_.assign(static_cast<size_t>(batch), 0);
}

Tensor KVCache::begin_step(const Tensor& valid, int64_t T) {
    if (step_ != 0) throw ValueError("KVCache::begin_step: the previous step was not closed with end_step()");
    if (T <= 0) throw ValueError(fmt::format("KVCache::begin_step: a step needs at least one token, got T = {}", T));
    if (length_ + T > max_length_)
        throw ValueError(fmt::format("KVCache: {} cached + {} new tokens exceed the cache's max_length {}", length_, T,
                                     max_length_));
    if (valid.defined() && (valid.sizes() != Shape{batch_, T} || valid.dtype() != kBool))
        throw ShapeError(fmt::format("KVCache::begin_step: valid must be ({},{}) bool, but is {}", batch_, T,
                                     valid.describe()));
    std::vector<int32_t> v = valid.defined() ? valid.to(kInt32).to_vector<int32_t>()
                                             : std::vector<int32_t>(static_cast<size_t>(batch_ * T), 1);
    std::vector<int64_t> positions(v.size());
    real_count_before_ = real_count_;
    any_padding_before_ = any_padding_;
    for (int64_t b = 0; b < batch_; ++b) {
        for (int64_t t = 0; t < T; ++t) {
            const bool real = v[static_cast<size_t>(b * T + t)] != 0;
            valid_[static_cast<size_t>(b * max_length_ + length_ + t)] = real;
            // transformers: position_ids = attention_mask.cumsum(-1) - 1, then 0 at padding
            positions[static_cast<size_t>(b * T + t)] = real ? real_count_[static_cast<size_t>(b)]++ : 0;
            any_padding_ = any_padding_ || !real;
        }
    }
    step_ = T;
    causal_ = !any_padding_ && length_ == 0 && T > 1;
    const bool all_visible = !any_padding_ && T == 1;
    mask_ = causal_ || all_visible ? Tensor() : build_mask(T).to(keys_.front().device());
    return tensor(positions, {batch_, T}, TensorOptions(kInt64).device(keys_.front().device()));
}

// (B,1,T,S): query t of row b (at position length + t) sees key j iff j <= length + t and j is real.
Tensor KVCache::build_mask(int64_t T) const {
    const int64_t S = length_ + T;
    std::vector<int32_t> keep(static_cast<size_t>(batch_ * T * S), 0);
    for (int64_t b = 0; b < batch_; ++b)
        for (int64_t t = 0; t < T; ++t)
            for (int64_t j = 0; j <= length_ + t; ++j)
                keep[static_cast<size_t>((b * T + t) * S + j)] = valid_[static_cast<size_t>(b * max_length_ + j)];
    return tensor(keep, {batch_, 1, T, S}, TensorOptions(kInt32)).to(kBool);
}

void KVCache::check_layer_input(int64_t layer, const Tensor& q, const Tensor& k, const Tensor& v) const {
    if (step_ == 0) throw ValueError("KVCache::attend: no open step (call begin_step first)");
    if (layer < 0 || layer >= num_layers())
        throw IndexError(fmt::format("KVCache::attend: layer {} is out of range for a cache of {} layers", layer,
                                     num_layers()));
    const Tensor& buf = keys_.front();
    const Shape kv{batch_, buf.size(1), step_, buf.size(3)};
    const bool ok = k.sizes() == kv && v.sizes() == kv && q.dim() == 4 && q.size(0) == batch_ &&
                    q.size(2) == step_ && q.size(3) == buf.size(3) && q.size(1) % buf.size(1) == 0;
    if (!ok)
        throw ShapeError(fmt::format("KVCache::attend: expected q (B,NH,T,HS), k and v {} with NH a multiple of NKV "
                                     "{}, but q is {}, k is {}, v is {}", shape_str(kv), buf.size(1), q.describe(),
                                     k.describe(), v.describe()));
}

Tensor KVCache::attend(int64_t layer, const Tensor& q, const Tensor& k, const Tensor& v) {
    check_layer_input(layer, q, k, v);
    NoGradGuard no_grad;                                                    // inference only
    const size_t l = static_cast<size_t>(layer);
    Tensor k_slot = keys_[l].narrow(2, length_, step_), v_slot = values_[l].narrow(2, length_, step_);
    copy_(k_slot, k);                                                       // in place: (B,NKV,T,HS)
    copy_(v_slot, v);
    const int64_t S = length_ + step_;
    Tensor keys = keys_[l].narrow(2, 0, S), values = values_[l].narrow(2, 0, S);   // (B,NKV,S,HS)
    if (keys.dtype() != q.dtype()) {                                        // e.g. autocast's bf16 queries
        keys = keys.to(q.dtype());
        values = values.to(q.dtype());
    }
    const bool gqa = q.size(1) != keys.size(1);
    return F::scaled_dot_product_attention(q, keys, values, mask_, 0.0, causal_, std::nullopt, gqa);   // (B,NH,T,HS)
}

void KVCache::end_step() {
    if (step_ == 0) throw ValueError("KVCache::end_step: no open step");
    length_ += step_;
    step_ = 0;
    mask_ = Tensor();
}

void KVCache::abort_step() {
    if (step_ == 0) return;
    real_count_ = real_count_before_;
    any_padding_ = any_padding_before_;
    step_ = 0;
    mask_ = Tensor();
}

void KVCache::reset() {
    length_ = 0;
    step_ = 0;
    any_padding_ = false;
    causal_ = false;
    mask_ = Tensor();
    std::fill(valid_.begin(), valid_.end(), 0);
    std::fill(real_count_.begin(), real_count_.end(), 0);
}

}  // namespace ampgrad::models

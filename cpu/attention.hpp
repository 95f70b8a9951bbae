// attention.hpp: the fused (flash-style) attention kernel's arguments and entry points.
// The forward saves the row log-sum-exp, never the probabilities; see cpu/attention.cpp.
#pragma once
#include "core/tensor.hpp"

namespace ampgrad::cpu {

struct AttentionArgs {
    Tensor out;          // (B,NH,T,HSv) written; any strides
    Tensor lse;          // (B,NH,T) contiguous, f32 (f64 for f64 inputs); written by the forward
    Tensor q, k, v;      // (B,NH,T,HS) (B,NKV,S,HS) (B,NKV,S,HSv); any strides; one floating dtype;
                         // NH a multiple of NKV (grouped-query attention when NKV < NH)
    double scale = 1.0;  // scores = scale * q k^T
    bool causal = false; // query i sees keys 0..i
};

struct AttentionGradArgs {
    AttentionArgs fwd;   // the forward's tensors (out and lse as the forward wrote them)
    Tensor dout;         // (B,NH,T,HSv)
    Tensor dq, dk, dv;   // written when defined; shapes of q, k, v; any strides
};

// The implementations behind kernels::attention_forward / attention_backward (kernels/kernels.hpp).
void attention_forward(const AttentionArgs& a);
void attention_backward(const AttentionGradArgs& g);

}  // namespace ampgrad::cpu

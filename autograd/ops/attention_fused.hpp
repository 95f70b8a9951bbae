// attention_fused.hpp: the fused (flash-style) path of scaled_dot_product_attention, taken by
// autograd/ops/attention.cpp for the plain and causal cases on the CPU.
#pragma once
#include "core/tensor.hpp"

namespace ampgrad::ops {

// q (B,NH,T,HS), k (B,NH,S,HS), v (B,NH,S,HSv) -> (B,NH,T,HSv), already checked (one floating
// dtype, one device, S > 0). The result is a (B,NH,T,HSv) view of a (B,T,NH,HSv) buffer, so
// transpose(1,2).reshape(B,T,C) after it is free.
Tensor fused_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale);

// Whether fused_attention can run these operands.
bool fused_attention_supported(const Tensor& q, const Tensor& k);

}  // namespace ampgrad::ops

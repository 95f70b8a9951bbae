// kernel_preconditions.hpp: the layout checks a kernel and its twin on another backend both make
// before touching memory (cpu/layer_norm.cpp and cuda/layer_norm.cu, cpu/embedding.cpp and
// cuda/embedding.cu), written once. A failed check is a kernel-contract violation by the op layer,
// reported by AMPGRAD_CHECK (core/error.hpp) with the kernel and the tensors it was given.
#pragma once
#include <initializer_list>

#include "core/error.hpp"
#include "core/tensor.hpp"

namespace ampgrad {

// x (N,C) contiguous; each of `rows` undefined or a contiguous (N,C) of x's dtype; each of
// `per_channel` undefined or a contiguous (C) of x's dtype.
inline void check_row_layout(const char* kernel, const Tensor& x, std::initializer_list<const Tensor*> rows,
                             std::initializer_list<const Tensor*> per_channel) {
    AMPGRAD_CHECK(x.dim() == 2 && x.is_contiguous(), "{}: x must be contiguous (N,C), got {}", kernel, x.describe());
    for (const Tensor* t : rows)
        AMPGRAD_CHECK(!t->defined() || (t->is_contiguous() && t->sizes() == x.sizes() && t->dtype() == x.dtype()),
                      "{}: expected a contiguous tensor like x {}, got {}", kernel, x.describe(), t->describe());
    for (const Tensor* t : per_channel)
        AMPGRAD_CHECK(!t->defined() || (t->is_contiguous() && t->numel() == x.size(1) && t->dtype() == x.dtype()),
                      "{}: expected a contiguous ({}) tensor of x's dtype, got {}", kernel, x.size(1), t->describe());
}

// out (N,C) contiguous rows of weight (V,C) contiguous, one per index of idx (N).
inline void check_embedding_shapes(const Tensor& out, const Tensor& idx, const Tensor& weight) {
    AMPGRAD_CHECK(weight.dim() == 2 && weight.is_contiguous() && out.is_contiguous() && out.dtype() == weight.dtype() &&
                      out.numel() == idx.numel() * weight.size(1),
                  "embedding kernel: out {} / weight {} / idx {} do not fit", out.describe(), weight.describe(),
                  idx.describe());
}

}  // namespace ampgrad

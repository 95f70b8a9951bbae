// kernel_preconditions.hpp: the layout checks a kernel and its twin on another backend both make
// before touching memory (layer_norm, embedding and gemm_epilogue, in cpu/ and cuda/), written once. A failed check is a kernel-contract violation by the op layer,
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

// gemm_epilogue's operands: out (M,N) contiguous = op(a) (M,K) @ op(b) (K,N), one dtype; bias
// (N) contiguous; aux (M,N) contiguous, only with the GELU epilogue.
inline void check_gemm_epilogue_shapes(const Tensor& out, const Tensor& aux, const Tensor& a, const Tensor& b,
                                       bool trans_a, bool trans_b, const Tensor& bias, bool gelu) {
    AMPGRAD_CHECK(out.is_contiguous() && out.dim() == 2 && a.dim() == 2 && b.dim() == 2,
                  "gemm_epilogue: out {} a {} b {}", out.describe(), a.describe(), b.describe());
    AMPGRAD_CHECK(a.dtype() == out.dtype() && b.dtype() == out.dtype(), "gemm_epilogue: dtypes differ: {} {} {}",
                  out.describe(), a.describe(), b.describe());
    const int64_t m = out.size(0), n = out.size(1), k = trans_a ? a.size(0) : a.size(1);
    AMPGRAD_CHECK((trans_a ? a.size(1) : a.size(0)) == m && (trans_b ? b.size(1) : b.size(0)) == k &&
                      (trans_b ? b.size(0) : b.size(1)) == n,
                  "gemm_epilogue: out {} = a {} (trans {}) @ b {} (trans {})", out.describe(), a.describe(), trans_a,
                  b.describe(), trans_b);
    AMPGRAD_CHECK(!bias.defined() || (bias.is_contiguous() && bias.numel() == n && bias.dtype() == out.dtype()),
                  "gemm_epilogue: bias {} for out {}", bias.defined() ? bias.describe() : "undefined", out.describe());
    AMPGRAD_CHECK(!aux.defined() || (gelu && aux.is_contiguous() && aux.sizes() == out.sizes() &&
                                     aux.dtype() == out.dtype()),
                  "gemm_epilogue: aux {} for out {}", aux.defined() ? aux.describe() : "undefined", out.describe());
}

}  // namespace ampgrad

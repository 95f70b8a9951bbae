// kernel_preconditions.hpp: the layout checks a kernel and its twin on another backend both make
// before touching memory (layer_norm, embedding, gemm_epilogue, attention and the row kernels of
// sort, in cpu/ and cuda/), written once. On the GPU a shape the kernel does not expect is no clean
// error but an out-of-bounds access that loses the context, so the checks cover every operand. A
// failed check is a kernel-contract violation by the op layer, reported by AMPGRAD_CHECK
// (core/error.hpp) with the kernel and the tensors it was given.
#pragma once
#include <initializer_list>
#include <utility>

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

// kernels::gemm's out: dense rows at least N apart, and a batch stride other than 0: a contiguous
// tensor, a tile of a larger matrix, or the heads of a (B,T,NH,HS) tensor, whose rows interleave (the
// attention GEMM path's). Entries must not overlap; that is the caller's to keep, as in BLAS.
inline bool gemm_out_rows_dense(const Tensor& out) {
    const int64_t d = out.dim(), m = out.size(d - 2), n = out.size(d - 1);
    if (out.numel() == 0 || out.is_contiguous()) return true;
    const int64_t row = m == 1 ? n : out.stride(d - 2);
    const bool rows_ok = (n == 1 || out.stride(d - 1) == 1) && row >= n;
    return rows_ok && (d == 2 || out.size(0) == 1 || out.stride(0) != 0);
}

// The compute type of attention in `dtype` (scores, lse): f64 for f64, else f32.
inline DType attention_compute_dtype(DType dtype) { return dtype == kFloat64 ? kFloat64 : kFloat32; }

// The fused attention's operands (kernels/fused_kernels.hpp): q (B,NH,T,HS), k (B,NKV,S,HS), v (B,NKV,S,HSv),
// out (B,NH,T,HSv), one floating dtype, S > 0, NH a multiple of NKV > 0; lse (B,NH,T) contiguous in
// the compute type (f32, f64 for f64). `op` names the kernel in the message.
inline void check_attention_args(const char* op, const Tensor& out, const Tensor& lse, const Tensor& q,
                                 const Tensor& k, const Tensor& v) {
    AMPGRAD_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4 && out.dim() == 4, "{}: q {} k {} v {} out {}", op,
                  q.describe(), k.describe(), v.describe(), out.describe());
    AMPGRAD_CHECK(k.dtype() == q.dtype() && v.dtype() == q.dtype() && out.dtype() == q.dtype(), "{}: dtypes differ",
                  op);
    AMPGRAD_CHECK(k.size(0) == q.size(0) && v.size(0) == q.size(0) && k.size(3) == q.size(3) &&
                      v.size(2) == k.size(2) && out.sizes() == Shape({q.size(0), q.size(1), q.size(2), v.size(3)}),
                  "{}: q {} k {} v {} out {} do not fit (B,NH,T,HS), (B,NKV,S,HS), (B,NKV,S,HSv), (B,NH,T,HSv)", op,
                  q.describe(), k.describe(), v.describe(), out.describe());
    AMPGRAD_CHECK(lse.is_contiguous() && lse.numel() == q.size(0) * q.size(1) * q.size(2) &&
                      lse.dtype() == attention_compute_dtype(q.dtype()),
                  "{}: lse is {}", op, lse.describe());
    AMPGRAD_CHECK(k.size(2) > 0, "{}: no keys in {}", op, k.describe());
    AMPGRAD_CHECK(k.size(1) > 0 && q.size(1) % k.size(1) == 0 && v.size(1) == k.size(1),
                  "{}: {} query heads cannot share {} key and {} value heads", op, q.size(1), k.size(1), v.size(1));
}

// The backward's gradients, each undefined or shaped as its input in q's dtype (dk, dv: NKV heads);
// dout shaped as out.
inline void check_attention_grads(const char* op, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                                  const Tensor& dout, const Tensor& out, const Tensor& q, const Tensor& k,
                                  const Tensor& v) {
    AMPGRAD_CHECK(dout.sizes() == out.sizes() && dout.dtype() == q.dtype(), "{}: dout {} for out {}", op,
                  dout.describe(), out.describe());
    for (auto [grad, input] : {std::pair{&dq, &q}, std::pair{&dk, &k}, std::pair{&dv, &v}})
        AMPGRAD_CHECK(!grad->defined() || (grad->sizes() == input->sizes() && grad->dtype() == q.dtype()),
                      "{}: gradient {} for input {}", op, grad->describe(), input->describe());
}

// The row kernels along the last dim (sort, take_along_last, put_along_last; kernels/kernels.hpp):
// `rows` (R,N) and `picked` (R,K) contiguous, one dtype; index int64 contiguous (R,K) or (1,K).
inline void check_along_last(const char* kernel, const Tensor& rows, const Tensor& picked, const Tensor& index) {
    AMPGRAD_CHECK(rows.dim() == 2 && picked.dim() == 2 && index.dim() == 2 && rows.is_contiguous() &&
                      picked.is_contiguous() && index.is_contiguous() && index.dtype() == kInt64 &&
                      picked.dtype() == rows.dtype() && picked.size(0) == rows.size(0) &&
                      index.size(1) == picked.size(1) && (index.size(0) == 1 || index.size(0) == picked.size(0)),
                  "{}: expected contiguous rows (R,N), (R,K) of one dtype and an int64 index (R,K) or (1,K); got "
                  "rows {}, picked {}, index {}",
                  kernel, rows.describe(), picked.describe(), index.describe());
}

// sort's operands: in, values (R,N) contiguous of one dtype, indices (R,N) int64 contiguous.
inline void check_sort_rows(const Tensor& values, const Tensor& indices, const Tensor& in) {
    AMPGRAD_CHECK(in.dim() == 2 && in.is_contiguous() && values.is_contiguous() && indices.is_contiguous() &&
                      values.sizes() == in.sizes() && indices.sizes() == in.sizes() && values.dtype() == in.dtype() &&
                      indices.dtype() == kInt64,
                  "sort: expected contiguous rows (R,N), got in {}, values {}, indices {}", in.describe(),
                  values.describe(), indices.describe());
}

// The GEMM attention path's row kernels (kernels/fused_kernels.hpp): scores (G,R,S) contiguous in the
// compute type of probs' floating dtype, probs (G,R,S) contiguous, lse (G*R) contiguous in the compute
// type, T > 0 dividing R.
inline void check_attention_rows(const char* kernel, const Tensor& probs, const Tensor& lse, const Tensor& scores,
                                 int64_t T) {
    const DType compute = attention_compute_dtype(probs.dtype());
    AMPGRAD_CHECK(scores.dim() == 3 && scores.is_contiguous() && probs.is_contiguous() &&
                      probs.sizes() == scores.sizes() && is_floating(probs.dtype()) && scores.dtype() == compute &&
                      lse.is_contiguous() && lse.dtype() == compute && lse.numel() == scores.size(0) * scores.size(1) &&
                      T > 0 && scores.size(1) % T == 0,
                  "{}: expected contiguous scores (G,R,S) in {}, probs of that shape, lse (G*R) and R a multiple of "
                  "T = {}; got scores {}, probs {}, lse {}",
                  kernel, dtype_name(compute), T, scores.describe(), probs.describe(), lse.describe());
}
// dscores, probs (G,R,S) one floating dtype, dprobs (G,R,S) its compute type, dout and out (G,R,HSv) in
// probs' dtype; all contiguous.
inline void check_attention_score_grad(const char* kernel, const Tensor& dscores, const Tensor& probs,
                                       const Tensor& dprobs, const Tensor& dout, const Tensor& out, int64_t T) {
    const DType dtype = probs.dtype();
    AMPGRAD_CHECK(probs.dim() == 3 && out.dim() == 3 && T > 0 && probs.size(1) % T == 0 && is_floating(dtype) &&
                      dscores.dtype() == dtype &&
                      dprobs.dtype() == attention_compute_dtype(dtype) && dout.dtype() == dtype &&
                      out.dtype() == dtype && dscores.sizes() == probs.sizes() && dprobs.sizes() == probs.sizes() &&
                      dout.sizes() == out.sizes() && out.size(0) == probs.size(0) && out.size(1) == probs.size(1) &&
                      dscores.is_contiguous() && probs.is_contiguous() && dprobs.is_contiguous() &&
                      dout.is_contiguous() && out.is_contiguous(),
                  "{}: expected contiguous dscores, probs (G,R,S) with R a multiple of T = {}, dprobs (G,R,S) in the "
                  "compute type and dout, out (G,R,HSv); got dscores {}, probs {}, dprobs {}, dout {}, out {}",
                  kernel, T, dscores.describe(), probs.describe(), dprobs.describe(), dout.describe(), out.describe());
}

}  // namespace ampgrad

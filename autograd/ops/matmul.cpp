// matmul.cpp: matmul (numpy semantics), mm, bmm and linear. Each forward is one raw backend gemm;
// the backward sits beside it. Derivation: docs/ops/matmul.md
//   C = A @ B      (M,K)(K,N) -> (M,N)
//   dA = dC @ B^T  (M,N)(N,K) -> (M,K)
//   dB = A^T @ dC  (K,M)(M,N) -> (K,N)
// Backward is written with these same differentiable ops (so double backward works). They hand
// transposed views to gemm as trans flags, so neither direction copies the operands.
#include "autograd/ops/autocast_hook.hpp"
#include "autograd/ops/op_utils.hpp"
#include "autograd/ops/ops.hpp"
#include "autograd/record.hpp"
#include "kernels/fused_kernels.hpp"

namespace ampgrad {

using autograd::BackwardContext;
using autograd::record;

namespace {

// ---- argument checks: "op: what is wrong: facts" ----

void check_operands(std::string_view op, const Tensor& a, const Tensor& b, std::string_view a_name = "a",
                    std::string_view b_name = "b") {
    ops::check_defined(op, a, a_name);
    ops::check_defined(op, b, b_name);
    if (a.device() != b.device())
        throw DeviceError(fmt::format("{}: devices differ: {} is {}, {} is {}; move one operand with .to(device)", op,
                                      a_name, a.describe(), b_name, b.describe()));
    if (a.dtype() != b.dtype())
        throw DTypeError(fmt::format("{}: dtypes differ: {} is {}, {} is {}; cast one with .to(dtype)", op, a_name,
                                     a.describe(), b_name, b.describe()));
    if (!is_floating(a.dtype()))
        throw DTypeError(fmt::format("{}: expected floating tensors but got {} is {}, {} is {}", op, a_name,
                                     a.describe(), b_name, b.describe()));
    if (is_float8(a.dtype()))
        throw DTypeError(fmt::format("{}: fp8 operands ({} is {}, {} is {}) multiply only through F::scaled_mm, "
                                     "with their scales (docs/fp8.md)", op, a_name, a.describe(), b_name, b.describe()));
}

void check_dims(std::string_view op, const Tensor& a, const Tensor& b, int64_t dims) {
    if (a.dim() != dims || b.dim() != dims)
        throw ShapeError(fmt::format("{}: expected {}-D tensors but got a is {}, b is {}", op, dims, a.describe(),
                                     b.describe()));
}

// a is (...,M,K) or (K); b is (...,K,N) or (K)
void check_inner(std::string_view op, const Tensor& a, const Tensor& b) {
    int64_t b_row = b.dim() == 1 ? 0 : b.dim() - 2;
    if (a.size(-1) != b.size(b_row))
        throw ShapeError(fmt::format("{}: inner dimensions differ: a is {}, b is {}; expected a.shape[-1] == "
                                     "b.shape[{}] ({} != {})", op, a.describe(), b.describe(),
                                     b.dim() == 1 ? "0" : "-2", a.size(-1), b.size(b_row)));
}

// ---- raw (non-recording) layout helpers for the forward ----

Tensor transpose_last_raw(const Tensor& t) {                  // (...,R,C) -> (...,C,R), a view
    Shape sizes = t.sizes(), strides = t.strides();
    std::swap(sizes[t.dim() - 1], sizes[t.dim() - 2]);
    std::swap(strides[t.dim() - 1], strides[t.dim() - 2]);
    return make_view(t, sizes, strides, t.storage_offset());
}

Tensor copy_raw(const Tensor& t) {                             // a fresh contiguous copy
    Tensor out = make_empty(t.sizes(), t.dtype(), t.device());
    kernels::copy(out, t);
    return out;
}

// t with its first `count` dims merged into one: a view when the strides allow it, else a copy.
// An empty t has nothing to view: it gets a fresh empty tensor of the merged shape (its strides
// need not merge, and copying would not make them, so recursing on a copy would never end).
Tensor merge_leading_raw(const Tensor& t, int64_t count) {
    if (t.numel() == 0) {
        Shape sizes{shape_numel(Shape(t.sizes().begin(), t.sizes().begin() + count))};
        sizes.insert(sizes.end(), t.sizes().begin() + count, t.sizes().end());
        return make_empty(sizes, t.dtype(), t.device());
    }
    int64_t merged = 1, stride = 1, expected = -1;                 // expected: stride the next-outer dim needs
    for (int64_t d = count - 1; d >= 0; --d) {                     // innermost of the merged dims first
        merged *= t.size(d);
        if (t.size(d) == 1) continue;
        if (expected < 0) stride = t.stride(d);
        else if (t.stride(d) != expected) return merge_leading_raw(copy_raw(t), count);
        expected = t.stride(d) * t.size(d);
    }
    Shape sizes{merged}, strides{stride};
    for (int64_t d = count; d < t.dim(); ++d) {
        sizes.push_back(t.size(d));
        strides.push_back(t.stride(d));
    }
    return make_view(t, sizes, strides, t.storage_offset());
}

// How gemm should read the matrix t (...,R,C): as stored if its rows are dense, as the transpose of a
// row-major matrix (trans = true) if its columns are, else as a contiguous copy. op(tensor) == t.
struct GemmOperand {
    Tensor tensor;
    bool trans = false;
};

bool rows_dense(const Tensor& t) {
    return (t.stride(-1) == 1 || t.size(-1) == 1) && (t.stride(-2) >= t.size(-1) || t.size(-2) == 1);
}

GemmOperand gemm_operand(const Tensor& t) {
    if (rows_dense(t)) return {t, false};
    Tensor tt = transpose_last_raw(t);
    if (rows_dense(tt)) return {tt, true};
    return {copy_raw(t), false};
}

// out (B,M,N) = a (B,M,K) @ b (B,K,N), or the 2-D case; a and b share dims and batch (or batch 1).
Tensor gemm_forward(const Tensor& a, const Tensor& b, const Shape& out_shape) {
    Tensor out = make_empty(out_shape, a.dtype(), a.device());
    GemmOperand ga = gemm_operand(a), gb = gemm_operand(b);
    kernels::gemm(out, ga.tensor, gb.tensor, ga.trans, gb.trans, 1.0, 0.0);
    return out;
}

Tensor mT(const Tensor& t) { return transpose(t, -1, -2); }

// Rows of t seen as a matrix (prod of all dims but the last). Spelled out rather than reshape's
// -1, which cannot be inferred when the last dim is 0 (PyTorch refuses it too).
int64_t leading_rows(const Shape& s) { return shape_numel(Shape(s.begin(), s.end() - 1)); }

// a (...,M,K) @ b (...,K,N), both at least 2-D, batch dims broadcast: one recorded node `op`.
Tensor matmul_batched(std::string_view op, const Tensor& a, const Tensor& b) {
    Shape a_batch(a.sizes().begin(), a.sizes().end() - 2), b_batch(b.sizes().begin(), b.sizes().end() - 2);
    Shape batch;
    try {
        batch = ops::broadcast_shapes("matmul", a_batch, b_batch);
    } catch (const ShapeError&) {
        throw ShapeError(fmt::format("matmul: batch dimensions cannot be broadcast: a is {}, b is {}",
                                     a.describe(), b.describe()));
    }
    const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
    Shape a_full = batch, b_full = batch, out_shape = batch;
    a_full.insert(a_full.end(), {m, k});                      // (...,M,K)
    b_full.insert(b_full.end(), {k, n});                      // (...,K,N)
    out_shape.insert(out_shape.end(), {m, n});                // (...,M,N)
    const auto nb = static_cast<int64_t>(batch.size());
    Tensor a3 = merge_leading_raw(ops::expand_raw(a, a_full), nb);       // (B,M,K)
    Tensor b3 = merge_leading_raw(ops::expand_raw(b, b_full), nb);       // (B,K,N)
    Tensor out3 = gemm_forward(a3, b3, {a3.size(0), m, n});              // (B,M,N)
    Tensor out = make_view(out3, out_shape, contiguous_strides(out_shape), 0);
    return record(op, out, {a, b}, {b.requires_grad() ? a : Tensor(), a.requires_grad() ? b : Tensor()},
                  [](BackwardContext& ctx, const tensor_list& g) {
                      tensor_list d(2);                                   // broadcast dims: summed by the engine
                      if (ctx.needs_input_grad(0)) d[0] = matmul(g[0], mT(ctx.saved(1)));   // (...,M,K)
                      if (ctx.needs_input_grad(1)) d[1] = matmul(mT(ctx.saved(0)), g[0]);   // (...,K,N)
                      return d;
                  });
}

// mm without the checks and autocast (matmul has done both).
Tensor mm_unchecked(const Tensor& a, const Tensor& b) {
    Tensor out = gemm_forward(a, b, {a.size(0), b.size(1)});              // (M,N)
    return record("mm", out, {a, b}, {b.requires_grad() ? a : Tensor(), a.requires_grad() ? b : Tensor()},
                  [](BackwardContext& ctx, const tensor_list& g) {
                      tensor_list d(2);
                      if (ctx.needs_input_grad(0)) d[0] = mm(g[0], ctx.saved(1).t());      // (M,K)
                      if (ctx.needs_input_grad(1)) d[1] = mm(ctx.saved(0).t(), g[0]);      // (K,N)
                      return d;
                  });
}

}  // namespace

// numpy semantics: 1-D operands gain (then lose) a unit dim; >= 2-D operands broadcast their batch dims.
Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
    Tensor a = a_in, b = b_in;
    AMPGRAD_AUTOCAST("matmul", &a, &b);
    check_operands("matmul", a, b);
    if (a.dim() == 0 || b.dim() == 0)
        throw ShapeError(fmt::format("matmul: both arguments need at least 1 dimension but got a is {}, b is {}",
                                     a.describe(), b.describe()));
    check_inner("matmul", a, b);
    if (a.dim() == 1 && b.dim() == 1) return reshape(mm_unchecked(unsqueeze(a, 0), unsqueeze(b, 1)), {});
    if (a.dim() == 1) return squeeze(matmul(unsqueeze(a, 0), b), -2);                // (K) @ (...,K,N)
    if (b.dim() == 1) return squeeze(matmul(a, unsqueeze(b, 1)), -1);                // (...,M,K) @ (K)
    if (a.dim() == 2 && b.dim() == 2) return mm_unchecked(a, b);
    if (b.dim() == 2) {       // (...,M,K) @ (K,N): fold the batch into rows, one GEMM both ways
        Shape out_shape = a.sizes();
        out_shape.back() = b.size(1);
        return reshape(mm_unchecked(reshape(a, {leading_rows(a.sizes()), a.size(-1)}), b), out_shape);
    }
    return matmul_batched("matmul", a, b);
}

Tensor mm(const Tensor& a_in, const Tensor& b_in) {
    Tensor a = a_in, b = b_in;
    AMPGRAD_AUTOCAST("mm", &a, &b);
    check_operands("mm", a, b);
    check_dims("mm", a, b, 2);
    check_inner("mm", a, b);
    return mm_unchecked(a, b);
}

Tensor bmm(const Tensor& a_in, const Tensor& b_in) {
    Tensor a = a_in, b = b_in;
    AMPGRAD_AUTOCAST("bmm", &a, &b);
    check_operands("bmm", a, b);
    check_dims("bmm", a, b, 3);
    if (a.size(0) != b.size(0))
        throw ShapeError(fmt::format("bmm: batch sizes differ: a is {}, b is {} ({} != {})", a.describe(),
                                     b.describe(), a.size(0), b.size(0)));
    check_inner("bmm", a, b);
    return matmul_batched("bmm", a, b);
}

// y = x @ w^T + b:  x (*,K), w (N,K), b (N) or undefined  ->  y (*,N). Rows R = prod(*).
//   dx = dy @ w  (R,N)(N,K);   dw = dy^T @ x  (N,R)(R,K);   db = sum over rows of dy
Tensor linear(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in) {
    Tensor x = x_in, w = w_in, b = b_in;
    AMPGRAD_AUTOCAST("linear", &x, &w, &b);
    check_operands("linear", x, w, "x", "weight");
    if (b.defined()) check_operands("linear", x, b, "x", "bias");
    if (x.dim() < 1 || w.dim() != 2)
        throw ShapeError(fmt::format("linear: expected x (*,K), weight (N,K) and bias (N) but got x is {}, weight "
                                     "is {}, bias is {}", x.describe(), w.describe(),
                                     b.defined() ? b.describe() : "undefined"));
    if (x.size(-1) != w.size(1))
        throw ShapeError(fmt::format("linear: in_features differ: x is {}, weight is {}; expected x.shape[-1] == "
                                     "weight.shape[1] ({} != {})", x.describe(), w.describe(), x.size(-1), w.size(1)));
    if (b.defined() && (b.dim() != 1 || b.size(0) != w.size(0))) {
        // as PyTorch (which adds the bias in place to x W^T): any bias that broadcasts to the output's shape
        Shape y_shape = x.sizes();
        y_shape.back() = w.size(0);
        bool fits = b.dim() <= static_cast<int64_t>(y_shape.size());
        for (int64_t i = 1; fits && i <= b.dim(); ++i)
            fits = b.size(-i) == 1 || b.size(-i) == y_shape[y_shape.size() - static_cast<size_t>(i)];
        if (!fits)
            throw ShapeError(fmt::format("linear: expected x (*,K), weight (N,K) and bias (N) (or a bias that "
                                         "broadcasts to the output's shape {}) but got x is {}, weight is {}, "
                                         "bias is {}", shape_str(y_shape), x.describe(), w.describe(),
                                         b.describe()));
        return add(linear(x, w, Tensor()), b);
    }
    const int64_t k = w.size(1), n = w.size(0);
    // x as rows: a view unless its leading dims cannot merge; a 1-D x is one row
    Tensor x2 = x.dim() == 1 ? make_view(x, {1, k}, {k * x.stride(0), x.stride(0)}, x.storage_offset())
                             : merge_leading_raw(x, x.dim() - 1);                           // (R,K)
    Tensor y2 = make_empty({x2.size(0), n}, x.dtype(), x.device());                         // (R,N)
    GemmOperand gx = gemm_operand(x2), gw = gemm_operand(w);
    if (b.defined() && b.is_contiguous() && kernels::gemm_epilogue.has(y2.device().type)) {   // bias in the epilogue
        kernels::gemm_epilogue(y2, Tensor(), gx.tensor, gw.tensor, gx.trans, !gw.trans, b, GemmEpilogue::kBias);
    } else {
        if (b.defined()) kernels::copy(y2, ops::expand_raw(b, y2.sizes()));
        kernels::gemm(y2, gx.tensor, gw.tensor, gx.trans, !gw.trans, 1.0, b.defined() ? 1.0 : 0.0);
    }
    Shape y_shape = x.sizes();
    y_shape.back() = n;
    Tensor y = make_view(y2, y_shape, contiguous_strides(y_shape), 0);                      // (*,N)
    const int64_t r = x2.size(0);
    return record("linear", y, {x, w, b}, {w.requires_grad() ? x : Tensor(), x.requires_grad() ? w : Tensor()},
                  [r, k, n](BackwardContext& ctx, const tensor_list& g) {
                      tensor_list d(3);
                      Tensor dy2 = reshape(g[0], {r, n});                                   // (R,N)
                      if (ctx.needs_input_grad(0))
                          d[0] = reshape(mm(dy2, ctx.saved(1)), ctx.input_meta(0).shape);  // (*,K)
                      if (ctx.needs_input_grad(1)) d[1] = mm(dy2.t(), reshape(ctx.saved(0), {r, k}));    // (N,K)
                      if (ctx.needs_input_grad(2)) d[2] = sum(dy2, {0});                    // (N)
                      return d;
                  });
}

}  // namespace ampgrad

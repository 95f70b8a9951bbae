// scaled_mm.cpp: F::scaled_mm, the FP8 GEMM with torch._scaled_mm's rules (docs/fp8.md):
//   out (M,N) = (a (M,K) @ b (K,N)) * scale_a * scale_b + bias, accumulated in f32.
// This file checks the operands the way PyTorch does (layouts, dtypes, scale shapes, multiples of 16)
// and calls the backend kernel (cpu/scaled_mm.cpp: exact emulation; cuda/scaled_mm.cu: cuBLASLt).
// Forward only, as torch._scaled_mm: it records no backward (the fp8 recipes compose their own).
#include "autograd/ops/op_utils.hpp"
#include "autograd/ops/ops.hpp"

namespace ampgrad::nn::functional {

namespace {

constexpr std::string_view kOp = "scaled_mm";

// torch's is_row_major / is_col_major for the dense (M,K) and (K,N) operands the kernels read.
// An empty matrix (K = 0, as torch._scaled_mm allows) has no layout to check.
bool is_row_major(const Tensor& t) { return t.numel() == 0 || (t.stride(1) == 1 && t.stride(0) == t.size(1)); }
bool is_col_major(const Tensor& t) { return t.numel() == 0 || (t.stride(0) == 1 && t.stride(1) == t.size(0)); }

// a (M,K), b (K,N): fp8, 2-D, multipliable, a row-major and b column-major, K and N multiples of 16.
void check_matrices(const Tensor& a, const Tensor& b) {
    if (a.dim() != 2 || b.dim() != 2)
        throw ShapeError(fmt::format("{}: inputs must be 2-D but got a is {}, b is {}", kOp, a.describe(), b.describe()));
    if (!is_float8(a.dtype()) || !is_float8(b.dtype()))
        throw DTypeError(fmt::format("{}: a and b must be float8_e4m3fn or float8_e5m2 but got a is {}, b is {}", kOp,
                                     a.describe(), b.describe()));
    if (a.dtype() == kFloat8_e5m2 && b.dtype() == kFloat8_e5m2)
        throw DTypeError(fmt::format("{}: multiplication of two float8_e5m2 matrices is not supported (a is {}, b is "
                                     "{}); one operand must be float8_e4m3fn", kOp, a.describe(), b.describe()));
    if (a.size(1) != b.size(0))
        throw ShapeError(fmt::format("{}: a and b shapes cannot be multiplied: a is {}, b is {} ({} != {})", kOp,
                                     a.describe(), b.describe(), a.size(1), b.size(0)));
    if (!is_row_major(a))
        throw ShapeError(fmt::format("{}: a must be row-major (contiguous (M,K)) but has strides ({},{}) for {}", kOp,
                                     a.stride(0), a.stride(1), a.describe()));
    if (!is_col_major(b))
        throw ShapeError(fmt::format("{}: b must be column-major (the transpose of a contiguous (N,K)) but has strides "
                                     "({},{}) for {}; pass w.t() of a row-major (N,K) weight", kOp, b.stride(0),
                                     b.stride(1), b.describe()));
    if (a.size(1) % 16 != 0 || b.size(1) % 16 != 0)
        throw ShapeError(fmt::format("{}: K and N must be multiples of 16 (as cuBLASLt's fp8 GEMM needs) but a is {}, "
                                     "b is {}", kOp, a.describe(), b.describe()));
}

bool is_scalar_scale(const Tensor& s) { return s.numel() == 1; }
bool has_shape(const Tensor& s, int64_t rows, int64_t cols) {
    return s.dim() == 2 && s.size(0) == rows && s.size(1) == cols && s.is_contiguous();
}

// Tensorwise: both scales one f32. Rowwise: scale_a (M,1), scale_b (1,N) f32, a and b e4m3fn, out bf16.
void check_scales(const Tensor& a, const Tensor& b, const Tensor& scale_a, const Tensor& scale_b, DType out_dtype) {
    if (scale_a.dtype() != kFloat32 || scale_b.dtype() != kFloat32)
        throw DTypeError(fmt::format("{}: scale_a and scale_b must be f32 but got scale_a is {}, scale_b is {}", kOp,
                                     scale_a.describe(), scale_b.describe()));
    const int64_t M = a.size(0), N = b.size(1);
    if (is_scalar_scale(scale_a) && is_scalar_scale(scale_b)) return;           // tensorwise
    if (!has_shape(scale_a, M, 1) || !has_shape(scale_b, 1, N))
        throw ShapeError(fmt::format("{}: invalid scaling configuration: for tensorwise scaling both scales must have "
                                     "one element; for rowwise scaling scale_a must be ({},1) and scale_b (1,{}); got "
                                     "scale_a {}, scale_b {}", kOp, M, N, scale_a.describe(), scale_b.describe()));
    if (out_dtype != kBFloat16)
        throw DTypeError(fmt::format("{}: rowwise scaling supports only a bf16 output, got out_dtype {}", kOp,
                                     dtype_name(out_dtype)));
    if (a.dtype() != kFloat8_e4m3fn || b.dtype() != kFloat8_e4m3fn)
        throw DTypeError(fmt::format("{}: rowwise scaling needs float8_e4m3fn a and b, got a is {}, b is {}", kOp,
                                     a.describe(), b.describe()));
}

void check_output(const Tensor& b, DType out_dtype, const Tensor& bias, const Tensor& amax_out) {
    if (out_dtype != kFloat32 && out_dtype != kFloat16 && out_dtype != kBFloat16)
        throw DTypeError(fmt::format("{}: out_dtype must be f32, f16 or bf16, got {}", kOp, dtype_name(out_dtype)));
    if (bias.defined()) {
        if (out_dtype == kFloat32)
            throw ValueError(fmt::format("{}: a bias is not supported when out_dtype is f32 (as torch._scaled_mm); got "
                                         "bias {}", kOp, bias.describe()));
        if (bias.dtype() != out_dtype)
            throw DTypeError(fmt::format("{}: bias must have out_dtype {} but is {}", kOp, dtype_name(out_dtype),
                                         bias.describe()));
        if (bias.dim() != 1 || bias.size(0) != b.size(1))
            throw ShapeError(fmt::format("{}: bias must be ({}) but is {}", kOp, b.size(1), bias.describe()));
    }
    if (amax_out.defined() && (amax_out.dtype() != kFloat32 || amax_out.numel() != 1))
        throw DTypeError(fmt::format("{}: amax_out must be a one-element f32 tensor, got {}", kOp, amax_out.describe()));
}

}  // namespace

Tensor scaled_mm(const Tensor& a, const Tensor& b, const Tensor& scale_a, const Tensor& scale_b, DType out_dtype,
                 const Tensor& bias, const Tensor& amax_out) {
    ops::check_defined(kOp, a, "a");
    ops::check_defined(kOp, b, "b");
    ops::check_defined(kOp, scale_a, "scale_a");
    ops::check_defined(kOp, scale_b, "scale_b");
    ops::check_same_device(kOp, {&a, &b, &scale_a, &scale_b});
    if (bias.defined()) ops::check_same_device(kOp, {&a, &bias});
    if (amax_out.defined()) ops::check_same_device(kOp, {&a, &amax_out});
    check_matrices(a, b);
    check_scales(a, b, scale_a, scale_b, out_dtype);
    check_output(b, out_dtype, bias, amax_out);
    Tensor out = make_empty({a.size(0), b.size(1)}, out_dtype, a.device());                          // (M,N)
    Tensor sa = scale_a.is_contiguous() ? scale_a : scale_a.detach().contiguous();
    Tensor sb = scale_b.is_contiguous() ? scale_b : scale_b.detach().contiguous();
    Tensor bias_dense = bias.defined() && !bias.is_contiguous() ? bias.detach().contiguous() : bias;
    kernels::scaled_mm(out, a, b, sa, sb, bias_dense, amax_out);
    return out;
}

}  // namespace ampgrad::nn::functional

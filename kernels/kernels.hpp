// kernels.hpp: every kernel ampgrad's ops call, declared once. Each is a Kernel object
// (kernels/kernel_registry.hpp) with one slot per device type; cpu/*.cpp and cuda/*.cu fill the
// slots from the files that define them (AMPGRAD_REGISTER_KERNEL), and callers write
// kernels::gemm(out, a, b, ...). Kernels take plain tensors (already allocated outputs, already
// broadcast inputs) and know nothing of autograd: differentiation lives in autograd/ops/.
//
// Conventions for every kernel:
//  - `out` tensors are allocated by the caller with the right shape and dtype (usually contiguous);
//  - inputs may be arbitrary strided views (stride 0 = broadcast) unless a comment says otherwise;
//  - fp16/bf16 are loaded to fp32, computed in fp32, and rounded once on store (as tensor cores do);
//  - floating kernels accept f32/f64/f16/bf16; anything else throws DTypeError naming the kernel.
// The elementwise ops' formulas (value and gradient) live in kernels/scalar_math.hpp, shared by the
// CPU loops and the CUDA kernels. The op lists below generate the enums and their names.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "kernels/kernel_registry.hpp"
#include "core/tensor.hpp"

namespace ampgrad {

// ---- op lists: X(enumerator, name, formula struct in kernels/scalar_math.hpp) ----

// out = f(in). logical_not writes kBool; the others keep the input dtype.
#define AMPGRAD_UNARY_OPS(X)                 \
    X(kNeg, "neg", Neg)                      \
    X(kExp, "exp", Exp)                      \
    X(kLog, "log", Log)                      \
    X(kSqrt, "sqrt", Sqrt)                   \
    X(kRsqrt, "rsqrt", Rsqrt)                \
    X(kAbs, "abs", Abs)                      \
    X(kTanh, "tanh", Tanh)                   \
    X(kSigmoid, "sigmoid", Sigmoid)          \
    X(kRelu, "relu", Relu)                   \
    X(kGeluTanh, "gelu_tanh", GeluTanh)      \
    X(kGeluErf, "gelu", GeluErf)             \
    X(kSilu, "silu", Silu)                   \
    X(kSign, "sign", Sign)                   \
    X(kReciprocal, "reciprocal", Reciprocal) \
    X(kSquare, "square", Square)             \
    X(kLogicalNot, "logical_not", LogicalNot) \
    X(kSin, "sin", Sin)                      \
    X(kCos, "cos", Cos)                      \
    X(kExp2, "exp2", Exp2)                   \
    X(kLog1p, "log1p", Log1p)                \
    X(kExpm1, "expm1", Expm1)                \
    X(kErf, "erf", Erf)                      \
    X(kFloor, "floor", Floor)                \
    X(kCeil, "ceil", Ceil)                   \
    X(kRound, "round", Round)                \
    X(kTrunc, "trunc", Trunc)

// out = a (op) b in the operands' dtype.
#define AMPGRAD_ARITHMETIC_OPS(X) \
    X(kAdd, "add", Add)           \
    X(kSub, "sub", Sub)           \
    X(kMul, "mul", Mul)           \
    X(kDiv, "div", Div)           \
    X(kPow, "pow", Pow)           \
    X(kMaximum, "maximum", Maximum) \
    X(kMinimum, "minimum", Minimum) \
    X(kFmod, "fmod", Fmod)          \
    X(kRemainder, "remainder", Remainder) \
    X(kAtan2, "atan2", Atan2)

// out (kBool) = a (op) b.
#define AMPGRAD_COMPARISON_OPS(X)              \
    X(kEq, "eq", Eq)                           \
    X(kNe, "ne", Ne)                           \
    X(kLt, "lt", Lt)                           \
    X(kLe, "le", Le)                           \
    X(kGt, "gt", Gt)                           \
    X(kGe, "ge", Ge)                           \
    X(kLogicalAnd, "logical_and", LogicalAnd)  \
    X(kLogicalOr, "logical_or", LogicalOr)    \
    X(kLogicalXor, "logical_xor", LogicalXor)

// dx = dy * f'(x) from what the op saved: the output y for tanh, sigmoid and relu, else the input x
// (the formula struct's kGradFromOutput); the struct's grad() (the same struct as the op's).
#define AMPGRAD_ACTIVATION_GRADS(X)     \
    X(kTanh, "tanh", Tanh)              \
    X(kSigmoid, "sigmoid", Sigmoid)     \
    X(kRelu, "relu", Relu)              \
    X(kGeluTanh, "gelu_tanh", GeluTanh) \
    X(kGeluErf, "gelu", GeluErf)        \
    X(kSilu, "silu", Silu)

#define AMPGRAD_REDUCE_OPS(X)       \
    X(kSum, "sum", _)               \
    X(kMean, "mean", _)             \
    X(kMax, "max", _)               \
    X(kMin, "min", _)               \
    X(kProd, "prod", _)             \
    X(kSumSquares, "sum_squares", _)

#define AMPGRAD_OP_ENUMERATOR(e, name, formula) e,
enum class UnaryOp : uint8_t { AMPGRAD_UNARY_OPS(AMPGRAD_OP_ENUMERATOR) };
// Arithmetic first, then comparisons (is_comparison relies on the order).
enum class BinaryOp : uint8_t { AMPGRAD_ARITHMETIC_OPS(AMPGRAD_OP_ENUMERATOR) AMPGRAD_COMPARISON_OPS(AMPGRAD_OP_ENUMERATOR) };
enum class ActivationGrad : uint8_t { AMPGRAD_ACTIVATION_GRADS(AMPGRAD_OP_ENUMERATOR) };
enum class ReduceOp : uint8_t { AMPGRAD_REDUCE_OPS(AMPGRAD_OP_ENUMERATOR) };
#undef AMPGRAD_OP_ENUMERATOR

std::string_view op_name(UnaryOp op);
std::string_view op_name(BinaryOp op);
std::string_view op_name(ActivationGrad op);
std::string_view op_name(ReduceOp op);

// Comparisons follow the arithmetic ops in BinaryOp and write kBool.
#define AMPGRAD_PLUS_ONE(e, name, formula) +1
inline constexpr int kNumArithmeticOps = 0 AMPGRAD_ARITHMETIC_OPS(AMPGRAD_PLUS_ONE);
#undef AMPGRAD_PLUS_ONE
constexpr bool is_comparison(BinaryOp op) { return static_cast<int>(op) >= kNumArithmeticOps; }

namespace kernels {

// ---- memory ----
// dst = src (same shape; src may be broadcast; any dtype pair). dst and src may be on different
// devices: the accelerator's copy (the non-CPU operand's) moves the bytes both ways.
extern constinit Kernel<void(const Tensor& dst, const Tensor& src)> copy;
extern constinit Kernel<void(const Tensor& dst, double value)> fill;
// dst = src on one device, like copy, except that a cast to an fp8 dst saturates: finite values past
// its range and ±inf become ±max, NaN stays NaN (core/float8.hpp). The scaled fp8 recipes cast so.
extern constinit Kernel<void(const Tensor& dst, const Tensor& src)> copy_saturating;

// ---- elementwise ----
extern constinit Kernel<void(UnaryOp op, const Tensor& out, const Tensor& in)> unary;
// out = a (op) b; a, b already expanded to out's shape (stride 0 where broadcast).
// Arithmetic: a, b and out share one dtype (the op layer promotes first).
// Comparisons and logic: a and b share one dtype; out is kBool.
extern constinit Kernel<void(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b)> binary;
// out = a (op) scalar, or scalar (op) a when scalar_first; op is kAdd, kSub, kMul or kDiv; a and
// out are one floating dtype. The scalar is converted to the compute type (fp32 for f16/bf16),
// not to a's dtype: x_f16 * 0.1 rounds once, as PyTorch's opmath scalar does.
extern constinit Kernel<void(BinaryOp op, const Tensor& out, const Tensor& a, double scalar, bool scalar_first)>
    binary_scalar;
// out = a + alpha * b, all one dtype (the axpy form of add/sub; also the optimizer's workhorse)
extern constinit Kernel<void(const Tensor& out, const Tensor& a, const Tensor& b, double alpha)> add_scaled;
// out = cond ? a : b; cond is kBool, a, b and out share one dtype
extern constinit Kernel<void(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b)> where;
// out = min(max(in, lo), hi) with either bound optional; NaN stays NaN
extern constinit Kernel<void(const Tensor& out, const Tensor& in, std::optional<double> lo,
                             std::optional<double> hi)> clamp;
// out = lerp(a, b, w) (kernels/scalar_math.hpp's Lerp); a, b and out one floating dtype, a and b
// expanded to out's shape. w is `weight` (that dtype, expanded likewise) or, when `weight` is
// undefined, `weight_scalar` kept in the compute type (not rounded to f16/bf16 first, as PyTorch's).
extern constinit Kernel<void(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& weight,
                             double weight_scalar)> lerp;
// dx = dy * f'(x); `saved` is y or x as AMPGRAD_ACTIVATION_GRADS says
extern constinit Kernel<void(ActivationGrad op, const Tensor& dx, const Tensor& saved, const Tensor& dy)>
    activation_backward;

// ---- reductions ----
// Reduce `in` over `dims` (sorted, unique, non-negative) into `out`, whose shape is in's shape
// with those dims set to 1 (keepdim form). kMean divides by the number of reduced elements.
extern constinit Kernel<void(ReduceOp op, const Tensor& out, const Tensor& in, std::span<const int64_t> dims)>
    reduce;
// Max over one dim, keepdim form, with the int64 index of the first maximum.
extern constinit Kernel<void(const Tensor& values, const Tensor& indices, const Tensor& in, int64_t dim)>
    max_with_indices;

// ---- linear algebra ----
// Batched GEMM: out[b] = alpha * op(a[b]) @ op(b[b]) + beta * out[b]
// a: (B,M,K) or (B,K,M) if trans_a; b: (B,K,N) or (B,N,K) if trans_b; out: (B,M,N) with dense rows
// (contiguous, or a block of a larger matrix: any row and batch strides, gemm_out_rows_dense).
// Batch stride 0 on a or b broadcasts it. a and b share a dtype, and out has it too, except that
// f16/bf16 operands may write an f32 out (f32 accumulation, never rounded: kernels/attention_gemm.cpp).
extern constinit Kernel<void(const Tensor& out, const Tensor& a, const Tensor& b, bool trans_a, bool trans_b,
                             double alpha, double beta)> gemm;
// FP8 scaled GEMM (torch._scaled_mm; the op layer checks its rules: autograd/ops/scaled_mm.cpp):
//   out = (a @ b) * scale_a * scale_b + bias, accumulated in f32, rounded once to out's dtype.
// a: (M,K) fp8 row-major; b: (K,N) fp8 column-major; scale_a: one f32 or (M,1) f32; scale_b: one f32
// or (1,N) f32; bias: (N) in out's dtype or undefined; out: (M,N) contiguous f32/f16/bf16;
// amax: undefined, or a one-element f32 set to max |out| of the values as stored in out (NaN if any is).
// (Not cuBLASLt's AMAX_D, which is the value before rounding: cuBLAS computes it for fp8 outputs only,
// pytorch/pytorch#122821, and out is never fp8 here.)
extern constinit Kernel<void(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& scale_a,
                             const Tensor& scale_b, const Tensor& bias, const Tensor& amax)> scaled_mm;

// ---- NF4, QLoRA's 4-bit weights (the formulas: kernels/nf4.hpp; docs/nf4.md) ----
// w: n contiguous floats (f32, f64, f16, bf16) in blocks of block_size (the last may be short);
// absmax (ceil(n/B)) f32 = max |w| per block; codes (ceil(n/2)) u8 = two NF4 codes a byte.
extern constinit Kernel<void(const Tensor& codes, const Tensor& absmax, const Tensor& w, int64_t block_size)>
    nf4_quantize;
// out: n contiguous floats = level[code] * absmax[block] in f32, rounded to out's dtype.
extern constinit Kernel<void(const Tensor& out, const Tensor& codes, const Tensor& absmax, int64_t block_size)>
    nf4_dequantize;
// The 8-bit dynamic map, blockwise (double quantisation of NF4's absmax): x (m) f32 contiguous;
// absmax (ceil(m/B)) f32; codes (m) u8 = the nearest map value of x / absmax.
extern constinit Kernel<void(const Tensor& codes, const Tensor& absmax, const Tensor& x, int64_t block_size)>
    dynamic_quantize;
// out (m) f32 = map[code] * absmax[block] + offset (offset: one f32 element).
extern constinit Kernel<void(const Tensor& out, const Tensor& codes, const Tensor& absmax, const Tensor& offset,
                             int64_t block_size)> dynamic_dequantize;

// ---- fused nn kernels (all over the last dim, contiguous inputs) ----
// y = softmax(x) or log_softmax(x) over the last dim; x, y: (N,C)
extern constinit Kernel<void(const Tensor& y, const Tensor& x, bool log)> softmax;
// dx = y * (dy - sum(dy*y))   or, for log: dx = dy - exp(y) * sum(dy)
extern constinit Kernel<void(const Tensor& dx, const Tensor& y, const Tensor& dy, bool log)> softmax_backward;
// x: (N,C); weight/bias: (C) or undefined; y: (N,C); mean, rstd: (N) f32 (f64 when x is f64)
extern constinit Kernel<void(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                             const Tensor& weight, const Tensor& bias, double eps)> layer_norm;
// dx (N,C) may be undefined; dweight/dbias (C) may be undefined; they are overwritten
extern constinit Kernel<void(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dy,
                             const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& weight)>
    layer_norm_backward;
// RMSNorm over the last dim: x (N,C); weight (C) or undefined; y (N,C); rstd (N) f32 (f64 when x is f64)
extern constinit Kernel<void(const Tensor& y, const Tensor& rstd, const Tensor& x, const Tensor& weight, double eps)>
    rms_norm;
// dx (N,C) and dweight (C) may be undefined; they are overwritten
extern constinit Kernel<void(const Tensor& dx, const Tensor& dweight, const Tensor& dy, const Tensor& x,
                             const Tensor& rstd, const Tensor& weight)> rms_norm_backward;
// Rotary embedding (kernels/scalar_math.hpp's Rotary): out = x cos + R(x) sin, or with `transpose`
// x cos + R^T(x sin). out (*,HS) contiguous; x, cos, sin: strided, already expanded to out's shape
// (stride 0 where broadcast), one floating dtype; HS even. The pairs are (j, j + HS/2), or (2i, 2i+1)
// when `interleaved`.
extern constinit Kernel<void(const Tensor& out, const Tensor& x, const Tensor& cos, const Tensor& sin,
                             bool interleaved, bool transpose)> rotary_embedding;
// out (N,C) = weight[idx] ; idx (N) int64/int32; throws IndexError for an out-of-range index
extern constinit Kernel<void(const Tensor& out, const Tensor& idx, const Tensor& weight)> embedding;
// dweight (V,C) += scatter of dout (N,C) rows at idx (dweight must be zeroed by the caller)
extern constinit Kernel<void(const Tensor& dweight, const Tensor& idx, const Tensor& dout)> embedding_backward;
// Per-row CE from logits (N,V) and targets (N): loss (N) f32/f64, lse (N) saved for backward.
// Rows whose target == ignore_index get loss 0.
extern constinit Kernel<void(const Tensor& loss, const Tensor& lse, const Tensor& logits, const Tensor& targets,
                             int64_t ignore_index)> cross_entropy;
// dlogits (N,V) = (softmax(logits) - onehot(target)) * dloss[row] (0 for ignored rows)
extern constinit Kernel<void(const Tensor& dlogits, const Tensor& dloss, const Tensor& logits, const Tensor& lse,
                             const Tensor& targets, int64_t ignore_index)> cross_entropy_backward;

// ---- sorting and scans along the last dim (rows (R,N), contiguous; docs/ops/sort.md) ----
// values (R,N) = each row of `in` sorted by kernels/scalar_math.hpp's SortBefore (NaN largest), indices
// (R,N) int64 = where each value came from. Stable: equal values keep their index order.
extern constinit Kernel<void(const Tensor& values, const Tensor& indices, const Tensor& in, bool descending)> sort;
// out (R,N) = running sums of each row of `in` (same dtype, not bool), accumulated in the compute
// type (fp32 for f16/bf16, as PyTorch's CPU cumsum)
extern constinit Kernel<void(const Tensor& out, const Tensor& in)> cumsum;
// out (R,K) = in (R,N) at index (R,K) or (1,K) (one row of int64 indices shared by every row):
// out[r][j] = in[r][index[r][j]]. Throws IndexError for an index outside [0, N).
extern constinit Kernel<void(const Tensor& out, const Tensor& in, const Tensor& index)> take_along_last;
// out (R,N), zeroed by the caller: out[r][index[r][j]] = src[r][j] for src (R,K), index (R,K) or (1,K),
// whose indices within a row are distinct (a permutation, or the first K of one), so nothing accumulates
extern constinit Kernel<void(const Tensor& out, const Tensor& src, const Tensor& index)> put_along_last;
// ---- indexing along one dim (kernels/index_layout.hpp's walk) ----
// out (I) = self[p with p[dim] = index[p]]; index (I) int64/int32, self and out one dtype (any),
// self no smaller than I apart from dim; every operand strided. An index outside [0, self.size(dim))
// throws IndexError "index k is out of bounds for dimension d with size n" before anything is written
// (CUDA: a device trap). 0-d operands count as 1-d of size 1.
extern constinit Kernel<void(const Tensor& out, const Tensor& self, const Tensor& index, int64_t dim)> gather;
// self[p with p[dim] = index[p]] = src[p], or += when `accumulate`; written in place into self
// (strided). index (I) int64/int32; src (any strides, stride 0 for a broadcast value) of self's
// dtype and no smaller than I. Each slice along dim is one sequential walk (no atomics): positions
// of a slice that hit the same element apply in index order, so the result is deterministic (with
// duplicates, scatter keeps the last). f16/bf16 sums are rounded after each add (as PyTorch's).
extern constinit Kernel<void(const Tensor& self, const Tensor& index, const Tensor& src, int64_t dim,
                             bool accumulate)> scatter;

// ---- random (Philox 4x32-10, counter-based: same seed+offset gives the same numbers anywhere) ----
extern constinit Kernel<void(const Tensor& out, uint64_t seed, uint64_t offset, double lo, double hi)>
    random_uniform;
extern constinit Kernel<void(const Tensor& out, uint64_t seed, uint64_t offset, double mean, double std)>
    random_normal;

// ---- AMP ----
// For each grad: found_inf (1-element f32) = 1 if any element is non-finite; grad *= inv_scale
// (1-element f32). One pass over all the data; nothing is read back to the host.
extern constinit Kernel<void(std::span<Tensor> grads, const Tensor& found_inf, const Tensor& inv_scale)>
    non_finite_check_and_unscale;
// PyTorch's _amp_update_scale_ on 1-element tensors, with our `>=` growth check and bounds.
extern constinit Kernel<void(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                             double growth_factor, double backoff_factor, int64_t growth_interval,
                             double min_scale, double max_scale)> update_scale;

// Every kernel above, once: kernels.cpp defines them from this list, and all() enumerates it
// (tests/layering_test.sh checks that the list and the declarations above agree).
#define AMPGRAD_KERNELS(X)                                                                              \
    X(copy) X(fill) X(unary) X(binary) X(binary_scalar) X(add_scaled) X(where) X(clamp)                 \
    X(activation_backward) X(reduce) X(max_with_indices) X(gemm) X(softmax) X(softmax_backward)         \
    X(layer_norm) X(layer_norm_backward) X(embedding) X(embedding_backward) X(cross_entropy)            \
    X(cross_entropy_backward) X(random_uniform) X(random_normal) X(non_finite_check_and_unscale)        \
    X(update_scale) X(lerp) X(rms_norm) X(rms_norm_backward) X(rotary_embedding) X(sort) X(cumsum)       \
    X(take_along_last) X(put_along_last) X(gather) X(scatter) X(copy_saturating) X(scaled_mm)  \
    X(nf4_quantize) X(nf4_dequantize) X(dynamic_quantize) X(dynamic_dequantize)

// All kernels, in the order of AMPGRAD_KERNELS.
std::span<const KernelBase* const> all();
// The names of the kernels with no implementation for `device` (empty: full coverage).
std::vector<std::string_view> missing(DeviceType device);

}  // namespace kernels

}  // namespace ampgrad

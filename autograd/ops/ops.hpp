// ops.hpp: every differentiable op, as free functions in namespace ampgrad (libtorch naming).
// Each is defined in autograd/ops/<family>.cpp with its backward beside its forward.
// Shape letters: docs/notation.md. "(*)" means any shape; broadcasting follows PyTorch.
#pragma once
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "autograd/ops/factories.hpp"   // IWYU pragma: export
#include "core/tensor.hpp"

namespace ampgrad {

// `std::cout << t` prints the values and a "[ CPUFloatType{2,3} ]" footer, as libtorch (print.cpp)
std::ostream& operator<<(std::ostream& os, const Tensor& t);

// ---- factories: autograd/ops/factories.hpp, included above ----

// ---- elementwise arithmetic (autograd/ops/elementwise.cpp) ----
Tensor add(const Tensor& a, const Tensor& b, double alpha = 1.0);
Tensor sub(const Tensor& a, const Tensor& b, double alpha = 1.0);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double s);
Tensor mul(const Tensor& a, double s);
// Tensor-scalar forms: for floating tensors the scalar is not rounded to the tensor's dtype.
Tensor div(const Tensor& a, double s);
Tensor div(double s, const Tensor& a);   // reciprocal(a) * s, as libtorch
Tensor rsub(const Tensor& a, double s);   // s - a
Tensor neg(const Tensor& a);
Tensor pow(const Tensor& a, double exponent);
Tensor pow(const Tensor& a, const Tensor& exponent);
Tensor pow(double base, const Tensor& exponent);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor rsqrt(const Tensor& a);
Tensor abs(const Tensor& a);
Tensor square(const Tensor& a);
Tensor reciprocal(const Tensor& a);
Tensor clamp(const Tensor& a, std::optional<double> lo, std::optional<double> hi = std::nullopt);
Tensor clamp_min(const Tensor& a, double lo);
Tensor clamp_max(const Tensor& a, double hi);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, double b);
Tensor where(const Tensor& cond, double a, const Tensor& b);
Tensor where(const Tensor& cond, double a, double b);   // f32, on cond's device
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
// comparisons and logic: not differentiable, return kBool
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
// ... against a scalar, which takes a's dtype as a libtorch wrapped number does (f16 x == 0.1 compares
// with f16(0.1))
Tensor eq(const Tensor& a, double s);
Tensor ne(const Tensor& a, double s);
Tensor lt(const Tensor& a, double s);
Tensor le(const Tensor& a, double s);
Tensor gt(const Tensor& a, double s);
Tensor ge(const Tensor& a, double s);
Tensor logical_not(const Tensor& a);
// torch.all / torch.any (autograd/ops/all_any.cpp): kBool, every / some element nonzero (NaN counts)
Tensor all(const Tensor& x);
Tensor all(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor any(const Tensor& x);
Tensor any(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor isfinite(const Tensor& a);
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);
bool equal(const Tensor& a, const Tensor& b);   // same shape and bitwise-equal values

// operators (+ - * / == < ... += -= *= /= & |): autograd/ops/operators.hpp, included below

// ---- elementwise math (autograd/ops/math.cpp); integer inputs compute in f32 unless noted ----
Tensor sin(const Tensor& a);
Tensor cos(const Tensor& a);
Tensor exp2(const Tensor& a);                          // 2^a
Tensor log1p(const Tensor& a);                         // log(1 + a), exact for small a
Tensor expm1(const Tensor& a);                         // exp(a) - 1, exact for small a
Tensor erf(const Tensor& a);
// piecewise constant (gradient 0); integer inputs give a copy of themselves, sign keeps their dtype
Tensor sign(const Tensor& a);
Tensor floor(const Tensor& a);
Tensor ceil(const Tensor& a);
Tensor round(const Tensor& a);                         // half to even: round(2.5) = 2
Tensor trunc(const Tensor& a);
// remainders: fmod has a's sign (truncated division), remainder b's (floored, Python's %);
// integer tensors keep their dtype and refuse a zero divisor (ValueError)
Tensor fmod(const Tensor& a, const Tensor& b);
Tensor fmod(const Tensor& a, double b);
Tensor remainder(const Tensor& a, const Tensor& b);
Tensor remainder(const Tensor& a, double b);
Tensor atan2(const Tensor& a, const Tensor& b);        // the angle of (b, a)
// start + weight (end - start); start, end (and a tensor weight) share one floating dtype
Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight);
Tensor lerp(const Tensor& start, const Tensor& end, double weight);
// logic on any dtypes (nonzero is true): not differentiable, return kBool
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);

// ---- activations (autograd/ops/activation.cpp) ----
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x, bool tanh_approximation = false);
Tensor gelu(const Tensor& x, std::string_view approximate);   // "none" or "tanh" (ValueError otherwise)
Tensor gelu(const Tensor& x, const char* approximate);        // (a literal would otherwise pick the bool)
Tensor silu(const Tensor& x);

// ---- reductions (autograd/ops/reduce.cpp); dims may be negative ----
Tensor sum(const Tensor& x);
Tensor sum(const Tensor& x, const Shape& dims, bool keepdim = false);
inline Tensor sum(const Tensor& x, int64_t dim, bool keepdim = false) { return sum(x, Shape{dim}, keepdim); }
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, const Shape& dims, bool keepdim = false);
inline Tensor mean(const Tensor& x, int64_t dim, bool keepdim = false) { return mean(x, Shape{dim}, keepdim); }
std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);  // values, indices
Tensor max(const Tensor& x);
Tensor amax(const Tensor& x, const Shape& dims, bool keepdim = false);
inline Tensor amax(const Tensor& x, int64_t dim, bool keepdim = false) { return amax(x, Shape{dim}, keepdim); }
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor logsumexp(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor norm(const Tensor& x);                                   // L2 over all elements
Tensor var(const Tensor& x, int64_t dim, bool unbiased = true, bool keepdim = false);
// (autograd/ops/reduce_stats.cpp) min/amin mirror max/amax; an empty dims list means all dims.
std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);  // values, indices
Tensor min(const Tensor& x);
Tensor amin(const Tensor& x, const Shape& dims, bool keepdim = false);
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor prod(const Tensor& x);                                   // integer/bool inputs give int64
Tensor prod(const Tensor& x, int64_t dim, bool keepdim = false);
// sum((x - mean)^2) / max(0, n - correction); std = sqrt(var). torch.var(x, dims, correction=...)
Tensor var(const Tensor& x, const Shape& dims, double correction, bool keepdim = false);
Tensor std(const Tensor& x, const Shape& dims = {}, double correction = 1.0, bool keepdim = false);
Tensor logsumexp(const Tensor& x, const Shape& dims, bool keepdim = false);
// vector p-norm over dims (torch.linalg.vector_norm): p = 0, 1, 2, any real, +/-inf
Tensor norm(const Tensor& x, double p, const Shape& dims = {}, bool keepdim = false);
// Sum a broadcast gradient back down to `shape` (used by every broadcasting backward).
Tensor sum_to(const Tensor& x, const Shape& shape);

// ---- views and shape ops (autograd/ops/view.cpp) ----
Tensor view(const Tensor& x, const Shape& shape);
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1);
Tensor permute(const Tensor& x, const Shape& dims);
Tensor unsqueeze(const Tensor& x, int64_t d);
Tensor squeeze(const Tensor& x, int64_t d);
Tensor expand(const Tensor& x, const Shape& shape);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
Tensor select(const Tensor& x, int64_t dim, int64_t index);
tensor_list split(const Tensor& x, int64_t split_size, int64_t dim = 0);
Tensor cat(const tensor_list& tensors, int64_t dim = 0);
Tensor stack(const tensor_list& tensors, int64_t dim = 0);
Tensor contiguous(const Tensor& x);
Tensor clone(const Tensor& x);
Tensor to_dtype(const Tensor& x, DType dtype);       // differentiable cast
// Cast to an fp8 dtype that saturates (autograd/ops/view.cpp): finite values past its range and ±inf
// become ±max (448 for e4m3fn, 57344 for e5m2), NaN stays NaN; the scaled recipes cast so, while
// to_dtype is PyTorch's non-saturating .to() (docs/fp8.md). Differentiable like to_dtype.
Tensor to_float8_saturated(const Tensor& x, DType fp8_dtype);
Tensor to_device(const Tensor& x, Device device, bool non_blocking = false);   // differentiable copy
// x[start:end:step] along dim, a view (Python slicing: a negative start/end counts from the end, and
// out-of-range bounds clamp; an absent one means the whole side). step must be positive (ValueError).
Tensor slice(const Tensor& x, int64_t dim = 0, std::optional<int64_t> start = std::nullopt,
             std::optional<int64_t> end = std::nullopt, int64_t step = 1);

// ---- masks, repeats and chunks (autograd/ops/mask.cpp) ----
// torch.chunk: `chunks` pieces of ceil(size / chunks) along dim (views; the last may be smaller, and
// there may be fewer); an empty dim gives `chunks` empty pieces
tensor_list chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
// x (*,M,N): keep the elements on and below (tril) or above (triu) the diagonal-th diagonal, zero the
// rest (diagonal 0 is the main one, > 0 above it, < 0 below)
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);
// x where mask (kBool) is false, value where it is true; x and mask broadcast; value is converted to
// x's dtype. The gradient flows to x where mask is false.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
// each element `repeats` times in a row along dim, or over the flattened x when dim is absent
Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim = std::nullopt);

// ---- reordering copies (autograd/ops/reorder.cpp); each returns a new tensor, never a view ----
// Tensor.repeat: x tiled repeats[i] times along dim i; repeats may have more dims than x (x gets
// leading 1s). (S0,S1) with repeats (a,b,c) -> (a, b*S0, c*S1)
Tensor repeat(const Tensor& x, const Shape& repeats);
// x with the order of the elements reversed along each of dims (no dim twice)
Tensor flip(const Tensor& x, const Shape& dims);
// elements moved shifts[i] places along dims[i], wrapping around; with dims empty, along the
// flattened x (then one shift). torch.roll
Tensor roll(const Tensor& x, const Shape& shifts, const Shape& dims = {});
// running sums along dim; integer and bool inputs sum in int64 unless dtype says otherwise (x is
// cast to dtype first, as torch.cumsum(x, dim, dtype=...))
Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);

// ---- sorting (autograd/ops/sort.cpp); NaN counts as the largest value ----
// values and int64 indices of x sorted along dim. Always stable: equal values keep their index
// order (PyTorch promises that only for stable = true). Values are differentiable.
std::pair<Tensor, Tensor> sort(const Tensor& x, int64_t dim = -1, bool descending = false, bool stable = false);
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false, bool stable = false);
// The k largest (or smallest) entries along dim, best first: (values, int64 indices), each with
// size k at dim. Values are differentiable. NaN ranks above every number; ties keep index order.
// sorted = false returns them sorted too.
std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true);

// ---- indexing along one dim (autograd/ops/index.cpp) ----
// PyTorch's semantics; indices must lie in [0, size) (IndexError naming the op, the dim, the index and
// the size), int64 or int32 unless noted. 0-d tensors count as 1-d of size 1 where PyTorch allows them.
// out (I) = x[p with p[dim] = index[p]]; index has x's number of dims and is no larger than x apart from dim
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// x with x[p with p[dim] = index[p]] = src[p] (src of x's dtype, no smaller than index), or = value
// (converted to x's dtype); with repeated targets the last write wins
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, double value);
// x with src[p] added at x[p with p[dim] = index[p]]; repeated targets sum
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// the slices of x at the positions of index (K) along dim: size K at dim
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// x with alpha * source's slice j added to x's slice index[j] along dim; source is x's shape with
// index.numel() at dim, and x's dtype
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source, double alpha = 1.0);
// gather after broadcasting x and indices (int64) in every dim but dim; indices in [-size, size)
// (negative ones count from the end); without dim, over the flattened x and indices
Tensor take_along_dim(const Tensor& x, const Tensor& indices, std::optional<int64_t> dim = std::nullopt);
// x's slice i repeats[i] times along dim (repeats: 0-d/1-element for all, or one per slice; int64 or
// int32, non-negative), over the flattened x without dim; output_size, when given, must be the sum
Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim = std::nullopt,
                         std::optional<int64_t> output_size = std::nullopt);
// repeats (N) int64/int32 -> i repeated repeats[i] times, in repeats' dtype: [1,0,3] -> [0,2,2,2]
Tensor repeat_interleave(const Tensor& repeats);

// ---- linear algebra (autograd/ops/matmul.cpp) ----
Tensor matmul(const Tensor& a, const Tensor& b);     // numpy semantics, batched + broadcasting
Tensor mm(const Tensor& a, const Tensor& b);         // (M,K) @ (K,N) -> (M,N)
Tensor bmm(const Tensor& a, const Tensor& b);        // (B,M,K) @ (B,K,N) -> (B,M,N)
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b = {});   // (*,K) (N,K) (N) -> (*,N)

// ---- in place (autograd/ops/inplace.cpp); each bumps the version counter ----
Tensor& add_(Tensor& self, const Tensor& other, double alpha = 1.0);
Tensor& mul_(Tensor& self, const Tensor& other);
Tensor& add_(Tensor& self, double s);   // floating self: s kept in the compute type, as x + s
Tensor& mul_(Tensor& self, double s);
Tensor& zero_(Tensor& self);
Tensor& fill_(Tensor& self, double value);
Tensor& copy_(Tensor& self, const Tensor& src);
Tensor& clamp_(Tensor& self, std::optional<double> lo, std::optional<double> hi);
// the index ops in place (autograd/ops/index.cpp's rules)
Tensor& scatter_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
Tensor& scatter_(Tensor& self, int64_t dim, const Tensor& index, double value);
Tensor& scatter_add_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
Tensor& index_add_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, double alpha = 1.0);

// ---- RNG (core/generator.cpp) ----
void manual_seed(uint64_t seed);

// ---- sampling (sampling.cpp; computed on the host) ----
// Draws category indices from each row of non-negative weights probs (V) or (B,V) -> int64
// (num_samples) or (B,num_samples), from the default generator (manual_seed reproduces it).
// ValueError for a negative / non-finite weight, a zero row sum, or too few non-zero categories
// for a draw without replacement.
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement = false);

namespace nn::functional {
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true);
// (autograd/ops/rms_norm.cpp) y = x / sqrt(mean(x^2) + eps) * weight over the trailing normalized_shape
// dims; eps defaults to the machine epsilon of the compute type (f32 for f16/bf16), as PyTorch computes it
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {},
                std::optional<double> eps = std::nullopt);
// (autograd/ops/rotary.cpp) x (*,HS), cos and sin broadcastable to x: x cos + rotate_half(x) sin, with
// Hugging Face's rotate_half(x) = cat(-x[..., HS/2:], x[..., :HS/2]); `interleaved` pairs (2i, 2i+1)
// instead, as Meta's original Llama code. HS must be even; cos and sin hold HS values per position.
Tensor apply_rotary_emb(const Tensor& x, const Tensor& cos, const Tensor& sin, bool interleaved = false);
// (*) , (V,C) -> (*,C); the row at padding_idx (may be negative) gets no gradient
Tensor embedding(const Tensor& indices, const Tensor& weight, std::optional<int64_t> padding_idx = std::nullopt);
// (autograd/ops/index.cpp) x (*) int64 -> (*,num_classes) int64 with a 1 at each value; num_classes
// -1 means max(x) + 1. Values must lie in [0, num_classes) (ValueError). Not differentiable.
Tensor one_hot(const Tensor& x, int64_t num_classes = -1);
// logits (N,V) or (V); targets (N) int64; mean over non-ignored rows (the fused kernel path)
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100);
enum class Reduction { kNone, kMean, kSum };
// F.cross_entropy's keyword arguments, e.g. cross_entropy(x, t, {.weight = w, .label_smoothing = 0.1})
struct CrossEntropyOptions {
    Tensor weight;                           // (C) per-class weights, or undefined
    int64_t ignore_index = -100;             // index targets only
    Reduction reduction = Reduction::kMean;
    double label_smoothing = 0.0;            // in [0, 1]
};
// (autograd/ops/cross_entropy.cpp) logits (N,C,*) or (C); targets either class indices (N,*) or ()
// int64, or class probabilities shaped like logits. kNone returns (N,*).
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, const CrossEntropyOptions& options);
Tensor mse_loss(const Tensor& input, const Tensor& target);           // mean reduction
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target);   // mean
Tensor binary_cross_entropy(const Tensor& probs, const Tensor& target);                // mean
// q (*,T,HS), k (*,S,HS), v (*,S,HSv) -> (*,T,HSv), leading dims broadcast:
//   dropout(softmax(q k^T * scale + mask), dropout_p) v,  scale defaulting to 1/sqrt(HS).
// attn_mask (broadcastable to (*,T,S)) is bool (true = may attend) or additive in q's dtype;
// is_causal is the top-left aligned lower-triangular mask and excludes attn_mask, as in PyTorch.
// dropout_p > 0 always drops (F.scaled_dot_product_attention has no training flag).
// enable_gqa: q (*,NH,T,HS) against k, v (*,NKV,S,HS) with NH a multiple of NKV; query head h uses
// key/value head h / (NH / NKV) (grouped-query attention), without copying K/V per query head.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask = {},
                                   double dropout_p = 0.0, bool is_causal = false,
                                   std::optional<double> scale = std::nullopt, bool enable_gqa = false);
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool is_causal);
// libtorch's spelling with no mask: scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, true)
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, std::nullopt_t no_mask,
                                   double dropout_p = 0.0, bool is_causal = false,
                                   std::optional<double> scale = std::nullopt, bool enable_gqa = false);
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x, bool tanh_approximation = false);
// F::gelu(x, F::GELUFuncOptions().approximate("tanh")), as libtorch
struct GELUFuncOptions {
    std::string approximate_ = "none";
    GELUFuncOptions& approximate(std::string a) { approximate_ = std::move(a); return *this; }
};
Tensor gelu(const Tensor& x, const GELUFuncOptions& options);
Tensor gelu(const Tensor& x, const char* approximate);
Tensor silu(const Tensor& x);
// One token per row from logits (B,V) or (V) -> int64 (B,1) or (1): divide by temperature, keep
// the top_k largest (others -inf), softmax, multinomial. temperature 0 means greedy (argmax).
Tensor sample_from_logits(const Tensor& logits, double temperature = 1.0, std::optional<int64_t> top_k = std::nullopt);
// torch._scaled_mm (autograd/ops/scaled_mm.cpp; docs/fp8.md): a (M,K) fp8 row-major, b (K,N) fp8
// column-major (not both e5m2; K and N multiples of 16) -> (M,N) out_dtype (f32, f16 or bf16):
//   out = (a @ b) * scale_a * scale_b + bias, accumulated in f32 and rounded once.
// Scales are f32: tensorwise, one element each; or rowwise, scale_a (M,1) and scale_b (1,N) (then a
// and b e4m3fn and out bf16). bias (N) in out_dtype (not with f32 out). amax_out, when given (one f32
// element), receives max |out| of the output as stored (NaN if any element is NaN). Forward only: no
// backward is recorded, as in PyTorch.
Tensor scaled_mm(const Tensor& a, const Tensor& b, const Tensor& scale_a, const Tensor& scale_b,
                 DType out_dtype = kBFloat16, const Tensor& bias = {}, const Tensor& amax_out = {});
using ampgrad::linear;   // F::linear(x, w, b): the same function (one entity, so no ambiguity)
}  // namespace nn::functional
namespace F = nn::functional;
// libtorch also spells these in torch:: (torch::softmax, torch::dropout, ...): the same functions
using nn::functional::binary_cross_entropy_with_logits;
using nn::functional::dropout;
using nn::functional::layer_norm;
using nn::functional::log_softmax;
using nn::functional::mse_loss;
using nn::functional::scaled_dot_product_attention;
using nn::functional::softmax;

}  // namespace ampgrad

#include "autograd/ops/operators.hpp"   // IWYU pragma: export

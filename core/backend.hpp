// backend.hpp: the one interface that cpu/ and cuda/ implement. Kernels take plain tensors
// (already allocated outputs, already broadcast inputs) and know nothing of autograd:
// differentiation lives in autograd/ops/, which calls these through backend_for(device).
//
// Conventions for every kernel:
//  - `out` tensors are allocated by the caller with the right shape and dtype (usually contiguous);
//  - inputs may be arbitrary strided views (stride 0 = broadcast) unless a comment says otherwise;
//  - fp16/bf16 are loaded to fp32, computed in fp32, and rounded once on store (as tensor cores do);
//  - floating kernels accept f32/f64/f16/bf16; anything else throws DTypeError naming the kernel.
#pragma once
#include <cstdint>
#include <optional>
#include <span>

#include "core/tensor.hpp"

namespace ampgrad {

enum class UnaryOp : uint8_t {
    kNeg, kExp, kLog, kSqrt, kRsqrt, kAbs, kTanh, kSigmoid, kRelu,
    kGeluTanh, kGeluErf, kSilu, kSign, kReciprocal, kSquare, kLogicalNot,
};
enum class BinaryOp : uint8_t {
    kAdd, kSub, kMul, kDiv, kPow, kMaximum, kMinimum,
    kEq, kNe, kLt, kLe, kGt, kGe,                    // comparisons write kBool
    kLogicalAnd, kLogicalOr,
};
// d(activation)/dx times dy: dx = dy * f'(x). f' is computed from what the op saved, as PyTorch
// does: the output y for kTanh (1 - y^2), kSigmoid (y (1 - y)) and kRelu (y > 0); the input x for
// the others.
enum class ActivationGrad : uint8_t { kTanh, kSigmoid, kRelu, kGeluTanh, kGeluErf, kSilu };
enum class ReduceOp : uint8_t { kSum, kMean, kMax, kMin, kProd, kSumSquares };

std::string_view op_name(UnaryOp op);
std::string_view op_name(BinaryOp op);

class Backend {
public:
    virtual ~Backend() = default;
    virtual DeviceType device_type() const = 0;

    // ---- memory ----
    // dst = src (same shape; src may be broadcast; any dtype pair; dst/src may be on this device or CPU)
    virtual void copy(const Tensor& dst, const Tensor& src) = 0;
    virtual void fill(const Tensor& dst, double value) = 0;

    // ---- elementwise ----
    virtual void unary(UnaryOp op, const Tensor& out, const Tensor& in) = 0;
    // out = a (op) b; a, b already expanded to out's shape (stride 0 where broadcast).
    // Arithmetic: a, b and out share one dtype (the op layer promotes first).
    // Comparisons and logic: a and b share one dtype; out is kBool.
    virtual void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) = 0;
    // out = a (op) scalar, or scalar (op) a when scalar_first; op is kAdd, kSub, kMul or kDiv; a and
    // out are one floating dtype. The scalar is converted to the compute type (fp32 for f16/bf16),
    // not to a's dtype: x_f16 * 0.1 rounds once, as PyTorch's opmath scalar does.
    virtual void binary_scalar(BinaryOp op, const Tensor& out, const Tensor& a, double scalar, bool scalar_first) = 0;
    // out = a + alpha * b, all one dtype (the axpy form of add/sub; also the optimizer's workhorse)
    virtual void add_scaled(const Tensor& out, const Tensor& a, const Tensor& b, double alpha) = 0;
    virtual void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) = 0;
    virtual void clamp(const Tensor& out, const Tensor& in, std::optional<double> lo,
                       std::optional<double> hi) = 0;
    // dx = dy * f'(x); `x` is the saved tensor: the output y for tanh/sigmoid/relu (see ActivationGrad)
    virtual void activation_backward(ActivationGrad op, const Tensor& dx, const Tensor& x,
                                     const Tensor& dy) = 0;

    // ---- reductions ----
    // Reduce `in` over `dims` (sorted, unique, non-negative) into `out`, whose shape is in's shape
    // with those dims set to 1 (keepdim form). kMean divides by the number of reduced elements.
    virtual void reduce(ReduceOp op, const Tensor& out, const Tensor& in, std::span<const int64_t> dims) = 0;
    // Max over one dim, keepdim form, with the int64 index of the first maximum.
    virtual void max_with_indices(const Tensor& values, const Tensor& indices, const Tensor& in,
                                  int64_t dim) = 0;

    // ---- linear algebra ----
    // Batched GEMM: out[b] = alpha * op(a[b]) @ op(b[b]) + beta * out[b]
    // a: (B,M,K) or (B,K,M) if trans_a; b: (B,K,N) or (B,N,K) if trans_b; out: (B,M,N) contiguous.
    // Batch stride 0 on a or b broadcasts it.
    virtual void gemm(const Tensor& out, const Tensor& a, const Tensor& b, bool trans_a, bool trans_b,
                      double alpha, double beta) = 0;

    // ---- fused nn kernels (all over the last dim, contiguous inputs) ----
    // y = softmax(x) or log_softmax(x) over the last dim; x, y: (N,C)
    virtual void softmax(const Tensor& y, const Tensor& x, bool log) = 0;
    // dx = y * (dy - sum(dy*y))   or, for log: dx = dy - exp(y) * sum(dy)
    virtual void softmax_backward(const Tensor& dx, const Tensor& y, const Tensor& dy, bool log) = 0;
    // x: (N,C); weight/bias: (C) or undefined; y: (N,C); mean, rstd: (N) f32 (f64 when x is f64)
    virtual void layer_norm(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                            const Tensor& weight, const Tensor& bias, double eps) = 0;
    // dx (N,C) may be undefined; dweight/dbias (C) may be undefined; they are overwritten
    virtual void layer_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                                     const Tensor& dy, const Tensor& x, const Tensor& mean,
                                     const Tensor& rstd, const Tensor& weight) = 0;
    // out (N,C) = weight[idx] ; idx (N) int64/int32; throws IndexError for an out-of-range index
    virtual void embedding(const Tensor& out, const Tensor& idx, const Tensor& weight) = 0;
    // dweight (V,C) += scatter of dout (N,C) rows at idx (dweight must be zeroed by the caller)
    virtual void embedding_backward(const Tensor& dweight, const Tensor& idx, const Tensor& dout) = 0;
    // Per-row CE from logits (N,V) and targets (N): loss (N) f32/f64, lse (N) saved for backward.
    // Rows whose target == ignore_index get loss 0.
    virtual void cross_entropy(const Tensor& loss, const Tensor& lse, const Tensor& logits,
                               const Tensor& targets, int64_t ignore_index) = 0;
    // dlogits (N,V) = (softmax(logits) - onehot(target)) * dloss[row] (0 for ignored rows)
    virtual void cross_entropy_backward(const Tensor& dlogits, const Tensor& dloss, const Tensor& logits,
                                        const Tensor& lse, const Tensor& targets, int64_t ignore_index) = 0;

    // ---- random (Philox 4x32-10, counter-based: same seed+offset gives the same numbers anywhere) ----
    virtual void random_uniform(const Tensor& out, uint64_t seed, uint64_t offset, double lo, double hi) = 0;
    virtual void random_normal(const Tensor& out, uint64_t seed, uint64_t offset, double mean, double std) = 0;

    // ---- AMP ----
    // For each grad: found_inf (1-element f32) = 1 if any element is non-finite; grad *= inv_scale
    // (1-element f32). One pass over all the data; nothing is read back to the host.
    virtual void non_finite_check_and_unscale(std::span<Tensor> grads, const Tensor& found_inf,
                                              const Tensor& inv_scale) = 0;
    // PyTorch's _amp_update_scale_ on 1-element tensors, with our `>=` growth check and bounds.
    virtual void update_scale(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                              double growth_factor, double backoff_factor, int64_t growth_interval,
                              double min_scale, double max_scale) = 0;
};

// The backend that owns a device: the CPU one always; the CUDA one when built and a GPU exists
// (otherwise a DeviceError saying why).
Backend& backend_for(Device device);
inline Backend& backend_of(const Tensor& t) { return backend_for(t.device()); }

// Threads used by CPU kernels (defaults to the number of cores, or OMP_NUM_THREADS).
void set_num_threads(int n);
int get_num_threads();

}  // namespace ampgrad

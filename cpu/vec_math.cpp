// vec_math.cpp: see vec_math.hpp. Formulas (as in elementwise.cpp):
//   gelu_tanh(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
//   gelu_tanh'(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2),  t = tanh(u)
//   sigmoid(x) = 1 / (1 + exp(-x)),  silu(x) = x sigmoid(x),  silu'(x) = s (1 + x (1 - s))
// Work is split over threads in blocks of kBlock elements; f16/bf16 blocks are widened to f32
// in a stack buffer, computed, and rounded once on store.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-variable"
#include <Eigen/Core>
#pragma GCC diagnostic pop

#include "cpu/loops.hpp"
#include "cpu/vec_math.hpp"

namespace ampgrad::cpu {

namespace {

constexpr int64_t kBlock = 1024;
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCoeff = 0.044715f;

using Arr = Eigen::Array<float, Eigen::Dynamic, 1>;
using ArrMap = Eigen::Map<Arr>;
using ConstArrMap = Eigen::Map<const Arr>;

// y = op(x) for n floats
template <UnaryOp op>
void unary_block(float* y, const float* x, int64_t n) {
    ConstArrMap X(x, n);
    ArrMap Y(y, n);
    if constexpr (op == UnaryOp::kTanh) Y = X.tanh();
    else if constexpr (op == UnaryOp::kSigmoid) Y = 1.0f / (1.0f + (-X).exp());
    else if constexpr (op == UnaryOp::kSilu) Y = X / (1.0f + (-X).exp());
    else if constexpr (op == UnaryOp::kGeluTanh)
        Y = 0.5f * X * (1.0f + (kSqrt2OverPi * (X + kGeluCoeff * X.cube())).tanh());
}

// dx = dy * f'(x) for n floats; for tanh and sigmoid `x` is the saved output y (core/scalar_math.hpp, kGradFromOutput)
template <ActivationGrad op>
void grad_block(float* dx, const float* x, const float* dy, int64_t n) {
    ConstArrMap X(x, n), G(dy, n);
    ArrMap D(dx, n);
    if constexpr (op == ActivationGrad::kTanh) {                // X holds y = tanh(x)
        D = G * (1.0f - X.square());
    } else if constexpr (op == ActivationGrad::kSigmoid) {      // X holds y = sigmoid(x)
        D = G * X * (1.0f - X);
    } else if constexpr (op == ActivationGrad::kSilu) {
        Arr s = 1.0f / (1.0f + (-X).exp());
        D = G * s * (1.0f + X * (1.0f - s));
    } else if constexpr (op == ActivationGrad::kGeluTanh) {
        Arr t = (kSqrt2OverPi * (X + kGeluCoeff * X.cube())).tanh();
        D = G * (0.5f * (1.0f + t) +
                 0.5f * X * (1.0f - t.square()) * (kSqrt2OverPi * (1.0f + 3.0f * kGeluCoeff * X.square())));
    }
}

// Runs block(outs..., ins...) over [0, n) in blocks, threads splitting the blocks. T is the
// storage type; for f16/bf16 each block is widened into float buffers first.
template <typename T, int NIn, typename Block>
void run_blocks(T* out, std::array<const T*, NIn> in, int64_t n, Block block) {
    const int64_t blocks = (n + kBlock - 1) / kBlock;
    parallel_for(blocks, std::max<int64_t>(1, kGrainSize / kBlock), [&](int64_t b0, int64_t b1) {
        alignas(64) float buf[NIn + 1][kBlock];
        for (int64_t b = b0; b < b1; ++b) {
            const int64_t start = b * kBlock, len = std::min(kBlock, n - start);
            if constexpr (std::is_same_v<T, float>) {
                if constexpr (NIn == 1) block(out + start, in[0] + start, len);
                else block(out + start, in[0] + start, in[1] + start, len);
            } else {
                for (int k = 0; k < NIn; ++k)
                    for (int64_t i = 0; i < len; ++i) buf[k + 1][i] = static_cast<float>(in[k][start + i]);
                if constexpr (NIn == 1) block(buf[0], buf[1], len);
                else block(buf[0], buf[1], buf[2], len);
                for (int64_t i = 0; i < len; ++i) out[start + i] = static_cast<T>(buf[0][i]);
            }
        }
    });
}

template <typename Fn>
bool dispatch_low_float(DType dtype, Fn&& fn) {
    switch (dtype) {
        case kFloat32: fn(float{}); return true;
        case kFloat16: fn(Half{}); return true;
        case kBFloat16: fn(BFloat16{}); return true;
        default: return false;
    }
}

template <UnaryOp op>
bool unary_op(const Tensor& out, const Tensor& in) {
    return dispatch_low_float(in.dtype(), [&](auto tag) {
        using T = decltype(tag);
        run_blocks<T, 1>(out.data_ptr<T>(), {in.data_ptr<T>()}, in.numel(), unary_block<op>);
    });
}

template <ActivationGrad op>
bool grad_op(const Tensor& dx, const Tensor& x, const Tensor& dy) {
    return dispatch_low_float(x.dtype(), [&](auto tag) {
        using T = decltype(tag);
        run_blocks<T, 2>(dx.data_ptr<T>(), {x.data_ptr<T>(), dy.data_ptr<T>()}, x.numel(), grad_block<op>);
    });
}

bool same_contiguous(std::initializer_list<const Tensor*> ts) {
    const Tensor& first = **ts.begin();
    for (const Tensor* t : ts)
        if (!t->is_contiguous() || t->dtype() != first.dtype() || t->numel() != first.numel()) return false;
    return true;
}

}  // namespace

void gelu_tanh_inplace(float* x, int64_t n) { unary_block<UnaryOp::kGeluTanh>(x, x, n); }

bool vectorised_unary(UnaryOp op, const Tensor& out, const Tensor& in) {
    if (!same_contiguous({&out, &in})) return false;
    switch (op) {
        case UnaryOp::kTanh: return unary_op<UnaryOp::kTanh>(out, in);
        case UnaryOp::kSigmoid: return unary_op<UnaryOp::kSigmoid>(out, in);
        case UnaryOp::kSilu: return unary_op<UnaryOp::kSilu>(out, in);
        case UnaryOp::kGeluTanh: return unary_op<UnaryOp::kGeluTanh>(out, in);
        default: return false;
    }
}

bool vectorised_activation_backward(ActivationGrad op, const Tensor& dx, const Tensor& x, const Tensor& dy) {
    if (!same_contiguous({&dx, &x, &dy})) return false;
    switch (op) {
        case ActivationGrad::kTanh: return grad_op<ActivationGrad::kTanh>(dx, x, dy);
        case ActivationGrad::kSigmoid: return grad_op<ActivationGrad::kSigmoid>(dx, x, dy);
        case ActivationGrad::kSilu: return grad_op<ActivationGrad::kSilu>(dx, x, dy);
        case ActivationGrad::kGeluTanh: return grad_op<ActivationGrad::kGeluTanh>(dx, x, dy);
        default: return false;
    }
}

}  // namespace ampgrad::cpu

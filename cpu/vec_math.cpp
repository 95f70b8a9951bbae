// vec_math.cpp: see vec_math.hpp. The formulas are kernels/scalar_math.hpp's, the same text the scalar
// loops and the CUDA kernels instantiate, here instantiated with Pack: one SIMD register of floats
// whose exp and tanh are Eigen's packet functions (found by ADL from the formulas' unqualified
// calls). So the vectorised path cannot drift from the reference formulas; it differs from the
// scalar loop only in how exp and tanh round (Eigen's polynomial approximations, a few float ulps,
// against libm).
// Work is split over threads in blocks of kBlock elements; f16/bf16 blocks are widened to f32
// in a stack buffer, computed, and rounded once on store. A block's last partial register is
// padded into a full one, so every element goes through the same packet code.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-variable"
#include <Eigen/Core>
#pragma GCC diagnostic pop

#include <algorithm>
#include <array>

#include "kernels/scalar_math.hpp"
#include "cpu/loops.hpp"
#include "cpu/vec_math.hpp"

namespace ampgrad::cpu {

namespace {

constexpr int64_t kBlock = 1024;

// ---- Pack: the arithmetic scalar_math's formulas use, on one SIMD register ----

using RawPacket = Eigen::internal::packet_traits<float>::type;
constexpr int64_t kLanes = Eigen::internal::packet_traits<float>::size;

struct Pack {
    RawPacket v;
    explicit Pack(RawPacket raw) : v(raw) {}
    explicit Pack(double c) : v(Eigen::internal::pset1<RawPacket>(static_cast<float>(c))) {}   // T(0.5), T(1)
};
inline Pack operator+(Pack a, Pack b) { return Pack(Eigen::internal::padd(a.v, b.v)); }
inline Pack operator-(Pack a, Pack b) { return Pack(Eigen::internal::psub(a.v, b.v)); }
inline Pack operator*(Pack a, Pack b) { return Pack(Eigen::internal::pmul(a.v, b.v)); }
inline Pack operator/(Pack a, Pack b) { return Pack(Eigen::internal::pdiv(a.v, b.v)); }
inline Pack operator-(Pack a) { return Pack(Eigen::internal::pnegate(a.v)); }
inline Pack exp(Pack a) { return Pack(Eigen::internal::pexp(a.v)); }
inline Pack tanh(Pack a) { return Pack(Eigen::internal::ptanh(a.v)); }

inline Pack load(const float* p) { return Pack(Eigen::internal::ploadu<RawPacket>(p)); }
inline void store(float* p, Pack a) { Eigen::internal::pstoreu(p, a.v); }

// out[i] = fn(in_0[i], ...) for n floats, a register at a time; the tail is padded with zeros.
template <int NIn, typename Fn>
void map_packets(float* out, std::array<const float*, NIn> in, int64_t n, Fn fn) {
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
        if constexpr (NIn == 1) store(out + i, fn(load(in[0] + i)));
        else store(out + i, fn(load(in[0] + i), load(in[1] + i)));
    }
    if (i == n) return;
    alignas(64) float pad[NIn + 1][kLanes] = {};
    for (int k = 0; k < NIn; ++k) std::copy(in[k] + i, in[k] + n, pad[k + 1]);
    if constexpr (NIn == 1) store(pad[0], fn(load(pad[1])));
    else store(pad[0], fn(load(pad[1]), load(pad[2])));
    std::copy(pad[0], pad[0] + (n - i), out + i);
}

// y = F::value(x) for n floats
template <class F>
void unary_block(float* y, const float* x, int64_t n) {
    map_packets<1>(y, {x}, n, [](Pack v) { return F::value(v); });
}

// dx = F::grad(saved, dy) for n floats; `saved` is y or x as F::kGradFromOutput says
template <class F>
void grad_block(float* dx, const float* saved, const float* dy, int64_t n) {
    map_packets<2>(dx, {saved, dy}, n, [](Pack s, Pack g) { return F::grad(s, g); });
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

template <class F>
bool unary_op(const Tensor& out, const Tensor& in) {
    return dispatch_low_float(in.dtype(), [&](auto tag) {
        using T = decltype(tag);
        run_blocks<T, 1>(out.data_ptr<T>(), {in.data_ptr<T>()}, in.numel(), unary_block<F>);
    });
}

template <class F>
bool grad_op(const Tensor& dx, const Tensor& saved, const Tensor& dy) {
    return dispatch_low_float(saved.dtype(), [&](auto tag) {
        using T = decltype(tag);
        run_blocks<T, 2>(dx.data_ptr<T>(), {saved.data_ptr<T>(), dy.data_ptr<T>()}, saved.numel(), grad_block<F>);
    });
}

bool same_contiguous(std::initializer_list<const Tensor*> ts) {
    const Tensor& first = **ts.begin();
    for (const Tensor* t : ts)
        if (!t->is_contiguous() || t->dtype() != first.dtype() || t->numel() != first.numel()) return false;
    return true;
}

}  // namespace

void gelu_tanh_inplace(float* x, int64_t n) { unary_block<formulas::GeluTanh>(x, x, n); }

bool vectorised_unary(UnaryOp op, const Tensor& out, const Tensor& in) {
    if (!same_contiguous({&out, &in})) return false;
    switch (op) {
        case UnaryOp::kTanh: return unary_op<formulas::Tanh>(out, in);
        case UnaryOp::kSigmoid: return unary_op<formulas::Sigmoid>(out, in);
        case UnaryOp::kSilu: return unary_op<formulas::Silu>(out, in);
        case UnaryOp::kGeluTanh: return unary_op<formulas::GeluTanh>(out, in);
        default: return false;
    }
}

bool vectorised_activation_backward(ActivationGrad op, const Tensor& dx, const Tensor& saved, const Tensor& dy) {
    if (!same_contiguous({&dx, &saved, &dy})) return false;
    switch (op) {
        case ActivationGrad::kTanh: return grad_op<formulas::Tanh>(dx, saved, dy);
        case ActivationGrad::kSigmoid: return grad_op<formulas::Sigmoid>(dx, saved, dy);
        case ActivationGrad::kSilu: return grad_op<formulas::Silu>(dx, saved, dy);
        case ActivationGrad::kGeluTanh: return grad_op<formulas::GeluTanh>(dx, saved, dy);
        default: return false;
    }
}

}  // namespace ampgrad::cpu

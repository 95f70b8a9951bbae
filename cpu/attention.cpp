// attention.cpp: fused scaled-dot-product attention on the CPU, flash-attention style: the
// forward keeps only the row log-sum-exp (B,NH,T), never the (T,S) probabilities, and the
// backward recomputes them from q, k and the lse. The causal mask is applied by index (key j is
// hidden from query i when j > i, top-left aligned as PyTorch's is_causal), so no mask tensor
// exists. Derivation: docs/ops/attention.md.
//   forward:  S = scale * q k^T;  P = softmax(S) (causal: row i sees keys 0..i);  O = P v;
//             lse_i = log sum_j exp(S_ij)
//   backward: P = exp(S - lse);  D_i = sum_c dO_ic O_ic;  dv = P^T dO;  dP = dO v^T;
//             dS = P * (dP - D);  dq = scale * dS k;  dk = scale * dS^T q
// Grouped-query attention (k, v with NKV heads, NH a multiple of NKV) reads kv head h / (NH / NKV)
// for query head h; the backward takes one kv head per task and sums dk, dv over its query heads.
// Work is split over the B*NH heads, one head per thread at a time; each head runs in a
// per-thread (T,S) scratch of the compute type (fp32 for f16/bf16) with Eigen's GEMM, so the
// scratch is O(T*S) per thread, not per head. Any strides are accepted (q, k, v are usually
// strided views of one fused QKV projection): each head is loaded into dense buffers.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-variable"
#include <Eigen/Core>
#pragma GCC diagnostic pop
#include <cmath>
#include <limits>

#include "kernels/fused_kernels.hpp"
#include "kernels/kernel_preconditions.hpp"
#include "kernels/scalar_math.hpp"
#include "cpu/attention.hpp"
#include "cpu/loops.hpp"

namespace ampgrad::cpu {

namespace {

template <typename C>
using Mat = Eigen::Matrix<C, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// One head (b, h) of a (B,NH,R,X) tensor, read into or written from a dense (R,X) matrix.
template <typename T, typename C>
void load_head(Mat<C>& dst, const Tensor& t, int64_t b, int64_t h) {
    const int64_t R = t.size(2), X = t.size(3), sr = t.stride(2), sx = t.stride(3);
    dst.resize(R, X);
    if (R * X == 0) return;                                  // an empty head may have no storage at all
    const T* src = static_cast<const T*>(t.raw_data()) + b * t.stride(0) + h * t.stride(1);
    for (int64_t r = 0; r < R; ++r)
        for (int64_t x = 0; x < X; ++x) dst(r, x) = static_cast<C>(src[r * sr + x * sx]);
}

template <typename T, typename C>
void store_head(const Tensor& t, int64_t b, int64_t h, const Mat<C>& src) {
    const int64_t R = t.size(2), X = t.size(3), sr = t.stride(2), sx = t.stride(3);
    if (R * X == 0) return;
    T* dst = static_cast<T*>(t.raw_data()) + b * t.stride(0) + h * t.stride(1);
    for (int64_t r = 0; r < R; ++r)
        for (int64_t x = 0; x < X; ++x) dst[r * sr + x * sx] = static_cast<T>(src(r, x));
}


// Scores (T,S) of one head: scale * q k^T.
template <typename C>
void head_scores(Mat<C>& s, const Mat<C>& q, const Mat<C>& k, C scale) {
    s.resize(q.rows(), k.rows());
    s.noalias() = scale * (q * k.transpose());
}

// exp(scores - shift) of one row, with exp(-inf) exactly 0. Eigen's vectorised exp of a double
// clamps its argument near -745 and returns 5.6e-309 for -inf (its float exp gives 0): a -inf score
// (a -inf in q or k) would then weigh 5.6e-309, so an inf in v gave inf where PyTorch's 0 * inf is
// NaN, and dS times a -inf key gave -inf. A NaN shift (the row's lse is NaN: an inf in q met keys
// of both signs) keeps every weight NaN, as exp(-inf - NaN) is in PyTorch.
template <typename Scores, typename C>
auto exp_of_shifted(const Eigen::ArrayBase<Scores>& scores, C shift) {
    const C minus_inf_weight = shift != shift ? shift : C(0);
    return (scores == -std::numeric_limits<C>::infinity()).select(minus_inf_weight, (scores - shift).exp());
}

template <typename T, typename C>
void forward_head(const AttentionArgs& a, int64_t b, int64_t h, Mat<C>& q, Mat<C>& k, Mat<C>& v, Mat<C>& s,
                  Mat<C>& o) {
    const int64_t hk = h / (a.q.size(1) / a.k.size(1));                // the key/value head of query head h
    load_head<T>(q, a.q, b, h);
    load_head<T>(k, a.k, b, hk);
    load_head<T>(v, a.v, b, hk);
    head_scores(s, q, k, static_cast<C>(a.scale));
    const int64_t T_ = s.rows(), S = s.cols();
    auto* lse = static_cast<compute_t<T>*>(a.lse.raw_data()) + (b * a.q.size(1) + h) * T_;
    for (int64_t i = 0; i < T_; ++i) {
        const int64_t n = formulas::attention_visible_keys(i, S, a.causal);
        auto row = s.row(i);
        const C mx = row.head(n).maxCoeff();
        if (mx == -std::numeric_limits<C>::infinity()) {                 // every score -inf: P = 0 (as
            row.setZero();                                               // PyTorch's _safe_softmax), lse -inf
            lse[i] = static_cast<compute_t<T>>(mx);
            continue;
        }
        row.head(n) = exp_of_shifted(row.head(n).array(), mx);
        const C sum = row.head(n).sum();
        row.head(n) *= C(1) / sum;
        row.tail(S - n).setZero();
        lse[i] = static_cast<compute_t<T>>(mx + std::log(sum));
    }
    o.resize(T_, v.cols());
    o.noalias() = s * v;
    store_head<T>(a.out, b, h, o);
}

template <typename T>
void forward_typed(const AttentionArgs& a) {
    using C = compute_t<T>;
    const int64_t B = a.q.size(0), NH = a.q.size(1);
    const int64_t n = B * NH;
#pragma omp parallel if (n > 1)
    {
        Mat<C> q, k, v, s, o;                                        // per-thread scratch
#pragma omp for schedule(dynamic, 1)
        for (int64_t i = 0; i < n; ++i) forward_head<T, C>(a, i / NH, i % NH, q, k, v, s, o);
    }
}

// Per-thread buffers of the backward; dk_sum, dv_sum add up a kv head's gradient over its query heads.
template <typename C>
struct BackwardScratch {
    Mat<C> q, k, v, o, dout, p, dp, dq, dk, dv, dk_sum, dv_sum;
    Eigen::Matrix<C, Eigen::Dynamic, 1> delta;
};

// Query head h of batch b against its kv head (already in w.k, w.v): writes dq, leaves dk, dv in w.
template <typename T, typename C>
void backward_head(const AttentionGradArgs& g, int64_t b, int64_t h, BackwardScratch<C>& w) {
    const AttentionArgs& a = g.fwd;
    load_head<T>(w.q, a.q, b, h);
    load_head<T>(w.o, a.out, b, h);
    load_head<T>(w.dout, g.dout, b, h);
    const C scale = static_cast<C>(a.scale);
    head_scores(w.p, w.q, w.k, scale);
    const int64_t T_ = w.p.rows(), S = w.p.cols();
    const auto* lse = static_cast<const compute_t<T>*>(a.lse.raw_data()) + (b * a.q.size(1) + h) * T_;
    for (int64_t i = 0; i < T_; ++i) {                                   // P = exp(S - lse), 0 where masked
        const int64_t n = formulas::attention_visible_keys(i, S, a.causal);
        auto row = w.p.row(i);
        if (lse[i] == -std::numeric_limits<compute_t<T>>::infinity()) {   // a row of all -inf scores: P = 0
            row.setZero();
            continue;
        }
        row.head(n) = exp_of_shifted(row.head(n).array(), static_cast<C>(lse[i]));
        row.tail(S - n).setZero();
    }
    w.delta = (w.dout.array() * w.o.array()).rowwise().sum();            // (T) D_i = dO_i . O_i
    w.dv.noalias() = w.p.transpose() * w.dout;                           // (S,HSv)
    w.dp.noalias() = w.dout * w.v.transpose();                           // (T,S)
    w.dp = (w.p.array() * (w.dp.colwise() - w.delta).array()).matrix();  // dS (masked entries: P = 0)
    w.dq.noalias() = scale * (w.dp * w.k);                               // (T,HS)
    w.dk.noalias() = scale * (w.dp.transpose() * w.q);                   // (S,HS)
    if (g.dq.defined()) store_head<T>(g.dq, b, h, w.dq);
}

// Key/value head hk of batch b: its query heads in order, dk and dv summed over them (one head: as is).
template <typename T, typename C>
void backward_kv_head(const AttentionGradArgs& g, int64_t b, int64_t hk, BackwardScratch<C>& w) {
    const AttentionArgs& a = g.fwd;
    const int64_t group = a.q.size(1) / a.k.size(1);
    load_head<T>(w.k, a.k, b, hk);
    load_head<T>(w.v, a.v, b, hk);
    for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
        backward_head<T, C>(g, b, h, w);
        if (h == hk * group) {
            w.dk_sum = w.dk;
            w.dv_sum = w.dv;
        } else {
            w.dk_sum += w.dk;
            w.dv_sum += w.dv;
        }
    }
    if (g.dk.defined()) store_head<T>(g.dk, b, hk, w.dk_sum);
    if (g.dv.defined()) store_head<T>(g.dv, b, hk, w.dv_sum);
}

template <typename T>
void backward_typed(const AttentionGradArgs& g) {
    using C = compute_t<T>;
    const int64_t B = g.fwd.q.size(0), NKV = g.fwd.k.size(1);
    const int64_t n = B * NKV;
#pragma omp parallel if (n > 1)
    {
        BackwardScratch<C> w;
#pragma omp for schedule(dynamic, 1)
        for (int64_t i = 0; i < n; ++i) backward_kv_head<T, C>(g, i / NKV, i % NKV, w);
    }
}

void check_args(const AttentionArgs& a) {
    check_attention_args("attention", a.out, a.lse, a.q, a.k, a.v);
}

}  // namespace

void attention_forward(const AttentionArgs& a) {
    check_args(a);
    if (a.lse.numel() == 0) return;   // B*NH*T == 0. HS == 0 still writes: scores 0, P uniform over the visible keys
    dispatch_float(a.q.dtype(), "attention", [&](auto tag) { forward_typed<decltype(tag)>(a); });
}

void attention_backward(const AttentionGradArgs& g) {
    check_args(g.fwd);
    check_attention_grads("attention_backward", g.dq, g.dk, g.dv, g.dout, g.fwd.out, g.fwd.q, g.fwd.k, g.fwd.v);
    auto has_elements = [](const Tensor& t) { return t.defined() && t.numel() > 0; };
    if (!has_elements(g.dq) && !has_elements(g.dk) && !has_elements(g.dv)) return;   // T == 0 still zeroes dk, dv
    dispatch_float(g.fwd.q.dtype(), "attention_backward", [&](auto tag) { backward_typed<decltype(tag)>(g); });
}

namespace {
// The registered kernels are these loops alone: the attention op chooses the GEMM path itself
// (kernels/attention_gemm.hpp).
void forward_kernel(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                    double scale, bool causal) {
    attention_forward({out, lse, q, k, v, scale, causal});
}
void backward_kernel(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout, const Tensor& out,
                     const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal) {
    attention_backward({{out, lse, q, k, v, scale, causal}, dout, dq, dk, dv});
}
}  // namespace

AMPGRAD_REGISTER_KERNEL(kernels::attention_forward, kCPU, forward_kernel);
AMPGRAD_REGISTER_KERNEL(kernels::attention_backward, kCPU, backward_kernel);

}  // namespace ampgrad::cpu

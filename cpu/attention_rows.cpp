// attention_rows.cpp: the two row kernels of the GEMM attention path (kernels/attention_gemm.cpp)
// on the CPU: attention_probs (the masked softmax of the scores and its log-sum-exp, or the
// backward's recomputation from a saved lse) and attention_score_grad (dS = P * (dP - D)). The
// formulas are kernels/scalar_math.hpp's AttentionWeight and AttentionScoreGrad, shared with
// cuda/attention_rows.cu. Rows are independent, so threads split rows. Contracts:
// kernels/fused_kernels.hpp.
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/fused_kernels.hpp"
#include "kernels/kernel_preconditions.hpp"
#include "kernels/scalar_math.hpp"
#include "cpu/loops.hpp"
#include "cpu/rows.hpp"

namespace ampgrad::cpu {

namespace {

// ---- kernels ----

// probs (rows,S) and lse (rows) from scores (rows,S), row by row; row r is query position r % T.
// The max, the weights and their sum are separate passes so that each vectorises (cpu/rows.hpp).
template <typename T, typename C>
void probs_rows(T* probs, C* lse, const C* scores, int64_t rows, int64_t S, int64_t T_, bool causal, bool recompute) {
    const C minus_inf = -std::numeric_limits<C>::infinity();
    auto exp_of = [](C x) { return exp_nonpositive(x); };
    parallel_for(rows, row_grain(S), [&](int64_t begin, int64_t end) {
        std::vector<C> weights(static_cast<size_t>(S));                  // exp(s - shift) of one row
        C* e = weights.data();
        for (int64_t r = begin; r < end; ++r) {
            const C* s = scores + r * S;
            T* p = probs + r * S;
            const int64_t n = formulas::attention_visible_keys(r % T_, S, causal);
            const C shift = recompute ? lse[r] : row_max(s, n);        // the max skips NaN
            for (int64_t j = 0; j < n; ++j) e[j] = formulas::AttentionWeight::value(s[j], shift, exp_of);
            C inv = C(1);
            bool dead = recompute && shift == minus_inf;                // the forward found every score -inf
            if (!recompute) {
                const C sum = row_sum(e, n);
                dead = sum == C(0);                                     // every visible score -inf (a NaN gives NaN)
                lse[r] = dead ? minus_inf : shift + std::log(sum);
                inv = C(1) / sum;
            }
            if (dead) {                                                 // P = 0, as PyTorch's _safe_softmax
                for (int64_t j = 0; j < S; ++j) p[j] = T(0);
                continue;
            }
            for (int64_t j = 0; j < n; ++j) p[j] = static_cast<T>(e[j] * inv);
            for (int64_t j = n; j < S; ++j) p[j] = T(0);
        }
    });
}

// dscores (rows,S) = probs * (dprobs - D), D_r = dout_r . out_r, over row r's visible keys (query
// position r % T); 0 for the masked ones, whose dprobs are not read. dscores may be probs.
template <typename T, typename C>
void score_grad_rows(T* dscores, const T* probs, const C* dprobs, const T* dout, const T* out, int64_t rows,
                     int64_t S, int64_t HSv, int64_t T_, bool causal) {
    parallel_for(rows, row_grain(S + HSv), [&](int64_t begin, int64_t end) {
        WideRow<T> dout_row(HSv), out_row(HSv);
        for (int64_t r = begin; r < end; ++r) {
            const C* dor = dout_row.load(dout + r * HSv);
            const C delta = row_dot(dor, out_row.load(out + r * HSv), HSv);
            const int64_t n = formulas::attention_visible_keys(r % T_, S, causal);
            for (int64_t j = 0; j < n; ++j) {
                const C p = static_cast<C>(probs[r * S + j]);
                dscores[r * S + j] = static_cast<T>(formulas::AttentionScoreGrad::value(p, dprobs[r * S + j], delta));
            }
            for (int64_t j = n; j < S; ++j) dscores[r * S + j] = T(0);
        }
    });
}

}  // namespace

// ---- launchers ----

void attention_probs(const Tensor& probs, const Tensor& lse, const Tensor& scores, int64_t T, bool causal,
                     bool recompute) {
    check_attention_rows("attention_probs", probs, lse, scores, T);
    const int64_t rows = scores.size(0) * scores.size(1), S = scores.size(2);
    if (rows == 0) return;
    dispatch_float(probs.dtype(), "attention_probs", [&](auto tag) {
        using T_ = decltype(tag);
        using C = compute_t<T_>;
        probs_rows<T_, C>(probs.data_ptr<T_>(), lse.data_ptr<C>(), scores.data_ptr<C>(), rows, S, T, causal, recompute);
    });
}

void attention_score_grad(const Tensor& dscores, const Tensor& probs, const Tensor& dprobs, const Tensor& dout,
                          const Tensor& out, int64_t T, bool causal) {
    check_attention_score_grad("attention_score_grad", dscores, probs, dprobs, dout, out, T);
    const int64_t rows = probs.size(0) * probs.size(1), S = probs.size(2), HSv = out.size(2);
    if (rows == 0) return;
    dispatch_float(probs.dtype(), "attention_score_grad", [&](auto tag) {
        using E = decltype(tag);
        using C = compute_t<E>;
        score_grad_rows<E, C>(dscores.data_ptr<E>(), probs.data_ptr<E>(), dprobs.data_ptr<C>(), dout.data_ptr<E>(),
                              out.data_ptr<E>(), rows, S, HSv, T, causal);
    });
}

AMPGRAD_REGISTER_KERNEL(kernels::attention_probs, kCPU, attention_probs);
AMPGRAD_REGISTER_KERNEL(kernels::attention_score_grad, kCPU, attention_score_grad);

}  // namespace ampgrad::cpu

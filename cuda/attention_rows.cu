// attention_rows.cu: the GPU twin of cpu/attention_rows.cpp, the two row kernels of the GEMM
// attention path (kernels/attention_gemm.cpp): attention_probs (masked softmax of the scores and its
// log-sum-exp, or the backward's recomputation from a saved lse) and attention_score_grad
// (dS = P * (dP - D)). Formulas: kernels/scalar_math.hpp's AttentionWeight and AttentionScoreGrad.
// A warp per row up to 1024 keys, a block of 512 threads beyond (cuda/rows.cuh), each thread
// walking its columns with the group's stride (coalesced); row sums are fixed-order shuffles in the
// compute type. Contracts: kernels/fused_kernels.hpp.
#include <limits>

#include "kernels/fused_kernels.hpp"
#include "kernels/kernel_preconditions.hpp"
#include "kernels/scalar_math.hpp"
#include "cuda/rows.cuh"

namespace ampgrad::cuda {

namespace {

// ---- kernels ----

// probs (rows,S) and lse (rows) from scores (rows,S); row r is query position r % T
template <typename T, bool kBlock>
__global__ void probs_kernel(T* probs, device_compute_t<T>* lse, const device_compute_t<T>* scores, int64_t rows,
                             int64_t S, int64_t T_, bool causal, bool recompute) {
    using C = device_compute_t<T>;
    const RowSlot slot = row_slot<kBlock>();
    const C minus_inf = -std::numeric_limits<C>::infinity();
    auto max_of = [](C a, C b) { return b > a ? b : a; };      // NaN skipped, as on the CPU
    auto add = [](C a, C b) { return a + b; };
    for (int64_t r = slot.first_row; r < rows; r += slot.row_stride) {
        const C* s = scores + r * S;
        T* p = probs + r * S;
        const int64_t n = formulas::attention_visible_keys(r % T_, S, causal);
        C shift = recompute ? lse[r] : minus_inf, inv = C(1);
        bool dead = recompute && shift == minus_inf;              // the forward found every score -inf
        if (!recompute) {
            for (int64_t j = slot.lane; j < n; j += slot.lanes) shift = max_of(shift, s[j]);
            shift = row_reduce<kBlock>(shift, max_of, minus_inf);
            C sum = 0;
            for (int64_t j = slot.lane; j < n; j += slot.lanes) sum += formulas::AttentionWeight::value(s[j], shift);
            sum = row_reduce<kBlock>(sum, add, C(0));
            dead = sum == C(0);                                   // every visible score -inf (a NaN gives NaN)
            if (slot.lane == 0) lse[r] = dead ? minus_inf : shift + math::log(sum);
            inv = C(1) / sum;
        }
        for (int64_t j = slot.lane; j < S; j += slot.lanes)
            p[j] = store_compute<T>(dead || j >= n ? C(0) : formulas::AttentionWeight::value(s[j], shift) * inv);
    }
}

// dscores (rows,S) = probs * (dprobs - D), D_r = dout_r . out_r, over row r's visible keys (query
// position r % T_); 0 for the masked ones, whose dprobs are not read. dscores may be probs.
template <typename T, bool kBlock>
__global__ void score_grad_kernel(T* dscores, const T* probs, const device_compute_t<T>* dprobs, const T* dout,
                                  const T* out, int64_t rows, int64_t S, int64_t HSv, int64_t T_, bool causal) {
    using C = device_compute_t<T>;
    const RowSlot slot = row_slot<kBlock>();
    auto add = [](C a, C b) { return a + b; };
    for (int64_t r = slot.first_row; r < rows; r += slot.row_stride) {
        C delta = 0;
        for (int64_t x = slot.lane; x < HSv; x += slot.lanes)
            delta += load_compute(dout[r * HSv + x]) * load_compute(out[r * HSv + x]);
        delta = row_reduce<kBlock>(delta, add, C(0));
        const int64_t n = formulas::attention_visible_keys(r % T_, S, causal);
        for (int64_t j = slot.lane; j < S; j += slot.lanes) {
            if (j >= n) {
                dscores[r * S + j] = store_compute<T>(C(0));
                continue;
            }
            const C p = load_compute(probs[r * S + j]);
            dscores[r * S + j] = store_compute<T>(formulas::AttentionScoreGrad::value(p, dprobs[r * S + j], delta));
        }
    }
}

}  // namespace

// ---- launchers ----

void attention_probs(const Tensor& probs, const Tensor& lse, const Tensor& scores, int64_t T, bool causal,
                     bool recompute) {
    const int index = probs.device().index;
    require_on_device("attention_probs", index, {&probs, &lse, &scores});
    check_attention_rows("attention_probs", probs, lse, scores, T);
    const int64_t rows = scores.size(0) * scores.size(1), S = scores.size(2);
    if (rows == 0) return;
    DeviceGuard guard(index);
    dispatch_float(probs.dtype(), "attention_probs", [&](auto tag) {
        using T_ = decltype(tag);
        using C = device_compute_t<T_>;
        const RowLaunch l = row_launch(rows, S);
        auto* p = device_ptr<T_>(probs);
        auto* l_ptr = static_cast<C*>(lse.raw_data());
        const auto* s = static_cast<const C*>(scores.raw_data());
        if (l.block)
            probs_kernel<T_, true><<<l.blocks, l.threads, 0, current_stream()>>>(p, l_ptr, s, rows, S, T, causal,
                                                                                recompute);
        else
            probs_kernel<T_, false><<<l.blocks, l.threads, 0, current_stream()>>>(p, l_ptr, s, rows, S, T, causal,
                                                                                 recompute);
        CUDA_CHECK(cudaGetLastError());
    });
}

void attention_score_grad(const Tensor& dscores, const Tensor& probs, const Tensor& dprobs, const Tensor& dout,
                          const Tensor& out, int64_t T_len, bool causal) {
    const int index = probs.device().index;
    require_on_device("attention_score_grad", index, {&dscores, &probs, &dprobs, &dout, &out});
    check_attention_score_grad("attention_score_grad", dscores, probs, dprobs, dout, out, T_len);
    const int64_t rows = probs.size(0) * probs.size(1), S = probs.size(2), HSv = out.size(2);
    if (rows == 0) return;
    DeviceGuard guard(index);
    dispatch_float(probs.dtype(), "attention_score_grad", [&](auto tag) {
        using T = decltype(tag);
        using C = device_compute_t<T>;
        const RowLaunch l = row_launch(rows, std::max(S, HSv));
        const auto* dp = static_cast<const C*>(dprobs.raw_data());
        if (l.block)
            score_grad_kernel<T, true><<<l.blocks, l.threads, 0, current_stream()>>>(
                device_ptr<T>(dscores), device_ptr<const T>(probs), dp, device_ptr<const T>(dout),
                device_ptr<const T>(out), rows, S, HSv, T_len, causal);
        else
            score_grad_kernel<T, false><<<l.blocks, l.threads, 0, current_stream()>>>(
                device_ptr<T>(dscores), device_ptr<const T>(probs), dp, device_ptr<const T>(dout),
                device_ptr<const T>(out), rows, S, HSv, T_len, causal);
        CUDA_CHECK(cudaGetLastError());
    });
}

AMPGRAD_REGISTER_KERNEL(kernels::attention_probs, kCUDA, attention_probs);
AMPGRAD_REGISTER_KERNEL(kernels::attention_score_grad, kCUDA, attention_score_grad);

}  // namespace ampgrad::cuda

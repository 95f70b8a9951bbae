// cross_entropy.cpp: softmax cross-entropy straight from logits (llm.c's fused classifier idea):
// the probabilities are never stored; forward keeps only each row's logsumexp, and backward
// rebuilds softmax = exp(logit - lse) on the fly. Threads split rows. Derivation:
// docs/ops/cross_entropy.md.
#include <cmath>
#include <limits>

#include "kernels/kernels.hpp"
#include "cpu/rows.hpp"

namespace ampgrad::cpu {

namespace {

// Targets (N) as int64; throws IndexError for a class outside [0, V) that is not ignore_index,
// before any threaded work starts.
std::vector<int64_t> read_targets(const Tensor& targets, const Tensor& logits, int64_t ignore_index) {
    AMPGRAD_CHECK(targets.dim() == 1 && targets.numel() == logits.size(0), "cross_entropy kernel: targets {} for {}",
                  targets.describe(), logits.describe());
    if (targets.dtype() != kInt64)
        throw DTypeError(fmt::format("cross_entropy: targets must be int64 class indices but got {}",
                                     targets.describe()));
    std::vector<int64_t> out(static_cast<size_t>(targets.numel()));
    const int64_t* p = static_cast<const int64_t*>(targets.raw_data());
    int64_t V = logits.size(1);
    for (size_t n = 0; n < out.size(); ++n) {
        out[n] = p[static_cast<int64_t>(n) * targets.stride(0)];
        if (out[n] != ignore_index && (out[n] < 0 || out[n] >= V))
            throw IndexError(fmt::format("cross_entropy: target {} is out of range for logits {}: expected "
                                         "0 <= target < {} or target == ignore_index ({}); found at row {}",
                                         out[n], logits.describe(), V, ignore_index, n));
    }
    return out;
}

// ---- kernels ----

// loss[n] = lse[n] - logits[n, t[n]] (0 where t[n] == ignore_index); logits: (N,V)
template <typename T>
void cross_entropy_forward_kernel(compute_t<T>* loss, compute_t<T>* lse, const T* logits,
                                  const std::vector<int64_t>& targets, int64_t V, int64_t ignore_index) {
    using Acc = compute_t<T>;
    int64_t N = static_cast<int64_t>(targets.size());
    parallel_for(N, row_grain(V), [&](int64_t begin, int64_t end) {
        WideRow<T> row(V);
        std::vector<Acc> e(static_cast<size_t>(V));             // exp(x - max) of one row
        for (int64_t n = begin; n < end; ++n) {
            const Acc* x = row.load(logits + n * V);
            Acc mx = row_max(x, V);
            for (int64_t c = 0; c < V; ++c) e[c] = exp_nonpositive(x[c] - mx);
            lse[n] = mx + std::log(row_sum(e.data(), V));
            loss[n] = targets[n] == ignore_index ? Acc(0) : lse[n] - x[targets[n]];
        }
    });
}

// dlogits[n, c] = (exp(logits[n, c] - lse[n]) - [c == t[n]]) * dloss[n]. An ignored row gets 0, except
// NaN where logits[n, c] - lse[n] is NaN (a NaN or +inf logit in the row), as PyTorch's
// log_softmax backward of a zero gradient, exp(logp) * 0, gives.
template <typename T>
void cross_entropy_backward_kernel(T* dlogits, const compute_t<T>* dloss, int64_t dloss_stride, const T* logits,
                                   const compute_t<T>* lse, const std::vector<int64_t>& targets, int64_t V,
                                   int64_t ignore_index) {
    using Acc = compute_t<T>;
    int64_t N = static_cast<int64_t>(targets.size());
    parallel_for(N, row_grain(V), [&](int64_t begin, int64_t end) {
        WideRow<T> row(V);
        for (int64_t n = begin; n < end; ++n) {
            T* d = dlogits + n * V;
            const Acc* x = row.load(logits + n * V);
            if (targets[n] == ignore_index) {
                for (int64_t c = 0; c < V; ++c)
                    d[c] = static_cast<T>(std::isnan(x[c] - lse[n]) ? std::numeric_limits<Acc>::quiet_NaN() : Acc(0));
                continue;
            }
            Acc g = dloss[n * dloss_stride], row_lse = lse[n];
            for (int64_t c = 0; c < V; ++c) d[c] = static_cast<T>(exp_nonpositive(x[c] - row_lse) * g);
            d[targets[n]] = static_cast<T>((exp_nonpositive(x[targets[n]] - row_lse) - Acc(1)) * g);
        }
    });
}

void check_rows(const char* kernel, const Tensor& logits, std::initializer_list<const Tensor*> per_row) {
    DType stat = logits.dtype() == kFloat64 ? kFloat64 : kFloat32;
    AMPGRAD_CHECK(logits.dim() == 2 && logits.is_contiguous(), "{}: logits must be contiguous (N,V), got {}", kernel,
                  logits.describe());
    for (const Tensor* t : per_row)
        AMPGRAD_CHECK(t->dim() == 1 && t->numel() == logits.size(0) && t->dtype() == stat,
                      "{}: expected ({}) {}, got {}", kernel, logits.size(0), dtype_name(stat), t->describe());
}

}  // namespace

// ---- launchers ----

void cross_entropy(const Tensor& loss, const Tensor& lse, const Tensor& logits, const Tensor& targets,
                   int64_t ignore_index) {
    check_rows("cross_entropy", logits, {&loss, &lse});
    AMPGRAD_CHECK(loss.is_contiguous() && lse.is_contiguous(), "cross_entropy: loss/lse must be contiguous");
    std::vector<int64_t> t = read_targets(targets, logits, ignore_index);
    dispatch_float(logits.dtype(), "cross_entropy", [&](auto tag) {
        using T = decltype(tag);
        using Acc = compute_t<T>;
        cross_entropy_forward_kernel(static_cast<Acc*>(loss.raw_data()), static_cast<Acc*>(lse.raw_data()),
                                     static_cast<const T*>(logits.raw_data()), t, logits.size(1), ignore_index);
    });
}

void cross_entropy_backward(const Tensor& dlogits, const Tensor& dloss, const Tensor& logits,
                            const Tensor& lse, const Tensor& targets, int64_t ignore_index) {
    check_rows("cross_entropy_backward", logits, {&dloss, &lse});
    AMPGRAD_CHECK(dlogits.is_contiguous() && dlogits.sizes() == logits.sizes() && dlogits.dtype() == logits.dtype() &&
                      lse.is_contiguous(),
                  "cross_entropy_backward: dlogits {} must be contiguous like logits {}", dlogits.describe(),
                  logits.describe());
    std::vector<int64_t> t = read_targets(targets, logits, ignore_index);
    dispatch_float(logits.dtype(), "cross_entropy_backward", [&](auto tag) {
        using T = decltype(tag);
        using Acc = compute_t<T>;
        cross_entropy_backward_kernel(static_cast<T*>(dlogits.raw_data()), static_cast<const Acc*>(dloss.raw_data()),
                                      dloss.stride(0), static_cast<const T*>(logits.raw_data()),
                                      static_cast<const Acc*>(lse.raw_data()), t, logits.size(1), ignore_index);
    });
}

AMPGRAD_REGISTER_KERNEL(kernels::cross_entropy, kCPU, cross_entropy);
AMPGRAD_REGISTER_KERNEL(kernels::cross_entropy_backward, kCPU, cross_entropy_backward);

}  // namespace ampgrad::cpu

// layer_norm.cpp: LayerNorm over the last dim of a contiguous (N,C) tensor, forward and backward
// (llm.c's layernorm_forward/backward). Threads split rows; the (C) weight/bias gradients are
// summed over rows in fixed chunks whose partial sums are added in chunk order, so the result
// does not depend on the thread count. Derivation: docs/ops/layernorm.md.
#include <cmath>

#include "kernels/kernels.hpp"
#include "kernels/kernel_preconditions.hpp"
#include "cpu/rows.hpp"

namespace ampgrad::cpu {

namespace {

// ---- kernels ----

// w and b widened to the compute type, 1 and 0 when absent, so the row loops have no branches
template <typename T>
std::vector<compute_t<T>> channel_values(const T* v, int64_t C, double absent) {
    std::vector<compute_t<T>> out(static_cast<size_t>(C), static_cast<compute_t<T>>(absent));
    if (v) for (int64_t c = 0; c < C; ++c) out[c] = static_cast<compute_t<T>>(v[c]);
    return out;
}

template <typename Acc>
struct CenteredSums {
    Acc sum;       // sum of xc
    Acc sum_sq;    // sum of xc^2
};

// The sums of xc and xc^2 over a row. 4 * kLanes partial sums (combined in a fixed order, so the
// result depends only on n): one accumulator register per sum would make the loop wait on the
// latency of each add.
template <typename Acc>
CenteredSums<Acc> centered_sums(const Acc* xc, int64_t n) {
    constexpr int64_t kWide = 4 * kLanes;
    Acc s[kWide] = {}, q[kWide] = {};
    const int64_t body = n - n % kWide;
    for (int64_t c = 0; c < body; c += kWide)
        for (int64_t l = 0; l < kWide; ++l) {
            s[l] += xc[c + l];
            q[l] += xc[c + l] * xc[c + l];
        }
    CenteredSums<Acc> out{0, 0};
    for (int64_t l = 0; l < kWide; ++l) {
        out.sum += s[l];
        out.sum_sq += q[l];
    }
    for (int64_t c = body; c < n; ++c) {
        out.sum += xc[c];
        out.sum_sq += xc[c] * xc[c];
    }
    return out;
}

// y = (x - mean) * rstd * w + b; mean, rstd: (N) in the compute type; w, b: (C) or null
template <typename T>
void layer_norm_forward_kernel(T* y, compute_t<T>* mean, compute_t<T>* rstd, const T* x, const T* w, const T* b,
                               int64_t N, int64_t C, double eps) {
    using Acc = compute_t<T>;
    const std::vector<Acc> ws = channel_values(w, C, 1.0), bs = channel_values(b, C, 0.0);
    parallel_for(N, row_grain(C), [&](int64_t begin, int64_t end) {
        WideRow<T> row(C);
        std::vector<Acc> xc(static_cast<size_t>(C));           // x - mean of one row
        for (int64_t n = begin; n < end; ++n) {
            const Acc* xr = row.load(x + n * C);
            Acc mu = row_sum(xr, C) / static_cast<Acc>(C);
            // Two passes (mean, then deviations): no cancellation when |mean| >> std. `shift`, the
            // mean of the deviations, is the rounding error of mu (the corrected two-pass algorithm):
            // taking it out makes a constant row's mean exact, so its xhat is exactly 0, as
            // PyTorch's Welford moments give (aten/src/ATen/native/cpu/moments_utils.h).
            for (int64_t c = 0; c < C; ++c) xc[c] = xr[c] - mu;
            CenteredSums<Acc> sums = centered_sums(xc.data(), C);
            Acc shift = sums.sum / static_cast<Acc>(C);
            Acc var = std::max(Acc(0), (sums.sum_sq - shift * sums.sum) / static_cast<Acc>(C));
            Acc rs = Acc(1) / std::sqrt(var + static_cast<Acc>(eps));
            T* yr = y + n * C;
            for (int64_t c = 0; c < C; ++c) yr[c] = static_cast<T>((xc[c] - shift) * rs * ws[c] + bs[c]);
            mean[n] = mu + shift;
            rstd[n] = rs;
        }
    });
}

struct LayerNormGrads {      // each pointer may be null when that gradient is not wanted
    void* dx;
    void* dweight;
    void* dbias;
};

// With xhat = (x - mean) * rstd and dxhat = dy * w:
//   dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
//   dweight = sum over rows of dy * xhat;  dbias = sum over rows of dy
template <typename T>
void layer_norm_backward_kernel(LayerNormGrads g, const T* dy, const T* x, const compute_t<T>* mean,
                                const compute_t<T>* rstd, const T* w, int64_t N, int64_t C) {
    using Acc = compute_t<T>;
    T* dx = static_cast<T*>(g.dx);
    bool want_dw = g.dweight != nullptr, want_db = g.dbias != nullptr;
    const std::vector<Acc> ws = channel_values(w, C, 1.0);
    // Fixed chunks of rows (independent of the thread count), each with its own partial sums.
    int64_t chunks = std::clamp<int64_t>(N * C / kGrainSize, 1, std::min<int64_t>(N, 32));
    int64_t rows_per_chunk = (N + chunks - 1) / chunks;
    std::vector<Acc> partial_w(want_dw ? chunks * C : 0), partial_b(want_db ? chunks * C : 0);
    parallel_for(chunks, 1, [&](int64_t chunk_begin, int64_t chunk_end) {
        WideRow<T> x_row(C), dy_row(C);
        std::vector<Acc> xhat(static_cast<size_t>(C)), dxhat(static_cast<size_t>(C));
        for (int64_t k = chunk_begin; k < chunk_end; ++k) {
            Acc* pw = want_dw ? partial_w.data() + k * C : nullptr;
            Acc* pb = want_db ? partial_b.data() + k * C : nullptr;
            for (int64_t n = k * rows_per_chunk; n < std::min(N, (k + 1) * rows_per_chunk); ++n) {
                const Acc* xr = x_row.load(x + n * C);
                const Acc* dyr = dy_row.load(dy + n * C);
                Acc mu = mean[n], rs = rstd[n];
                for (int64_t c = 0; c < C; ++c) {
                    xhat[c] = (xr[c] - mu) * rs;
                    dxhat[c] = dyr[c] * ws[c];
                }
                if (dx) {
                    Acc mean_dxhat = row_sum(dxhat.data(), C) / static_cast<Acc>(C);
                    Acc mean_dxhat_xhat = row_dot(dxhat.data(), xhat.data(), C) / static_cast<Acc>(C);
                    T* dxr = dx + n * C;
                    for (int64_t c = 0; c < C; ++c)
                        dxr[c] = static_cast<T>(rs * (dxhat[c] - mean_dxhat - xhat[c] * mean_dxhat_xhat));
                }
                if (pw) for (int64_t c = 0; c < C; ++c) pw[c] += dyr[c] * xhat[c];
                if (pb) for (int64_t c = 0; c < C; ++c) pb[c] += dyr[c];
            }
        }
    });
    // Add the chunk partials in chunk order.
    auto finish = [&](const std::vector<Acc>& partial, void* out) {
        for (int64_t c = 0; c < C; ++c) {
            Acc total = 0;
            for (int64_t k = 0; k < chunks; ++k) total += partial[k * C + c];
            static_cast<T*>(out)[c] = static_cast<T>(total);
        }
    };
    if (want_dw) finish(partial_w, g.dweight);
    if (want_db) finish(partial_b, g.dbias);
}

template <typename T>
const T* ptr_or_null(const Tensor& t) { return t.defined() ? static_cast<const T*>(t.raw_data()) : nullptr; }
void* ptr_or_null(const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; }

void check_stats(const char* kernel, const Tensor& x, const Tensor& mean, const Tensor& rstd) {
    DType stat = x.dtype() == kFloat64 ? kFloat64 : kFloat32;
    AMPGRAD_CHECK(mean.is_contiguous() && rstd.is_contiguous() && mean.numel() == x.size(0) &&
                      rstd.numel() == x.size(0) && mean.dtype() == stat && rstd.dtype() == stat,
                  "{}: mean/rstd must be contiguous ({}) {}, got {} and {}", kernel, x.size(0), dtype_name(stat),
                  mean.describe(), rstd.describe());
}

}  // namespace

// ---- launchers ----

void layer_norm(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                const Tensor& weight, const Tensor& bias, double eps) {
    check_row_layout("layer_norm", x, {&y}, {&weight, &bias});
    check_stats("layer_norm", x, mean, rstd);
    if (x.numel() == 0) return;
    dispatch_float(x.dtype(), "layer_norm", [&](auto tag) {
        using T = decltype(tag);
        using Acc = compute_t<T>;
        layer_norm_forward_kernel(static_cast<T*>(y.raw_data()), static_cast<Acc*>(mean.raw_data()),
                                  static_cast<Acc*>(rstd.raw_data()), static_cast<const T*>(x.raw_data()),
                                  ptr_or_null<T>(weight), ptr_or_null<T>(bias), x.size(0), x.size(1), eps);
    });
}

void layer_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dy,
                         const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& weight) {
    check_row_layout("layer_norm_backward", x, {&dx, &dy}, {&dweight, &dbias, &weight});
    check_stats("layer_norm_backward", x, mean, rstd);
    AMPGRAD_CHECK(weight.defined() || !dweight.defined(), "layer_norm_backward: dweight requested without a weight");
    if (x.size(1) == 0) return;
    dispatch_float(x.dtype(), "layer_norm_backward", [&](auto tag) {
        using T = decltype(tag);
        using Acc = compute_t<T>;
        LayerNormGrads g{ptr_or_null(dx), ptr_or_null(dweight), ptr_or_null(dbias)};
        if (x.size(0) == 0) {                                   // no rows: the sums are zero
            if (dweight.defined()) kernels::fill(dweight, 0.0);
            if (dbias.defined()) kernels::fill(dbias, 0.0);
            return;
        }
        layer_norm_backward_kernel(g, static_cast<const T*>(dy.raw_data()), static_cast<const T*>(x.raw_data()),
                                   static_cast<const Acc*>(mean.raw_data()), static_cast<const Acc*>(rstd.raw_data()),
                                   ptr_or_null<T>(weight), x.size(0), x.size(1));
    });
}

AMPGRAD_REGISTER_KERNEL(kernels::layer_norm, kCPU, layer_norm);
AMPGRAD_REGISTER_KERNEL(kernels::layer_norm_backward, kCPU, layer_norm_backward);

}  // namespace ampgrad::cpu

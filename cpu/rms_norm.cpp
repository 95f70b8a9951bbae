// rms_norm.cpp: RMSNorm over the last dim of a contiguous (N,C) tensor, forward and backward.
// Threads split rows; the forward saves each row's rstd = 1 / sqrt(mean(x^2) + eps) for backward.
// The (C) weight gradient is summed over rows in fixed chunks whose partial sums are added in chunk
// order, so the result does not depend on the thread count (as cpu/layer_norm.cpp). The formulas
// are kernels/scalar_math.hpp's RmsNorm, shared with cuda/rms_norm.cu. Derivation: docs/ops/rmsnorm.md.
#include <algorithm>
#include <vector>

#include "kernels/kernel_preconditions.hpp"
#include "kernels/kernels.hpp"
#include "kernels/scalar_math.hpp"
#include "cpu/rows.hpp"

namespace ampgrad::cpu {

namespace {

// w widened to the compute type; 1 when absent, so the row loops have no branches
template <typename T>
std::vector<compute_t<T>> weight_values(const T* w, int64_t C) {
    std::vector<compute_t<T>> out(static_cast<size_t>(C), compute_t<T>(1));
    if (w) for (int64_t c = 0; c < C; ++c) out[c] = static_cast<compute_t<T>>(w[c]);
    return out;
}

// y = x * rstd * w; rstd: (N) in the compute type; w: (C) or null
template <typename T>
void rms_norm_forward_kernel(T* y, compute_t<T>* rstd, const T* x, const T* w, int64_t N, int64_t C, double eps) {
    using Acc = compute_t<T>;
    const std::vector<Acc> ws = weight_values(w, C);
    parallel_for(N, row_grain(C), [&](int64_t begin, int64_t end) {
        WideRow<T> row(C);
        for (int64_t n = begin; n < end; ++n) {
            const Acc* xr = row.load(x + n * C);
            Acc rs = formulas::RmsNorm::rstd(row_dot(xr, xr, C), static_cast<Acc>(C), static_cast<Acc>(eps));
            T* yr = y + n * C;
            for (int64_t c = 0; c < C; ++c) yr[c] = static_cast<T>(xr[c] * rs * ws[c]);
            rstd[n] = rs;
        }
    });
}

// With xhat = x * rstd and g = dy * w: dx = rstd (g - xhat mean(g xhat)); dweight = sum over rows of dy xhat
template <typename T>
void rms_norm_backward_kernel(T* dx, T* dweight, const T* dy, const T* x, const compute_t<T>* rstd, const T* w,
                              int64_t N, int64_t C) {
    using Acc = compute_t<T>;
    const std::vector<Acc> ws = weight_values(w, C);
    // Fixed chunks of rows (independent of the thread count), each with its own partial sums.
    const int64_t chunks = std::clamp<int64_t>(N * C / kGrainSize, 1, std::min<int64_t>(N, 32));
    const int64_t rows_per_chunk = (N + chunks - 1) / chunks;
    std::vector<Acc> partial_w(dweight ? chunks * C : 0);
    parallel_for(chunks, 1, [&](int64_t chunk_begin, int64_t chunk_end) {
        WideRow<T> x_row(C), dy_row(C);
        std::vector<Acc> xhat(static_cast<size_t>(C)), g(static_cast<size_t>(C));
        for (int64_t k = chunk_begin; k < chunk_end; ++k) {
            Acc* pw = dweight ? partial_w.data() + k * C : nullptr;
            for (int64_t n = k * rows_per_chunk; n < std::min(N, (k + 1) * rows_per_chunk); ++n) {
                const Acc* xr = x_row.load(x + n * C);
                const Acc* dyr = dy_row.load(dy + n * C);
                const Acc rs = rstd[n];
                for (int64_t c = 0; c < C; ++c) {
                    xhat[c] = xr[c] * rs;
                    g[c] = dyr[c] * ws[c];
                }
                if (dx) {
                    Acc mean_g_xhat = row_dot(g.data(), xhat.data(), C) / static_cast<Acc>(C);
                    T* dxr = dx + n * C;
                    for (int64_t c = 0; c < C; ++c)
                        dxr[c] = static_cast<T>(formulas::RmsNorm::dx(g[c], xhat[c], rs, mean_g_xhat));
                }
                if (pw) for (int64_t c = 0; c < C; ++c) pw[c] += dyr[c] * xhat[c];
            }
        }
    });
    if (!dweight) return;
    for (int64_t c = 0; c < C; ++c) {                           // the chunk partials in chunk order
        Acc total = 0;
        for (int64_t k = 0; k < chunks; ++k) total += partial_w[k * C + c];
        dweight[c] = static_cast<T>(total);
    }
}

template <typename T>
T* ptr_or_null(const Tensor& t) { return t.defined() ? static_cast<T*>(t.raw_data()) : nullptr; }

void check_rstd(const char* kernel, const Tensor& x, const Tensor& rstd) {
    DType stat = x.dtype() == kFloat64 ? kFloat64 : kFloat32;
    AMPGRAD_CHECK(rstd.is_contiguous() && rstd.numel() == x.size(0) && rstd.dtype() == stat,
                  "{}: rstd must be contiguous ({}) {}, got {}", kernel, x.size(0), dtype_name(stat), rstd.describe());
}

}  // namespace

// ---- launchers ----

void rms_norm(const Tensor& y, const Tensor& rstd, const Tensor& x, const Tensor& weight, double eps) {
    check_row_layout("rms_norm", x, {&y}, {&weight});
    check_rstd("rms_norm", x, rstd);
    if (x.numel() == 0) return;
    dispatch_float(x.dtype(), "rms_norm", [&](auto tag) {
        using T = decltype(tag);
        rms_norm_forward_kernel(static_cast<T*>(y.raw_data()), static_cast<compute_t<T>*>(rstd.raw_data()),
                                static_cast<const T*>(x.raw_data()), ptr_or_null<const T>(weight), x.size(0),
                                x.size(1), eps);
    });
}

void rms_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dy, const Tensor& x,
                       const Tensor& rstd, const Tensor& weight) {
    check_row_layout("rms_norm_backward", x, {&dx, &dy}, {&dweight, &weight});
    check_rstd("rms_norm_backward", x, rstd);
    AMPGRAD_CHECK(weight.defined() || !dweight.defined(), "rms_norm_backward: dweight requested without a weight");
    if (x.size(1) == 0) return;
    if (x.size(0) == 0) {                                       // no rows: the weight gradient is 0
        if (dweight.defined()) kernels::fill(dweight, 0.0);
        return;
    }
    dispatch_float(x.dtype(), "rms_norm_backward", [&](auto tag) {
        using T = decltype(tag);
        rms_norm_backward_kernel(ptr_or_null<T>(dx), ptr_or_null<T>(dweight), static_cast<const T*>(dy.raw_data()),
                                 static_cast<const T*>(x.raw_data()),
                                 static_cast<const compute_t<T>*>(rstd.raw_data()), ptr_or_null<const T>(weight),
                                 x.size(0), x.size(1));
    });
}

AMPGRAD_REGISTER_KERNEL(kernels::rms_norm, kCPU, rms_norm);
AMPGRAD_REGISTER_KERNEL(kernels::rms_norm_backward, kCPU, rms_norm_backward);

}  // namespace ampgrad::cpu

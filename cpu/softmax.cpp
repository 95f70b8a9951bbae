// softmax.cpp: softmax and log_softmax over the last dim of a contiguous (N,C) tensor, and their
// backward. Rows are independent, so threads split rows. Numerically stable: the row max is
// subtracted before exp, so exp never overflows. Derivation: docs/ops/softmax.md.
#include <cmath>

#include "kernels/kernels.hpp"
#include "cpu/rows.hpp"

namespace ampgrad::cpu {

namespace {

// ---- kernels ----

// y = softmax(x) or log_softmax(x), row by row; x, y: (N,C)
template <typename T>
void softmax_forward_kernel(T* y, const T* x, int64_t N, int64_t C, bool log) {
    using Acc = compute_t<T>;
    parallel_for(N, row_grain(C), [&](int64_t begin, int64_t end) {
        WideRow<T> row(C);
        std::vector<Acc> e(static_cast<size_t>(C));             // exp(x - max) of one row
        for (int64_t n = begin; n < end; ++n) {
            const Acc* xr = row.load(x + n * C);
            T* yr = y + n * C;
            Acc mx = row_max(xr, C);
            for (int64_t c = 0; c < C; ++c) e[c] = exp_nonpositive(xr[c] - mx);
            Acc sum = row_sum(e.data(), C);
            if (log) {
                Acc log_sum = std::log(sum);
                for (int64_t c = 0; c < C; ++c) yr[c] = static_cast<T>(xr[c] - mx - log_sum);
            } else {
                Acc inv = Acc(1) / sum;
                for (int64_t c = 0; c < C; ++c) yr[c] = static_cast<T>(e[c] * inv);
            }
        }
    });
}

// softmax:     dx = y * (dy - sum(dy * y))
// log_softmax: dx = dy - exp(y) * sum(dy)
template <typename T>
void softmax_backward_kernel(T* dx, const T* y, const T* dy, int64_t N, int64_t C, bool log) {
    using Acc = compute_t<T>;
    parallel_for(N, row_grain(C), [&](int64_t begin, int64_t end) {
        WideRow<T> y_row(C), dy_row(C);
        for (int64_t n = begin; n < end; ++n) {
            const Acc* yr = y_row.load(y + n * C);
            const Acc* dyr = dy_row.load(dy + n * C);
            T* dxr = dx + n * C;
            if (log) {
                Acc dot = row_sum(dyr, C);
                for (int64_t c = 0; c < C; ++c) dxr[c] = static_cast<T>(dyr[c] - exp_nonpositive(yr[c]) * dot);
            } else {
                Acc dot = row_dot(dyr, yr, C);
                for (int64_t c = 0; c < C; ++c) dxr[c] = static_cast<T>(yr[c] * (dyr[c] - dot));
            }
        }
    });
}

int64_t last_dim(const Tensor& t) { return t.dim() == 0 ? 1 : t.sizes().back(); }

}  // namespace

// ---- launchers ----

void softmax(const Tensor& y, const Tensor& x, bool log) {
    AMPGRAD_CHECK(x.is_contiguous() && y.is_contiguous() && x.sizes() == y.sizes() && x.dtype() == y.dtype(),
                  "softmax kernel needs contiguous same-shaped x, y: x is {}, y is {}", x.describe(), y.describe());
    if (x.numel() == 0) return;
    int64_t C = last_dim(x);
    dispatch_float(x.dtype(), "softmax", [&](auto tag) {
        using T = decltype(tag);
        softmax_forward_kernel(static_cast<T*>(y.raw_data()), static_cast<const T*>(x.raw_data()), x.numel() / C, C,
                               log);
    });
}

void softmax_backward(const Tensor& dx, const Tensor& y, const Tensor& dy, bool log) {
    AMPGRAD_CHECK(dx.is_contiguous() && y.is_contiguous() && dy.is_contiguous() && dx.sizes() == y.sizes() &&
                      dy.sizes() == y.sizes() && dx.dtype() == y.dtype() && dy.dtype() == y.dtype(),
                  "softmax_backward kernel needs contiguous same-shaped dx, y, dy: dx is {}, y is {}, dy is {}",
                  dx.describe(), y.describe(), dy.describe());
    if (y.numel() == 0) return;
    int64_t C = last_dim(y);
    dispatch_float(y.dtype(), "softmax_backward", [&](auto tag) {
        using T = decltype(tag);
        softmax_backward_kernel(static_cast<T*>(dx.raw_data()), static_cast<const T*>(y.raw_data()),
                                static_cast<const T*>(dy.raw_data()), y.numel() / C, C, log);
    });
}

AMPGRAD_REGISTER_KERNEL(kernels::softmax, kCPU, softmax);
AMPGRAD_REGISTER_KERNEL(kernels::softmax_backward, kCPU, softmax_backward);

}  // namespace ampgrad::cpu

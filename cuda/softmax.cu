// softmax.cu: softmax and log_softmax over the last dim of a contiguous (N,C) tensor, and their
// backward: the GPU twin of cpu/softmax.cpp. Rows are independent: a warp per row for C <= 1024,
// a block of 512 threads per row beyond (cuda/rows.cuh). Each thread walks its columns with a
// stride of the group size (coalesced), and the row max / row sums are shuffle reductions in the
// compute type (fp32 for f16/bf16/f32, f64 for f64), as on the CPU. Numerically stable: the row
// max is subtracted before exp. Like the CPU, a row of all -inf gives NaN (-inf - -inf), and a NaN
// anywhere in a row makes the whole row NaN. Derivation: docs/ops/softmax.md.
#include <limits>

#include "kernels/scalar_math.hpp"
#include "cuda/rows.cuh"

namespace ampgrad::cuda {

namespace {

// ---- kernels ----

// y = softmax(x) or log_softmax(x), row by row; x, y: (N,C)
template <typename T, bool kBlock>
__global__ void softmax_forward_kernel(T* y, const T* x, int64_t N, int64_t C, bool log) {
    using Acc = device_compute_t<T>;
    const RowSlot slot = row_slot<kBlock>();
    // the row max skips NaN (as cpu/rows.hpp's row_max); NaN then reaches every output through exp
    auto max_of = [](Acc a, Acc b) { return b > a ? b : a; };
    auto add = [](Acc a, Acc b) { return a + b; };
    const Acc lowest = -std::numeric_limits<Acc>::infinity();
    for (int64_t n = slot.first_row; n < N; n += slot.row_stride) {
        const T* xr = x + n * C;
        T* yr = y + n * C;
        Acc mx = lowest;
        for (int64_t c = slot.lane; c < C; c += slot.lanes) mx = max_of(mx, load_compute(xr[c]));
        mx = row_reduce<kBlock>(mx, max_of, lowest);
        Acc sum = 0;
        for (int64_t c = slot.lane; c < C; c += slot.lanes) sum += math::exp(load_compute(xr[c]) - mx);
        sum = row_reduce<kBlock>(sum, add, Acc(0));
        if (log) {
            const Acc log_sum = math::log(sum);
            for (int64_t c = slot.lane; c < C; c += slot.lanes) yr[c] = store_compute<T>(load_compute(xr[c]) - mx - log_sum);
        } else {
            const Acc inv = Acc(1) / sum;
            for (int64_t c = slot.lane; c < C; c += slot.lanes) yr[c] = store_compute<T>(math::exp(load_compute(xr[c]) - mx) * inv);
        }
    }
}

// softmax:     dx = y * (dy - sum(dy * y))
// log_softmax: dx = dy - exp(y) * sum(dy)
template <typename T, bool kBlock>
__global__ void softmax_backward_kernel(T* dx, const T* y, const T* dy, int64_t N, int64_t C, bool log) {
    using Acc = device_compute_t<T>;
    const RowSlot slot = row_slot<kBlock>();
    auto add = [](Acc a, Acc b) { return a + b; };
    for (int64_t n = slot.first_row; n < N; n += slot.row_stride) {
        const T* yr = y + n * C;
        const T* dyr = dy + n * C;
        T* dxr = dx + n * C;
        Acc dot = 0;
        for (int64_t c = slot.lane; c < C; c += slot.lanes)
            dot += log ? load_compute(dyr[c]) : load_compute(dyr[c]) * load_compute(yr[c]);
        dot = row_reduce<kBlock>(dot, add, Acc(0));
        for (int64_t c = slot.lane; c < C; c += slot.lanes) {
            const Acc yc = load_compute(yr[c]), dyc = load_compute(dyr[c]);
            dxr[c] = store_compute<T>(log ? dyc - math::exp(yc) * dot : yc * (dyc - dot));
        }
    }
}

int64_t last_dim(const Tensor& t) { return t.dim() == 0 ? 1 : t.sizes().back(); }

}  // namespace

// ---- launchers ----

void softmax(const Tensor& y, const Tensor& x, bool log) {
    const int index = y.device().index;
    require_on_device("softmax", index, {&y, &x});
    AMPGRAD_CHECK(x.is_contiguous() && y.is_contiguous() && x.sizes() == y.sizes() && x.dtype() == y.dtype(),
                  "softmax kernel needs contiguous same-shaped x, y: x is {}, y is {}", x.describe(), y.describe());
    if (x.numel() == 0) return;
    const int64_t C = last_dim(x), N = x.numel() / C;
    DeviceGuard guard(index);
    dispatch_float(x.dtype(), "softmax", [&](auto tag) {
        using T = decltype(tag);
        const RowLaunch l = row_launch(N, C);
        if (l.block)
            softmax_forward_kernel<T, true><<<l.blocks, l.threads, 0, current_stream()>>>(
                device_ptr<T>(y), device_ptr<const T>(x), N, C, log);
        else
            softmax_forward_kernel<T, false><<<l.blocks, l.threads, 0, current_stream()>>>(
                device_ptr<T>(y), device_ptr<const T>(x), N, C, log);
        CUDA_CHECK(cudaGetLastError());
    });
}

void softmax_backward(const Tensor& dx, const Tensor& y, const Tensor& dy, bool log) {
    const int index = dx.device().index;
    require_on_device("softmax_backward", index, {&dx, &y, &dy});
    AMPGRAD_CHECK(dx.is_contiguous() && y.is_contiguous() && dy.is_contiguous() && dx.sizes() == y.sizes() &&
                      dy.sizes() == y.sizes() && dx.dtype() == y.dtype() && dy.dtype() == y.dtype(),
                  "softmax_backward kernel needs contiguous same-shaped dx, y, dy: dx is {}, y is {}, dy is {}",
                  dx.describe(), y.describe(), dy.describe());
    if (y.numel() == 0) return;
    const int64_t C = last_dim(y), N = y.numel() / C;
    DeviceGuard guard(index);
    dispatch_float(y.dtype(), "softmax_backward", [&](auto tag) {
        using T = decltype(tag);
        const RowLaunch l = row_launch(N, C);
        if (l.block)
            softmax_backward_kernel<T, true><<<l.blocks, l.threads, 0, current_stream()>>>(
                device_ptr<T>(dx), device_ptr<const T>(y), device_ptr<const T>(dy), N, C, log);
        else
            softmax_backward_kernel<T, false><<<l.blocks, l.threads, 0, current_stream()>>>(
                device_ptr<T>(dx), device_ptr<const T>(y), device_ptr<const T>(dy), N, C, log);
        CUDA_CHECK(cudaGetLastError());
    });
}

AMPGRAD_REGISTER_KERNEL(kernels::softmax, kCUDA, softmax);
AMPGRAD_REGISTER_KERNEL(kernels::softmax_backward, kCUDA, softmax_backward);

}  // namespace ampgrad::cuda

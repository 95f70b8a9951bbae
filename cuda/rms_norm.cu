// rms_norm.cu: RMSNorm over the last dim of a contiguous (N,C) tensor, forward and backward: the GPU
// twin of cpu/rms_norm.cpp, with the same saved statistic: rstd (N) in the compute type (f32, f64
// for f64 inputs). The formulas are kernels/scalar_math.hpp's RmsNorm.
//   - forward and dx: a warp per row for C <= 1024, a block per row beyond (cuda/rows.cuh);
//   - dweight (C): deterministic without atomics, as cuda/layer_norm.cu: a thread per column sums its
//     column over a fixed chunk of rows into (chunks, C) partials, then each column's partials are
//     added in chunk order.
// Derivation: docs/ops/rmsnorm.md.
#include <algorithm>

#include "kernels/kernel_preconditions.hpp"
#include "kernels/scalar_math.hpp"
#include "cuda/rows.cuh"

namespace ampgrad::cuda {

namespace {

// ---- kernels ----

template <typename T>
__device__ __forceinline__ device_compute_t<T> weight_or_one(const T* w, int64_t c) {
    return w ? load_compute(w[c]) : device_compute_t<T>(1);
}

// y = x * rstd * w; x, y: (N,C); w: (C) or null; rstd: (N)
template <typename T, bool kBlock>
__global__ void rms_norm_forward_kernel(T* y, device_compute_t<T>* rstd, const T* x, const T* w, int64_t N,
                                        int64_t C, double eps) {
    using Acc = device_compute_t<T>;
    const RowSlot slot = row_slot<kBlock>();
    auto add = [](Acc a, Acc v) { return a + v; };
    for (int64_t n = slot.first_row; n < N; n += slot.row_stride) {
        const T* xr = x + n * C;
        Acc squares = 0;
        for (int64_t c = slot.lane; c < C; c += slot.lanes) {
            const Acc v = load_compute(xr[c]);
            squares += v * v;
        }
        squares = row_reduce<kBlock>(squares, add, Acc(0));
        const Acc rs = formulas::RmsNorm::rstd(squares, static_cast<Acc>(C), static_cast<Acc>(eps));
        T* yr = y + n * C;
        for (int64_t c = slot.lane; c < C; c += slot.lanes)
            yr[c] = store_compute<T>(load_compute(xr[c]) * rs * weight_or_one(w, c));
        if (slot.lane == 0) rstd[n] = rs;
    }
}

// With xhat = x * rstd and g = dy * w: dx = rstd (g - xhat mean(g xhat))
template <typename T, bool kBlock>
__global__ void rms_norm_dx_kernel(T* dx, const T* dy, const T* x, const device_compute_t<T>* rstd, const T* w,
                                   int64_t N, int64_t C) {
    using Acc = device_compute_t<T>;
    const RowSlot slot = row_slot<kBlock>();
    auto add = [](Acc a, Acc v) { return a + v; };
    for (int64_t n = slot.first_row; n < N; n += slot.row_stride) {
        const T* xr = x + n * C;
        const T* dyr = dy + n * C;
        const Acc rs = rstd[n];
        Acc sum_g_xhat = 0;
        for (int64_t c = slot.lane; c < C; c += slot.lanes)
            sum_g_xhat += load_compute(dyr[c]) * weight_or_one(w, c) * (load_compute(xr[c]) * rs);
        const Acc mean_g_xhat = row_reduce<kBlock>(sum_g_xhat, add, Acc(0)) / static_cast<Acc>(C);
        T* dxr = dx + n * C;
        for (int64_t c = slot.lane; c < C; c += slot.lanes) {
            const Acc g = load_compute(dyr[c]) * weight_or_one(w, c);
            dxr[c] = store_compute<T>(formulas::RmsNorm::dx(g, load_compute(xr[c]) * rs, rs, mean_g_xhat));
        }
    }
}

// Column c of chunk k = blockIdx.y: the sum of dy * xhat over rows [k * rows_per_chunk, ...);
// partial_w: (chunks, C)
template <typename T>
__global__ void rms_norm_partials_kernel(device_compute_t<T>* partial_w, const T* dy, const T* x,
                                         const device_compute_t<T>* rstd, int64_t N, int64_t C, int64_t rows_per_chunk) {
    using Acc = device_compute_t<T>;
    const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (c >= C) return;
    const int64_t begin = rows_per_chunk * blockIdx.y;
    const int64_t end = begin + rows_per_chunk < N ? begin + rows_per_chunk : N;
    Acc acc = 0;
    for (int64_t n = begin; n < end; ++n) acc += load_compute(dy[n * C + c]) * (load_compute(x[n * C + c]) * rstd[n]);
    partial_w[blockIdx.y * C + c] = acc;
}

// ---- checks (as cpu/rms_norm.cpp's) ----

void check_rstd(const char* kernel, const Tensor& x, const Tensor& rstd) {
    AMPGRAD_CHECK(rstd.is_contiguous() && rstd.numel() == x.size(0) && rstd.dtype() == stat_dtype(x),
                  "{}: rstd must be contiguous ({}) {}, got {}", kernel, x.size(0), dtype_name(stat_dtype(x)),
                  rstd.describe());
}

// ---- launchers ----

// dweight (C) from (chunks, C) partials (cuda/rows.cuh's plan)
template <typename T>
void weight_grad(const Tensor& dweight, const Tensor& dy, const Tensor& x, const Tensor& rstd) {
    using Acc = device_compute_t<T>;
    const int64_t N = x.size(0), C = x.size(1);
    const ColumnChunks plan = plan_column_chunks(N, C);
    Tensor partial = make_empty({plan.chunks, C}, stat_dtype(x), x.device());   // (chunks,C)
    rms_norm_partials_kernel<T><<<plan.grid(), kBlockSize, 0, current_stream()>>>(
        device_ptr<Acc>(partial), device_ptr<const T>(dy), device_ptr<const T>(x), device_ptr<const Acc>(rstd), N, C,
        plan.rows_per_chunk);
    CUDA_CHECK(cudaGetLastError());
    sum_chunks<T>(dweight, partial, plan, C);
}

}  // namespace

void rms_norm(const Tensor& y, const Tensor& rstd, const Tensor& x, const Tensor& weight, double eps) {
    const int index = x.device().index;
    require_on_device("rms_norm", index, {&y, &rstd, &x, &weight});
    check_row_layout("rms_norm", x, {&y}, {&weight});
    check_rstd("rms_norm", x, rstd);
    if (x.numel() == 0) return;
    const int64_t N = x.size(0), C = x.size(1);
    DeviceGuard guard(index);
    dispatch_float(x.dtype(), "rms_norm", [&](auto tag) {
        using T = decltype(tag);
        using Acc = device_compute_t<T>;
        const RowLaunch l = row_launch(N, C);
        auto launch = [&](auto kernel) {
            kernel<<<l.blocks, l.threads, 0, current_stream()>>>(device_ptr<T>(y), device_ptr<Acc>(rstd),
                                                                 device_ptr<const T>(x), ptr_or_null<T>(weight), N, C, eps);
            CUDA_CHECK(cudaGetLastError());
        };
        if (l.block) launch(rms_norm_forward_kernel<T, true>);
        else launch(rms_norm_forward_kernel<T, false>);
    });
}

void rms_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dy, const Tensor& x,
                       const Tensor& rstd, const Tensor& weight) {
    const int index = x.device().index;
    require_on_device("rms_norm_backward", index, {&dx, &dweight, &dy, &x, &rstd, &weight});
    check_row_layout("rms_norm_backward", x, {&dx, &dy}, {&dweight, &weight});
    check_rstd("rms_norm_backward", x, rstd);
    AMPGRAD_CHECK(weight.defined() || !dweight.defined(), "rms_norm_backward: dweight requested without a weight");
    const int64_t N = x.size(0), C = x.size(1);
    if (C == 0) return;
    if (N == 0) {                                               // no rows: the weight gradient is 0
        if (dweight.defined()) kernels::fill(dweight, 0.0);
        return;
    }
    DeviceGuard guard(index);
    dispatch_float(x.dtype(), "rms_norm_backward", [&](auto tag) {
        using T = decltype(tag);
        using Acc = device_compute_t<T>;
        if (dx.defined()) {
            const RowLaunch l = row_launch(N, C);
            auto launch = [&](auto kernel) {
                kernel<<<l.blocks, l.threads, 0, current_stream()>>>(device_ptr<T>(dx), device_ptr<const T>(dy),
                                                                     device_ptr<const T>(x), device_ptr<const Acc>(rstd),
                                                                     ptr_or_null<T>(weight), N, C);
                CUDA_CHECK(cudaGetLastError());
            };
            if (l.block) launch(rms_norm_dx_kernel<T, true>);
            else launch(rms_norm_dx_kernel<T, false>);
        }
        if (dweight.defined()) weight_grad<T>(dweight, dy, x, rstd);
    });
}

AMPGRAD_REGISTER_KERNEL(kernels::rms_norm, kCUDA, rms_norm);
AMPGRAD_REGISTER_KERNEL(kernels::rms_norm_backward, kCUDA, rms_norm_backward);

}  // namespace ampgrad::cuda

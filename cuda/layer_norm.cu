// layer_norm.cu: LayerNorm over the last dim of a contiguous (N,C) tensor, forward and backward:
// the GPU twin of cpu/layer_norm.cpp (llm.c's layernorm kernels), with the same saved statistics:
// mean and rstd (N) in the compute type (f32, f64 for f64 inputs).
//   - forward and dx: a warp per row for C <= 1024, a block per row beyond (cuda/rows.cuh); mean,
//     then the deviations' sum and sum of squares (the corrected two-pass algorithm, as on the CPU:
//     no cancellation when |mean| >> std, and a constant row's mean is exact);
//   - dweight/dbias (C): deterministic without atomics: a thread per column sums its column over a
//     fixed chunk of rows (blockIdx.y picks the chunk; neighbouring threads read neighbouring
//     columns), writing (chunks, C) partials; a second kernel adds each column's partials in chunk order.
// Accumulation is in the compute type throughout (fp32 for f16/bf16/f32). Derivation: docs/ops/layernorm.md.
#include <algorithm>

#include "kernels/kernel_preconditions.hpp"
#include "kernels/scalar_math.hpp"
#include "cuda/rows.cuh"

namespace ampgrad::cuda {

namespace {

// ---- kernels ----

template <typename T>
__device__ __forceinline__ device_compute_t<T> value_or(const T* v, int64_t c, float absent) {
    return v ? load_compute(v[c]) : static_cast<device_compute_t<T>>(absent);
}

// y = (x - mean) * rstd * w + b; x, y: (N,C); w, b: (C) or null; mean, rstd: (N)
template <typename T, bool kBlock>
__global__ void layer_norm_forward_kernel(T* y, device_compute_t<T>* mean, device_compute_t<T>* rstd, const T* x,
                                          const T* w, const T* b, int64_t N, int64_t C, double eps) {
    using Acc = device_compute_t<T>;
    const RowSlot slot = row_slot<kBlock>();
    auto add = [](Acc a, Acc v) { return a + v; };
    for (int64_t n = slot.first_row; n < N; n += slot.row_stride) {
        const T* xr = x + n * C;
        Acc sum = 0;
        for (int64_t c = slot.lane; c < C; c += slot.lanes) sum += load_compute(xr[c]);
        const Acc mu = row_reduce<kBlock>(sum, add, Acc(0)) / static_cast<Acc>(C);
        // the corrected two-pass algorithm, as cpu/layer_norm.cpp: shift (the mean of the deviations)
        // is mu's rounding error; taking it out makes a constant row's deviations exactly 0
        Acc dev = 0, squares = 0;
        for (int64_t c = slot.lane; c < C; c += slot.lanes) {
            const Acc d = load_compute(xr[c]) - mu;
            dev += d;
            squares += d * d;
        }
        dev = row_reduce<kBlock>(dev, add, Acc(0));
        squares = row_reduce<kBlock>(squares, add, Acc(0));
        const Acc shift = dev / static_cast<Acc>(C);
        const Acc var = (squares - shift * dev) / static_cast<Acc>(C);
        const Acc rs = Acc(1) / math::sqrt((var > Acc(0) ? var : Acc(0)) + static_cast<Acc>(eps));
        T* yr = y + n * C;
        for (int64_t c = slot.lane; c < C; c += slot.lanes)
            yr[c] = store_compute<T>((load_compute(xr[c]) - mu - shift) * rs * value_or(w, c, 1.0f) +
                                     value_or(b, c, 0.0f));
        if (slot.lane == 0) {
            mean[n] = mu + shift;
            rstd[n] = rs;
        }
    }
}

// With xhat = (x - mean) * rstd and dxhat = dy * w:
//   dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
template <typename T, bool kBlock>
__global__ void layer_norm_dx_kernel(T* dx, const T* dy, const T* x, const device_compute_t<T>* mean,
                                     const device_compute_t<T>* rstd, const T* w, int64_t N, int64_t C) {
    using Acc = device_compute_t<T>;
    const RowSlot slot = row_slot<kBlock>();
    auto add = [](Acc a, Acc v) { return a + v; };
    for (int64_t n = slot.first_row; n < N; n += slot.row_stride) {
        const T* xr = x + n * C;
        const T* dyr = dy + n * C;
        const Acc mu = mean[n], rs = rstd[n];
        Acc sum_dxhat = 0, sum_dxhat_xhat = 0;
        for (int64_t c = slot.lane; c < C; c += slot.lanes) {
            const Acc dxhat = load_compute(dyr[c]) * value_or(w, c, 1.0f);
            sum_dxhat += dxhat;
            sum_dxhat_xhat += dxhat * ((load_compute(xr[c]) - mu) * rs);
        }
        const Acc mean_dxhat = row_reduce<kBlock>(sum_dxhat, add, Acc(0)) / static_cast<Acc>(C);
        const Acc mean_dxhat_xhat = row_reduce<kBlock>(sum_dxhat_xhat, add, Acc(0)) / static_cast<Acc>(C);
        T* dxr = dx + n * C;
        for (int64_t c = slot.lane; c < C; c += slot.lanes) {
            const Acc xhat = (load_compute(xr[c]) - mu) * rs;
            const Acc dxhat = load_compute(dyr[c]) * value_or(w, c, 1.0f);
            dxr[c] = store_compute<T>(rs * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat));
        }
    }
}

// Column c of chunk k = blockIdx.y: sums over rows [k * rows_per_chunk, (k+1) * rows_per_chunk) of
// dy * xhat (into partial_w) and dy (into partial_b); either may be null. partials: (chunks, C)
template <typename T>
__global__ void layer_norm_partials_kernel(device_compute_t<T>* partial_w, device_compute_t<T>* partial_b,
                                           const T* dy, const T* x, const device_compute_t<T>* mean,
                                           const device_compute_t<T>* rstd, int64_t N, int64_t C,
                                           int64_t rows_per_chunk) {
    using Acc = device_compute_t<T>;
    const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (c >= C) return;
    const int64_t begin = rows_per_chunk * blockIdx.y;
    const int64_t end = begin + rows_per_chunk < N ? begin + rows_per_chunk : N;
    Acc acc_w = 0, acc_b = 0;
    for (int64_t n = begin; n < end; ++n) {
        const Acc d = load_compute(dy[n * C + c]);
        acc_w += d * ((load_compute(x[n * C + c]) - mean[n]) * rstd[n]);
        acc_b += d;
    }
    if (partial_w) partial_w[blockIdx.y * C + c] = acc_w;
    if (partial_b) partial_b[blockIdx.y * C + c] = acc_b;
}

// ---- checks (as cpu/layer_norm.cpp's) ----

void check_stats(const char* kernel, const Tensor& x, const Tensor& mean, const Tensor& rstd) {
    const DType stat = stat_dtype(x);
    AMPGRAD_CHECK(mean.is_contiguous() && rstd.is_contiguous() && mean.numel() == x.size(0) &&
                      rstd.numel() == x.size(0) && mean.dtype() == stat && rstd.dtype() == stat,
                  "{}: mean/rstd must be contiguous ({}) {}, got {} and {}", kernel, x.size(0), dtype_name(stat),
                  mean.describe(), rstd.describe());
}

// ---- launchers ----

// dweight, dbias (C) from (chunks, C) partials (cuda/rows.cuh's plan); either may be undefined
template <typename T>
void weight_bias_grads(const Tensor& dweight, const Tensor& dbias, const Tensor& dy, const Tensor& x,
                       const Tensor& mean, const Tensor& rstd) {
    using Acc = device_compute_t<T>;
    const int64_t N = x.size(0), C = x.size(1);
    const ColumnChunks plan = plan_column_chunks(N, C);
    Tensor pw = dweight.defined() ? make_empty({plan.chunks, C}, stat_dtype(x), x.device()) : Tensor();
    Tensor pb = dbias.defined() ? make_empty({plan.chunks, C}, stat_dtype(x), x.device()) : Tensor();
    layer_norm_partials_kernel<T><<<plan.grid(), kBlockSize, 0, current_stream()>>>(
        pw.defined() ? device_ptr<Acc>(pw) : nullptr, pb.defined() ? device_ptr<Acc>(pb) : nullptr,
        device_ptr<const T>(dy), device_ptr<const T>(x), device_ptr<const Acc>(mean), device_ptr<const Acc>(rstd), N, C,
        plan.rows_per_chunk);
    CUDA_CHECK(cudaGetLastError());
    sum_chunks<T>(dweight, pw, plan, C);
    sum_chunks<T>(dbias, pb, plan, C);
}

}  // namespace

void layer_norm(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& weight,
                const Tensor& bias, double eps) {
    const int index = x.device().index;
    require_on_device("layer_norm", index, {&y, &mean, &rstd, &x, &weight, &bias});
    check_row_layout("layer_norm", x, {&y}, {&weight, &bias});
    check_stats("layer_norm", x, mean, rstd);
    if (x.numel() == 0) return;
    const int64_t N = x.size(0), C = x.size(1);
    DeviceGuard guard(index);
    dispatch_float(x.dtype(), "layer_norm", [&](auto tag) {
        using T = decltype(tag);
        using Acc = device_compute_t<T>;
        const RowLaunch l = row_launch(N, C);
        auto launch = [&](auto kernel) {
            kernel<<<l.blocks, l.threads, 0, current_stream()>>>(
                device_ptr<T>(y), device_ptr<Acc>(mean), device_ptr<Acc>(rstd), device_ptr<const T>(x),
                ptr_or_null<T>(weight), ptr_or_null<T>(bias), N, C, eps);
            CUDA_CHECK(cudaGetLastError());
        };
        if (l.block) launch(layer_norm_forward_kernel<T, true>);
        else launch(layer_norm_forward_kernel<T, false>);
    });
}

void layer_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dy,
                         const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& weight) {
    const int index = x.device().index;
    require_on_device("layer_norm_backward", index, {&dx, &dweight, &dbias, &dy, &x, &mean, &rstd, &weight});
    check_row_layout("layer_norm_backward", x, {&dx, &dy}, {&dweight, &dbias, &weight});
    check_stats("layer_norm_backward", x, mean, rstd);
    AMPGRAD_CHECK(weight.defined() || !dweight.defined(), "layer_norm_backward: dweight requested without a weight");
    const int64_t N = x.size(0), C = x.size(1);
    if (C == 0) return;
    if (N == 0) {                                               // no rows: the sums are zero
        if (dweight.defined()) kernels::fill(dweight, 0.0);
        if (dbias.defined()) kernels::fill(dbias, 0.0);
        return;
    }
    DeviceGuard guard(index);
    dispatch_float(x.dtype(), "layer_norm_backward", [&](auto tag) {
        using T = decltype(tag);
        using Acc = device_compute_t<T>;
        if (dx.defined()) {
            const RowLaunch l = row_launch(N, C);
            auto launch = [&](auto kernel) {
                kernel<<<l.blocks, l.threads, 0, current_stream()>>>(
                    device_ptr<T>(dx), device_ptr<const T>(dy), device_ptr<const T>(x), device_ptr<const Acc>(mean),
                    device_ptr<const Acc>(rstd), ptr_or_null<T>(weight), N, C);
                CUDA_CHECK(cudaGetLastError());
            };
            if (l.block) launch(layer_norm_dx_kernel<T, true>);
            else launch(layer_norm_dx_kernel<T, false>);
        }
        if (dweight.defined() || dbias.defined()) weight_bias_grads<T>(dweight, dbias, dy, x, mean, rstd);
    });
}

AMPGRAD_REGISTER_KERNEL(kernels::layer_norm, kCUDA, layer_norm);
AMPGRAD_REGISTER_KERNEL(kernels::layer_norm_backward, kCUDA, layer_norm_backward);

}  // namespace ampgrad::cuda

// amp.cu: the two GradScaler kernels, run entirely on the GPU so that checking gradients and
// updating the loss scale never waits for the host (no cudaMemcpy, no synchronisation).
//   non_finite_check_and_unscale: found_inf = 1 if any grad element is inf/NaN; grad *= inv_scale
//   update_scale: PyTorch's _amp_update_scale_ with a `>=` growth check and [min_scale, max_scale]
#include "cuda/loops.cuh"

namespace ampgrad::cuda {

namespace {

// ---- kernels ----

// Grads are unscaled even where a non-finite value is found (PyTorch does the same); many
// threads may write found_inf, all writing 1, which needs no atomics.
template <typename T>
__global__ void unscale_kernel(int64_t n, OffsetCalc<1> calc, T* grad, float* found_inf, const float* inv_scale) {
    using C = device_compute_t<T>;
    C inv = static_cast<C>(*inv_scale);
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        int64_t o = calc.get(i).at[0];
        C v = load_compute(grad[o]);
        if (!isfinite(v)) *found_inf = 1.0f;
        grad[o] = store_compute<T>(inv == C(1) ? v : v * inv);
    }
}

// One thread: scale (f32), tracker (i32 or i64) and found_inf (f32) are 1-element tensors.
//   found_inf: scale = max(scale * backoff, min_scale); tracker = 0
//   otherwise: tracker += 1; once tracker >= interval: scale = min(scale * growth, max_scale) if
//              that is finite; tracker = 0
// Products are taken in double and rounded to f32 once, as PyTorch does.
template <typename Tracker>
__global__ void update_scale_kernel(float* scale, Tracker* tracker, const float* found_inf, double growth_factor,
                                    double backoff_factor, int64_t growth_interval, double min_scale,
                                    double max_scale) {
    double s = *scale;
    if (*found_inf != 0.0f) {
        *scale = static_cast<float>(fmax(s * backoff_factor, min_scale));
        *tracker = 0;
        return;
    }
    int64_t successful = static_cast<int64_t>(*tracker) + 1;
    if (successful >= growth_interval) {
        float grown = static_cast<float>(s * growth_factor);
        if (isfinite(grown)) *scale = static_cast<float>(fmin(static_cast<double>(grown), max_scale));
        *tracker = 0;
    } else {
        *tracker = static_cast<Tracker>(successful);
    }
}

// ---- launchers ----

void require_scalar_f32(const char* kernel, const char* what, const Tensor& t) {
    if (t.numel() != 1 || t.dtype() != kFloat32)
        throw DTypeError(fmt::format("cuda {}: {} must be a 1-element f32 tensor, got {}", kernel, what,
                                     t.describe()));
}

}  // namespace

void non_finite_check_and_unscale(std::span<Tensor> grads, const Tensor& found_inf,
                                  const Tensor& inv_scale) {
    const int index = found_inf.device().index;
    require_scalar_f32("non_finite_check_and_unscale", "found_inf", found_inf);
    require_scalar_f32("non_finite_check_and_unscale", "inv_scale", inv_scale);
    require_on_device("non_finite_check_and_unscale", index, {&found_inf, &inv_scale});
    DeviceGuard guard(index);
    float* found = device_ptr<float>(found_inf);
    const float* inv = device_ptr<const float>(inv_scale);
    for (const Tensor& grad : grads) {                       // one pass over each grad's data
        if (!grad.defined() || grad.numel() == 0) continue;
        require_on_device("non_finite_check_and_unscale", index, {&grad});
        int64_t n = grad.numel();
        OffsetCalc<1> calc = make_offset_calc<1>({&grad});
        dispatch_float(grad.dtype(), "non_finite_check_and_unscale", [&](auto tag) {
            using T = decltype(tag);
            unscale_kernel<T><<<grid_for(n), kBlockSize, 0, current_stream()>>>(n, calc, device_ptr<T>(grad), found,
                                                                                inv);
            CUDA_CHECK(cudaGetLastError());
        });
    }
}

void update_scale(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                  double growth_factor, double backoff_factor, int64_t growth_interval, double min_scale,
                  double max_scale) {
    const int index = scale.device().index;
    require_scalar_f32("update_scale", "scale", scale);
    require_scalar_f32("update_scale", "found_inf", found_inf);
    if (growth_tracker.numel() != 1 || (growth_tracker.dtype() != kInt32 && growth_tracker.dtype() != kInt64))
        throw DTypeError(fmt::format("cuda update_scale: growth_tracker must be a 1-element i32 or i64 tensor, got {}",
                                     growth_tracker.describe()));
    require_on_device("update_scale", index, {&scale, &growth_tracker, &found_inf});
    DeviceGuard guard(index);
    auto launch = [&](auto tracker_tag) {
        using Tracker = decltype(tracker_tag);
        update_scale_kernel<Tracker><<<1, 1, 0, current_stream()>>>(
            device_ptr<float>(scale), device_ptr<Tracker>(growth_tracker), device_ptr<const float>(found_inf),
            growth_factor, backoff_factor, growth_interval, min_scale, max_scale);
        CUDA_CHECK(cudaGetLastError());
    };
    if (growth_tracker.dtype() == kInt32) launch(int32_t{});
    else launch(int64_t{});
}

AMPGRAD_REGISTER_KERNEL(kernels::non_finite_check_and_unscale, kCUDA, non_finite_check_and_unscale);
AMPGRAD_REGISTER_KERNEL(kernels::update_scale, kCUDA, update_scale);

}  // namespace ampgrad::cuda

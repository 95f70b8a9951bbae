// optim.cu: the GPU's fused optimizer steps (kernels::sgd_step, kernels::adam_step in
// kernels/fused_kernels.hpp), the twin of cpu/optim.cpp: one call per parameter group updates every
// parameter with kernels/optim_math.hpp's per-element formulas (the same text the CPU runs), reading
// each gradient as grad * inv_scale and storing that back (as PyTorch's fused kernels leave .grad
// unscaled). The GradScaler's found_inf flag is read on the device by every
// kernel: when it is nonzero the kernels return before writing anything, step counts included, so
// a skipped step costs no host synchronisation. f32 and f64, as the CPU loops.
//
// Layout: one grid-stride launch per parameter (simple, correct past 2^31 elements); Adam's bias
// corrections are computed once per block from the step count on the device, and the counts are
// incremented afterwards by one small kernel (stream order makes every update read the old count).
// Batching many small parameters into one launch (PyTorch's multi_tensor_apply) is not done yet.
#include "kernels/fused_kernels.hpp"
#include "kernels/optim_math.hpp"
#include "cuda/loops.cuh"

namespace ampgrad::cuda {

namespace {

// StepScaling as device pointers: null stands for inv_scale 1 / found_inf 0.
struct DeviceScaling {
    const float* inv_scale;
    const float* found_inf;
};

__device__ __forceinline__ bool skip_step(const DeviceScaling& s) { return s.found_inf && *s.found_inf != 0.0f; }

// The inverse scale rounded to T as cpu/optim.cpp rounds it (f32 value -> T).
template <typename T>
__device__ __forceinline__ T inv_scale_of(const DeviceScaling& s) {
    return s.inv_scale ? static_cast<T>(*s.inv_scale) : T(1);
}

// ---- kernels ----

// param, grad, buf: (n) contiguous; buf is null unless kMomentum
template <typename T, bool kMomentum>
__global__ void sgd_kernel(int64_t n, T* param, T* grad, T* buf, optim_math::SgdCoeffs<T> c,
                           DeviceScaling scaling) {
    if (skip_step(scaling)) return;
    const T inv = inv_scale_of<T>(scaling);
    T unused = T(0);
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        // .grad left unscaled, as PyTorch's (inv is the same for every thread: no divergence)
        const T g = inv != T(1) ? optim_math::unscale_stored_grad<true>(grad[i], inv) : grad[i];
        param[i] = optim_math::sgd_element<T, kMomentum>(c, param[i], g, T(1), kMomentum ? buf[i] : unused);
    }
}

template <typename T>
struct AdamPointers {
    T* param;
    T* grad;                                    // unscaled in place (optim_math::unscale_stored_grad)
    T *exp_avg, *exp_avg_sq, *max_exp_avg_sq;   // max_exp_avg_sq null unless amsgrad
};

// All pointers (n) contiguous. The step this update uses is the stored count + 1: read from
// step_on_device (the increment kernel writes it later) or, for counts kept on the host, step_on_host.
template <typename T, bool kAmsgrad>
__global__ void adam_kernel(int64_t n, AdamPointers<T> t, AdamScalars s, const float* step_on_device,
                            float step_on_host, DeviceScaling scaling) {
    if (skip_step(scaling)) return;                    // the same for every thread: no divergent barrier
    __shared__ optim_math::AdamCoeffs<T> shared_coeffs;
    if (threadIdx.x == 0) {
        float step = step_on_device ? *step_on_device + 1.0f : step_on_host;   // f32, as cpu/optim.cpp counts
        shared_coeffs = optim_math::adam_coeffs<T>(s, static_cast<double>(step));
    }
    __syncthreads();
    const optim_math::AdamCoeffs<T> c = shared_coeffs;
    const T inv = inv_scale_of<T>(scaling);
    T unused = T(0);
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        const T g = inv != T(1) ? optim_math::unscale_stored_grad<true>(t.grad[i], inv) : t.grad[i];
        t.param[i] = optim_math::adam_element<T, kAmsgrad>(c, t.param[i], g, T(1), t.exp_avg[i], t.exp_avg_sq[i],
                                                           kAmsgrad ? t.max_exp_avg_sq[i] : unused);
    }
}

// Adam's step counts (() f32 each), incremented after every update of the call has read them.
constexpr int kStepsPerLaunch = 128;
struct StepList {
    float* at[kStepsPerLaunch];
    int count;
};

__global__ void increment_steps_kernel(StepList steps, DeviceScaling scaling) {
    if (skip_step(scaling)) return;
    for (int i = threadIdx.x; i < steps.count; i += blockDim.x) *steps.at[i] += 1.0f;
}

// ---- launchers ----

void require_scalar_f32(const char* kernel, const char* what, const Tensor& t, int index) {
    if (!t.defined()) return;
    if (t.numel() != 1 || t.dtype() != kFloat32)
        throw DTypeError(fmt::format("cuda {}: {} must be a 1-element f32 tensor, got {}", kernel, what, t.describe()));
    require_on_device(kernel, index, {&t});
}

DeviceScaling device_scaling(const char* kernel, const StepScaling& s, int index) {
    require_scalar_f32(kernel, "inv_scale", s.inv_scale, index);
    require_scalar_f32(kernel, "found_inf", s.found_inf, index);
    return {s.inv_scale.defined() ? device_ptr<const float>(s.inv_scale) : nullptr,
            s.found_inf.defined() ? device_ptr<const float>(s.found_inf) : nullptr};
}

// Throws unless every list has one entry per parameter and each tensor is on the device,
// contiguous, of its parameter's size and of the call's dtype (f32 or f64).
void check_lists(const char* kernel, int index, const std::vector<Tensor>& params,
                 std::initializer_list<const std::vector<Tensor>*> lists) {
    if (params.empty()) return;
    DType dtype = params[0].dtype();
    if (dtype != kFloat32 && dtype != kFloat64) throw_bad_dtype(kernel, dtype, "f32 or f64");
    for (const std::vector<Tensor>* list : lists)
        AMPGRAD_CHECK(list->size() == params.size(), "cuda {}: {} parameters but a state list of {}", kernel,
                      params.size(), list->size());
    for (size_t i = 0; i < params.size(); ++i) {
        for (const std::vector<Tensor>* list : lists) {
            const Tensor& t = (*list)[i];
            require_on_device(kernel, index, {&t});
            AMPGRAD_CHECK(t.is_contiguous() && t.dtype() == dtype && t.numel() == params[i].numel(),
                          "cuda {}: parameter {} is {} but a tensor of its step is {} (contiguous, same size and "
                          "dtype expected)", kernel, i, params[i].describe(), t.describe());
        }
    }
}

}  // namespace

void sgd_step(const SgdTensors& t, const SgdScalars& s, const StepScaling& scaling) {
    if (t.params.empty()) return;
    const int index = t.params[0].device().index;
    const bool momentum = s.momentum != 0.0;
    if (momentum) check_lists("sgd_step", index, t.params, {&t.params, &t.grads, &t.momentum_buffers});
    else check_lists("sgd_step", index, t.params, {&t.params, &t.grads});
    DeviceGuard guard(index);
    const DeviceScaling ds = device_scaling("sgd_step", scaling, index);
    dispatch_float(t.params[0].dtype(), "sgd_step", [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
            const optim_math::SgdCoeffs<T> c = optim_math::sgd_coeffs<T>(s);
            for (size_t i = 0; i < t.params.size(); ++i) {
                const int64_t n = t.params[i].numel();
                if (n == 0) continue;
                T* buf = momentum ? device_ptr<T>(t.momentum_buffers[i]) : nullptr;
                auto kernel = momentum ? sgd_kernel<T, true> : sgd_kernel<T, false>;
                kernel<<<grid_for(n), kBlockSize, 0, current_stream()>>>(n, device_ptr<T>(t.params[i]),
                                                                         device_ptr<T>(t.grads[i]), buf, c, ds);
                CUDA_CHECK(cudaGetLastError());
            }
        }
    });
}

namespace {

// The step counts: on the parameters' device they are incremented in the kernels (no host read);
// on the host (cpu/optim.cpp's layout) only when no found_inf flag could veto the step, since
// honouring a device flag for a host count would need a synchronisation.
bool steps_on_device(const AdamTensors& t, const StepScaling& scaling, int index) {
    AMPGRAD_CHECK(t.steps.size() == t.params.size(), "cuda adam_step: {} parameters but {} step counts",
                  t.params.size(), t.steps.size());
    const bool on_device = t.steps[0].device().type == kCUDA;
    for (const Tensor& step : t.steps) {
        if (step.numel() != 1 || step.dtype() != kFloat32)
            throw DTypeError(fmt::format("cuda adam_step: a step count must be a 1-element f32 tensor, got {}",
                                         step.describe()));
        if (on_device) require_on_device("adam_step", index, {&step});
        else if (step.device().type != kCPU || scaling.found_inf.defined())
            throw DeviceError(fmt::format(
                "cuda adam_step: step count {} is not on cuda:{}; with a found_inf flag the counts must live on the "
                "parameters' device (as PyTorch's fused Adam keeps them) so that a skipped step needs no host read",
                step.describe(), index));
    }
    return on_device;
}

void increment_device_steps(const AdamTensors& t, const DeviceScaling& ds) {
    for (size_t first = 0; first < t.steps.size(); first += kStepsPerLaunch) {
        StepList list{};
        list.count = static_cast<int>(std::min<size_t>(kStepsPerLaunch, t.steps.size() - first));
        for (int k = 0; k < list.count; ++k) list.at[k] = device_ptr<float>(t.steps[first + k]);
        increment_steps_kernel<<<1, kStepsPerLaunch, 0, current_stream()>>>(list, ds);
        CUDA_CHECK(cudaGetLastError());
    }
}

}  // namespace

void adam_step(const AdamTensors& t, const AdamScalars& s, const StepScaling& scaling) {
    if (t.params.empty()) return;
    const int index = t.params[0].device().index;
    if (s.amsgrad) check_lists("adam_step", index, t.params,
                               {&t.params, &t.grads, &t.exp_avgs, &t.exp_avg_sqs, &t.max_exp_avg_sqs});
    else check_lists("adam_step", index, t.params, {&t.params, &t.grads, &t.exp_avgs, &t.exp_avg_sqs});
    const bool device_steps = steps_on_device(t, scaling, index);
    DeviceGuard guard(index);
    const DeviceScaling ds = device_scaling("adam_step", scaling, index);
    dispatch_float(t.params[0].dtype(), "adam_step", [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
            for (size_t i = 0; i < t.params.size(); ++i) {
                float step_on_host = 0.0f;
                if (!device_steps) step_on_host = (*t.steps[i].data_ptr<float>() += 1.0f);   // no flag: never skipped
                const int64_t n = t.params[i].numel();
                if (n == 0) continue;
                AdamPointers<T> p{device_ptr<T>(t.params[i]), device_ptr<T>(t.grads[i]),
                                  device_ptr<T>(t.exp_avgs[i]), device_ptr<T>(t.exp_avg_sqs[i]),
                                  s.amsgrad ? device_ptr<T>(t.max_exp_avg_sqs[i]) : nullptr};
                const float* step_ptr = device_steps ? device_ptr<const float>(t.steps[i]) : nullptr;
                auto kernel = s.amsgrad ? adam_kernel<T, true> : adam_kernel<T, false>;
                kernel<<<grid_for(n), kBlockSize, 0, current_stream()>>>(n, p, s, step_ptr, step_on_host, ds);
                CUDA_CHECK(cudaGetLastError());
            }
        }
    });
    if (device_steps) increment_device_steps(t, ds);
}

AMPGRAD_REGISTER_KERNEL(kernels::sgd_step, kCUDA, sgd_step);
AMPGRAD_REGISTER_KERNEL(kernels::adam_step, kCUDA, adam_step);

}  // namespace ampgrad::cuda

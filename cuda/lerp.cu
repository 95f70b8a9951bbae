// lerp.cu: out = lerp(a, b, w), the GPU twin of cpu/lerp.cpp, with w a tensor or a scalar kept in
// the compute type. The formula is kernels/scalar_math.hpp's Lerp; each thread loads to
// device_compute_t<T> (fp32 for f16/bf16) and rounds once on store.
#include "kernels/scalar_math.hpp"
#include "cuda/loops.cuh"

namespace ampgrad::cuda {

namespace {

template <typename T>
__global__ void lerp_tensor_kernel(int64_t n, OffsetCalc<4> calc, T* out, const T* a, const T* b, const T* w) {
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        Offsets<4> o = calc.get(i);
        out[o.at[0]] = store_compute<T>(
            formulas::Lerp::value(load_compute(a[o.at[1]]), load_compute(b[o.at[2]]), load_compute(w[o.at[3]])));
    }
}

template <typename T>
__global__ void lerp_scalar_kernel(int64_t n, OffsetCalc<3> calc, T* out, const T* a, const T* b,
                                   device_compute_t<T> w) {
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        Offsets<3> o = calc.get(i);
        out[o.at[0]] = store_compute<T>(formulas::Lerp::value(load_compute(a[o.at[1]]), load_compute(b[o.at[2]]), w));
    }
}

}  // namespace

void lerp(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& weight, double weight_scalar) {
    const int index = out.device().index;
    require_on_device("lerp", index, {&out, &a, &b, &weight});
    int64_t n = out.numel();
    if (n == 0) return;
    AMPGRAD_CHECK(a.dtype() == out.dtype() && b.dtype() == out.dtype() &&
                      (!weight.defined() || weight.dtype() == out.dtype()),
                  "lerp: operand dtypes differ (out {}, a {}, b {})", out.describe(), a.describe(), b.describe());
    DeviceGuard guard(index);
    dispatch_float(out.dtype(), "lerp", [&](auto tag) {
        using T = decltype(tag);
        if (weight.defined()) {
            OffsetCalc<4> calc = make_offset_calc<4>({&out, &a, &b, &weight});
            lerp_tensor_kernel<T><<<grid_for(n), kBlockSize, 0, current_stream()>>>(
                n, calc, device_ptr<T>(out), device_ptr<const T>(a), device_ptr<const T>(b), device_ptr<const T>(weight));
        } else {
            OffsetCalc<3> calc = make_offset_calc<3>({&out, &a, &b});
            lerp_scalar_kernel<T><<<grid_for(n), kBlockSize, 0, current_stream()>>>(
                n, calc, device_ptr<T>(out), device_ptr<const T>(a), device_ptr<const T>(b),
                static_cast<device_compute_t<T>>(weight_scalar));
        }
        CUDA_CHECK(cudaGetLastError());
    });
}

AMPGRAD_REGISTER_KERNEL(kernels::lerp, kCUDA, lerp);

}  // namespace ampgrad::cuda

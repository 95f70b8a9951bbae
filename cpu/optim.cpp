// optim.cpp: the CPU's optimizer steps (kernels::sgd_step, kernels::adam_step in
// kernels/fused_kernels.hpp): one-pass multi-tensor updates for SGD and Adam/AdamW on contiguous
// f32/f64 tensors, which unscale each gradient as they read it and skip the whole step when the
// GradScaler's found_inf flag is set (StepScaling). Each follows PyTorch's
// single-tensor formulas operation by operation, in the parameter's dtype with the scalars rounded
// to it, so an f32 step agrees with torch to within a rounding or two. Plain pointer loops split
// across OpenMP threads: no autograd, no temporaries. The file is built with -fno-math-errno
// (meson.build) so that sqrt vectorizes. The generic path (any device, any float dtype) is built
// from tensor ops in optim/sgd.cpp and optim/adam.cpp.
#include <type_traits>

#include "kernels/fused_kernels.hpp"
#include "kernels/optim_math.hpp"
#include "cpu/loops.hpp"

namespace ampgrad::cpu {

namespace {

// The per-element formulas are kernels/optim_math.hpp's (shared with cuda/optim.cu); they are
// branch-free, so these loops vectorize after inlining.

template <typename T, bool kMomentum>
void sgd_loop(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdScalars& s,
              T inv_scale) {
    T* p = param.data_ptr<T>();
    T* g_in = grad.data_ptr<T>();                    // unscaled in place (optim_math::unscale_stored_grad)
    T* buf = kMomentum ? momentum_buffer.data_ptr<T>() : nullptr;
    const optim_math::SgdCoeffs<T> c = optim_math::sgd_coeffs<T>(s);
    auto update = [=](int64_t begin, int64_t end, auto store) {
        T unused = T(0);
        for (int64_t i = begin; i < end; ++i) {
            const T g = optim_math::unscale_stored_grad<decltype(store)::value>(g_in[i], inv_scale);
            p[i] = optim_math::sgd_element<T, kMomentum>(c, p[i], g, T(1), kMomentum ? buf[i] : unused);
        }
    };
    parallel_for(param.numel(), kGrainSize, [=](int64_t begin, int64_t end) {
        if (inv_scale == T(1)) update(begin, end, std::false_type{});
        else update(begin, end, std::true_type{});
    });
}

template <typename T, bool kAmsgrad>
void adam_loop(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
               const Tensor& max_exp_avg_sq, const AdamScalars& s, double step, T inv_scale) {
    T* p = param.data_ptr<T>();
    T* g_in = grad.data_ptr<T>();                    // unscaled in place (optim_math::unscale_stored_grad)
    T* m = exp_avg.data_ptr<T>();
    T* v = exp_avg_sq.data_ptr<T>();
    T* v_max = kAmsgrad ? max_exp_avg_sq.data_ptr<T>() : nullptr;
    const optim_math::AdamCoeffs<T> c = optim_math::adam_coeffs<T>(s, step);
    auto update = [=](int64_t begin, int64_t end, auto store) {
        T unused = T(0);
        for (int64_t i = begin; i < end; ++i) {
            const T g = optim_math::unscale_stored_grad<decltype(store)::value>(g_in[i], inv_scale);
            p[i] = optim_math::adam_element<T, kAmsgrad>(c, p[i], g, T(1), m[i], v[i], kAmsgrad ? v_max[i] : unused);
        }
    };
    parallel_for(param.numel(), kGrainSize, [=](int64_t begin, int64_t end) {
        if (inv_scale == T(1)) update(begin, end, std::false_type{});
        else update(begin, end, std::true_type{});
    });
}

// The scaling's two flags as the loops use them: skip (found_inf nonzero) and the inverse scale.
struct ReadScaling {
    bool skip;
    double inv_scale;
};

ReadScaling read_scaling(const StepScaling& scaling) {
    auto value = [](const Tensor& t, double absent) {
        return t.defined() ? static_cast<double>(*t.data_ptr<float>()) : absent;   // () f32 on the CPU
    };
    return {value(scaling.found_inf, 0.0) != 0.0, value(scaling.inv_scale, 1.0)};
}

}  // namespace

void sgd_step(const SgdTensors& t, const SgdScalars& s, const StepScaling& scaling) {
    const ReadScaling r = read_scaling(scaling);
    if (r.skip) return;
    const bool momentum = s.momentum != 0.0;
    for (size_t i = 0; i < t.params.size(); ++i) {
        const Tensor& buf = momentum ? t.momentum_buffers[i] : Tensor();
        const bool f64 = t.params[i].dtype() == kFloat64;
        if (f64 && momentum) sgd_loop<double, true>(t.params[i], t.grads[i], buf, s, r.inv_scale);
        else if (f64) sgd_loop<double, false>(t.params[i], t.grads[i], buf, s, r.inv_scale);
        else if (momentum) sgd_loop<float, true>(t.params[i], t.grads[i], buf, s, static_cast<float>(r.inv_scale));
        else sgd_loop<float, false>(t.params[i], t.grads[i], buf, s, static_cast<float>(r.inv_scale));
    }
}

void adam_step(const AdamTensors& t, const AdamScalars& s, const StepScaling& scaling) {
    const ReadScaling r = read_scaling(scaling);
    if (r.skip) return;                                    // moments and step counts untouched
    for (size_t i = 0; i < t.params.size(); ++i) {
        float& step = *t.steps[i].data_ptr<float>();
        step += 1.0f;
        const Tensor& v_max = s.amsgrad ? t.max_exp_avg_sqs[i] : Tensor();
        const Tensor &p = t.params[i], &g = t.grads[i], &m = t.exp_avgs[i], &v = t.exp_avg_sqs[i];
        const float inv_f = static_cast<float>(r.inv_scale);
        const bool f64 = p.dtype() == kFloat64;
        if (f64 && s.amsgrad) adam_loop<double, true>(p, g, m, v, v_max, s, step, r.inv_scale);
        else if (f64) adam_loop<double, false>(p, g, m, v, v_max, s, step, r.inv_scale);
        else if (s.amsgrad) adam_loop<float, true>(p, g, m, v, v_max, s, step, inv_f);
        else adam_loop<float, false>(p, g, m, v, v_max, s, step, inv_f);
    }
}

AMPGRAD_REGISTER_KERNEL(kernels::sgd_step, kCPU, sgd_step);
AMPGRAD_REGISTER_KERNEL(kernels::adam_step, kCPU, adam_step);

}  // namespace ampgrad::cpu

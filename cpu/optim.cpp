// optim.cpp: the CPU's optimizer steps (kernels::sgd_step, kernels::adam_step in
// core/fused_kernels.hpp): one-pass multi-tensor updates for SGD and Adam/AdamW on contiguous
// f32/f64 tensors, which unscale each gradient as they read it and skip the whole step when the
// GradScaler's found_inf flag is set (StepScaling). Each follows PyTorch's
// single-tensor formulas operation by operation, in the parameter's dtype with the scalars rounded
// to it, so an f32 step agrees with torch to within a rounding or two. Plain pointer loops split
// across OpenMP threads: no autograd, no temporaries. The file is built with -fno-math-errno
// (meson.build) so that sqrt vectorizes. The generic path (any device, any float dtype) is built
// from tensor ops in optim/sgd.cpp and optim/adam.cpp.
#include <algorithm>
#include <cmath>

#include "core/fused_kernels.hpp"
#include "cpu/loops.hpp"

namespace ampgrad::cpu {

namespace {

// The loops below are branch-free so that they vectorize: flags become factors that are exact
// (x * 1, x * -1, x + 0 * p), and amsgrad / momentum are template parameters.

// The gradient as the formulas see it: grad * inv_scale, rounded to T (what GradScaler's unscale_
// would have stored), times -1 when maximizing. inv_scale 1 leaves it exact.
template <typename T>
T read_grad(T sign, T grad, T inv_scale) { return sign * (grad * inv_scale); }

template <typename T, bool kMomentum>
void sgd_loop(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdScalars& s,
              T inv_scale) {
    T* p = param.data_ptr<T>();
    const T* g_in = grad.data_ptr<T>();
    T* buf = kMomentum ? momentum_buffer.data_ptr<T>() : nullptr;
    const T sign = s.maximize ? T(-1) : T(1), neg_lr = static_cast<T>(-s.lr), wd = static_cast<T>(s.weight_decay);
    const T momentum = static_cast<T>(s.momentum), keep = static_cast<T>(1.0 - s.dampening);
    const bool first = s.first_step, nesterov = s.nesterov;
    parallel_for(param.numel(), kGrainSize, [=](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
            T g = read_grad(sign, g_in[i], inv_scale) + wd * p[i];       // grad.add(param, alpha=wd)
            if constexpr (kMomentum) {
                buf[i] = first ? g : buf[i] * momentum + keep * g;        // buf.mul_(m).add_(g, alpha=1-damp)
                g = nesterov ? g + momentum * buf[i] : buf[i];
            }
            p[i] = p[i] + neg_lr * g;                                     // param.add_(g, alpha=-lr)
        }
    });
}

template <typename T, bool kAmsgrad>
void adam_loop(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
               const Tensor& max_exp_avg_sq, const AdamScalars& s, double step, T inv_scale) {
    T* p = param.data_ptr<T>();
    const T* g_in = grad.data_ptr<T>();
    T* m = exp_avg.data_ptr<T>();
    T* v = exp_avg_sq.data_ptr<T>();
    T* v_max = kAmsgrad ? max_exp_avg_sq.data_ptr<T>() : nullptr;
    const double bias_correction1 = 1.0 - std::pow(s.beta1, step);
    const double bias_correction2 = 1.0 - std::pow(s.beta2, step);
    const T neg_step_size = static_cast<T>(-(s.lr / bias_correction1));
    const T bc2_sqrt = static_cast<T>(std::sqrt(bias_correction2)), eps = static_cast<T>(s.eps);
    const bool decoupled = s.decoupled_weight_decay;
    const T l2 = decoupled ? T(0) : static_cast<T>(s.weight_decay);                  // Adam
    const T decay = decoupled ? static_cast<T>(1.0 - s.lr * s.weight_decay) : T(1);  // AdamW
    const T sign = s.maximize ? T(-1) : T(1);
    const T w1 = static_cast<T>(1.0 - s.beta1), beta2 = static_cast<T>(s.beta2), w2 = static_cast<T>(1.0 - s.beta2);
    parallel_for(param.numel(), kGrainSize, [=](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
            T g = read_grad(sign, g_in[i], inv_scale) + l2 * p[i];       // Adam: grad.add(param, alpha=wd)
            T p_i = p[i] * decay;                                         // AdamW: param.mul_(1 - lr*wd)
            m[i] = m[i] + w1 * (g - m[i]);                                // exp_avg.lerp_(g, 1-beta1)
            v[i] = v[i] * beta2 + w2 * g * g;                             // mul_(beta2).addcmul_(g, g, 1-beta2)
            T second = v[i];
            if constexpr (kAmsgrad) second = v_max[i] = std::max(v_max[i], v[i]);
            T denom = std::sqrt(second) / bc2_sqrt + eps;
            p[i] = p_i + neg_step_size * m[i] / denom;                    // addcdiv_(m, denom, -step_size)
        }
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

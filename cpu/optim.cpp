// optim.cpp: the CPU's optimizer steps (kernels::sgd_step, kernels::adam_step in core/kernels.hpp):
// one-pass updates for SGD and Adam/AdamW on contiguous f32/f64 tensors. Each follows PyTorch's
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

template <typename T, bool kMomentum>
void sgd_loop(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdScalars& s) {
    T* p = param.data_ptr<T>();
    const T* g_in = grad.data_ptr<T>();
    T* buf = kMomentum ? momentum_buffer.data_ptr<T>() : nullptr;
    const T sign = s.maximize ? T(-1) : T(1), neg_lr = static_cast<T>(-s.lr), wd = static_cast<T>(s.weight_decay);
    const T momentum = static_cast<T>(s.momentum), keep = static_cast<T>(1.0 - s.dampening);
    const bool first = s.first_step, nesterov = s.nesterov;
    parallel_for(param.numel(), kGrainSize, [=](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
            T g = sign * g_in[i] + wd * p[i];                             // grad.add(param, alpha=wd)
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
               const Tensor& max_exp_avg_sq, const AdamScalars& s) {
    T* p = param.data_ptr<T>();
    const T* g_in = grad.data_ptr<T>();
    T* m = exp_avg.data_ptr<T>();
    T* v = exp_avg_sq.data_ptr<T>();
    T* v_max = kAmsgrad ? max_exp_avg_sq.data_ptr<T>() : nullptr;
    const double bias_correction1 = 1.0 - std::pow(s.beta1, s.step);
    const double bias_correction2 = 1.0 - std::pow(s.beta2, s.step);
    const T neg_step_size = static_cast<T>(-(s.lr / bias_correction1));
    const T bc2_sqrt = static_cast<T>(std::sqrt(bias_correction2)), eps = static_cast<T>(s.eps);
    const bool decoupled = s.decoupled_weight_decay;
    const T l2 = decoupled ? T(0) : static_cast<T>(s.weight_decay);                  // Adam
    const T decay = decoupled ? static_cast<T>(1.0 - s.lr * s.weight_decay) : T(1);  // AdamW
    const T sign = s.maximize ? T(-1) : T(1);
    const T w1 = static_cast<T>(1.0 - s.beta1), beta2 = static_cast<T>(s.beta2), w2 = static_cast<T>(1.0 - s.beta2);
    parallel_for(param.numel(), kGrainSize, [=](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
            T g = sign * g_in[i] + l2 * p[i];                             // Adam: grad.add(param, alpha=wd)
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

}  // namespace

void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdScalars& s) {
    bool f64 = param.dtype() == kFloat64, momentum = s.momentum != 0.0;
    if (f64 && momentum) sgd_loop<double, true>(param, grad, momentum_buffer, s);
    else if (f64) sgd_loop<double, false>(param, grad, momentum_buffer, s);
    else if (momentum) sgd_loop<float, true>(param, grad, momentum_buffer, s);
    else sgd_loop<float, false>(param, grad, momentum_buffer, s);
}

void adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
               const Tensor& max_exp_avg_sq, const AdamScalars& s) {
    bool f64 = param.dtype() == kFloat64;
    if (f64 && s.amsgrad) adam_loop<double, true>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, s);
    else if (f64) adam_loop<double, false>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, s);
    else if (s.amsgrad) adam_loop<float, true>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, s);
    else adam_loop<float, false>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, s);
}

AMPGRAD_REGISTER_KERNEL(kernels::sgd_step, kCPU, sgd_step);
AMPGRAD_REGISTER_KERNEL(kernels::adam_step, kCPU, adam_step);

}  // namespace ampgrad::cpu

// optim_math.hpp: the one definition of the per-element SGD and Adam/AdamW updates of the fused
// optimizer steps (kernels::sgd_step / kernels::adam_step, kernels/fused_kernels.hpp). The CPU loops
// (cpu/optim.cpp) and the CUDA kernels (cuda/optim.cu) both call these, so the two backends run
// the same operations in the same order: PyTorch's single-tensor formulas (torch/optim/sgd.py,
// torch/optim/adam.py), operation by operation, in the parameter's dtype T (f32 or f64) with the
// scalars rounded to T.
//
// Branch-free where the CPU needs it to vectorize: flags become exact factors (x * 1, x * -1,
// x + 0 * p); momentum and amsgrad are template parameters.
#pragma once
#include "kernels/fused_kernels.hpp"
#include "kernels/scalar_math.hpp"

namespace ampgrad::optim_math {

// The gradient as the formulas see it: grad * inv_scale, rounded to T (what GradScaler's unscale_
// would have stored), times -1 when maximizing (sign). inv_scale 1 leaves it exact.
template <typename T>
AMPGRAD_HOST_DEVICE inline T read_grad(T sign, T grad, T inv_scale) { return sign * (grad * inv_scale); }

// The gradient unscaled and stored back, as PyTorch's fused Adam/SGD leave .grad after a GradScaler
// step (so .grad holds what unscale_ would have stored): grad * inv_scale rounded to T. Returns it;
// the formulas then read it with inv_scale 1, which gives the same value read_grad would have.
// kStore is false for inv_scale 1 (no loss scale): nothing is written. A compile-time flag, so the
// CPU loops pick their variant once and stay branch-free (a store under a per-element branch stops
// them vectorizing).
template <bool kStore, typename T>
AMPGRAD_HOST_DEVICE inline T unscale_stored_grad(T& grad, T inv_scale) {
    if constexpr (kStore) grad = grad * inv_scale;
    return grad;
}

// ---- SGD ----

// SgdScalars rounded to T once per step.
template <typename T>
struct SgdCoeffs {
    T sign, neg_lr, weight_decay, momentum, keep;   // keep = 1 - dampening
    bool first, nesterov;
};

template <typename T>
AMPGRAD_HOST_DEVICE inline SgdCoeffs<T> sgd_coeffs(const SgdScalars& s) {
    return {s.maximize ? T(-1) : T(1),      static_cast<T>(-s.lr),          static_cast<T>(s.weight_decay),
            static_cast<T>(s.momentum),     static_cast<T>(1.0 - s.dampening), s.first_step, s.nesterov};
}

// One element: returns the new parameter; updates the momentum buffer `buf` when kMomentum
// (ignored otherwise). grad is the stored (possibly loss-scaled) gradient.
template <typename T, bool kMomentum>
AMPGRAD_HOST_DEVICE inline T sgd_element(const SgdCoeffs<T>& c, T param, T grad, T inv_scale, T& buf) {
    T g = read_grad(c.sign, grad, inv_scale) + c.weight_decay * param;      // grad.add(param, alpha=wd)
    if constexpr (kMomentum) {
        buf = c.first ? g : buf * c.momentum + c.keep * g;                    // buf.mul_(m).add_(g, alpha=1-damp)
        g = c.nesterov ? g + c.momentum * buf : buf;
    }
    return param + c.neg_lr * g;                                              // param.add_(g, alpha=-lr)
}

// ---- Adam / AdamW ----

// AdamScalars and the bias corrections of `step` (the count after this step's increment), rounded
// to T once per parameter. The bias corrections are taken in double, as PyTorch takes them.
template <typename T>
struct AdamCoeffs {
    T sign, l2, decay, w1, beta2, w2, neg_step_size, bc2_sqrt, eps;
};

template <typename T>
AMPGRAD_HOST_DEVICE inline AdamCoeffs<T> adam_coeffs(const AdamScalars& s, double step) {
    const double bias_correction1 = 1.0 - math::pow(s.beta1, step);
    const double bias_correction2 = 1.0 - math::pow(s.beta2, step);
    const bool decoupled = s.decoupled_weight_decay;
    AdamCoeffs<T> c;
    c.sign = s.maximize ? T(-1) : T(1);
    c.l2 = decoupled ? T(0) : static_cast<T>(s.weight_decay);                  // Adam
    c.decay = decoupled ? static_cast<T>(1.0 - s.lr * s.weight_decay) : T(1);  // AdamW
    c.w1 = static_cast<T>(1.0 - s.beta1);
    c.beta2 = static_cast<T>(s.beta2);
    c.w2 = static_cast<T>(1.0 - s.beta2);
    c.neg_step_size = static_cast<T>(-(s.lr / bias_correction1));
    c.bc2_sqrt = static_cast<T>(math::sqrt(bias_correction2));
    c.eps = static_cast<T>(s.eps);
    return c;
}

// One element: returns the new parameter and updates the moments m, v (and v_max when kAmsgrad;
// ignored otherwise). grad is the stored (possibly loss-scaled) gradient.
template <typename T, bool kAmsgrad>
AMPGRAD_HOST_DEVICE inline T adam_element(const AdamCoeffs<T>& c, T param, T grad, T inv_scale, T& m, T& v,
                                          T& v_max) {
    T g = read_grad(c.sign, grad, inv_scale) + c.l2 * param;   // Adam: grad.add(param, alpha=wd)
    T p = param * c.decay;                                     // AdamW: param.mul_(1 - lr*wd)
    m = m + c.w1 * (g - m);                                    // exp_avg.lerp_(g, 1-beta1)
    v = v * c.beta2 + c.w2 * g * g;                            // mul_(beta2).addcmul_(g, g, 1-beta2)
    T second = v;
    if constexpr (kAmsgrad) second = v_max = (v_max < v ? v : v_max);   // torch.maximum (std::max's order)
    T denom = math::sqrt(second) / c.bc2_sqrt + c.eps;
    return p + c.neg_step_size * m / denom;                    // addcdiv_(m, denom, -step_size)
}

}  // namespace ampgrad::optim_math

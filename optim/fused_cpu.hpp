// fused_cpu.hpp: one-pass CPU updates for SGD and Adam/AdamW on contiguous f32/f64 tensors.
// Each follows PyTorch's single-tensor formulas operation by operation, in the parameter's dtype
// with the scalars rounded to it, so an f32 step agrees with torch to within a rounding or two.
// Plain pointer loops split across OpenMP threads: no autograd, no temporaries. The file is built
// with -fno-math-errno (meson.build) so that sqrt vectorizes.
// The generic path (any device, any float dtype) is built from tensor ops in sgd.cpp / adam.cpp.
#pragma once
#include <initializer_list>

#include "core/tensor.hpp"

namespace ampgrad::optim {

// True if every defined tensor is on the CPU, contiguous, and of one dtype, f32 or f64.
bool fused_cpu_supported(std::initializer_list<const Tensor*> tensors);

struct SgdScalars {
    double lr, momentum, dampening, weight_decay;
    bool nesterov, maximize;
    bool first_step;      // the momentum buffer is initialised to the gradient (PyTorch's rule)
};
// param -= lr * update; momentum_buffer is undefined when momentum == 0.
void sgd_step_cpu(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdScalars& s);

struct AdamScalars {
    double lr, beta1, beta2, eps, weight_decay;
    bool amsgrad, maximize, decoupled_weight_decay;
    double step;          // this step's count, already incremented (1 on the first step)
};
// max_exp_avg_sq is undefined unless amsgrad.
void adam_step_cpu(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                   const Tensor& max_exp_avg_sq, const AdamScalars& s);

}  // namespace ampgrad::optim

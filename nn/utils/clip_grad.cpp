// clip_grad.cpp: see clip_grad.hpp. As in PyTorch, each tensor's norm is reduced on its device
// (reduced floats are read as f32 first, so f16 squares cannot overflow), then the per-tensor norms
// are combined. On the CPU they are combined on the host in double. On a GPU everything stays on
// the device, as in PyTorch: the norms are stacked and normed there, and the clip coefficient is
// clamped to 1 there, so clipping queues work and never makes the host wait (docs/amp.md).
#include "nn/utils/clip_grad.hpp"

#include <algorithm>
#include <cmath>

#include "autograd/grad_mode.hpp"
#include "autograd/ops/op_utils.hpp"
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"

namespace ampgrad::nn::utils {

namespace {

// ||t||_p^p (or ||t||_inf for p = inf) as a host double.
double norm_power(const Tensor& t, double p) {
    Tensor x = is_reduced_float(t.dtype()) ? ops::cast_raw(t, kFloat32) : t;   // (*)
    if (x.numel() == 0) return 0.0;
    if (std::isinf(p)) return abs(x).max().item_double();
    if (p == 2.0) {                                        // the common case: one pass, no temporary
        double n = norm(x).item_double();
        return n * n;
    }
    if (p == 1.0) return abs(x).sum().item_double();
    return pow(abs(x), p).sum().item_double();
}

// The total norm on the gradients' device: the norm of the per-tensor norms (f32, or f64 for f64).
Tensor device_total_norm(const std::vector<Tensor>& tensors, double norm_type) {
    const DType compute = std::any_of(tensors.begin(), tensors.end(), [](const Tensor& t) { return t.dtype() == kFloat64; })
                              ? kFloat64 : kFloat32;
    tensor_list parts;
    for (const Tensor& t : tensors) {
        Tensor x = is_reduced_float(t.dtype()) ? ops::cast_raw(t, kFloat32) : t;   // (*)
        parts.push_back(x.numel() == 0 ? zeros({}, TensorOptions(compute).device(t.device()))
                                       : to_dtype(norm(x, norm_type), compute));   // ()
    }
    return norm(stack(parts), norm_type);                                            // ()
}

std::vector<Tensor> grads_of(const std::vector<Tensor>& params) {
    std::vector<Tensor> grads;
    for (const Tensor& p : params)
        if (p.defined() && p.grad().defined()) grads.push_back(p.grad());
    return grads;
}

[[noreturn]] void throw_nonfinite(double norm_type) {
    throw ValueError(fmt::format("clip_grad_norm_: The total norm of order {} for gradients from `parameters` is "
                                 "non-finite, so it cannot be clipped. To disable this error and scale the gradients "
                                 "by the non-finite norm anyway, set `error_if_nonfinite=False`", norm_type));
}

}  // namespace

Tensor get_total_norm(const std::vector<Tensor>& tensors, double norm_type, bool error_if_nonfinite,
                      std::optional<DType> result_dtype) {
    if (!(norm_type > 0.0))
        throw ValueError(fmt::format("clip_grad_norm_: norm_type must be positive or inf, got {}", norm_type));
    if (tensors.empty()) return zeros({}, result_dtype.value_or(kFloat32));
    NoGradGuard no_grad;
    DType dtype = tensors[0].dtype();
    for (const Tensor& t : tensors) dtype = promote_types(dtype, t.dtype());
    if (result_dtype) dtype = *result_dtype;
    if (!tensors[0].device().is_cpu()) {
        Tensor total = device_total_norm(tensors, norm_type);
        if (error_if_nonfinite && !std::isfinite(total.item_double()))                 // HOST SYNC, asked for
            throw_nonfinite(norm_type);
        return to_dtype(total, dtype);
    }
    bool inf_norm = std::isinf(norm_type);
    double total = 0.0;
    for (const Tensor& t : tensors) {
        double part = norm_power(t, norm_type);
        total = inf_norm ? (std::isnan(part) || std::isnan(total) ? NAN : std::max(total, part)) : total + part;
    }
    if (!inf_norm) total = std::pow(total, 1.0 / norm_type);
    if (error_if_nonfinite && !std::isfinite(total)) throw_nonfinite(norm_type);
    return full({}, total, TensorOptions(dtype).device(tensors[0].device()));
}

void clip_grads_with_norm_(const std::vector<Tensor>& params, double max_norm, const Tensor& total_norm) {
    if (!total_norm.device().is_cpu()) {                   // on the device: clamp(max / (norm + eps), max=1)
        NoGradGuard no_grad;
        Tensor coef = clamp(max_norm / (to_dtype(total_norm, kFloat32) + 1e-6), std::nullopt, 1.0);   // ()
        for (Tensor g : grads_of(params)) g.mul_(to_dtype(coef, g.dtype()));
        return;
    }
    double coef = max_norm / (total_norm.item_double() + 1e-6);
    if (coef < 1.0 || std::isnan(coef)) {                  // multiplying by exactly 1 would change nothing
        NoGradGuard no_grad;
        for (Tensor g : grads_of(params)) g.mul_(coef);
    }
}

Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type, bool error_if_nonfinite) {
    std::vector<Tensor> grads = grads_of(params);
    Tensor total = get_total_norm(grads, norm_type, error_if_nonfinite);
    if (!grads.empty()) clip_grads_with_norm_(params, max_norm, total);
    return total;
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm, double norm_type, bool error_if_nonfinite) {
    return clip_grad_norm_(params, max_norm, norm_type, error_if_nonfinite).item_double();
}

}  // namespace ampgrad::nn::utils

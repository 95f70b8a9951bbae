// clip_grad.hpp: gradient clipping by total norm, as torch.nn.utils.clip_grad_norm_.
// The total norm is the norm of all gradients seen as one vector:
//
//   total = (sum_i ||g_i||_p^p)^(1/p)     (max_i ||g_i||_inf for norm_type = inf)
//   clip_coef = min(max_norm / (total + 1e-6), 1);   every g_i *= clip_coef
//
//   Tensor norm = nn::utils::clip_grad_norm_(model->parameters(), 1.0);   // () before clipping
#pragma once
#include <limits>
#include <optional>
#include <vector>

#include "core/tensor.hpp"

namespace ampgrad::nn::utils {

inline constexpr double kInfNorm = std::numeric_limits<double>::infinity();

// The total norm of the given tensors (not their grads), a 0-dim tensor on the first tensor's
// device in their promoted dtype, or in `result_dtype` when given (kFloat32 for f16 tensors whose
// norm may pass f16's range: it is always formed in f32 or wider); 0-dim zero (f32 unless
// result_dtype) when the list is empty. norm_type > 0 or inf.
// error_if_nonfinite: ValueError with PyTorch's message if the norm is nan or inf.
Tensor get_total_norm(const std::vector<Tensor>& tensors, double norm_type = 2.0, bool error_if_nonfinite = false,
                      std::optional<DType> result_dtype = std::nullopt);
// Scales the grads of `params` in place by min(max_norm / (total_norm + 1e-6), 1).
void clip_grads_with_norm_(const std::vector<Tensor>& params, double max_norm, const Tensor& total_norm);
// Both steps; returns the total norm of the gradients before clipping (parameters without a grad
// are skipped).
Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);
// The same, returning the norm as a double (one device-to-host read).
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0,
                      bool error_if_nonfinite = false);

}  // namespace ampgrad::nn::utils

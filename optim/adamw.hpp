// adamw.hpp: AdamW (Loshchilov & Hutter), PyTorch's torch.optim.AdamW: Adam whose weight decay is
// decoupled from the gradient (p *= 1 - lr * weight_decay before the Adam update), with
// weight_decay defaulting to 0.01.
//
//   optim::AdamW opt(model->parameters(), optim::AdamWOptions(6e-4).betas({0.9, 0.95}).weight_decay(0.1));
#pragma once
#include <type_traits>

#include "optim/adam.hpp"

namespace ampgrad::optim {

// AdamOptions with AdamW's defaults (weight_decay 0.01, decoupled). Its setters return AdamOptions&.
struct AdamWOptions : AdamOptions {
    AdamWOptions(double lr = 1e-3) : AdamOptions(lr) { weight_decay(1e-2); }   // NOLINT
};

class AdamW : public Adam {
public:
    // decoupled_weight_decay is forced on, whatever `options` says.
    AdamW(std::vector<Tensor> params, const AdamOptions& options = AdamWOptions());
    AdamW(std::vector<ParamGroup> groups, const AdamOptions& defaults = AdamWOptions());
    // AdamW(params, lr): AdamWOptions(lr), so weight_decay keeps AdamW's default 1e-2 (a bare double
    // would otherwise become AdamOptions(lr), whose weight_decay is 0). A template, so that a braced
    // `{}` still means default options, not lr 0.
    template <typename L> requires std::is_arithmetic_v<L>
    AdamW(std::vector<Tensor> params, L lr) : AdamW(std::move(params), AdamWOptions(static_cast<double>(lr))) {}
    template <typename L> requires std::is_arithmetic_v<L>
    AdamW(std::vector<ParamGroup> groups, L lr) : AdamW(std::move(groups), AdamWOptions(static_cast<double>(lr))) {}
};

}  // namespace ampgrad::optim

// adamw.cpp: AdamW is Adam with decoupled_weight_decay on (see adam.cpp for the update).
#include "optim/adamw.hpp"

namespace ampgrad::optim {

namespace {
AdamOptions decoupled(AdamOptions options) { return options.decoupled_weight_decay(true); }
}  // namespace

AdamW::AdamW(std::vector<Tensor> params, const AdamOptions& options)
    : AdamW(single_group(std::move(params)), options) {}

AdamW::AdamW(std::vector<ParamGroup> groups, const AdamOptions& defaults)
    : Adam(std::move(groups), decoupled(defaults), "AdamW") {
    for (ParamGroup& g : groups_) g.options["decoupled_weight_decay"] = 1.0;   // even if a group said otherwise
}

}  // namespace ampgrad::optim

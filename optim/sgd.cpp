// sgd.cpp: SGD's step. f32/f64 parameters take the fused kernel (kernels::sgd_step) where their device has one; any
// other parameter runs the same formulas as in-place tensor ops, written like torch's
// _single_tensor_sgd.
#include "optim/sgd.hpp"

#include "autograd/grad_mode.hpp"
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"
#include "optim/fused_step.hpp"

namespace ampgrad::optim {

std::map<std::string, double> SGDOptions::to_map() const {
    return {{"lr", lr_}, {"momentum", momentum_}, {"dampening", dampening_}, {"weight_decay", weight_decay_},
            {"nesterov", nesterov_ ? 1.0 : 0.0}, {"maximize", maximize_ ? 1.0 : 0.0}, {"fused", fused_ ? 1.0 : 0.0}};
}

SGD::SGD(std::vector<Tensor> params, const SGDOptions& options) : SGD(single_group(std::move(params)), options) {}

SGD::SGD(std::vector<ParamGroup> groups, const SGDOptions& defaults)
    : Optimizer(std::move(groups), defaults.to_map(), "SGD") {
    for (const ParamGroup& g : groups_) validate_group(g);
}

void SGD::validate_group(const ParamGroup& g) const {
    if (g.option("lr") < 0) throw ValueError(fmt::format("SGD: Invalid learning rate: {}", g.option("lr")));
    if (g.option("momentum") < 0) throw ValueError(fmt::format("SGD: Invalid momentum value: {}", g.option("momentum")));
    if (g.option("weight_decay") < 0)
        throw ValueError(fmt::format("SGD: Invalid weight_decay value: {}", g.option("weight_decay")));
    if (g.option("nesterov") != 0 && (g.option("momentum") <= 0 || g.option("dampening") != 0))
        throw ValueError(fmt::format("SGD: Nesterov momentum requires a momentum and zero dampening (momentum={}, "
                                     "dampening={})", g.option("momentum"), g.option("dampening")));
}

namespace {

// The tensor-op form of one parameter's update (any device, any floating dtype).
void sgd_step_tensor(Tensor& p, const Tensor& grad, Tensor& buf, const SgdScalars& s) {
    Tensor g = s.maximize ? -grad : grad;
    if (s.weight_decay != 0.0) g = add(g, p, s.weight_decay);
    if (s.momentum != 0.0) {
        if (s.first_step) copy_(buf, g);
        else buf.mul_(s.momentum).add_(g, 1.0 - s.dampening);
        g = s.nesterov ? add(g, buf, s.momentum) : buf;
    }
    p.add_(g, -s.lr);
}

}  // namespace

void SGD::step() {
    NoGradGuard no_grad;
    for (ParamGroup& group : groups_) {
        SgdScalars s{.lr = group.option("lr"), .momentum = group.option("momentum"),
                     .dampening = group.option("dampening"), .weight_decay = group.option("weight_decay"),
                     .nesterov = group.option("nesterov") != 0, .maximize = group.option("maximize") != 0,
                     .first_step = false};
        bool fused = group.option("fused") != 0;
        for (Tensor& p : group.params) {
            const Tensor& grad = p.grad();
            if (!grad.defined()) continue;
            check_grad(p);
            Tensor buf;
            if (s.momentum != 0.0) {
                Tensor& slot = state(p)["momentum_buffer"];
                s.first_step = !slot.defined();
                if (s.first_step) slot = make_empty(p.sizes(), p.dtype(), p.device());
                buf = slot;
            }
            if (fused && fused_step_supported(kernels::sgd_step, {&p, &grad, &buf})) {
                kernels::sgd_step(p, grad, buf, s);
                p.bump_version();
            } else {
                sgd_step_tensor(p, grad, buf, s);
            }
        }
    }
}

}  // namespace ampgrad::optim

// adam.cpp: Adam's step (AdamW is Adam with decoupled_weight_decay). f32/f64 parameters take the
// fused multi-tensor kernel (kernels::adam_step) where their device has one; others run the same formulas as
// in-place tensor ops, written like torch's _single_tensor_adam. step(StepScaling) is GradScaler's path:
// the kernel unscales and skips by itself (fused_step.hpp).
#include "optim/adam.hpp"

#include <cmath>
#include <optional>

#include "autograd/grad_mode.hpp"
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"
#include "core/profiler.hpp"
#include "optim/fused_step.hpp"

namespace ampgrad::optim {

std::map<std::string, double> AdamOptions::to_map() const {
    return {{"lr", lr_}, {"beta1", beta1_}, {"beta2", beta2_}, {"eps", eps_}, {"weight_decay", weight_decay_},
            {"amsgrad", amsgrad_ ? 1.0 : 0.0}, {"maximize", maximize_ ? 1.0 : 0.0},
            {"decoupled_weight_decay", decoupled_weight_decay_ ? 1.0 : 0.0}, {"fused", fused_ ? 1.0 : 0.0}};
}

Adam::Adam(std::vector<Tensor> params, const AdamOptions& options) : Adam(single_group(std::move(params)), options) {}

Adam::Adam(std::vector<ParamGroup> groups, const AdamOptions& defaults) : Adam(std::move(groups), defaults, "Adam") {}

Adam::Adam(std::vector<ParamGroup> groups, const AdamOptions& defaults, std::string name)
    : Optimizer(std::move(groups), defaults.to_map(), std::move(name)) {
    for (const ParamGroup& g : groups_) validate_group(g);
}

void Adam::validate_group(const ParamGroup& g) const {
    if (g.option("lr") < 0) throw ValueError(fmt::format("{}: Invalid learning rate: {}", name_, g.option("lr")));
    if (g.option("eps") < 0) throw ValueError(fmt::format("{}: Invalid epsilon value: {}", name_, g.option("eps")));
    for (int i = 0; i < 2; ++i) {
        double beta = g.option(i == 0 ? "beta1" : "beta2");
        if (!(beta >= 0.0 && beta < 1.0))
            throw ValueError(fmt::format("{}: Invalid beta parameter at index {}: {} (expected 0 <= beta < 1)", name_,
                                         i, beta));
    }
    if (g.option("weight_decay") < 0)
        throw ValueError(fmt::format("{}: Invalid weight_decay value: {}", name_, g.option("weight_decay")));
    for (const Tensor& p : g.params) {
        if (is_floating(p.dtype()) && !is_reduced_float(p.dtype())) continue;
        throw DTypeError(fmt::format("{}: parameter {} is {}; {} keeps its moments in the parameter's dtype and needs "
                                     "f32 or f64 parameters. For an f16/bf16 model keep fp32 master weights: wrap the "
                                     "optimizer in amp::MasterWeightsOptimizer", name_,
                                     p.name().empty() ? "(unnamed)" : p.name(), p.describe(), name_));
    }
}

namespace {

// The tensor-op form of one parameter's update (any device).
void adam_step_tensor(Tensor& p, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, Tensor& max_exp_avg_sq,
                      const AdamScalars& s, double step) {
    Tensor g = s.maximize ? -grad : grad;
    if (s.weight_decay != 0.0) {
        if (s.decoupled_weight_decay) p.mul_(1.0 - s.lr * s.weight_decay);
        else g = add(g, p, s.weight_decay);
    }
    exp_avg.mul_(s.beta1).add_(g, 1.0 - s.beta1);
    exp_avg_sq.mul_(s.beta2).add_(g * g, 1.0 - s.beta2);
    double step_size = s.lr / (1.0 - std::pow(s.beta1, step));
    double bias_correction2_sqrt = std::sqrt(1.0 - std::pow(s.beta2, step));
    Tensor second = exp_avg_sq;
    if (s.amsgrad) second = copy_(max_exp_avg_sq, maximum(max_exp_avg_sq, exp_avg_sq));
    Tensor denom = sqrt(second) / bias_correction2_sqrt + s.eps;
    p.add_(exp_avg / denom, -step_size);
}

// The step count where this parameter's update reads it: on the parameter's device for the fused
// kernel (PyTorch's fused Adam keeps it there, so a GPU kernel counts, and skips on found_inf,
// without a host read), on the CPU for the tensor-op path, which counts on the host. A count made
// on the other side (a loaded state dict, a parameter moved since) is moved once.
Tensor& step_count_on(ParamState& st, const Device& device) {
    Tensor& step = st["step"];
    if (!step.defined()) step = zeros({}, TensorOptions(kFloat32).device(device));
    else if (step.device() != device) step = to_device(step, device);
    return step;
}

}  // namespace

void Adam::step() { step_scaled(StepScaling{}); }

// Each group's parameters go to kernels::adam_step in one call per (device, dtype); the rest run the
// tensor-op formulas, reading the scaling on the host.
void Adam::step_scaled(const StepScaling& scaling) {
    std::optional<profiler::Span> span;   // "AdamW.step" (the name is built only while profiling)
    if (profiler::enabled()) [[unlikely]] span.emplace("optim", name_ + ".step");
    NoGradGuard no_grad;
    HostScaling host(scaling);
    for (ParamGroup& group : groups_) {
        validate_group(group);    // catches parameters converted to f16 since construction
        AdamScalars s{.lr = group.option("lr"), .beta1 = group.option("beta1"), .beta2 = group.option("beta2"),
                      .eps = group.option("eps"), .weight_decay = group.option("weight_decay"),
                      .amsgrad = group.option("amsgrad") != 0, .maximize = group.option("maximize") != 0,
                      .decoupled_weight_decay = group.option("decoupled_weight_decay") != 0};
        bool fused = group.option("fused") != 0;
        std::vector<KernelBatch<AdamTensors>> batches;
        for (Tensor& p : group.params) {
            const Tensor& grad = p.grad();
            if (!grad.defined()) continue;
            check_grad(p);
            ParamState& st = state(p);
            if (st.empty()) {                       // lazy init on the first step with a gradient
                st["exp_avg"] = zeros_like(p);
                st["exp_avg_sq"] = zeros_like(p);
            }
            if (s.amsgrad && !st["max_exp_avg_sq"].defined()) st["max_exp_avg_sq"] = zeros_like(p);
            Tensor &m = st["exp_avg"], &v = st["exp_avg_sq"];
            Tensor v_max = s.amsgrad ? st["max_exp_avg_sq"] : Tensor();
            if (fused && fused_step_supported(kernels::adam_step, {&p, &grad, &m, &v, &v_max})) {
                AdamTensors& b = batch_for(batches, p);
                b.params.push_back(p), b.grads.push_back(grad), b.exp_avgs.push_back(m), b.exp_avg_sqs.push_back(v);
                if (s.amsgrad) b.max_exp_avg_sqs.push_back(v_max);
                b.steps.push_back(step_count_on(st, p.device()));
                continue;
            }
            Tensor& step_count = step_count_on(st, Device(kCPU));
            if (host.skip()) continue;
            float& step = step_count.data_ptr<float>()[0];
            step += 1.0f;
            adam_step_tensor(p, host.unscaled(grad), m, v, v_max, s, step);
        }
        for (const KernelBatch<AdamTensors>& b : batches) {
            kernels::adam_step(b.lists, s, scaling_on(scaling, b.device));
            for (const Tensor& p : b.lists.params) p.bump_version();
        }
    }
}

}  // namespace ampgrad::optim

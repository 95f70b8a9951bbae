// zero/engine_step.cpp: the ZeRO engine's step (DeepSpeed's DeepSpeedZeroOptimizer.step in
// deepspeed/runtime/zero/stage_1_and_2.py, with two fixes): every rank agrees on overflow with
// one all-reduce (max) of its partition's found-inf; the gradient norm is one all-reduce (sum) of
// the partitions' squared norms; the gradients are unscaled with the scale the backward USED (not
// the one update_scale just set); then the inner optimizer steps the master partition and one
// all-gather gives every rank the whole updated model.
#include "zero/engine.hpp"

#include "autograd/engine.hpp"
#include "autograd/grad_mode.hpp"
#include "autograd/ops/ops.hpp"
#include "core/profiler.hpp"
#include "zero/stage3.hpp"

#include <cmath>
#include <fmt/format.h>

namespace ampgrad::zero {

void ZeroEngine::step() {
    profiler::Span span("zero", "ZeroEngine.step");
    if (autograd::current_graph_task_depth() > 0)
        throw AutogradError("ZeroEngine.step: called while a backward is running (from a hook or a callback?)");
    const bool boundary = is_gradient_accumulation_boundary();
    if (boundary && unreduced_boundary_)
        throw ValueError("ZeroEngine.step: this accumulation boundary's backward ran inside no_sync(), so its gradients "
                         "were never reduced across ranks; run the boundary's backward outside no_sync()");
    ++micro_steps_;
    if (!boundary) return;
    apply_step();
    ++global_steps_;
}

void ZeroEngine::apply_step() {
    NoGradGuard no_grad;
    // 1. Overflow, agreed: any non-finite element in any rank's partition skips the step everywhere.
    //    bf16 checks only with bf16.check_grad_overflow (DeepSpeed's default is no check, no skip).
    bool overflow = false;
    if (!config_.bf16 || config_.bf16_check_grad_overflow) {
        Tensor found = (1.0 - isfinite(grad_partition_).to(kFloat32)).sum().reshape({1});
        group_->all_reduce(found, dist::ReduceOp::kMax, /*async_op=*/false);
        overflow = found.item<float>() > 0.0f;
    }
    // 2. The scale the backward used, then the scaler's update (DeepSpeed's hysteresis; may throw at min).
    const double backward_scale = loss_scale();
    if (scaler_) scaler_->update_scale(overflow);
    if (overflow) {
        ++skipped_steps_;   // no optimizer step, no scheduler step, parameters untouched
        step_applied_ = false;
        grad_partition_.zero_();
        tree_grad_ = Tensor();
        if (stage3_) stage3_->after_step(Tensor());
        return;
    }
    // 3. Global norm over every partition (padding is zero), unscaled.
    double squared_norm = 0.0;
    if (deterministic_) {   // parameter by parameter in a fixed order, whatever the partition
        squared_norm = tree_grad_squared_norm();
    } else {
        Tensor sq = (grad_partition_.to(kFloat64) * grad_partition_.to(kFloat64)).sum().reshape({1});
        if (config_.stage > 0) group_->all_reduce(sq, dist::ReduceOp::kSum, /*async_op=*/false);   // stage 0: whole here
        squared_norm = sq.item<double>();
    }
    grad_norm_ = std::sqrt(squared_norm) / backward_scale;
    // 4. Unscale and clip in one multiply: g / (S * c), c = (norm + 1e-6) / clip when above 1.
    double combined = backward_scale;
    if (config_.gradient_clipping > 0.0) {
        double c = (grad_norm_ + 1e-6) / config_.gradient_clipping;
        if (c > 1.0) combined *= c;
    }
    master_.set_grad(grad_partition_.to(master_dtype_) * (1.0 / combined));
    apply_weight_decay();
    inner_->step();
    master_.set_grad(Tensor());
    grad_partition_.zero_();
    step_applied_ = true;
    if (stage3_) {   // 5. Stage 3: the parameters stay partitioned; gathered again by the next forward.
        stage3_->after_step(master_);
        if (scheduler_) scheduler_->step();
        return;
    }
    // 5. All-gather the updated partitions (model dtype) and write them into the parameters (stage 0:
    // every rank stepped the whole master, so there is nothing to gather).
    Tensor mine = master_.detach().to(model_dtype_);
    Tensor flat = mine;
    if (config_.stage > 0) {
        flat = zeros({layout_.padded_numel()}, TensorOptions().dtype(model_dtype_).device(master_.device()));
        group_->all_gather(flat, mine, /*async_op=*/false);
    }
    for (size_t i = 0; i < params_.size(); ++i)
        params_[i].detach().copy_(flat.narrow(0, layout_.param_begin(i), layout_.param_numel(i)).view(params_[i].sizes()));
    if (scheduler_) scheduler_->step();
}

void ZeroEngine::restore_counters(int64_t global_steps, int64_t micro_steps, int64_t skipped_steps) {
    global_steps_ = global_steps;
    micro_steps_ = micro_steps;
    skipped_steps_ = skipped_steps;
    unreduced_boundary_ = false;   // a loaded checkpoint starts a fresh accumulation window
}

Tensor ZeroEngine::full_grad(const std::string& name) {
    auto it = std::find(names_.begin(), names_.end(), name);
    if (it == names_.end()) throw ValueError(fmt::format("ZeroEngine.full_grad: no trainable parameter '{}'", name));
    size_t i = static_cast<size_t>(it - names_.begin());
    NoGradGuard no_grad;
    Tensor flat = grad_partition_;   // stage 0: whole on every rank
    if (config_.stage > 0) {
        flat = zeros({layout_.padded_numel()}, TensorOptions().dtype(grad_partition_.dtype()).device(master_.device()));
        group_->all_gather(flat, grad_partition_, /*async_op=*/false);
    }
    const Shape& shape = stage3_ ? stage3_->shape(i) : params_[i].sizes();
    return flat.narrow(0, layout_.param_begin(i), layout_.param_numel(i)).view(shape).clone();
}

ModelStateBytes ZeroEngine::model_state_bytes() const {
    ModelStateBytes b;
    if (stage3_) b.params = stage3_->trainable_param_bytes();
    else for (const Tensor& p : params_) b.params += p.numel() * static_cast<int64_t>(p.element_size());
    const bool slice_of_full = full_grads_.defined() && grad_partition_.impl()->storage == full_grads_.impl()->storage;
    b.grads = slice_of_full ? 0 : grad_partition_.numel() * static_cast<int64_t>(grad_partition_.element_size());
    if (full_grads_.defined()) b.grads += full_grads_.numel() * static_cast<int64_t>(full_grads_.element_size());
    else b.grads += std::min(config_.reduce_bucket_size, layout_.padded_numel()) * static_cast<int64_t>(params_[0].element_size());
    b.optimizer = master_.numel() * static_cast<int64_t>(master_.element_size());
    if (const optim::ParamState* st = inner_->find_state(master_))
        for (const auto& [key, t] : *st) b.optimizer += t.numel() * static_cast<int64_t>(t.element_size());
    return b;
}

double zero_paper_bytes(int stage, int64_t psi, int world_size, double k) {
    const double p = static_cast<double>(psi), n = world_size;
    switch (stage) {
        case 0: return (4.0 + k) * p;
        case 1: return 4.0 * p + k * p / n;
        case 2: return 2.0 * p + (2.0 + k) * p / n;
        case 3: return (4.0 + k) * p / n;
        default: throw ValueError(fmt::format("zero_paper_bytes: stage {} is not 0..3", stage));
    }
}

void ZeroEngine::set_weight_decay(const WeightDecayOf& weight_decay_of) {
    decay_runs_.clear();
    const int64_t begin = layout_.partition_begin(owner_rank());
    for (size_t i = 0; i < params_.size(); ++i) {
        const double wd = weight_decay_of(names_[i], params_[i]);
        if (wd < 0) throw ValueError(fmt::format("ZeroEngine.set_weight_decay: weight decay {} for '{}' is negative", wd, names_[i]));
        if (wd == 0) continue;
        for (const Piece& piece : layout_.pieces(i))
            if (piece.rank == owner_rank()) decay_runs_.push_back({piece.flat_begin - begin, piece.numel, wd});
    }
    engine_decays_ = true;
    for (optim::ParamGroup& g : inner_->param_groups()) g.options["weight_decay"] = 0.0;
}

// AdamW's decoupled decay (p *= 1 - lr * wd, before the update), run by run over this rank's master.
void ZeroEngine::apply_weight_decay() {
    if (!engine_decays_) return;
    const double lr = inner_->param_groups().at(0).lr();
    for (optim::ParamGroup& g : inner_->param_groups()) g.options["weight_decay"] = 0.0;   // see set_weight_decay
    for (const DecayRun& run : decay_runs_) master_.detach().narrow(0, run.begin, run.numel).mul_(1.0 - lr * run.weight_decay);
}

}  // namespace ampgrad::zero

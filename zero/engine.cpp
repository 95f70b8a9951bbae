// zero/engine.cpp: the ZeRO engine's backward side: construction, the per-parameter hooks, the
// gradient buckets and their owner-contiguous reduce-scatter, and the once-per-backward epilogue.
// The step (overflow, norm, clip, update, all-gather) is in engine_step.cpp.
#include "zero/engine.hpp"

#include "autograd/engine.hpp"
#include "dist/flight_recorder.hpp"
#include "autograd/grad_mode.hpp"
#include "core/determinism.hpp"
#include "autograd/ops/ops.hpp"
#include "dist/ddp.hpp"
#include "zero/stage3.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

namespace ampgrad::zero {

// One launched reduce-scatter: its buffers stay alive until it completes.
struct ZeroEngine::Pending {
    dist::WorkPtr work;
    Tensor send, recv;                   // (W * chunk), (chunk): model dtype
    std::vector<Piece> mine;             // this rank's pieces...
    std::vector<int64_t> recv_offset;    // ...and where each sits in recv
};

namespace {

std::vector<int64_t> numels_of(const std::vector<Tensor>& params) {
    std::vector<int64_t> out;
    for (const Tensor& p : params) out.push_back(p.numel());
    return out;
}

std::unique_ptr<amp::LossScaler> make_scaler(const ZeroConfig& c) {
    if (!c.fp16) return nullptr;
    if (c.loss_scale > 0) return std::make_unique<amp::StaticLossScaler>(c.loss_scale);
    amp::DynamicLossScalerOptions o;
    o.init_scale = std::ldexp(1.0, c.initial_scale_power);
    o.scale_window = c.loss_scale_window;
    o.min_scale = c.min_loss_scale;
    o.delayed_shift = c.hysteresis;
    o.consecutive_hysteresis = c.consecutive_hysteresis;
    if (c.stage == 0) {   // DeepSpeed without ZeRO steps FP16_Optimizer: no hysteresis, and no error at min_scale
        o.delayed_shift = 1;
        o.raise_error_at_min_scale = false;
    }
    return std::make_unique<amp::DynamicLossScaler>(o);
}

}  // namespace

ZeroEngine::ZeroEngine(std::shared_ptr<nn::Module> module, ZeroConfig config, const OptimizerFactory& make_optimizer,
                       dist::ProcessGroup* group, const SchedulerFactory& make_scheduler)
    : module_(std::move(module)), config_(config), group_(group ? group : &dist::default_group()),
      layout_({}, 1), file_layout_({}, 1), epilogue_([this] { begin_backward(); }, [this] { end_backward(); }) {
    if (!module_) throw ValueError("ZeroEngine: the module is null");
    config_.validate();
    const int W = group_->world_size();
    if (config_.train_batch_size > 0 &&
        config_.train_batch_size != config_.train_micro_batch_size_per_gpu * config_.gradient_accumulation_steps * W)
        throw ValueError(fmt::format(
            "ZeroEngine: train_batch_size {} != train_micro_batch_size_per_gpu {} * gradient_accumulation_steps {} * "
            "world size {}", config_.train_batch_size, config_.train_micro_batch_size_per_gpu,
            config_.gradient_accumulation_steps, W));
    deterministic_ = ampgrad::deterministic();
    if (deterministic_) dist::check_tree_layout(W, config_.gradient_accumulation_steps, "ZeroEngine");
    cast_module_for_precision();
    dist::broadcast_module_state(*module_, *group_, /*buffers=*/true);
    collect_parameters();
    // Stage 0 holds everything on every rank: one partition (a world of 1) that each rank owns whole.
    // Its checkpoint files follow the stage-1 layout at this world size (file_layout()).
    layout_ = FlatLayout(numels_of(params_), config_.stage == 0 ? 1 : W);
    file_layout_ = FlatLayout(numels_of(params_), W);
    NoGradGuard no_grad;   // the rest builds state, not a graph
    allocate_partitions();
    inner_ = make_optimizer({master_});
    if (!inner_) throw ValueError("ZeroEngine: the optimizer factory returned null");
    if (make_scheduler) scheduler_ = make_scheduler(*inner_);
    scaler_ = make_scaler(config_);
    for (size_t i = 0; i < params_.size(); ++i)
        hooks_.emplace_back(params_[i].register_post_accumulate_grad_hook([this, i](Tensor&) { on_grad(i); }));
    if (config_.stage == 3)   // the parameters themselves are partitioned: zero/stage3.cpp
        stage3_ = std::make_unique<Stage3>(*module_, params_, layout_, *group_, config_.stage3_prefetch_bucket_size);
}

// The parameters that require grad, in the module's order, all of one dtype (the model's); the
// master dtype is f64 for an f64 model, else f32.
void ZeroEngine::collect_parameters() {
    for (const auto& [name, p] : module_->named_parameters()) {
        if (!p.requires_grad()) continue;
        if (!names_.empty() && p.dtype() != params_[0].dtype())
            throw DTypeError(fmt::format("ZeroEngine: parameter '{}' is {} but '{}' is {}; one dtype per model",
                                         name, dtype_name(p.dtype()), names_[0], dtype_name(params_[0].dtype())));
        names_.push_back(name);
        params_.push_back(p);
    }
    if (params_.empty()) throw ValueError("ZeroEngine: the module has no parameter that requires grad");
    model_dtype_ = params_[0].dtype();
    master_dtype_ = model_dtype_ == kFloat64 ? kFloat64 : kFloat32;
}

// This rank's partition of the flat parameters in the master dtype (padding stays zero), and the
// gradient buffers: the whole flat gradient for stages 0-1, and this rank's gradient partition.
void ZeroEngine::allocate_partitions() {
    NoGradGuard no_grad;
    const int64_t P = layout_.partition_numel(), begin = layout_.partition_begin(owner_rank());
    const TensorOptions master_options = TensorOptions().dtype(master_dtype_).device(params_[0].device());
    master_ = zeros({P}, master_options);
    for (size_t i = 0; i < params_.size(); ++i)
        for (const Piece& piece : layout_.pieces(i))
            if (piece.rank == owner_rank())
                master_.narrow(0, piece.flat_begin - begin, piece.numel)
                    .copy_(params_[i].detach().reshape({-1}).narrow(0, piece.param_offset, piece.numel));
    master_.requires_grad_(true);
    DType grad_dtype = master_dtype_;   // data_types.grad_accum_dtype: f32 unless "fp16"/"bf16" (the model's)
    if (config_.grad_accum_dtype == "fp16" || config_.grad_accum_dtype == "bf16") {
        grad_dtype = config_.grad_accum_dtype == "fp16" ? kFloat16 : kBFloat16;
        if (grad_dtype != model_dtype_)
            throw DTypeError(fmt::format("ZeroEngine: data_types.grad_accum_dtype \"{}\" must be the model's dtype, {}",
                                         config_.grad_accum_dtype, dtype_name(model_dtype_)));
    }
    if (config_.stage <= 1)
        full_grads_ = zeros({layout_.padded_numel()}, TensorOptions().dtype(model_dtype_).device(params_[0].device()));
    // Stages 0 and 1 with gradients in the model dtype: the partition is this rank's slice of the whole
    // gradient buffer (stage 0: all of it), no second copy (the ZeRO paper's 2Ψ + 2Ψ + KΨ/N).
    grad_partition_ = config_.stage <= 1 && grad_dtype == model_dtype_ ? full_grads_.narrow(0, begin, P)
                                                                       : zeros({P}, master_options.dtype(grad_dtype));
}

// fp16/bf16.enabled: DeepSpeed's engine casts the module's floating parameters to the 16-bit dtype
// itself (deepspeed/runtime/engine.py, _cast_module_mixed_precision; buffers keep theirs). So do we,
// unless cast_module_dtype is false: then a parameter of another dtype is refused, named.
void ZeroEngine::cast_module_for_precision() {
    if (!config_.fp16 && !config_.bf16) return;
    const DType want = config_.fp16 ? kFloat16 : kBFloat16;
    const char* key = config_.fp16 ? "fp16.enabled" : "bf16.enabled";
    if (config_.cast_module_dtype) {
        module_->cast_parameters(want);
        return;
    }
    for (const auto& [name, p] : module_->named_parameters())
        if (is_floating(p.dtype()) && p.dtype() != want)
            throw DTypeError(fmt::format("ZeroEngine: {} with cast_module_dtype = false needs {} parameters, but '{}' is "
                                         "{}: call module->to({}) first, or leave cast_module_dtype true to let the "
                                         "engine cast it", key, dtype_name(want), name, dtype_name(p.dtype()),
                                         config_.fp16 ? "kFloat16" : "kBFloat16"));
}

ZeroEngine::~ZeroEngine() {
    hooks_.clear();
    try {
        for (auto& p : pending_) p->work->wait(group_->timeout());   // in flight after a backward that threw
    } catch (const Error&) {
    }
}

Tensor ZeroEngine::scale(const Tensor& loss) {
    next_scaled_ = true;
    return scaler_ ? scaler_->scale_loss(loss) : loss;
}

Tensor ZeroEngine::backward(const Tensor& loss, bool retain_graph, bool scale_wrt_gas) {
    if (loss.numel() != 1)
        throw ShapeError(fmt::format("ZeroEngine.backward: the loss must have one element, got {}", loss.describe()));
    if (!loss.requires_grad())
        throw AutogradError("ZeroEngine.backward: the loss does not require grad (no parameter reached it)");
    next_scale_wrt_gas_ = scale_wrt_gas;
    scale(loss).backward(Tensor(), retain_graph);
    NoGradGuard no_grad;
    return scale_wrt_gas ? loss.detach() * (1.0 / static_cast<double>(config_.gradient_accumulation_steps)) : loss.detach();
}

NoSyncGuard::NoSyncGuard(ZeroEngine& engine) : engine_(&engine) {
    if (engine.config_.stage >= 2)
        throw ValueError(fmt::format("ZeroEngine.no_sync: no_sync context manager is incompatible with gradient "
                                     "partitioning logic of ZeRO stage {}", engine.config_.stage));
    if (engine.in_no_sync_) throw ValueError("ZeroEngine.no_sync: no_sync context manager reentry is unsupported");
    engine.in_no_sync_ = true;
}

NoSyncGuard::~NoSyncGuard() {
    if (engine_) engine_->in_no_sync_ = false;
}

NoSyncGuard ZeroEngine::no_sync() { return NoSyncGuard(*this); }

bool ZeroEngine::is_gradient_accumulation_boundary() const {
    if (boundary_override_) return *boundary_override_;
    return (micro_steps_ + 1) % config_.gradient_accumulation_steps == 0;
}

// ---- backward: hooks, buckets, epilogue ----

// First hook of a user backward: fix this backward's divisor and whether its loss was scaled.
void ZeroEngine::begin_backward() {
    complete_pending();   // only after a backward that threw before its epilogue
    bucket_.clear();
    bucket_grads_.clear();
    bucket_numel_ = 0;
    divisor_ = static_cast<double>(group_->world_size()) *
               (next_scale_wrt_gas_ ? static_cast<double>(config_.gradient_accumulation_steps) : 1.0);
    next_scale_wrt_gas_ = true;
    this_scaled_ = next_scaled_;
    next_scaled_ = false;
    if (stage3_) stage3_->begin_backward();
}

// Post-accumulate-grad hook: take the gradient (pre-divided by W * GAS) and clear .grad, so a
// second accumulation in this backward (a parameter used again in a checkpoint phase, or shared)
// arrives as a fresh gradient and is simply added: reduction is linear.
void ZeroEngine::on_grad(size_t i) {
    if (!epilogue_.on_hook()) return;   // a backward inside a forward: not ours, leave .grad
    NoGradGuard no_grad;
    Tensor g = params_[i].grad().reshape({-1});
    params_[i].set_grad(Tensor());
    if (deterministic_) return on_grad_in_tree(i, g);
    Tensor scaled = (g.dtype() == kFloat64 ? g : g.to(kFloat32)) * (1.0 / divisor_);
    if (config_.stage <= 1) {
        full_grads_.narrow(0, layout_.param_begin(i), layout_.param_numel(i)).add_(scaled.to(model_dtype_));
        return;
    }
    if (bucket_numel_ + g.numel() > config_.reduce_bucket_size) flush_bucket();
    bucket_.push_back(i);
    bucket_grads_.push_back(scaled.to(model_dtype_));
    bucket_numel_ += g.numel();
    if (bucket_numel_ >= config_.reduce_bucket_size) flush_bucket();   // a parameter larger than the bucket goes alone
    if (stage3_) stage3_->after_grad(i);
}

void ZeroEngine::flush_bucket() {
    if (bucket_.empty()) return;
    launch(bucket_, bucket_grads_);
    bucket_.clear();
    bucket_grads_.clear();
    bucket_numel_ = 0;
    if (!config_.overlap_comm) complete_pending();
}

// Owner-contiguous pack, one reduce-scatter (sum; the gradients were pre-divided).
void ZeroEngine::launch(const std::vector<size_t>& params, const std::vector<Tensor>& grads) {
    NoGradGuard no_grad;
    BucketPacking packing = pack_bucket(layout_, params);
    const int W = group_->world_size(), me = group_->rank();
    auto pending = std::make_unique<Pending>();
    const TensorOptions options = TensorOptions().dtype(model_dtype_).device(params_[0].device());
    pending->send = zeros({W * packing.chunk}, options);
    pending->recv = zeros({packing.chunk}, options);
    for (size_t k = 0; k < packing.pieces.size(); ++k) {
        const Piece& piece = packing.pieces[k];
        size_t slot = static_cast<size_t>(std::find(params.begin(), params.end(), piece.param) - params.begin());
        pending->send.narrow(0, packing.buffer_offset[k], piece.numel)
            .copy_(grads[slot].narrow(0, piece.param_offset, piece.numel));
        if (piece.rank == me) {
            pending->mine.push_back(piece);
            pending->recv_offset.push_back(packing.buffer_offset[k] - static_cast<int64_t>(me) * packing.chunk);
        }
    }
    dist::CollectiveSite site("zero.reduce_scatter bucket");   // the flight recorder's calling site
    pending->work = group_->reduce_scatter(pending->recv, pending->send, dist::ReduceOp::kSum, /*async_op=*/true);
    pending_.push_back(std::move(pending));
}

// Wait for every launched reduce-scatter, in launch order, and add this rank's pieces into its
// gradient partition (f32): accumulation across phases and micro-steps.
void ZeroEngine::complete_pending() {
    NoGradGuard no_grad;
    const int64_t begin = layout_.partition_begin(group_->rank());
    for (auto& p : pending_) {
        p->work->wait(group_->timeout());
        for (size_t k = 0; k < p->mine.size(); ++k)
            grad_partition_.narrow(0, p->mine[k].flat_begin - begin, p->mine[k].numel)
                .add_(p->recv.narrow(0, p->recv_offset[k], p->mine[k].numel).to(grad_partition_.dtype()));
    }
    pending_.clear();
}

// Stage 1, at the boundary: the whole flat gradient is already owner-contiguous.
void ZeroEngine::reduce_full_grads() {
    NoGradGuard no_grad;
    Tensor mine = zeros({layout_.partition_numel()}, TensorOptions().dtype(model_dtype_).device(full_grads_.device()));
    dist::CollectiveSite site("zero.reduce_scatter grads");
    group_->reduce_scatter(mine, full_grads_, dist::ReduceOp::kSum, /*async_op=*/false);
    full_grads_.zero_();   // first: grad_partition_ may be a slice of it
    grad_partition_.add_(mine.to(grad_partition_.dtype()));
}

// Stage 0, at the boundary: every rank keeps the whole gradient, so all-reduce it (sum; pre-divided)
// in buckets of reduce_bucket_size elements, all launched before the first wait when overlap_comm
// (DeepSpeed's stage 0 all-reduces its buffers at the boundary too: engine.py, allreduce_gradients).
void ZeroEngine::all_reduce_full_grads() {
    NoGradGuard no_grad;
    std::vector<dist::WorkPtr> works;
    const int64_t n = full_grads_.numel();
    for (int64_t at = 0; at < n; at += config_.reduce_bucket_size) {
        Tensor bucket = full_grads_.narrow(0, at, std::min(config_.reduce_bucket_size, n - at));   // (<= bucket)
        dist::CollectiveSite site("zero.all_reduce bucket");
        works.push_back(group_->all_reduce(bucket, dist::ReduceOp::kSum, /*async_op=*/config_.overlap_comm));
    }
    for (auto& w : works) w->wait(group_->timeout());
    if (grad_partition_.impl()->storage == full_grads_.impl()->storage) return;   // the same buffer
    grad_partition_.add_(full_grads_.to(grad_partition_.dtype()));
    full_grads_.zero_();
}

// The epilogue: once per user backward, after every checkpoint phase (outermost-task callback).
void ZeroEngine::end_backward() {
    if (deterministic_) {
        end_backward_in_tree();
    } else if (config_.stage >= 2) {
        flush_bucket();
        complete_pending();
        if (stage3_) stage3_->end_backward();
    } else if (is_gradient_accumulation_boundary()) {
        unreduced_boundary_ = in_no_sync_;   // no_sync: the gradients stay local, accumulated
        if (!in_no_sync_) {
            if (config_.stage == 0) all_reduce_full_grads();
            else reduce_full_grads();
        }
    }
    if (scaler_ && !this_scaled_)
        throw AutogradError(
            "ZeroEngine: Loss scaling is required for this configuration, but backward() was called directly without "
            "scaling the loss (fp16.enabled): call engine.backward(loss), or engine.scale(loss).backward()");
}

}  // namespace ampgrad::zero

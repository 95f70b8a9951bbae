// zero/engine.hpp: a DeepSpeed-style training engine with ZeRO stages 0, 1, 2 and 3 (DeepSpeed's
// deepspeed/runtime/engine.py driving deepspeed/runtime/zero/stage_1_and_2.py and stage3.py).
// docs/zero.md walks through one step. Stage 3 also partitions the parameters themselves:
// zero/stage3.hpp gathers and releases them around each module's forward and backward.
//
//   zero::ZeroEngine engine(model, zero::load_config("ds_config.json"),
//       [](std::vector<Tensor> masters) { return std::make_unique<optim::AdamW>(masters, optim::AdamWOptions(1e-3)); });
//   for (auto& [x, y] : micro_batches) {
//       Tensor loss = loss_fn(model->forward(x), y);
//       engine.backward(loss);        // scaled (fp16), /accumulation steps; gradients reduced by hooks
//       engine.step();                // every micro-batch; updates only at accumulation boundaries
//   }
//   // or, as plain PyTorch: engine.scale(loss).backward();  out.backward(grad);   then engine.step()
//
// Stage 0 is plain data parallelism behind the same API: every rank keeps the whole f32 master and
// optimizer state, and the gradients are all-reduced in buckets at the accumulation boundary.
// Per rank: the full model (its dtype), the f32 master and optimizer state of ONE partition
// (stage 1 and 2), and either the full gradients (stage 1: reduced once per step, at the boundary)
// or only the partition's (stage 2: buckets reduce-scattered while backward runs, every
// micro-step). Every parameter's post-accumulate-grad hook hands its gradient over and clears
// .grad; the end-of-backward epilogue (autograd::BackwardEpilogue) runs once per user backward,
// after every reentrant checkpoint phase, and never for a backward called inside a forward.
#pragma once
#include "amp/loss_scaler.hpp"
#include "autograd/backward_epilogue.hpp"
#include "dist/process_group.hpp"
#include "dist/tree_reduce.hpp"
#include "nn/module.hpp"
#include "optim/lr_scheduler.hpp"
#include "optim/optimizer.hpp"
#include "zero/config.hpp"
#include "zero/layout.hpp"
#include "zero/stage3.hpp"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ampgrad::zero {

// The inner optimizer gets this rank's master partition: one flat f32 (f64 for an f64 model) leaf.
using OptimizerFactory = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor> master_partition)>;
using SchedulerFactory = std::function<std::unique_ptr<optim::LRScheduler>(optim::Optimizer& inner)>;

// Bytes this rank holds for the model states, by kind (the ZeRO paper's 2Ψ + 2Ψ + KΨ split).
struct ModelStateBytes {
    int64_t params = 0;            // the model's parameters (full in stages 1, 2; stage 3: partition + gathered)
    int64_t grads = 0;             // stage 1: full flat gradients; stages 2, 3: bucket + partition
    int64_t optimizer = 0;         // master partition + the inner optimizer's state tensors
    int64_t total() const { return params + grads + optimizer; }
};
// The ZeRO paper's per-device figure (Table 1): psi parameters, K = 12 for Adam in mixed precision,
// 2-byte params and grads. Stage 1: 4Ψ + KΨ/N; stage 2: 2Ψ + (2 + K)Ψ/N; stage 3: (4 + K)Ψ/N.
double zero_paper_bytes(int stage, int64_t psi, int world_size, double k = 12.0);

struct LoadResult;   // zero/checkpoint.hpp
class ZeroEngine;

// engine.no_sync(): while it lives, an accumulation boundary's backward leaves the gradients
// unreduced (DeepSpeed's no_sync context; stages 0 and 1 only). Move-only.
class NoSyncGuard {
public:
    explicit NoSyncGuard(ZeroEngine& engine);
    ~NoSyncGuard();
    NoSyncGuard(NoSyncGuard&& other) noexcept : engine_(other.engine_) { other.engine_ = nullptr; }
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(NoSyncGuard&&) = delete;

private:
    ZeroEngine* engine_;
};

class ZeroEngine {
public:
    // Broadcasts rank 0's parameters, lays out the partitions, hooks every trainable parameter.
    ZeroEngine(std::shared_ptr<nn::Module> module, ZeroConfig config, const OptimizerFactory& make_optimizer,
               dist::ProcessGroup* group = nullptr, const SchedulerFactory& make_scheduler = {});
    ~ZeroEngine();
    ZeroEngine(const ZeroEngine&) = delete;
    ZeroEngine& operator=(const ZeroEngine&) = delete;

    // (loss * scale).backward(); the gradients are divided by gradient_accumulation_steps unless
    // scale_wrt_gas is false. Returns loss / accumulation steps, for logging. loss: one element.
    Tensor backward(const Tensor& loss, bool retain_graph = false, bool scale_wrt_gas = true);
    // loss * loss scale, for users who call .backward() themselves (required with fp16).
    Tensor scale(const Tensor& loss);
    // Call after every micro-batch's backward. At an accumulation boundary: agree on overflow
    // across ranks, update the scaler, then skip, or unscale + clip + step + all-gather.
    void step();
    // (micro_steps + 1) % gradient_accumulation_steps == 0, unless set_gradient_accumulation_boundary
    // overrides it (DeepSpeed's engine.set_gradient_accumulation_boundary: the caller decides, e.g. a
    // pipeline schedule; reset_gradient_accumulation_boundary() returns to the count).
    bool is_gradient_accumulation_boundary() const;
    void set_gradient_accumulation_boundary(bool is_boundary) { boundary_override_ = is_boundary; }
    void reset_gradient_accumulation_boundary() { boundary_override_.reset(); }
    // DeepSpeed's `with engine.no_sync():` for stages 0 and 1 (stages 2 and 3 reduce as the backward
    // runs: ValueError, as DeepSpeed asserts; so does a second guard while one lives). Stages 0 and 1
    // reduce only at an accumulation boundary, so on the other micro-steps it changes nothing; a
    // boundary's backward inside it leaves the gradients local, and step() then refuses (ValueError)
    // until a backward outside it has reduced them.
    [[nodiscard]] NoSyncGuard no_sync();
    // True when backward needs a scaled loss (fp16), as DeepSpeed's engine.needs_scaler().
    bool needs_scaler() const { return config_.fp16; }
    // DeepSpeed's engine.save_checkpoint(save_dir, tag) / engine.load_checkpoint(load_dir): forwards to
    // zero/checkpoint.hpp's functions (zero/checkpoint_methods.cpp). An empty tag is DeepSpeed's
    // default, "global_step<N>". Both are collective. Returns the checkpoint directory.
    std::string save_checkpoint(const std::string& save_dir, const std::string& tag = "");
    // tag: load load_dir/tag; empty: the checkpoint load_dir's `latest` names (or load_dir itself).
    LoadResult load_checkpoint(const std::string& load_dir, const std::string& tag = "");
    // Weight decay by parameter, as an optimizer's parameter groups give it (DeepSpeed hands the client
    // optimizer's groups to ZeRO; nanoGPT decays matrices and embeddings, not biases and norms):
    // AdamW's decoupled decay, master *= 1 - lr * weight_decay_of(name, param), applied to each
    // parameter's run of this rank's master partition before every inner step. The engine then owns
    // the decay: the inner optimizer's groups keep weight_decay 0 (set here, and again at each step,
    // so an older checkpoint's saved option cannot decay twice).
    using WeightDecayOf = std::function<double(const std::string& name, const Tensor& param)>;
    void set_weight_decay(const WeightDecayOf& weight_decay_of);

    bool was_step_applied() const { return step_applied_; }
    int64_t global_steps() const { return global_steps_; }
    int64_t micro_steps() const { return micro_steps_; }
    int64_t skipped_steps() const { return skipped_steps_; }
    // Samples trained on, all ranks together: global_steps * train_batch_size (DeepSpeed's counter,
    // advanced at every boundary, a skipped step included).
    int64_t global_samples() const { return global_steps_ * config_.global_batch_size(group_->world_size()); }
    int64_t epilogues_run() const { return epilogue_.epilogues_run(); }
    double loss_scale() const { return scaler_ ? scaler_->loss_scale() : 1.0; }
    double global_grad_norm() const { return grad_norm_; }   // unscaled, before clipping; last applied step
    const FlatLayout& layout() const { return layout_; }
    const ZeroConfig& config() const { return config_; }
    nn::Module& module() const { return *module_; }
    optim::Optimizer& optimizer() const { return *inner_; }
    ModelStateBytes model_state_bytes() const;
    // This rank's reduced, still scaled gradient partition (P elements, f32); for tests and debugging.
    Tensor& grad_partition() { return grad_partition_; }
    // The full reduced (unscaled by nothing, still loss-scaled) gradient of a parameter, gathered
    // from its owners: a collective, every rank must call it (DeepSpeed's safe_get_full_grad).
    Tensor full_grad(const std::string& name);
    // Stage 3's partitioned parameters (gather/release, zero/stage3.hpp); null in stages 1 and 2.
    Stage3* stage3() const { return stage3_.get(); }

    // ---- checkpoint access (zero/checkpoint.cpp): this rank's state, and the load hooks ----
    const std::vector<std::string>& param_names() const { return names_; }   // trainable, in flat order
    const std::vector<Tensor>& params() const { return params_; }
    dist::ProcessGroup& group() const { return *group_; }
    DType model_dtype() const { return model_dtype_; }
    Tensor& master_partition() { return master_; }        // (P) this rank's f32 master leaf
    amp::LossScaler* loss_scaler() const { return scaler_.get(); }      // null without fp16
    optim::LRScheduler* scheduler() const { return scheduler_.get(); }  // null without one
    void restore_counters(int64_t global_steps, int64_t micro_steps, int64_t skipped_steps);
    // The layout the checkpoint files follow: layout(), except in stage 0, where each rank writes the
    // range a stage-1 rank of this world size would own, so a stage-0 checkpoint is a stage-1 one.
    const FlatLayout& file_layout() const { return file_layout_; }
    // The flat index of master_partition()'s first element (stage 0: 0, it holds everything).
    int64_t master_begin() const { return layout_.partition_begin(owner_rank()); }
    // ---- end of checkpoint access ----

private:
    struct Pending;
    int owner_rank() const { return config_.stage == 0 ? 0 : group_->rank(); }   // in layout_
    void cast_module_for_precision();
    void collect_parameters();     // params_, names_, the model and master dtypes
    void allocate_partitions();    // master_, full_grads_, grad_partition_ (after layout_)
    void on_grad(size_t i);
    void begin_backward();
    void end_backward();
    void flush_bucket();
    void launch(const std::vector<size_t>& params, const std::vector<Tensor>& grads);
    void complete_pending();
    void reduce_full_grads();
    void all_reduce_full_grads();
    void apply_step();
    void apply_weight_decay();
    // The deterministic mode (ampgrad::deterministic() at construction; zero/engine_tree.cpp): each
    // micro-batch's gradient whole, its leaves added in the tree of dist/tree_reduce.hpp.
    void on_grad_in_tree(size_t i, const Tensor& g);
    void end_backward_in_tree();
    void reduce_in_tree();
    double tree_grad_squared_norm();

    // set_weight_decay: the runs of master_ (offset, length) with their decay rate (0 runs left out).
    struct DecayRun {
        int64_t begin = 0, numel = 0;
        double weight_decay = 0.0;
    };

    std::shared_ptr<nn::Module> module_;
    ZeroConfig config_;
    dist::ProcessGroup* group_;
    std::vector<std::string> names_;
    std::vector<Tensor> params_;
    FlatLayout layout_;
    FlatLayout file_layout_;
    DType model_dtype_, master_dtype_;
    Tensor master_;                       // (P) this rank's master partition, a leaf
    Tensor grad_partition_;               // (P) reduced gradients, accumulated until the step
    Tensor full_grads_;                   // stage 1: (padded) local gradients, accumulated
    std::vector<size_t> bucket_;          // stage 2: parameters whose gradients wait in bucket_grads_
    std::vector<Tensor> bucket_grads_;
    int64_t bucket_numel_ = 0;
    std::vector<std::unique_ptr<Pending>> pending_;
    std::unique_ptr<optim::Optimizer> inner_;
    std::unique_ptr<optim::LRScheduler> scheduler_;
    std::unique_ptr<amp::LossScaler> scaler_;
    autograd::BackwardEpilogue epilogue_;
    std::vector<autograd::ScopedHook> hooks_;
    double divisor_ = 1.0;                // this backward's gradients are divided by it (W * GAS)
    bool next_scale_wrt_gas_ = true;      // set by backward(); read when the backward begins
    bool next_scaled_ = false;            // backward()/scale() was called for the next backward
    bool this_scaled_ = false;
    int64_t global_steps_ = 0, micro_steps_ = 0, skipped_steps_ = 0;
    std::optional<bool> boundary_override_;   // set_gradient_accumulation_boundary
    friend class NoSyncGuard;
    bool in_no_sync_ = false;                 // a NoSyncGuard lives
    bool unreduced_boundary_ = false;         // a boundary's backward ran inside no_sync
    bool step_applied_ = false;
    double grad_norm_ = 0.0;
    std::unique_ptr<Stage3> stage3_;
    std::vector<DecayRun> decay_runs_;
    bool engine_decays_ = false;          // set_weight_decay was called
    bool deterministic_ = false;          // the tree order (core/determinism.hpp), fixed at construction
    Tensor micro_grad_;                   // deterministic: (padded) this micro-batch's gradient, master dtype
    dist::PairwiseSum micro_sums_;        // deterministic: this rank's micro-batches, added pairwise
    Tensor tree_grad_;                    // deterministic: (padded) the whole reduced gradient, until the step
};

}  // namespace ampgrad::zero

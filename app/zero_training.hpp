// zero_training.hpp: `ampgrad train --zero N` (N = 0, 1, 2, 3): the model (any family) trained by the ZeRO engine (zero/engine.hpp)
// on every process that ampgrad-run started, each on its own share of the batch. It takes the
// place of Precision (app/precision.hpp) for the step:
//   --prec fp32          f32 parameters and masters
//   --prec bf16          autocast to bf16 in the forward, f32 parameters
//   --prec fp16-master   f16 parameters, f32 master partitions, DeepSpeed's dynamic loss scaler
//                        (--init-scale must be a power of two, --scale-window, --hysteresis)
//   --prec fp8           as bf16, with the Linear layers in fp8 (app/fp8_run.hpp); the amax histories
//                        are reduced across the ranks but not saved in ZeRO checkpoints
//   --prec fp16          not supported (GradScaler's per-parameter unscale has no ZeRO form here)
// Weight decay hits the same parameters as in one process (matrices and embeddings, not biases and
// norm gains): the inner AdamW sees one flat master partition, so the engine applies the decay per
// parameter run of it (zero::ZeroEngine::set_weight_decay).
// Checkpoints are ZeRO checkpoints (zero/checkpoint.hpp) plus the run's state.json.
#pragma once
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "amp/autocast.hpp"
#include "app/precision.hpp"
#include "app/run_config.hpp"
#include "models/gpt.hpp"
#include "zero/engine.hpp"

namespace ampgrad::app {

// The process group's backend for a run on `device` ("cpu" or "cuda"): Gloo on the CPU. On GPUs,
// NCCL with one rank per GPU; where this node's ranks outnumber its GPUs (NCCL refuses two ranks on
// one device) or the build has no NCCL, Gloo through host copies (dist/host_staged_group.hpp).
// AMPGRAD_DIST_BACKEND=gloo|nccl overrides the choice.
std::string dist_backend_for(const std::string& device);

// Joins the process group ampgrad-run describes (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), or
// a group of one when WORLD_SIZE is not set, with dist_backend_for(device). Does nothing when a
// group exists already.
void init_zero_process_group(const std::string& device);

// This rank's device: the CPU, or GPU LOCAL_RANK % the GPUs on this node (so the ranks of a node
// spread over its GPUs, and share them when they outnumber them).
Device rank_device(const std::string& device);

class ZeroTraining {
public:
    ZeroTraining(const RunConfig& cfg, const std::shared_ptr<nn::Module>& model);   // the run's model, any family

    std::unique_ptr<amp::AutocastGuard> autocast() const;
    // One optimiser step over grad_accum micro-batches, as Precision: for each micro-batch
    // backward(its mean loss) (engine.backward, which divides by the accumulation steps, then
    // engine.step, which reduces and steps only at the boundary), then step() reports the outcome.
    void zero_grad() { step_scale_ = engine_->loss_scale(); }
    void backward(const Tensor& micro_loss);
    StepOutcome step();
    void set_lr(double lr);
    double loss_scale() const { return engine_->loss_scale(); }
    int64_t skipped_steps() const { return engine_->skipped_steps(); }
    int stage() const { return engine_->config().stage; }
    zero::ModelStateBytes state_bytes() const { return engine_->model_state_bytes(); }
    zero::ZeroEngine& engine() { return *engine_; }
    const Fp8Run* fp8() const { return fp8_.get(); }   // null unless --prec fp8
    Fp8Run* fp8() { return fp8_.get(); }

private:
    std::string mode_;
    DeviceType device_type_;   // autocast's
    std::unique_ptr<zero::ZeroEngine> engine_;
    std::unique_ptr<Fp8Run> fp8_;   // --prec fp8
    double step_scale_ = 1.0;   // the loss scale this step's backward used
};

}  // namespace ampgrad::app

// precision.hpp: the four training precisions behind `--prec`, as one object the training loop
// calls the same way:
//   fp32         f32 parameters and compute.
//   bf16         autocast to bf16 (the forward's GEMMs in bf16); f32 parameters; no loss scaling.
//   fp16         autocast to f16 with GradScaler (PyTorch's recipe): skip a step whose gradients
//                overflow, halve the scale, grow it after scale_window clean steps.
//   fp16-master  f16 parameters, f32 master weights in the optimiser, DeepSpeed's dynamic loss
//                scaler with hysteresis (amp/master_weights.hpp, amp/loss_scaler.hpp).
//   fp8          bf16 autocast with the Linear layers' GEMMs in fp8 (--fp8-recipe; app/fp8_run.hpp).
// Each clips the (unscaled) gradient norm to grad_clip and reports it.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "amp/autocast.hpp"
#include "amp/grad_scaler.hpp"
#include "amp/master_weights.hpp"
#include "app/fp8_run.hpp"
#include "app/run_config.hpp"
#include "models/gpt.hpp"
#include "nn/module.hpp"
#include "optim/adamw.hpp"

namespace ampgrad::app {

struct StepOutcome {
    bool skipped = false;
    double grad_norm = 0.0;   // before clipping, unscaled; inf or nan on an overflow
    double scale = 1.0;       // the loss scale this step's backward used (1 without scaling)
};

class Precision {
public:
    Precision(const RunConfig& cfg, nn::Module& model);   // the run's model, any family

    // An autocast region for the forward pass (none for fp32).
    std::unique_ptr<amp::AutocastGuard> autocast() const;
    // One optimiser step over grad_accum micro-batches (--grad-accum):
    //   zero_grad();  for each micro-batch: backward(its mean loss);  step();
    // backward adds the gradient of loss / grad_accum (scaled by the loss scale with fp16 and
    // fp16-master), so grad_accum micro-batches of B give the gradient of one batch of grad_accum * B.
    // step unscales once, clips, steps (or skips) and updates the scale.
    void zero_grad();
    void backward(const Tensor& micro_loss);
    StepOutcome step();
    StepOutcome step(const Tensor& loss) {   // one micro-batch: zero_grad, backward, step
        zero_grad();
        backward(loss);
        return step();
    }
    void set_lr(double lr);
    double loss_scale() const;
    int64_t skipped_steps() const { return skipped_; }
    const Fp8Run* fp8() const { return fp8_.get(); }        // null unless --prec fp8

    // Everything to resume: tensors (optimiser moments, "step" counters, master weights) by name,
    // and the host state (scaler, param groups).
    nn::NamedTensors state_tensors() const;
    nlohmann::json state_json() const;
    void load_state(const nn::NamedTensors& tensors, const nlohmann::json& state);

private:
    optim::Optimizer& optimizer();
    const optim::Optimizer& optimizer() const;

    std::string mode_;
    DeviceType device_;
    double grad_clip_;
    int64_t grad_accum_;
    double step_scale_ = 1.0;                              // the loss scale this step's backward used
    nn::Module& model_;
    std::vector<std::string> param_names_;                 // the optimiser's parameter order
    std::vector<Tensor> params_;
    std::unique_ptr<optim::AdamW> adamw_;                  // fp32, bf16, fp16
    std::unique_ptr<amp::GradScaler> scaler_;              // fp16
    std::unique_ptr<amp::MasterWeightsOptimizer> master_;  // fp16-master
    std::unique_ptr<Fp8Run> fp8_;                          // fp8
    int64_t skipped_ = 0;
};

}  // namespace ampgrad::app

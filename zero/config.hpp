// zero/config.hpp: the ZeRO engine's configuration, as a struct or as a DeepSpeed-style JSON file
// with the key names DeepSpeed users already write (deepspeed/runtime/config.py,
// deepspeed/runtime/zero/config.py). An unknown or misspelt key is a ValueError naming it.
//
//   { "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2,
//     "zero_optimization": { "stage": 2, "reduce_bucket_size": 5e8, "overlap_comm": true },
//     "fp16": { "enabled": true, "loss_scale_window": 1000, "hysteresis": 2, "min_loss_scale": 1 },
//     "gradient_clipping": 1.0 }
#pragma once
#include <cstdint>
#include <string>

namespace ampgrad::zero {

// Fields in API.md's order (stage, reduce_bucket_size, overlap_comm, gradient_accumulation_steps,
// then fp16/bf16 and the loss scaler's), so designated initialisers written in that order compile:
//   zero::ZeroConfig{.stage = 2, .gradient_accumulation_steps = 4, .bf16 = true}
struct ZeroConfig {
    // zero_optimization
    int stage = 1;                                 // 0: nothing partitioned (data parallel); 1: optimizer states + f32 masters; 2: + gradients; 3: + parameters
    int64_t reduce_bucket_size = 500000000;        // elements per gradient bucket (stages 2, 3; stage 0's all-reduce)
    bool overlap_comm = true;                      // reduce buckets asynchronously while backward runs
    int64_t gradient_accumulation_steps = 1;
    // fp16 (dynamic loss scaling unless loss_scale > 0)
    bool fp16 = false;
    double loss_scale = 0.0;
    int initial_scale_power = 16;
    int64_t loss_scale_window = 1000;
    int64_t hysteresis = 2;
    bool consecutive_hysteresis = false;
    double min_loss_scale = 1.0;
    // bf16: no loss scaling
    bool bf16 = false;
    // bf16.check_grad_overflow: with bf16, look for inf/NaN gradients and skip such a step (as fp16
    // always does). DeepSpeed's default is off: no check, no collective, and a non-finite gradient
    // reaches the weights.
    bool bf16_check_grad_overflow = false;
    double gradient_clipping = 1.0;                // global L2 norm over every partition; 0: off (DeepSpeed's default is 1.0)
    int64_t train_batch_size = 0;                  // 0: micro * accumulation * world size; else checked
    int64_t train_micro_batch_size_per_gpu = 1;
    int64_t stage3_prefetch_bucket_size = 50000000;  // stage 3: elements gathered ahead of the forward, by the recorded order; 0: off
    // With fp16 or bf16 enabled, the engine casts the module's floating parameters to that dtype
    // itself, in place, as DeepSpeed's engine does (buffers keep their dtype). false: refuse a module
    // whose parameters are not already that dtype (DTypeError), for users who cast it themselves.
    // Not a DeepSpeed key: set it on the struct (after load_config, say).
    bool cast_module_dtype = true;
    // data_types.grad_accum_dtype: the dtype of the gradient partition, where micro-steps accumulate.
    // "" (default): f32 (f64 for an f64 model); "fp16"/"bf16": the model's own (must match it), which
    // gives the ZeRO paper's 2-byte gradients (in stage 1 the partition is then a slice of the whole
    // gradient buffer). "fp32" is the default made explicit.
    std::string grad_accum_dtype;

    // ValueError naming the field for an impossible value (stage not 0..3, window <= 0, ...).
    void validate() const;
    // train_batch_size, or micro * accumulation * world_size when it is 0 (the engine checks they agree).
    int64_t global_batch_size(int world_size) const {
        return train_batch_size > 0 ? train_batch_size
                                    : train_micro_batch_size_per_gpu * gradient_accumulation_steps * world_size;
    }
};

// Parses DeepSpeed JSON text; `source` names it in errors (a file name).
ZeroConfig parse_config(const std::string& json_text, const std::string& source = "config");
ZeroConfig load_config(const std::string& path);

}  // namespace ampgrad::zero

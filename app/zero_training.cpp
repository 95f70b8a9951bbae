// zero_training.cpp: the run's model under the ZeRO engine (app/zero_training.hpp).
#include "app/zero_training.hpp"

#include <cmath>
#include <cstdlib>

#include "ampgrad_config.h"
#include "core/cuda_info.hpp"
#include "core/error.hpp"
#include "dist/process_group.hpp"
#include "optim/adamw.hpp"

namespace ampgrad::app {

namespace {

zero::ZeroConfig engine_config(const RunConfig& cfg, int world_size) {
    if (cfg.prec == "fp16")
        throw ValueError("--zero: --prec fp16 (autocast + GradScaler) is not supported with ZeRO; use --prec fp16-master "
                         "(f16 weights, f32 master partitions, DeepSpeed's dynamic loss scaler)");
    if (cfg.zero < 0 || cfg.zero > 3) throw ValueError(fmt::format("--zero: stage {} is not 0, 1, 2 or 3", cfg.zero));
    if (cfg.batch_size % world_size != 0)
        throw ValueError(fmt::format("--zero: --batch-size {} is not divisible by the {} processes", cfg.batch_size,
                                     world_size));
    zero::ZeroConfig c;
    c.stage = static_cast<int>(cfg.zero);
    c.train_micro_batch_size_per_gpu = cfg.batch_size / world_size;
    c.gradient_accumulation_steps = cfg.grad_accum;
    c.gradient_clipping = cfg.grad_clip;
    if (cfg.prec == "fp16-master") {
        const int power = static_cast<int>(std::lround(std::log2(cfg.init_scale)));
        if (std::ldexp(1.0, power) != cfg.init_scale)
            throw ValueError(fmt::format("--zero with fp16-master: --init-scale {} must be a power of two", cfg.init_scale));
        c.fp16 = true;
        c.initial_scale_power = power;
        c.loss_scale_window = cfg.scale_window;
        c.hysteresis = cfg.hysteresis;
    }
    return c;
}

}  // namespace

std::string dist_backend_for(const std::string& device) {
    if (const char* chosen = std::getenv("AMPGRAD_DIST_BACKEND"); chosen && *chosen) {
        const std::string backend = chosen;
        if (backend != "gloo" && backend != "nccl")
            throw ValueError(fmt::format("AMPGRAD_DIST_BACKEND='{}' must be gloo or nccl", backend));
        if (backend == "nccl" && device != "cuda")
            throw ValueError("AMPGRAD_DIST_BACKEND=nccl: NCCL moves GPU tensors; this run is on the CPU (--device cpu)");
        return backend;
    }
    if (device != "cuda" || !AMPGRAD_WITH_NCCL) return "gloo";
    const int ranks_here = dist::rendezvous_info_from_env().local_world_size;
    return ranks_here <= cuda::device_count() ? "nccl" : "gloo";
}

Device rank_device(const std::string& device) {
    if (device != "cuda") return Device(kCPU);
    const int gpus = cuda::device_count();
    if (gpus < 1) throw DeviceError("--device cuda: no usable CUDA GPU on this machine (no driver or no device)");
    return Device(kCUDA, dist::is_initialized() ? dist::local_rank() % gpus : 0);
}

void init_zero_process_group(const std::string& device) {
    if (dist::is_initialized()) return;
    dist::InitOptions o;
    // ampgrad-run --collective-timeout S: the limit of every collective (the watchdog's too).
    if (const char* t = std::getenv("AMPGRAD_COLLECTIVE_TIMEOUT"); t && *t) {
        char* end = nullptr;
        const long seconds = std::strtol(t, &end, 10);
        if (*end != '\0' || seconds < 1)
            throw ValueError(fmt::format("AMPGRAD_COLLECTIVE_TIMEOUT='{}' must be a whole number of seconds, at least 1", t));
        o.timeout = dist::Millis(seconds * 1000);
    }
    if (std::getenv("WORLD_SIZE") == nullptr) {
        o.rank = 0;
        o.world_size = 1;
        o.master_addr = "127.0.0.1";
        o.master_port = 0;   // the store binds any free port: no other run can take it between pick and bind
    }
    dist::init_process_group(dist_backend_for(device), o);
}

ZeroTraining::ZeroTraining(const RunConfig& cfg, const std::shared_ptr<nn::Module>& model)
    : mode_(cfg.prec), device_type_(cfg.device == "cuda" ? kCUDA : kCPU) {
    init_zero_process_group(cfg.device);
    zero::ZeroConfig c = engine_config(cfg, dist::world_size());
    if (c.fp16) model->to(kFloat16);
    optim::AdamOptions options = optim::AdamWOptions(cfg.lr).betas({cfg.beta1, cfg.beta2}).weight_decay(cfg.weight_decay);
    engine_ = std::make_unique<zero::ZeroEngine>(model, c, [options](std::vector<Tensor> master) {
        return std::make_unique<optim::AdamW>(master, options);
    });
    // The same parameters decay as in one process (app/precision.cpp's groups): matrices and
    // embeddings, not biases and norm gains. The engine applies it per parameter run of its partition.
    const double weight_decay = cfg.weight_decay;
    engine_->set_weight_decay([weight_decay](const std::string&, const Tensor& p) {
        return optim::gets_weight_decay(p) ? weight_decay : 0.0;
    });
    if (mode_ == "fp8") fp8_ = std::make_unique<Fp8Run>(cfg, *model);
}

std::unique_ptr<amp::AutocastGuard> ZeroTraining::autocast() const {
    if (fp8_) return fp8_->autocast();
    if (mode_ != "bf16") return nullptr;
    return std::make_unique<amp::AutocastGuard>(device_type_, kBFloat16);
}

void ZeroTraining::set_lr(double lr) {
    for (optim::ParamGroup& g : engine_->optimizer().param_groups()) g.set_lr(lr);
}

void ZeroTraining::backward(const Tensor& micro_loss) {
    engine_->backward(micro_loss);
    engine_->step();   // reduces and steps at the accumulation boundary only
}

StepOutcome ZeroTraining::step() {
    if (engine_->micro_steps() % engine_->config().gradient_accumulation_steps != 0)
        throw InternalError("ZeroTraining::step: called between accumulation boundaries");
    StepOutcome out;
    out.scale = step_scale_;
    out.skipped = !engine_->was_step_applied();
    out.grad_norm = out.skipped ? INFINITY : engine_->global_grad_norm();
    if (fp8_) fp8_->update();   // all_reduce MAX of the amaxes over the ranks, then the scales
    return out;
}

}  // namespace ampgrad::app

// trainer.cpp: one training run (app/trainer.hpp): its steps, evaluation and sampling. How a
// Trainer is built is in trainer_setup.cpp.
#include "app/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <numbers>

#include "ampgrad_config.h"
#include "app/deterministic_run.hpp"
#include "app/export_hf.hpp"
#include "app/lora_run.hpp"
#include "autograd/grad_mode.hpp"
#include "autograd/ops/ops.hpp"
#include "core/allocator.hpp"
#include "core/cuda_info.hpp"
#include "core/determinism.hpp"
#include "core/error.hpp"
#include "core/philox.hpp"
#include "data/text.hpp"
#include "dist/process_group.hpp"
#include "models/generation.hpp"
#include "models/pretrained.hpp"
#include "nn/init.hpp"

namespace ampgrad::app {

namespace {

// The addition task's exact match: greedy answers through the KV-cache loop (models::generate).
double addition_exact_match(const data::AdditionTask& task, const models::CausalLM& lm, int64_t count) {
    auto greedy = [&lm](const Tensor& prompts, int64_t new_tokens) {   // (B,P) -> (B,P+new_tokens)
        models::GenerationConfig g;
        g.max_new_tokens = new_tokens;                                  // do_sample false: argmax
        return models::generate(lm, prompts.to(lm.device()), Tensor(), g).to(Device(kCPU));
    };
    return task.exact_match(greedy, count);
}

}  // namespace

double Trainer::lr_at(int64_t it) const {
    if (it < cfg_.warmup) return cfg_.lr * static_cast<double>(it + 1) / static_cast<double>(cfg_.warmup + 1);
    if (it >= cfg_.steps) return cfg_.min_lr;
    const double r = static_cast<double>(it - cfg_.warmup) / static_cast<double>(std::max<int64_t>(cfg_.steps - cfg_.warmup, 1));
    return cfg_.min_lr + 0.5 * (1.0 + std::cos(std::numbers::pi * r)) * (cfg_.lr - cfg_.min_lr);
}

void Trainer::set_steps(int64_t steps) {
    if (steps < step_)
        throw ValueError(fmt::format("--steps {}: the run being resumed is already at step {}; give --steps {} or more "
                                     "(or resume without --steps)", steps, step_, step_));
    cfg_.steps = steps;
}

std::pair<Tensor, Tensor> Trainer::next_batch(int64_t micro) {
    const int64_t batch = layout_.micro;   // this rank's share (--zero, data parallel)
    if (cfg_.deterministic) key_streams(rank_ * layout_.accum + micro);
    std::pair<Tensor, Tensor> xy;
    if (addition_) xy = addition_->batch(addition_state_, batch);
    else if (sampler_) xy = sampler_->next(batch, model_->block_size());
    else   // micro-batch k of rank r: windows position + (r * accum + k) * batch (app/shard_data.hpp; the layout
           // covers the same batch_size * grad_accum windows per step at any world size)
        xy = shards_->train->batch_at(data_position_ + static_cast<uint64_t>((rank_ * layout_.accum + micro) * batch), batch);
    if (device_.is_cuda()) return {xy.first.to(device_), xy.second.to(device_)};
    return xy;
}

// --deterministic: global micro-batch g of this step draws its windows and its dropout masks from
// streams keyed on (seed, step, g), whatever rank draws it (token shards already index by g).
void Trainer::key_streams(int64_t global_micro) {
    const uint64_t batches = keyed_seed(cfg_.seed, step_, global_micro, KeyedStream::kBatches);
    if (sampler_) sampler_->set_state({batches, 0});
    if (addition_) addition_state_ = {batches, 0};
    manual_seed(keyed_seed(cfg_.seed, step_, global_micro, KeyedStream::kDropout));
}

Tensor Trainer::loss_on(const Tensor& x, const Tensor& y) {
    std::unique_ptr<amp::AutocastGuard> autocast = zero_ ? zero_->autocast() : precision_->autocast();
    return model_->forward(x, y);
}

// One micro-batch's backward. Data parallel: only the last micro-batch's backward all-reduces
// (PyTorch DDP's no_sync); ZeRO's engine knows its accumulation boundary itself.
void Trainer::backward_micro(const Tensor& loss, bool last) {
    if (zero_) {
        zero_->backward(loss);
    } else if (ddp_ && !last) {
        auto no_sync = ddp_->no_sync();
        precision_->backward(loss);
    } else {
        precision_->backward(loss);
    }
}

TrainStats Trainer::train_step() {
    TrainStats s;
    s.step = step_ + 1;
    s.lr = lr_at(step_);
    if (zero_) zero_->set_lr(s.lr);
    else precision_->set_lr(s.lr);
    model_->module()->train();
    if (zero_) zero_->zero_grad();
    else precision_->zero_grad();
    const int64_t accum = layout_.accum;
    Tensor loss_sum;   // () the micro-batches' mean losses, summed on the device (one read at the end)
    std::vector<Tensor> micro_losses;   // --deterministic: each, for the tree mean
    for (int64_t k = 0; k < accum; ++k) {
        const auto fetch_start = std::chrono::steady_clock::now();
        auto [x, y] = next_batch(k);
        s.data_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - fetch_start).count();
        Tensor loss = loss_on(x, y);
        loss_sum = k == 0 ? loss.detach() : loss_sum + loss.detach();
        if (cfg_.deterministic) micro_losses.push_back(loss.detach());
        backward_micro(loss, k + 1 == accum);
        s.tokens += x.numel() * world_size_;
    }
    if (before_optimizer_step_) before_optimizer_step_();   // --ckpt-async's fence
    StepOutcome o = zero_ ? zero_->step() : precision_->step();
    if (shards_) data_position_ += static_cast<uint64_t>(cfg_.batch_size * cfg_.grad_accum);   // the global batch
    s.loss = loss_sum.item<double>() / static_cast<double>(accum);
    if (cfg_.deterministic) {   // the tree mean over the global micro-batch index
        std::vector<double> losses;
        for (const Tensor& l : micro_losses) losses.push_back(l.item<double>());
        s.loss = tree_mean_loss(losses, zero_ != nullptr);
    } else if (zero_ || ddp_) {   // the mean over the ranks' shares
        Tensor l = full({1}, s.loss, TensorOptions().dtype(kFloat64));
        dist::all_reduce(l, dist::ReduceOp::kAvg);
        s.loss = l.item<double>();
    }
    if (zero_) {   // the stage and this rank's model-state bytes
        s.zero_stage = zero_->stage();
        s.state_bytes = zero_->state_bytes();
    }
    if (const Fp8Run* fp8 = zero_ ? zero_->fp8() : precision_->fp8()) s.fp8 = fp8->step_report();
    s.grad_norm = o.grad_norm;
    s.scale = o.scale;
    s.skipped = o.skipped;
    s.skipped_total = skipped_steps();
    s.grad_accum = accum;
    s.world_size = world_size_;
    s.global_batch = cfg_.batch_size * cfg_.grad_accum;
    s.peak_bytes = max_memory_allocated(device_);
    ++step_;
    return s;
}

double Trainer::mean_loss(const std::vector<std::pair<Tensor, Tensor>>& batches) {
    double total = 0.0;
    int64_t windows = 0;
    for (const auto& [x, y] : batches) {   // weighted by windows: a full split's last batch may be short
        const double l = loss_on(device_.is_cuda() ? x.to(device_) : x, device_.is_cuda() ? y.to(device_) : y).item<double>();
        total += l * static_cast<double>(x.size(0));
        windows += x.size(0);
    }
    return total / static_cast<double>(windows);
}

// Shards: the estimate reads the first eval_iters batches of the validation stream (in order); the
// full split reads every window of it once. Returns the loss and what it is.
std::pair<double, std::string> Trainer::split_loss(uint64_t windows, const WindowFetch& fetch) {
    const uint64_t B = static_cast<uint64_t>(cfg_.batch_size);
    double total = 0.0;
    for (uint64_t first = 0; first < windows; first += B) {
        const int64_t n = static_cast<int64_t>(std::min(B, windows - first));
        total += mean_loss({fetch(first, n)}) * static_cast<double>(n);
    }
    return {total / static_cast<double>(windows),
            fmt::format("full split: all {} windows of {} tokens", windows, model_->block_size())};
}

EvalStats Trainer::evaluate(bool full_split) {
    if (!addition_ && !sampler_ && !shards_)
        throw IOError(fmt::format("evaluate: the run's token shards cannot be read: {}", data_unavailable_));
    EvalStats e;
    e.step = step_;
    NoGradGuard no_grad;
    model_->module()->eval();
    const GeneratorState rng = get_rng_state();   // evaluation must not move the training RNG
    // --deterministic: batches of one rank's micro-batch, the same in every layout (the GEMM shapes too).
    const int64_t B = cfg_.deterministic ? layout_.micro : cfg_.batch_size, iters = cfg_.eval_iters;
    if (addition_) {
        data::SamplerState train_state{0xE7A1, 0};
        std::vector<std::pair<Tensor, Tensor>> train;
        for (int64_t i = 0; i < iters; ++i) train.push_back(addition_->batch(train_state, B));
        e.train_loss = e.val_loss = mean_loss(train);
        e.exact_match = addition_exact_match(*addition_, model_->causal_lm(), 500);
        e.protocol = fmt::format("estimate: {} batches of {} problems", iters, B);
    } else if (shards_) {   // the first windows of the training stream; the validation stream in order
        const data::ShardLoader &train = *shards_->train, &val = *shards_->val;
        std::vector<std::pair<Tensor, Tensor>> train_batches, val_batches;
        for (int64_t i = 0; i < iters; ++i) train_batches.push_back(train.batch_at(static_cast<uint64_t>(i * B), B));
        e.train_loss = mean_loss(train_batches);
        if (full_split) {
            std::tie(e.val_loss, e.protocol) =
                split_loss(val.windows_per_epoch(), [&](uint64_t first, int64_t n) { return val.batch_at(first, n); });
        } else {
            for (int64_t i = 0; i < iters; ++i) val_batches.push_back(val.batch_at(static_cast<uint64_t>(i * B), B));
            e.val_loss = mean_loss(val_batches);
            e.protocol = fmt::format("estimate: the first {} batches of {} windows", iters, B);
        }
    } else {
        const int64_t T = model_->block_size();
        e.train_loss = mean_loss(data::fixed_batches(corpus_.train, iters, B, T));
        if (full_split) {
            const uint64_t windows = (corpus_.val->size() - 1) / static_cast<uint64_t>(T);
            std::tie(e.val_loss, e.protocol) = split_loss(windows, [&](uint64_t first, int64_t n) {
                return data::sequential_windows(*corpus_.val, first, n, T);
            });
        } else {
            e.val_loss = mean_loss(data::fixed_batches(corpus_.val, iters, B, T));
            e.protocol = fmt::format("estimate: {} random batches of {} windows", iters, B);
        }
    }
    set_rng_state(rng);
    model_->module()->train();
    return e;
}

std::vector<int64_t> Trainer::unspellable_tokens() const {
    std::vector<int64_t> ids;
    for (int64_t id = corpus_.tokenizer.vocab_size(); id < model_->vocab_size(); ++id) ids.push_back(id);
    return ids;
}

// The KV-cache loop (models/generation.hpp) from the prompt, with the training RNG put back after.
std::string Trainer::sample(const std::string& prompt, int64_t tokens, double temperature, std::optional<int64_t> top_k) {
    const Tensor prompt_ids = corpus_.tokenizer.encode_tensor(prompt.empty() ? "\n" : prompt, device_);   // (1,T0)
    models::GenerationConfig g;
    g.max_new_tokens = tokens;
    g.do_sample = temperature > 0.0;
    g.temperature = g.do_sample ? temperature : 1.0;
    g.top_k = top_k;
    g.suppress_tokens = unspellable_tokens();
    const GeneratorState rng = get_rng_state();
    model_->module()->eval();
    Tensor out = models::generate(model_->causal_lm(), prompt_ids, Tensor(), g);   // (1,T0+n)
    model_->module()->train();
    set_rng_state(rng);
    const int64_t T0 = prompt_ids.size(1);
    return corpus_.tokenizer.decode(data::token_ids(out.narrow(1, T0, out.size(1) - T0)));
}

}  // namespace ampgrad::app

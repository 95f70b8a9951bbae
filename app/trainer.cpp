// trainer.cpp: one training run (app/trainer.hpp).
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

Device checked_device(const std::string& name) {
    if (name == "cpu") return Device(kCPU);
    if (!AMPGRAD_WITH_CUDA)
        throw DeviceError("--device cuda: this build of ampgrad has no CUDA backend (nvcc was not found when it "
                          "was configured); use --device cpu");
    if (!cuda::is_available())
        throw DeviceError("--device cuda: no usable CUDA GPU on this machine (no driver or no device); use --device cpu");
    return Device(kCUDA);
}

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

int launched_world_size() {
    for (const char* name : {"WORLD_SIZE", "SLURM_NTASKS"}) {
        const char* v = std::getenv(name);
        if (v == nullptr || *v == '\0') continue;
        char* end = nullptr;
        const long n = std::strtol(v, &end, 10);
        if (*end != '\0' || n < 1)
            throw ValueError(fmt::format("environment variable {}='{}' is not a positive integer", name, v));
        return static_cast<int>(n);
    }
    return 1;
}

Trainer::Trainer(const RunConfig& cfg) : Trainer(cfg, std::nullopt, /*training=*/true) {}

std::unique_ptr<Trainer> Trainer::pretrained_for_inference(const RunConfig& cfg) {
    if (cfg.init_from.empty()) throw ValueError("--hf: no Hugging Face folder given");
    RunConfig c = cfg;
    c.zero = -1;
    return std::unique_ptr<Trainer>(new Trainer(c, std::nullopt, /*training=*/false));
}

// --init-from: the model takes the folder's family and sizes, recorded in the run config (its sizes
// and its config.json as the family reads it) so that a checkpoint of this run rebuilds it without
// the folder. A learned position table (GPT-2's n_positions) fixes the context T; a RoPE model keeps
// its max_position_embeddings, and --block-size (at most that) sets T.
void Trainer::adopt_pretrained_sizes() {
    const models::PretrainedConfig hf = models::read_pretrained_config(cfg_.init_from);
    cfg_.pretrained_files = read_pretrained_files(cfg_.init_from);
    if (cfg_.model != hf.family && cfg_.model_given)
        throw ValueError(fmt::format("--model {}: the folder {} holds a {} (--init-from sets the model; drop --model)",
                                     cfg_.model, cfg_.init_from, hf.architecture));
    cfg_.model = hf.family;
    const models::ModelFamily& family = cfg_.family();
    const models::ModelSizes sizes = family.sizes(hf.config);
    auto adopt = [&](const char* flag, int64_t& field, const models::ModelSizes::Size& size) {
        if (field > 0 && field != size.value)   // a size typed beside --init-from must agree with the folder
            throw ValueError(fmt::format("{} {}: the weights in {} have {} {} (drop {})", flag, field, cfg_.init_from,
                                         size.key, size.value, flag));
        field = size.value;
    };
    adopt("--n-layer", cfg_.n_layer, sizes.n_layer);
    adopt("--n-head", cfg_.n_head, sizes.n_head);
    adopt("--n-embd", cfg_.n_embd, sizes.n_embd);
    if (sizes.context_fixed) {
        adopt("--block-size", cfg_.block_size, sizes.context);
    } else if (cfg_.block_size > sizes.context.value) {
        throw ValueError(fmt::format("--block-size {}: longer than the context of the {} in {} ({} {})", cfg_.block_size,
                                     family.title, cfg_.init_from, sizes.context.key, sizes.context.value));
    }
    const auto& presets = family.presets;
    if (std::find(presets.begin(), presets.end(), cfg_.preset) == presets.end())
        cfg_.preset = presets.front();                                     // unused: the folder is the config
    cfg_.vocab_size = sizes.vocab_size;
    cfg_.pretrained_config = hf.config;
    cfg_.validate();                                                       // e.g. --dropout, for this family
}

// Joins the launcher's process group (ZeRO, or data parallel); every rank draws its own batches
// (seed + 1 + rank) and dropout masks, and takes its share of each step (layout_, set once the
// accumulation is known: batch_size / world_size sequences per micro-step when that divides).
void Trainer::join_process_group() {
    init_zero_process_group(cfg_.device);
    rank_ = dist::rank();
    world_size_ = dist::world_size();
    device_ = rank_device(cfg_.device);   // GPU LOCAL_RANK % the node's GPUs
}

// The optimiser and the ZeRO engine see the step as this world size runs it: batch_size / world
// sequences per rank becomes layout_.micro, over layout_.accum micro-steps (the loss divides by it).
RunConfig Trainer::layout_config() const {
    RunConfig c = cfg_;
    c.batch_size = layout_.micro * world_size_;
    c.grad_accum = layout_.accum;
    return c;
}

Trainer::Trainer(const RunConfig& cfg, const std::optional<data::Tokenizer>& tokenizer, bool training)
    : cfg_(cfg), device_(checked_device(cfg.device)) {
    cfg_.validate();
    // A fresh --init-from run (a resumed one has the sizes already, and its checkpoint's weights).
    const bool load_pretrained = !cfg_.init_from.empty() && cfg_.vocab_size == 0;
    if (load_pretrained) adopt_pretrained_sizes();
    // "auto" -> what it stands for; with token shards and no BPE folder, the shards' meta.json says it.
    const std::string resolved = resolve_tokenizer(cfg_.tokenizer, cfg_.init_from);
    if (!(cfg_.tokenizer == "auto" && resolved == "char" && uses_token_shards(cfg_))) cfg_.tokenizer = resolved;
    const bool data_parallel = training && cfg_.zero < 0 && launched_world_size() > 1;
    if (cfg_.zero >= 0 || data_parallel) join_process_group();
    if (cfg_.task == "addition") {
        addition_.emplace(cfg_.digits);
        corpus_.tokenizer = addition_->tokenizer();
        corpus_.source = fmt::format("{}-digit addition", cfg_.digits);
        addition_state_ = {cfg_.seed + 1 + static_cast<uint64_t>(rank_), 0};
    } else {
        cfg_.data_format = uses_token_shards(cfg_) ? "shards" : "text";   // saved: a checkpoint knows without looking
        open_corpus(tokenizer, training);
    }
    const int64_t vocab = corpus_.tokenizer.vocab_size();
    if (!cfg_.init_from.empty() && vocab > cfg_.model_vocab_size(vocab))
        throw ValueError(fmt::format("--init-from {}: the {} tokenizer has {} tokens, more than the model's vocabulary of "
                                     "{}", cfg_.init_from, cfg_.tokenizer, vocab, cfg_.model_vocab_size(vocab)));
    // The context (checks the model's config, ValueError naming the field, before any data check).
    const int64_t T = cfg_.context_length(vocab);
    cfg_.resolve_accumulation(addition_ ? std::max(T, addition_->sequence_length()) : T);
    layout_ = step_layout(cfg_, world_size_);   // this rank's share of each step (app/auto_restart.hpp)
    if (training) check_deterministic_run(layout_config(), world_size_);
    set_deterministic(training && cfg_.deterministic);   // read by the ZeRO engine it builds below
    if (uses_token_shards(cfg_)) {   // every token checked against the model's vocabulary, before training
        open_shards(T, cfg_.model_vocab_size(vocab), training);
    } else if (!addition_ && static_cast<int64_t>(std::min(corpus_.train->size(), corpus_.val->size())) <= T) {
        throw ValueError(fmt::format("data {}: too short: its {} tokens leave {} for validation, fewer than one "
                                     "window of block_size {} + 1", corpus_.source,
                                     corpus_.train->size() + corpus_.val->size(), corpus_.val->size(), T));
    }
    manual_seed(cfg_.seed);
    // A resumed --lora run re-reads its frozen base from --init-from (a ZeRO checkpoint holds only the adapters).
    const bool read_base = load_pretrained || (!cfg_.lora.empty() && !cfg_.init_from.empty());
    {
        std::optional<nn::init::SkipInitGuard> allocate_only;         // the weights are loaded next
        if (read_base) allocate_only.emplace();
        model_ = LanguageModel::make(cfg_, vocab, addition_ ? addition_->sequence_length() : 0);
    }
    if (read_base)   // on the host, before any move; a Mistral folder fills a Llama
        models::load_pretrained_weights(model_->pretrained_model(), cfg_.init_from);
    attach_lora_adapters(cfg_, *model_->causal_lm_ptr());   // --lora / --adapter: before the optimizer sees the weights
    if (device_.is_cuda()) model_->module()->to(device_);
    if (cfg_.zero < 0) {
        precision_ = std::make_unique<Precision>(layout_config(), *model_->module());   // fp16-master may turn the weights to f16
        if (!data_parallel) return;
        ddp_ = std::make_unique<dist::DistributedDataParallel>(model_->module());   // broadcasts rank 0's weights
        // Each rank's dropout stream starts here, so that every rank's RNG offset is the same at
        // every step and a checkpoint's offset serves them all (restore_rank_streams).
        manual_seed(cfg_.seed + 7919 * static_cast<uint64_t>(rank_));
        return;
    }
    zero_ = std::make_unique<ZeroTraining>(layout_config(), model_->module());
    if (rank_ > 0) manual_seed(cfg_.seed + 7919 * static_cast<uint64_t>(rank_));
}

// A text file is tokenized whole into memory (90% / 10% split); token shards are only named here
// (the constructor maps and checks them once the model's vocabulary and context are known).
void Trainer::open_corpus(const std::optional<data::Tokenizer>& tokenizer, bool training) {
    if (!uses_token_shards(cfg_)) {
        corpus_ = load_corpus(cfg_, tokenizer);
        sampler_ = std::make_unique<data::BatchSampler>(corpus_.train, cfg_.seed + 1 + static_cast<uint64_t>(rank_));
        return;
    }
    if (training)   // a folder without shards, or a .bin that is none, is named before anything else
        for (const std::string& shard : data::list_shards(cfg_.data_file, "train")) data::read_shard_header(shard);
    corpus_.tokenizer = tokenizer ? *tokenizer : shard_tokenizer(cfg_);
}

// Training checks every token first. Sample, eval and export (training false) check only the
// validation shards, and do without shards that are gone (evaluate() then says so).
void Trainer::open_shards(int64_t T, int64_t model_vocab, bool training) {
    try {
        shards_ = std::make_unique<ShardData>(open_shard_data(cfg_, T, model_vocab, /*check_train_tokens=*/training));
        corpus_.source = shards_->source;
    } catch (const IOError& e) {
        if (training) throw;
        data_unavailable_ = e.what();
        corpus_.source = fmt::format("{} (unavailable: {})", cfg_.data_file, e.what());
    }
}

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

// trainer_setup.cpp: how a Trainer is built (app/trainer.hpp): the device, the process group, the
// data and tokenizer, the model (with --init-from weights and LoRA adapters) and the optimizer or
// ZeRO engine. The training and evaluation steps are in trainer.cpp.
#include <algorithm>
#include <cstdlib>

#include "ampgrad_config.h"
#include "app/deterministic_run.hpp"
#include "app/export_hf.hpp"
#include "app/lora_run.hpp"
#include "app/trainer.hpp"
#include "autograd/ops/ops.hpp"
#include "core/cuda_info.hpp"
#include "core/determinism.hpp"
#include "core/error.hpp"
#include "data/text.hpp"
#include "dist/process_group.hpp"
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
    const int64_t vocab = open_data(tokenizer, training);
    manual_seed(cfg_.seed);
    build_model(vocab, load_pretrained);
    build_optimizer(data_parallel);
}

// The task's data (addition problems, a text file or token shards) and its tokenizer, checked
// against the model's vocabulary and context; sets this rank's layout of the step. Returns the
// tokenizer's vocabulary size.
int64_t Trainer::open_data(const std::optional<data::Tokenizer>& tokenizer, bool training) {
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
    return vocab;
}

// The model of the run's family, its pretrained weights (--init-from) and LoRA adapters, on the device.
void Trainer::build_model(int64_t vocab, bool load_pretrained) {
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
}

// The optimizer: Precision (one process, or data parallel under DDP) or the ZeRO engine (--zero).
void Trainer::build_optimizer(bool data_parallel) {
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

}  // namespace ampgrad::app

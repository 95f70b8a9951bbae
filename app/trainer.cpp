// trainer.cpp: one training run (app/trainer.hpp).
#include "app/trainer.hpp"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <numbers>

#include "ampgrad_config.h"
#include "autograd/grad_mode.hpp"
#include "autograd/ops/ops.hpp"
#include "core/cuda_info.hpp"
#include "core/error.hpp"
#include "core/philox.hpp"
#include "data/text.hpp"
#include "dist/process_group.hpp"
#include "models/generation.hpp"
#include "models/llama_json.hpp"
#include "models/pretrained.hpp"
#include "nn/init.hpp"

namespace ampgrad::app {

Corpus load_corpus(const RunConfig& cfg, const std::optional<data::Tokenizer>& saved) {
    Corpus c;
    std::string text;
    if (cfg.data_file.empty()) {
        text = std::string(data::tiny_shakespeare());
        c.source = "bundled Tiny Shakespeare";
    } else {
        text = data::read_text_file(cfg.data_file);
        c.source = cfg.data_file;
    }
    c.tokenizer = saved ? *saved : make_tokenizer(resolve_tokenizer(cfg.tokenizer, cfg.init_from), text);
    std::vector<int32_t> ids = c.tokenizer.encode(text);
    const size_t n_train = ids.size() * 9 / 10;
    c.train = std::make_shared<std::vector<int32_t>>(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n_train));
    c.val = std::make_shared<std::vector<int32_t>>(ids.begin() + static_cast<std::ptrdiff_t>(n_train), ids.end());
    return c;
}

std::string resolve_tokenizer(const std::string& spec, const std::string& pretrained_dir) {
    if (spec != "auto") return spec;
    const std::filesystem::path dir(pretrained_dir);
    const bool has_bpe = !pretrained_dir.empty() && std::filesystem::exists(dir / "vocab.json") &&
                         std::filesystem::exists(dir / "merges.txt");
    return has_bpe ? "gpt2:" + pretrained_dir : "char";
}

data::Tokenizer make_tokenizer(const std::string& spec, std::string_view text) {
    if (spec == "byte") return data::Tokenizer::bytes();
    if (spec == "char") return data::Tokenizer::chars_of(text);
    if (spec == "gpt2") return data::Tokenizer::gpt2();   // GPT-2's BPE, built into the library
    if (spec.starts_with("gpt2:"))
        return data::Tokenizer::from_bpe(std::make_shared<data::BpeTokenizer>(data::BpeTokenizer::from_hf_dir(spec.substr(5))));
    if (spec.starts_with("tiktoken:"))
        return data::Tokenizer::from_bpe(std::make_shared<data::BpeTokenizer>(data::BpeTokenizer::from_tiktoken(spec.substr(9))));
    throw ValueError(fmt::format("--tokenizer: unknown value \"{}\"; expected auto, char, byte, gpt2, gpt2:DIR or tiktoken:FILE",
                                 spec));
}

// A BPE is saved whole (each id's byte-level spelling and the merges, as in vocab.json and
// merges.txt), so that a checkpoint samples and evaluates without the files it was trained with.
nlohmann::json tokenizer_to_json(const data::Tokenizer& t) {
    nlohmann::json j = {{"kind", t.kind_name()}, {"vocab_size", t.vocab_size()}};
    if (t.kind() == data::Tokenizer::Kind::kChar) j["code_points"] = t.code_points();
    if (t.kind() == data::Tokenizer::Kind::kBpe) {
        j["tokens"] = t.bpe()->token_strings();
        std::vector<std::string> merges;
        for (const auto& [left, right] : t.bpe()->merge_strings()) merges.push_back(left + " " + right);
        j["merges"] = merges;
    }
    return j;
}

data::Tokenizer tokenizer_from_json(const nlohmann::json& j) {
    const std::string kind = j.at("kind").get<std::string>();
    if (kind == "byte") return data::Tokenizer::bytes();
    if (kind == "char") return data::Tokenizer::from_code_points(j.at("code_points").get<std::vector<uint32_t>>());
    if (kind != "bpe") throw ValueError(fmt::format("checkpoint: unknown tokenizer kind \"{}\"", kind));
    std::vector<std::pair<std::string, std::string>> merges;
    for (const std::string& m : j.at("merges").get<std::vector<std::string>>()) {
        const size_t space = m.find(' ');
        if (space == std::string::npos) throw ValueError(fmt::format("checkpoint: the tokenizer merge \"{}\" has no space", m));
        merges.emplace_back(m.substr(0, space), m.substr(space + 1));
    }
    return data::Tokenizer::from_bpe(std::make_shared<data::BpeTokenizer>(
        data::BpeTokenizer::from_tokens(j.at("tokens").get<std::vector<std::string>>(), merges, "checkpoint tokenizer")));
}

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

// --init-from: the model takes the folder's kind and sizes, recorded in the run config so that a
// checkpoint of this run rebuilds it without the folder. A GPT-2's n_positions becomes the context
// T; a Llama keeps its max_position_embeddings, and --block-size (at most that) sets T.
void Trainer::adopt_pretrained_sizes() {
    const models::PretrainedConfig hf = models::read_pretrained_config(cfg_.init_from);
    const std::string kind = hf.llama ? "llama" : "gpt";
    if (cfg_.model != kind && cfg_.model_given)
        throw ValueError(fmt::format("--model {}: the folder {} holds a {} (--init-from sets the model; drop --model)",
                                     cfg_.model, cfg_.init_from, hf.architecture));
    cfg_.model = kind;
    auto adopt = [&](const char* flag, int64_t& field, int64_t value, const char* key) {
        if (field > 0 && field != value)   // a size typed beside --init-from must agree with the folder
            throw ValueError(fmt::format("{} {}: the weights in {} have {} {} (drop {})", flag, field, cfg_.init_from,
                                         key, value, flag));
        field = value;
    };
    if (hf.gpt) {
        adopt("--n-layer", cfg_.n_layer, hf.gpt->n_layer, "n_layer");
        adopt("--n-head", cfg_.n_head, hf.gpt->n_head, "n_head");
        adopt("--n-embd", cfg_.n_embd, hf.gpt->n_embd, "n_embd");
        adopt("--block-size", cfg_.block_size, hf.gpt->block_size, "n_positions");
        cfg_.vocab_size = hf.gpt->vocab_size;
        cfg_.layer_norm_epsilon = hf.gpt->layer_norm_epsilon;
        return;
    }
    const models::LlamaConfig& c = *hf.llama;
    adopt("--n-layer", cfg_.n_layer, c.num_hidden_layers, "num_hidden_layers");
    adopt("--n-head", cfg_.n_head, c.num_attention_heads, "num_attention_heads");
    adopt("--n-embd", cfg_.n_embd, c.hidden_size, "hidden_size");
    if (cfg_.preset.rfind("llama-", 0) != 0) cfg_.preset = "llama-nano";   // unused: the folder is the config
    cfg_.vocab_size = c.vocab_size;
    cfg_.pretrained_llama = models::to_hf_json(c);
    cfg_.validate();                                                       // e.g. --dropout, now for a Llama
    cfg_.context_length(c.vocab_size);                                     // --block-size within the context
}

// Joins the launcher's process group (ZeRO, or data parallel); every rank draws its own batches
// (seed + 1 + rank) and dropout masks, and takes batch_size / world_size sequences per step.
void Trainer::join_process_group() {
    init_zero_process_group();
    rank_ = dist::rank();
    world_size_ = dist::world_size();
    if (cfg_.batch_size % world_size_ != 0)
        throw ValueError(fmt::format("--batch-size {} is not divisible by the {} processes (rank {}): every rank takes "
                                     "an equal share of the global batch", cfg_.batch_size, world_size_, rank_));
}

Trainer::Trainer(const RunConfig& cfg, const std::optional<data::Tokenizer>& tokenizer, bool training)
    : cfg_(cfg), device_(checked_device(cfg.device)) {
    cfg_.validate();
    // A fresh --init-from run (a resumed one has the sizes already, and its checkpoint's weights).
    const bool load_pretrained = !cfg_.init_from.empty() && cfg_.vocab_size == 0;
    if (load_pretrained) adopt_pretrained_sizes();
    cfg_.tokenizer = resolve_tokenizer(cfg_.tokenizer, cfg_.init_from);   // "auto" -> what it stands for
    const bool data_parallel = training && cfg_.zero < 0 && launched_world_size() > 1;
    if (cfg_.zero >= 0 || data_parallel) join_process_group();
    int64_t vocab = 0;
    if (cfg_.task == "addition") {
        addition_.emplace(cfg_.digits);
        corpus_.tokenizer = addition_->tokenizer();
        corpus_.source = fmt::format("{}-digit addition", cfg_.digits);
        addition_state_ = {cfg_.seed + 1 + static_cast<uint64_t>(rank_), 0};
        vocab = corpus_.tokenizer.vocab_size();
    } else {
        corpus_ = load_corpus(cfg_, tokenizer);
        sampler_ = std::make_unique<data::BatchSampler>(corpus_.train, cfg_.seed + 1 + static_cast<uint64_t>(rank_));
        vocab = corpus_.tokenizer.vocab_size();
    }
    if (!cfg_.init_from.empty() && vocab > cfg_.model_vocab_size(vocab))
        throw ValueError(fmt::format("--init-from {}: the {} tokenizer has {} tokens, more than the model's vocabulary of "
                                     "{}", cfg_.init_from, cfg_.tokenizer, vocab, cfg_.model_vocab_size(vocab)));
    // The context (checks the model's config, ValueError naming the field, before any data check).
    const int64_t T = cfg_.context_length(vocab);
    if (!addition_ && static_cast<int64_t>(std::min(corpus_.train->size(), corpus_.val->size())) <= T)
        throw ValueError(fmt::format("data {}: too short: its {} tokens leave {} for validation, fewer than one "
                                     "window of block_size {} + 1", corpus_.source,
                                     corpus_.train->size() + corpus_.val->size(), corpus_.val->size(), T));
    manual_seed(cfg_.seed);
    {
        std::optional<nn::init::SkipInitGuard> allocate_only;         // the weights are loaded next
        if (load_pretrained) allocate_only.emplace();
        model_ = LanguageModel::make(cfg_, vocab, addition_ ? addition_->sequence_length() : 0);
    }
    if (load_pretrained)   // on the host, before any move; a Mistral folder fills a Llama
        models::load_pretrained_weights(model_->pretrained_model(), cfg_.init_from);
    if (device_.is_cuda()) model_->module()->to(device_);
    if (cfg_.zero < 0) {
        precision_ = std::make_unique<Precision>(cfg_, *model_->module());   // fp16-master may turn the weights to f16
        if (!data_parallel) return;
        if (device_.is_cuda())
            throw ValueError("data parallel training (ampgrad-run without --zero) runs on the CPU over Gloo in this "
                             "build; use --device cpu");
        ddp_ = std::make_unique<dist::DistributedDataParallel>(model_->module());   // broadcasts rank 0's weights
        // Each rank's dropout stream starts here, so that every rank's RNG offset is the same at
        // every step and a checkpoint's offset serves them all (restore_rank_streams).
        manual_seed(cfg_.seed + 7919 * static_cast<uint64_t>(rank_));
        return;
    }
    zero_ = std::make_unique<ZeroTraining>(cfg_, model_->module());
    if (rank_ > 0) manual_seed(cfg_.seed + 7919 * static_cast<uint64_t>(rank_));
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

std::pair<Tensor, Tensor> Trainer::next_batch() {
    const int64_t batch = cfg_.batch_size / world_size_;   // this rank's share (--zero, data parallel)
    auto [x, y] = addition_ ? addition_->batch(addition_state_, batch) : sampler_->next(batch, model_->block_size());
    if (device_.is_cuda()) return {x.to(device_), y.to(device_)};
    return {x, y};
}

Tensor Trainer::loss_on(const Tensor& x, const Tensor& y) {
    std::unique_ptr<amp::AutocastGuard> autocast = zero_ ? zero_->autocast() : precision_->autocast();
    return model_->forward(x, y);
}

TrainStats Trainer::train_step() {
    TrainStats s;
    s.step = step_ + 1;
    s.lr = lr_at(step_);
    if (zero_) zero_->set_lr(s.lr);
    else precision_->set_lr(s.lr);
    auto [x, y] = next_batch();
    model_->module()->train();
    Tensor loss = loss_on(x, y);
    StepOutcome o = zero_ ? zero_->step(loss) : precision_->step(loss);
    s.loss = loss.item<double>();
    if (zero_ || ddp_) {   // the mean over the ranks' shares
        Tensor l = full({1}, s.loss, TensorOptions().dtype(kFloat64));
        dist::all_reduce(l, dist::ReduceOp::kAvg);
        s.loss = l.item<double>();
    }
    if (zero_) {   // the stage and this rank's model-state bytes
        s.zero_stage = zero_->stage();
        s.state_bytes = zero_->state_bytes();
    }
    s.grad_norm = o.grad_norm;
    s.scale = o.scale;
    s.skipped = o.skipped;
    s.skipped_total = skipped_steps();
    s.tokens = x.numel() * world_size_;
    s.world_size = world_size_;
    s.global_batch = x.size(0) * world_size_;
    ++step_;
    return s;
}

EvalStats Trainer::evaluate() {
    EvalStats e;
    e.step = step_;
    NoGradGuard no_grad;
    model_->module()->eval();
    const GeneratorState rng = get_rng_state();   // evaluation must not move the training RNG
    auto mean_loss = [&](const std::vector<std::pair<Tensor, Tensor>>& batches) {
        double total = 0.0;
        for (const auto& [x, y] : batches)
            total += loss_on(device_.is_cuda() ? x.to(device_) : x, device_.is_cuda() ? y.to(device_) : y).item<double>();
        return total / static_cast<double>(batches.size());
    };
    if (addition_) {
        data::SamplerState train_state{0xE7A1, 0};
        std::vector<std::pair<Tensor, Tensor>> train;
        for (int64_t i = 0; i < cfg_.eval_iters; ++i) train.push_back(addition_->batch(train_state, cfg_.batch_size));
        e.train_loss = e.val_loss = mean_loss(train);
        e.exact_match = addition_->exact_match(*model_->gpt(), 500);   // --task addition is GPT only
    } else {
        const int64_t T = model_->block_size();
        e.train_loss = mean_loss(data::fixed_batches(corpus_.train, cfg_.eval_iters, cfg_.batch_size, T));
        e.val_loss = mean_loss(data::fixed_batches(corpus_.val, cfg_.eval_iters, cfg_.batch_size, T));
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
    std::vector<int32_t> ids = corpus_.tokenizer.encode(prompt.empty() ? "\n" : prompt);
    std::vector<int64_t> ids64(ids.begin(), ids.end());
    models::GenerationConfig g;
    g.max_new_tokens = tokens;
    g.do_sample = temperature > 0.0;
    g.temperature = g.do_sample ? temperature : 1.0;
    g.top_k = top_k;
    g.suppress_tokens = unspellable_tokens();
    const GeneratorState rng = get_rng_state();
    model_->module()->eval();
    Tensor out = models::generate(model_->causal_lm(), tensor(ids64, {1, static_cast<int64_t>(ids64.size())}).to(device_),
                                  Tensor(), g);
    model_->module()->train();
    set_rng_state(rng);
    std::vector<int64_t> all = out.to_vector<int64_t>();
    return corpus_.tokenizer.decode(std::vector<int32_t>(all.begin() + static_cast<std::ptrdiff_t>(ids64.size()), all.end()));
}

}  // namespace ampgrad::app

// gpt.cpp: the GPT-2 model (models/gpt.hpp): presets, the blocks, GPT-2 initialisation, the
// forward pass with optional per-block activation checkpointing, and sampling.
#include "models/gpt.hpp"

#include <cmath>
#include <type_traits>

#include "autograd/checkpoint.hpp"
#include "autograd/grad_mode.hpp"
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"
#include "core/profiler.hpp"
#include "models/config_limits.hpp"
#include "models/generation.hpp"
#include "models/gpt_mfu.hpp"
#include "nn/init.hpp"

namespace ampgrad::models {

// ---- configuration ----

std::vector<std::string> GPTConfig::preset_names() { return {"nano", "tiny", "small", "gpt2"}; }

GPTConfig GPTConfig::preset(const std::string& name) {
    GPTConfig c;
    if (name == "nano") {             // the CPU demo: ~2 minutes of training on 2 cores
        c.vocab_size = 256, c.block_size = 64, c.n_layer = 3, c.n_head = 4, c.n_embd = 96;
    } else if (name == "tiny") {
        c.vocab_size = 256, c.block_size = 64, c.n_layer = 4, c.n_head = 4, c.n_embd = 128;
    } else if (name == "small") {
        c.vocab_size = 256, c.block_size = 128, c.n_layer = 6, c.n_head = 8, c.n_embd = 256;
    } else if (name == "gpt2") {      // GPT-2 124M
        c.vocab_size = 50257, c.block_size = 1024, c.n_layer = 12, c.n_head = 12, c.n_embd = 768;
    } else {
        throw ValueError(fmt::format("GPTConfig: unknown preset \"{}\"; the presets are {}", name,
                                     fmt::join(preset_names(), ", ")));
    }
    return c;
}

namespace {

// GPTConfig's parameters (the tied head counted once, padded rows included) in the arithmetic of
// Number: int64_t for num_parameters, double for validate's bound, which a corrupt config's sizes
// must not overflow.
template <class Number>
Number count_parameters(const GPTConfig& g) {
    const Number C = static_cast<Number>(g.n_embd);
    const Number per_block = 2 * 2 * C            // ln_1, ln_2
                             + 3 * C * C + 3 * C  // c_attn
                             + C * C + C          // attn.c_proj
                             + 4 * C * C + 4 * C  // c_fc
                             + 4 * C * C + C;     // mlp.c_proj
    Number padded_vocab;   // rows of wte: V rounded up to a multiple of 64
    if constexpr (std::is_integral_v<Number>) padded_vocab = g.padded_vocab_size();
    else padded_vocab = std::ceil(static_cast<double>(g.vocab_size) / 64) * 64;
    return padded_vocab * C + static_cast<Number>(g.block_size) * C + static_cast<Number>(g.n_layer) * per_block + 2 * C;
}

}  // namespace

void GPTConfig::validate() const {
    auto positive = [](const char* field, int64_t v) {
        if (v <= 0) throw ValueError(fmt::format("GPTConfig: {} must be positive, but is {}", field, v));
    };
    positive("vocab_size", vocab_size);
    positive("block_size", block_size);
    positive("n_layer", n_layer);
    positive("n_head", n_head);
    positive("n_embd", n_embd);
    if (n_embd % n_head != 0)
        throw ValueError(fmt::format("GPTConfig: n_embd ({}) must be a multiple of n_head ({})", n_embd, n_head));
    if (!(dropout >= 0.0 && dropout < 1.0))
        throw ValueError(fmt::format("GPTConfig: dropout must be in [0, 1), but is {}", dropout));
    if (!(layer_norm_epsilon > 0.0))
        throw ValueError(fmt::format("GPTConfig: layer_norm_epsilon must be positive, but is {}", layer_norm_epsilon));
    check_model_size("GPTConfig", count_parameters<double>(*this));
}

int64_t GPTConfig::num_parameters() const { return count_parameters<int64_t>(*this); }

double GPTConfig::flops_per_token() const {
    const double n = static_cast<double>(num_parameters() - block_size * n_embd);
    return 6.0 * n + 12.0 * static_cast<double>(n_layer * n_embd * block_size);
}

// ---- blocks ----

CausalSelfAttention::CausalSelfAttention(const GPTConfig& cfg)
    : Module("CausalSelfAttention"), n_head(cfg.n_head), attn_dropout(cfg.dropout) {
    c_attn = register_module("c_attn", std::make_shared<nn::Linear>(cfg.n_embd, 3 * cfg.n_embd));
    c_proj = register_module("c_proj", std::make_shared<nn::Linear>(cfg.n_embd, cfg.n_embd));
    resid_dropout = register_module("resid_dropout", std::make_shared<nn::Dropout>(cfg.dropout));
}

Tensor CausalSelfAttention::forward(const Tensor& x) const {
    profiler::Span span("module", "CausalSelfAttention");
    const int64_t B = x.size(0), T = x.size(1), C = x.size(2), HS = C / n_head;
    tensor_list qkv = c_attn->forward(x).split(C, 2);                         // 3 x (B,T,C)
    auto heads = [&](const Tensor& t) { return t.reshape({B, T, n_head, HS}).transpose(1, 2); };
    Tensor q = heads(qkv[0]), k = heads(qkv[1]), v = heads(qkv[2]);          // (B,NH,T,HS)
    // Dropout on the attention probabilities inside SDPA, in training only (SDPA's dropout_p has
    // no training flag, as in PyTorch, so the caller decides; nanoGPT does the same).
    const double p = is_training() ? attn_dropout : 0.0;
    Tensor y = F::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/p,
                                               /*is_causal=*/true);               // (B,NH,T,HS)
    y = y.transpose(1, 2).reshape({B, T, C});                                 // (B,T,C)
    return resid_dropout->forward(c_proj->forward(y));
}

Tensor CausalSelfAttention::forward(const Tensor& x, KVCache& cache, int64_t layer) const {
    const int64_t B = x.size(0), T = x.size(1), C = x.size(2), HS = C / n_head;
    tensor_list qkv = c_attn->forward(x).split(C, 2);                         // 3 x (B,T,C)
    auto heads = [&](const Tensor& t) { return t.reshape({B, T, n_head, HS}).transpose(1, 2); };
    Tensor y = cache.attend(layer, heads(qkv[0]), heads(qkv[1]), heads(qkv[2]));   // (B,NH,T,HS)
    return c_proj->forward(y.transpose(1, 2).reshape({B, T, C}));             // (B,T,C)
}

MLP::MLP(const GPTConfig& cfg) : Module("MLP") {
    c_fc = register_module("c_fc", std::make_shared<nn::Linear>(cfg.n_embd, 4 * cfg.n_embd));
    c_proj = register_module("c_proj", std::make_shared<nn::Linear>(4 * cfg.n_embd, cfg.n_embd));
    dropout = register_module("dropout", std::make_shared<nn::Dropout>(cfg.dropout));
}

Tensor MLP::forward(const Tensor& x) const {
    profiler::Span span("module", "MLP");
    return dropout->forward(project(x));
}

Tensor MLP::project(const Tensor& x) const {
    Tensor h = gelu(c_fc->forward(x), /*tanh_approximation=*/true);   // (B,T,4C)
    return c_proj->forward(h);                                        // (B,T,C)
}

Block::Block(const GPTConfig& cfg) : Module("Block") {
    ln_1 = register_module("ln_1", std::make_shared<nn::LayerNorm>(Shape{cfg.n_embd}, cfg.layer_norm_epsilon));
    attn = register_module("attn", std::make_shared<CausalSelfAttention>(cfg));
    ln_2 = register_module("ln_2", std::make_shared<nn::LayerNorm>(Shape{cfg.n_embd}, cfg.layer_norm_epsilon));
    mlp = register_module("mlp", std::make_shared<MLP>(cfg));
}

Tensor Block::forward(const Tensor& x) const {
    profiler::Span span("module", "Block");
    Tensor h = x + attn->forward(ln_1->forward(x));   // (B,T,C)
    return h + mlp->forward(ln_2->forward(h));
}

Tensor Block::forward(const Tensor& x, KVCache& cache, int64_t layer) const {
    Tensor h = x + attn->forward(ln_1->forward(x), cache, layer);   // (B,T,C); dropout is off in inference
    return h + mlp->project(ln_2->forward(h));
}

// ---- the model ----

GPT::GPT(const GPTConfig& cfg) : Module("GPT"), cfg_(cfg) {
    cfg_.validate();
    transformer = register_module("transformer", std::make_shared<nn::Module>("Transformer"));
    wte = transformer->register_module("wte", std::make_shared<nn::Embedding>(cfg.padded_vocab_size(), cfg.n_embd));
    wpe = transformer->register_module("wpe", std::make_shared<nn::Embedding>(cfg.block_size, cfg.n_embd));
    h = transformer->register_module("h", std::make_shared<nn::ModuleList>());
    for (int64_t i = 0; i < cfg.n_layer; ++i) h->push_back(std::make_shared<Block>(cfg));
    ln_f = transformer->register_module("ln_f",
                                        std::make_shared<nn::LayerNorm>(Shape{cfg.n_embd}, cfg.layer_norm_epsilon));
    lm_head = register_module("lm_head", std::make_shared<nn::Module>("TiedLinear"));
    lm_head->register_parameter("weight", wte->weight);   // the same tensor: one parameter, two names
    if (!nn::init::skipping_init()) reset_parameters();   // nn::init::SkipInitGuard: deferred, loaded later
}

void GPT::reset_parameters() {
    const double std = 0.02, proj_std = 0.02 / std::sqrt(2.0 * static_cast<double>(cfg_.n_layer));
    nn::init::normal_(wte->weight, 0.0, std);
    nn::init::normal_(wpe->weight, 0.0, std);
    for (size_t i = 0; i < num_blocks(); ++i) {
        const Block& b = *block(i);
        for (const auto& ln : {b.ln_1, b.ln_2}) {
            nn::init::ones_(ln->weight);
            nn::init::zeros_(ln->bias);
        }
        for (const auto& [linear, s] : {std::pair{b.attn->c_attn, std}, {b.attn->c_proj, proj_std},
                                        {b.mlp->c_fc, std}, {b.mlp->c_proj, proj_std}}) {
            nn::init::normal_(linear->weight, 0.0, s);
            nn::init::zeros_(linear->bias);
        }
    }
    nn::init::ones_(ln_f->weight);
    nn::init::zeros_(ln_f->bias);
}

Tensor GPT::hidden_states(const Tensor& idx) const {
    if (idx.dim() != 2 || is_floating(idx.dtype()))
        throw ShapeError(fmt::format("GPT: idx must be (B,T) integer token ids, but is {}", idx.describe()));
    const int64_t T = idx.size(1);
    if (T > cfg_.block_size)
        throw ShapeError(fmt::format("GPT: a sequence of {} tokens is longer than the context (block_size {})", T,
                                     cfg_.block_size));
    Tensor pos = arange(T, TensorOptions(kInt64).device(idx.device()));          // (T)
    Tensor x = wte->forward(idx) + wpe->forward(pos);                           // (B,T,C)
    x = F::dropout(x, cfg_.dropout, is_training());
    const bool recompute = cfg_.checkpoint_blocks && is_training() && GradMode::is_enabled();
    for (size_t i = 0; i < num_blocks(); ++i) {
        std::shared_ptr<Block> b = block(i);
        if (recompute) {
            x = checkpoint([b](const tensor_list& in) { return tensor_list{b->forward(in[0])}; }, {x})[0];
        } else {
            x = b->forward(x);
        }
    }
    return ln_f->forward(x);                                                      // (B,T,C)
}

// The head's GEMM runs over the padded vocabulary (the efficient shape); the padded columns are
// then dropped, so they never enter a softmax and receive no gradient.
Tensor GPT::logits_from(const Tensor& x) const {
    Tensor logits = linear(x, wte->weight);                                       // (B,T,Vp)
    if (cfg_.padded_vocab_size() != cfg_.vocab_size) logits = logits.narrow(2, 0, cfg_.vocab_size);
    return logits;                                                                // (B,T,V)
}

Tensor GPT::forward(const Tensor& idx) const { return logits_from(hidden_states(idx)); }

KVCache GPT::make_cache(int64_t batch, int64_t max_length) const {
    if (max_length > cfg_.block_size)
        throw ValueError(fmt::format("GPT::make_cache: max_length {} is longer than the context (block_size {})",
                                     max_length, cfg_.block_size));
    return KVCache(cfg_.n_layer, batch, cfg_.n_head, max_length, cfg_.head_size(), wte->weight.options());
}

// The same blocks as hidden_states, each reading and extending its layer of the cache; the token
// positions come from the cache (the row's real tokens so far), not from 0..T-1.
Tensor GPT::forward_cached(const Tensor& idx, KVCache& cache, const Tensor& valid) const {
    if (idx.dim() != 2 || is_floating(idx.dtype()) || idx.size(0) != cache.batch())
        throw ShapeError(fmt::format("GPT::forward_cached: idx must be (B,T) integer token ids with B = {} (the "
                                     "cache's batch), but is {}", cache.batch(), idx.describe()));
    NoGradGuard no_grad;
    Tensor pos = cache.begin_step(valid, idx.size(1));                           // (B,T)
    Tensor x;
    try {
        x = wte->forward(idx) + wpe->forward(pos);                               // (B,T,C)
        for (size_t i = 0; i < num_blocks(); ++i) x = block(i)->forward(x, cache, static_cast<int64_t>(i));
    } catch (...) {
        cache.abort_step();                                                      // e.g. a token id out of range
        throw;
    }
    cache.end_step();
    return logits_from(ln_f->forward(x));                                        // (B,T,V)
}

Tensor GPT::forward(const Tensor& idx, const Tensor& targets) const {
    profiler::Span span("module", "GPT");
    if (!targets.defined() || targets.sizes() != idx.sizes())
        throw ShapeError(fmt::format("GPT: targets must have idx's shape {}, but are {}", idx.shape_str(),
                                     targets.defined() ? targets.describe() : std::string("undefined")));
    Tensor logits = forward(idx);                                                  // (B,T,V)
    const int64_t BT = logits.size(0) * logits.size(1);
    Tensor flat = targets.reshape({BT});                                           // (B*T)
    // nanoGPT's loss ignores -1 (its ignore_index), Hugging Face's -100: both are ignored here.
    if (!is_floating(flat.dtype())) flat = where(flat == -1, -100.0, flat);
    return F::cross_entropy(logits.reshape({BT, cfg_.vocab_size}), flat);
}

Tensor GPT::generate(const Tensor& idx, int64_t max_new_tokens, double temperature, std::optional<int64_t> top_k,
                     const std::function<void(int64_t)>& on_token) {
    return sample(*this, idx, max_new_tokens, temperature, top_k, on_token, "GPT::generate");
}

// ---- what a trainer reports (models::CausalLM) ----

double GPT::flops_per_token(int64_t context) const {
    GPTConfig c = cfg_;
    c.block_size = context;
    return c.flops_per_token();
}

double GPT::llmc_flops_per_token(int64_t context) const {
    GPTConfig c = cfg_;
    c.block_size = context;
    return models::llmc_flops_per_token(c);
}

std::string GPT::shape_text(int64_t context) const {
    return fmt::format("L={}, NH={}, C={}, T={}, V={}", cfg_.n_layer, cfg_.n_head, cfg_.n_embd, context, cfg_.vocab_size);
}

std::string GPT::saved_shape_text() const {
    return fmt::format("V={}, T={}, L={}, NH={}, C={}", cfg_.vocab_size, cfg_.block_size, cfg_.n_layer, cfg_.n_head,
                       cfg_.n_embd);
}

nlohmann::json to_json(const GPTConfig& c) {
    nlohmann::json j = {{"vocab_size", c.vocab_size}, {"block_size", c.block_size}, {"n_layer", c.n_layer},
                        {"n_head", c.n_head}, {"n_embd", c.n_embd}, {"dropout", c.dropout},
                        {"checkpoint_blocks", c.checkpoint_blocks}, {"padded_vocab_size", c.padded_vocab_size()},
                        {"num_parameters", c.num_parameters()}};
    if (c.layer_norm_epsilon != GPTConfig().layer_norm_epsilon)   // written only when not the default, so that
        j["layer_norm_epsilon"] = c.layer_norm_epsilon;           // older checkpoints still compare equal
    return j;
}

}  // namespace ampgrad::models

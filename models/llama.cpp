// llama.cpp: the Llama model (models/llama.hpp): presets and checks of the config, the decoder
// layers, transformers' initialisation, the forward pass with optional per-layer activation
// checkpointing, and sampling.
#include "models/llama.hpp"

#include <cmath>

#include "autograd/checkpoint.hpp"
#include "autograd/grad_mode.hpp"
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"
#include "core/profiler.hpp"
#include "models/config_limits.hpp"
#include "models/generation.hpp"
#include "models/llama_json.hpp"
#include "nn/init.hpp"

namespace ampgrad::models {

// ---- configuration ----

std::vector<std::string> LlamaConfig::preset_names() { return {"llama-nano", "llama-tiny", "llama-small", "llama-124m"}; }

LlamaConfig LlamaConfig::preset(const std::string& name) {
    LlamaConfig c;
    c.rms_norm_eps = 1e-5;
    c.tie_word_embeddings = true;   // as Llama 3.2 1B/3B, and the GPT presets
    if (name == "llama-nano") {     // the CPU demo: GPT "nano"'s width and depth, 2 KV heads for 4 query heads
        c.vocab_size = 256, c.hidden_size = 96, c.intermediate_size = 256, c.num_hidden_layers = 3;
        c.num_attention_heads = 4, c.num_key_value_heads = 2, c.max_position_embeddings = 64;
    } else if (name == "llama-tiny") {
        c.vocab_size = 256, c.hidden_size = 128, c.intermediate_size = 352, c.num_hidden_layers = 4;
        c.num_attention_heads = 4, c.num_key_value_heads = 2, c.max_position_embeddings = 64;
    } else if (name == "llama-small") {   // GPT "small"'s width, depth and context (SwiGLU's 2/3 of 4x, to 32)
        c.vocab_size = 256, c.hidden_size = 256, c.intermediate_size = 704, c.num_hidden_layers = 6;
        c.num_attention_heads = 8, c.num_key_value_heads = 4, c.max_position_embeddings = 128;
    } else if (name == "llama-124m") {   // near GPT-2 124M: 121M parameters with GPT-2's vocabulary
        c.vocab_size = 50257, c.hidden_size = 768, c.intermediate_size = 2304, c.num_hidden_layers = 12;
        c.num_attention_heads = 12, c.num_key_value_heads = 4, c.max_position_embeddings = 1024;
    } else {
        throw ValueError(fmt::format("LlamaConfig: unknown preset \"{}\"; the presets are {}", name,
                                     fmt::join(preset_names(), ", ")));
    }
    return c;
}

namespace {

void check_rope_scaling(const nn::Llama3RopeScaling& s) {
    if (!(s.factor >= 1.0))
        throw ValueError(fmt::format("LlamaConfig: rope_scaling.factor must be >= 1, but is {}", s.factor));
    if (!(s.low_freq_factor > 0.0 && s.high_freq_factor > s.low_freq_factor))
        throw ValueError(fmt::format("LlamaConfig: rope_scaling needs 0 < low_freq_factor < high_freq_factor, but they "
                                     "are {} and {}", s.low_freq_factor, s.high_freq_factor));
    if (s.original_max_position_embeddings <= 0)
        throw ValueError(fmt::format("LlamaConfig: rope_scaling.original_max_position_embeddings must be positive, "
                                     "but is {}", s.original_max_position_embeddings));
}

}  // namespace

namespace {

// LlamaConfig's parameters (a tied head counted once) in the arithmetic of Number: int64_t for
// num_parameters, double for validate's bound, which a corrupt config's sizes must not overflow.
template <class Number>
Number count_parameters(const LlamaConfig& c) {
    const Number H = static_cast<Number>(c.hidden_size), I = static_cast<Number>(c.intermediate_size);
    const Number HS = static_cast<Number>(c.head_size());
    const Number q = static_cast<Number>(c.num_attention_heads) * HS, kv = static_cast<Number>(c.num_key_value_heads) * HS;
    const Number biases = c.attention_bias ? q + 2 * kv + H : (c.qkv_bias ? q + 2 * kv : 0);
    const Number attention = H * q + 2 * H * kv + q * H + biases;
    const Number mlp = 3 * H * I + (c.mlp_bias ? 2 * I + H : 0);
    const Number per_layer = attention + mlp + 2 * H;   // + input_layernorm, post_attention_layernorm
    const Number embeddings = static_cast<Number>(c.vocab_size) * H * (c.tie_word_embeddings ? 1 : 2);
    return embeddings + static_cast<Number>(c.num_hidden_layers) * per_layer + H;
}

}  // namespace

void LlamaConfig::validate() const {
    auto positive = [](const char* field, double v) {
        if (!(v > 0)) throw ValueError(fmt::format("LlamaConfig: {} must be positive, but is {}", field, v));
    };
    positive("vocab_size", static_cast<double>(vocab_size));
    positive("hidden_size", static_cast<double>(hidden_size));
    positive("intermediate_size", static_cast<double>(intermediate_size));
    positive("num_hidden_layers", static_cast<double>(num_hidden_layers));
    positive("num_attention_heads", static_cast<double>(num_attention_heads));
    positive("num_key_value_heads", static_cast<double>(num_key_value_heads));
    positive("max_position_embeddings", static_cast<double>(max_position_embeddings));
    positive("rms_norm_eps", rms_norm_eps);
    positive("rope_theta", rope_theta);
    positive("initializer_range", initializer_range);
    if (head_dim < 0) throw ValueError(fmt::format("LlamaConfig: head_dim must be positive (or 0: hidden_size / "
                                                   "num_attention_heads), but is {}", head_dim));
    if (head_dim == 0 && hidden_size % num_attention_heads != 0)
        throw ValueError(fmt::format("LlamaConfig: hidden_size ({}) must be a multiple of num_attention_heads ({}) "
                                     "when head_dim is not given", hidden_size, num_attention_heads));
    if (head_size() % 2 != 0)
        throw ValueError(fmt::format("LlamaConfig: head_dim must be even (RoPE rotates pairs), but is {}", head_size()));
    if (num_attention_heads % num_key_value_heads != 0)
        throw ValueError(fmt::format("LlamaConfig: num_attention_heads ({}) must be a multiple of num_key_value_heads "
                                     "({})", num_attention_heads, num_key_value_heads));
    if (rope_scaling) check_rope_scaling(*rope_scaling);
    check_model_size("LlamaConfig", count_parameters<double>(*this));
}

int64_t LlamaConfig::num_parameters() const { return count_parameters<int64_t>(*this); }

double LlamaConfig::flops_per_token() const {
    const int64_t lookup_only = tie_word_embeddings ? 0 : vocab_size * hidden_size;   // the untied embedding table
    const double n = static_cast<double>(num_parameters() - lookup_only);
    return 6.0 * n + 12.0 * static_cast<double>(num_hidden_layers * num_attention_heads * head_size() *
                                                max_position_embeddings);
}

// ---- layers ----

LlamaAttention::LlamaAttention(const LlamaConfig& cfg)
    : Module("LlamaAttention"), num_heads(cfg.num_attention_heads), num_kv_heads(cfg.num_key_value_heads),
      head_dim(cfg.head_size()) {
    const int64_t H = cfg.hidden_size;
    const bool bias = cfg.attention_bias, qkv_bias = cfg.attention_bias || cfg.qkv_bias;
    q_proj = register_module("q_proj", std::make_shared<nn::Linear>(H, num_heads * head_dim, qkv_bias));
    k_proj = register_module("k_proj", std::make_shared<nn::Linear>(H, num_kv_heads * head_dim, qkv_bias));
    v_proj = register_module("v_proj", std::make_shared<nn::Linear>(H, num_kv_heads * head_dim, qkv_bias));
    o_proj = register_module("o_proj", std::make_shared<nn::Linear>(num_heads * head_dim, H, bias));
}

// q (B,NH,T,HS), k and v (B,NKV,T,HS) of x (B,T,H), with RoPE applied to q and k.
tensor_list LlamaAttention::rotated_heads(const Tensor& x, const Tensor& cos, const Tensor& sin) const {
    const int64_t B = x.size(0), T = x.size(1);
    auto heads = [&](const Tensor& t, int64_t n) { return t.reshape({B, T, n, head_dim}).transpose(1, 2); };
    Tensor q = heads(q_proj->forward(x), num_heads);        // (B,NH,T,HS)
    Tensor k = heads(k_proj->forward(x), num_kv_heads);     // (B,NKV,T,HS)
    Tensor v = heads(v_proj->forward(x), num_kv_heads);     // (B,NKV,T,HS)
    // The tables in the projections' dtype (bf16 under autocast), one per head: (B,1,T,HS).
    Tensor c = cos.to(q.dtype()).unsqueeze(1), s = sin.to(q.dtype()).unsqueeze(1);
    return {F::apply_rotary_emb(q, c, s), F::apply_rotary_emb(k, c, s), v};
}

// y (B,NH,T,HS) -> (B,T,H)
Tensor LlamaAttention::project_out(const Tensor& y) const {
    const int64_t B = y.size(0), T = y.size(2);
    return o_proj->forward(y.transpose(1, 2).reshape({B, T, num_heads * head_dim}));
}

Tensor LlamaAttention::forward(const Tensor& x, const Tensor& cos, const Tensor& sin) const {
    profiler::Span span("module", "LlamaAttention");
    tensor_list qkv = rotated_heads(x, cos, sin);
    Tensor y = F::scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], /*attn_mask=*/{}, /*dropout_p=*/0.0,
                                               /*is_causal=*/true, /*scale=*/std::nullopt,
                                               /*enable_gqa=*/num_kv_heads != num_heads);   // (B,NH,T,HS)
    return project_out(y);                                                                 // (B,T,H)
}

// The cache stores the rotated keys (as transformers' DynamicCache does), so a step rotates only
// its own tokens.
Tensor LlamaAttention::forward(const Tensor& x, const Tensor& cos, const Tensor& sin, KVCache& cache,
                               int64_t layer) const {
    tensor_list qkv = rotated_heads(x, cos, sin);
    return project_out(cache.attend(layer, qkv[0], qkv[1], qkv[2]));                     // (B,T,H)
}

LlamaMLP::LlamaMLP(const LlamaConfig& cfg) : Module("LlamaMLP") {
    const int64_t H = cfg.hidden_size, I = cfg.intermediate_size;
    gate_proj = register_module("gate_proj", std::make_shared<nn::Linear>(H, I, cfg.mlp_bias));
    up_proj = register_module("up_proj", std::make_shared<nn::Linear>(H, I, cfg.mlp_bias));
    down_proj = register_module("down_proj", std::make_shared<nn::Linear>(I, H, cfg.mlp_bias));
}

Tensor LlamaMLP::forward(const Tensor& x) const {
    profiler::Span span("module", "LlamaMLP");
    Tensor h = silu(gate_proj->forward(x)) * up_proj->forward(x);   // (B,T,I)
    return down_proj->forward(h);                                    // (B,T,H)
}

LlamaDecoderLayer::LlamaDecoderLayer(const LlamaConfig& cfg) : Module("LlamaDecoderLayer") {
    const Shape h{cfg.hidden_size};
    self_attn = register_module("self_attn", std::make_shared<LlamaAttention>(cfg));
    mlp = register_module("mlp", std::make_shared<LlamaMLP>(cfg));
    input_layernorm = register_module("input_layernorm", std::make_shared<nn::RMSNorm>(h, cfg.rms_norm_eps));
    post_attention_layernorm =
        register_module("post_attention_layernorm", std::make_shared<nn::RMSNorm>(h, cfg.rms_norm_eps));
}

Tensor LlamaDecoderLayer::forward(const Tensor& x, const Tensor& cos, const Tensor& sin) const {
    profiler::Span span("module", "LlamaDecoderLayer");
    Tensor h = x + self_attn->forward(input_layernorm->forward(x), cos, sin);   // (B,T,H)
    return h + mlp->forward(post_attention_layernorm->forward(h));
}

Tensor LlamaDecoderLayer::forward(const Tensor& x, const Tensor& cos, const Tensor& sin, KVCache& cache,
                                  int64_t layer) const {
    Tensor h = x + self_attn->forward(input_layernorm->forward(x), cos, sin, cache, layer);   // (B,T,H)
    return h + mlp->forward(post_attention_layernorm->forward(h));
}

// ---- the model ----

Llama::Llama(const LlamaConfig& cfg) : Llama(cfg, "LlamaForCausalLM") {}

Llama::Llama(const LlamaConfig& cfg, const std::string& module_name) : Module(module_name), cfg_(cfg) {
    cfg_.validate();
    model = register_module("model", std::make_shared<nn::Module>("LlamaModel"));
    embed_tokens = model->register_module("embed_tokens", std::make_shared<nn::Embedding>(cfg.vocab_size, cfg.hidden_size));
    layers = model->register_module("layers", std::make_shared<nn::ModuleList>());
    for (int64_t i = 0; i < cfg.num_hidden_layers; ++i) layers->push_back(std::make_shared<LlamaDecoderLayer>(cfg));
    norm = model->register_module("norm", std::make_shared<nn::RMSNorm>(Shape{cfg.hidden_size}, cfg.rms_norm_eps));
    rotary_emb = model->register_module(
        "rotary_emb", std::make_shared<nn::RotaryEmbedding>(cfg.head_size(), cfg.rope_theta, cfg.rope_scaling));
    if (!cfg.tie_word_embeddings)
        lm_head = register_module("lm_head", std::make_shared<nn::Linear>(cfg.hidden_size, cfg.vocab_size, false));
    if (!nn::init::skipping_init()) reset_parameters();   // nn::init::SkipInitGuard: deferred, loaded later
}

void Llama::reset_parameters() {
    const double std = cfg_.initializer_range;
    nn::init::normal_(embed_tokens->weight, 0.0, std);
    for (size_t i = 0; i < num_layers(); ++i) {
        const LlamaDecoderLayer& l = *layer(i);
        for (const auto& linear : {l.self_attn->q_proj, l.self_attn->k_proj, l.self_attn->v_proj, l.self_attn->o_proj,
                                   l.mlp->gate_proj, l.mlp->up_proj, l.mlp->down_proj}) {
            nn::init::normal_(linear->weight, 0.0, std);
            if (linear->bias.defined()) nn::init::zeros_(linear->bias);
        }
        nn::init::ones_(l.input_layernorm->weight);
        nn::init::ones_(l.post_attention_layernorm->weight);
    }
    nn::init::ones_(norm->weight);
    if (lm_head) nn::init::normal_(lm_head->weight, 0.0, std);
}

Tensor Llama::hidden_states(const Tensor& idx, const Tensor& position_ids) const {
    if (idx.dim() != 2 || is_floating(idx.dtype()))
        throw ShapeError(fmt::format("Llama: idx must be (B,T) integer token ids, but is {}", idx.describe()));
    const int64_t T = idx.size(1);
    if (T > cfg_.max_position_embeddings)
        throw ShapeError(fmt::format("Llama: a sequence of {} tokens is longer than the context "
                                     "(max_position_embeddings {})", T, cfg_.max_position_embeddings));
    Tensor pos = position_ids.defined() ? position_ids : arange(T, TensorOptions(kInt64).device(idx.device()));
    const bool fits = (pos.dim() == 1 || (pos.dim() == 2 && (pos.size(0) == 1 || pos.size(0) == idx.size(0)))) &&
                      pos.size(-1) == T && !is_floating(pos.dtype());
    if (!fits)
        throw ShapeError(fmt::format("Llama: position_ids must be (B,T), (1,T) or (T) integers with B = {}, T = {}, "
                                     "but are {}", idx.size(0), T, pos.describe()));
    if (pos.dim() == 1) pos = pos.unsqueeze(0);                                  // (1,T)
    auto [cos, sin] = rotary_emb->forward(pos, rope_dtype());                    // (B|1,T,HS) each
    Tensor x = embed_tokens->forward(idx);                                       // (B,T,H)
    const bool recompute = cfg_.checkpoint_blocks && is_training() && GradMode::is_enabled();
    for (size_t i = 0; i < num_layers(); ++i) {
        std::shared_ptr<LlamaDecoderLayer> l = layer(i);
        if (recompute) {
            auto body = [l](const tensor_list& in) { return tensor_list{l->forward(in[0], in[1], in[2])}; };
            x = checkpoint(body, {x, cos, sin})[0];
        } else {
            x = l->forward(x, cos, sin);
        }
    }
    return norm->forward(x);                                                     // (B,T,H)
}

// A tied head multiplies by the embedding's table inside embed_tokens' forward hooks, so that ZeRO
// stage 3 gathers that weight for the head's forward and backward as it does for the lookup.
Tensor Llama::logits_from(const Tensor& x) const {
    if (lm_head) return lm_head->forward(x);                                     // (B,T,V)
    return embed_tokens->with_forward_hooks(x, [&](const Tensor& in) { return linear(in, embed_tokens->weight); });
}

KVCache Llama::make_cache(int64_t batch, int64_t max_length) const {
    if (max_length > cfg_.max_position_embeddings)
        throw ValueError(fmt::format("Llama::make_cache: max_length {} is longer than the context "
                                     "(max_position_embeddings {})", max_length, cfg_.max_position_embeddings));
    return KVCache(cfg_.num_hidden_layers, batch, cfg_.num_key_value_heads, max_length, cfg_.head_size(),
                   embed_tokens->weight.options());
}

// As hidden_states, each layer reading and extending its layer of the cache; the RoPE positions
// come from the cache (each row's real tokens so far), not from 0..T-1.
Tensor Llama::forward_cached(const Tensor& idx, KVCache& cache, const Tensor& valid) const {
    if (idx.dim() != 2 || is_floating(idx.dtype()) || idx.size(0) != cache.batch())
        throw ShapeError(fmt::format("Llama::forward_cached: idx must be (B,T) integer token ids with B = {} (the "
                                     "cache's batch), but is {}", cache.batch(), idx.describe()));
    NoGradGuard no_grad;
    Tensor pos = cache.begin_step(valid, idx.size(1));                           // (B,T)
    Tensor x;
    try {
        auto [cos, sin] = rotary_emb->forward(pos, rope_dtype());                // (B,T,HS) each
        x = embed_tokens->forward(idx);                                          // (B,T,H)
        for (size_t i = 0; i < num_layers(); ++i) x = layer(i)->forward(x, cos, sin, cache, static_cast<int64_t>(i));
    } catch (...) {
        cache.abort_step();                                                      // e.g. a token id out of range
        throw;
    }
    cache.end_step();
    return logits_from(norm->forward(x));                                        // (B,T,V)
}

Tensor Llama::forward(const Tensor& idx) const { return forward(idx, Tensor(), Tensor()); }

Tensor Llama::forward(const Tensor& idx, const Tensor& targets) const {
    if (!targets.defined())
        throw ShapeError(fmt::format("Llama: targets must have idx's shape {}, but are undefined", idx.shape_str()));
    return forward(idx, targets, Tensor());
}

Tensor Llama::forward(const Tensor& idx, const Tensor& targets, const Tensor& position_ids) const {
    profiler::Span span("module", "Llama");
    if (targets.defined() && targets.sizes() != idx.sizes())
        throw ShapeError(fmt::format("Llama: targets must have idx's shape {}, but are {}", idx.shape_str(),
                                     targets.describe()));
    Tensor logits = logits_from(hidden_states(idx, position_ids));                // (B,T,V)
    if (!targets.defined()) return logits;
    const int64_t BT = logits.size(0) * logits.size(1);
    return F::cross_entropy(logits.reshape({BT, cfg_.vocab_size}), targets.reshape({BT}));
}

Tensor Llama::generate(const Tensor& idx, int64_t max_new_tokens, double temperature, std::optional<int64_t> top_k,
                       const std::function<void(int64_t)>& on_token) {
    return sample(*this, idx, max_new_tokens, temperature, top_k, on_token, "Llama::generate");
}

// ---- what a trainer reports (models::CausalLM) ----

double Llama::flops_per_token(int64_t context) const {
    LlamaConfig c = cfg_;
    c.max_position_embeddings = context;
    return c.flops_per_token();
}

// llm.c counts every parameter (6 N) and attention once per direction (6 L T times the attention
// width NH * HS).
double Llama::llmc_flops_per_token(int64_t context) const {
    const LlamaConfig& c = cfg_;
    return 6.0 * static_cast<double>(c.num_parameters()) +
           6.0 * static_cast<double>(c.num_hidden_layers * c.num_attention_heads * c.head_size() * context);
}

std::string Llama::shape_text(int64_t context) const {
    const LlamaConfig& c = cfg_;
    return fmt::format("L={}, NH={}, NKV={}, HS={}, H={}, I={}, T={}, V={}", c.num_hidden_layers,
                       c.num_attention_heads, c.num_key_value_heads, c.head_size(), c.hidden_size,
                       c.intermediate_size, context, c.vocab_size);
}

std::string Llama::saved_shape_text() const { return shape_text(cfg_.max_position_embeddings); }

nlohmann::json Llama::config_json() const {
    nlohmann::json j = to_hf_json(cfg_);
    j["checkpoint_blocks"] = cfg_.checkpoint_blocks;
    j["num_parameters"] = cfg_.num_parameters();
    return j;
}

}  // namespace ampgrad::models

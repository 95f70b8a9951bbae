// llama.hpp: the Llama architecture (Touvron et al. 2023; Llama 3, Grattafiori et al. 2024) as
// Hugging Face's LlamaForCausalLM (transformers/models/llama/modeling_llama.py), built from ampgrad's
// nn modules: a token embedding, num_hidden_layers pre-RMSNorm decoder layers (q/k/v/o projections
// with rotary position embeddings and grouped-query causal attention, a SwiGLU MLP), a final RMSNorm
// and a language-model head, untied or tied to the embedding. Parameter names are transformers' own
// ("model.layers.0.self_attn.q_proj.weight", "lm_head.weight"), so state_dict() is a transformers
// checkpoint and a transformers checkpoint loads with load_state_dict. docs/llama.md teaches it.
//
//   models::LlamaConfig cfg = models::LlamaConfig::preset("llama-nano");
//   auto model = std::make_shared<models::Llama>(cfg);             // N(0, initializer_range) weights
//   Tensor logits = model->forward(idx);                           // (B,T) int64 -> (B,T,V)
//   Tensor loss = model->forward(idx, targets);                    // () mean cross-entropy
//   Tensor out = model->generate(prompt, 100, 0.8, 40);            // (B,T0) -> (B,T0+100)
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nn/embedding.hpp"
#include "nn/linear.hpp"
#include "models/causal_lm.hpp"
#include "nn/module.hpp"
#include "nn/module_list.hpp"
#include "nn/rms_norm.hpp"
#include "nn/rotary_embedding.hpp"

namespace ampgrad::models {

// transformers' LlamaConfig, field for field (the fields a model needs). Notation in comments:
// V vocab, H hidden, I intermediate, L layers, NH query heads, NKV key/value heads, HS head_dim.
struct LlamaConfig {
    int64_t vocab_size = 32000;                  // V
    int64_t hidden_size = 4096;                  // H
    int64_t intermediate_size = 11008;           // I: the SwiGLU MLP's width
    int64_t num_hidden_layers = 32;              // L
    int64_t num_attention_heads = 32;            // NH
    int64_t num_key_value_heads = 32;            // NKV: NH a multiple of it (NKV < NH: grouped-query)
    int64_t head_dim = 0;                        // HS; 0: H / NH (transformers' default). May differ.
    double rms_norm_eps = 1e-6;
    double rope_theta = 10000.0;
    std::optional<nn::Llama3RopeScaling> rope_scaling;   // rope_type "llama3", or none
    int64_t max_position_embeddings = 2048;      // T: the longest context (generate crops to it)
    bool tie_word_embeddings = false;            // lm_head.weight is model.embed_tokens.weight
    bool attention_bias = false;                 // biases on q/k/v/o_proj
    bool qkv_bias = false;                       // biases on q/k/v_proj only (Qwen2; not a Llama config.json key)
    bool mlp_bias = false;                       // biases on gate/up/down_proj
    double initializer_range = 0.02;             // every Linear and Embedding weight ~ N(0, this)
    bool checkpoint_blocks = false;              // recompute each layer's activations in backward

    // "llama-nano" (the CPU demo, sized like GPT "nano"), "llama-tiny", "llama-small" (GPT "small"'s sizes), "llama-124m" (a GPU race
    // size near GPT-2 124M); ValueError naming the known presets.
    static LlamaConfig preset(const std::string& name);
    static std::vector<std::string> preset_names();

    int64_t head_size() const { return head_dim > 0 ? head_dim : hidden_size / num_attention_heads; }
    // ValueError naming the field unless every size is positive, NH % NKV == 0, HS is even (or,
    // unset, H % NH == 0), eps and theta are positive and rope_scaling's factors are sane.
    void validate() const;
    // Parameters of the model (a tied head counted once).
    int64_t num_parameters() const;
    // Training FLOPs per token (forward + backward), as GPTConfig's (nanoGPT, PaLM): 6 N + 12 L NH HS T,
    // where N counts the matrices a token multiplies through (the embedding lookup excluded when the
    // head is untied) and the last term is attention's two matmuls over a full context T.
    double flops_per_token() const;
    bool operator==(const LlamaConfig&) const = default;
};

// Self-attention with NH query heads and NKV key/value heads (grouped-query attention when
// NKV < NH: query head h reads key/value head h / (NH / NKV), inside SDPA, with no copies).
// Takes the rotary tables for its positions, so that a key/value cache can be added later.
class LlamaAttention : public nn::Module {
public:
    explicit LlamaAttention(const LlamaConfig& cfg);
    // x (B,T,H), cos and sin (B,T,HS) -> (B,T,H)
    Tensor forward(const Tensor& x, const Tensor& cos, const Tensor& sin) const;
    // The same over new tokens, reading and extending layer `layer` of the cache (inference).
    Tensor forward(const Tensor& x, const Tensor& cos, const Tensor& sin, KVCache& cache, int64_t layer) const;

    std::shared_ptr<nn::Linear> q_proj;    // weight (NH*HS, H)
    std::shared_ptr<nn::Linear> k_proj;    // weight (NKV*HS, H)
    std::shared_ptr<nn::Linear> v_proj;    // weight (NKV*HS, H)
    std::shared_ptr<nn::Linear> o_proj;    // weight (H, NH*HS)
    int64_t num_heads, num_kv_heads, head_dim;

private:
    tensor_list rotated_heads(const Tensor& x, const Tensor& cos, const Tensor& sin) const;   // q, k, v
    Tensor project_out(const Tensor& y) const;                                               // (B,NH,T,HS) -> (B,T,H)
};

// SwiGLU (Shazeer 2020): down_proj(silu(gate_proj(x)) * up_proj(x)).
class LlamaMLP : public nn::Module {
public:
    explicit LlamaMLP(const LlamaConfig& cfg);
    Tensor forward(const Tensor& x) const;   // (B,T,H) -> (B,T,H)

    std::shared_ptr<nn::Linear> gate_proj, up_proj;   // weight (I,H)
    std::shared_ptr<nn::Linear> down_proj;            // weight (H,I)
};

// x + self_attn(input_layernorm(x)), then x + mlp(post_attention_layernorm(x)).
class LlamaDecoderLayer : public nn::Module {
public:
    explicit LlamaDecoderLayer(const LlamaConfig& cfg);
    // x (B,T,H), cos and sin (B,T,HS) -> (B,T,H)
    Tensor forward(const Tensor& x, const Tensor& cos, const Tensor& sin) const;
    Tensor forward(const Tensor& x, const Tensor& cos, const Tensor& sin, KVCache& cache, int64_t layer) const;

    std::shared_ptr<nn::RMSNorm> input_layernorm, post_attention_layernorm;   // weight (H)
    std::shared_ptr<LlamaAttention> self_attn;
    std::shared_ptr<LlamaMLP> mlp;
};

class Llama : public nn::Module, public CausalLM {
public:
    // Builds the model and draws transformers' initial weights from the default generator
    // (manual_seed reproduces them); under nn::init::SkipInitGuard, allocates them only (to be loaded).
    explicit Llama(const LlamaConfig& cfg);

    Tensor forward(const Tensor& idx) const override;                          // (B,T) int64 -> logits (B,T,V)
    Tensor forward(const Tensor& idx, const Tensor& targets) const override;   // (B,T), (B,T) -> mean loss ()
    // The general form: position_ids (B,T) or (T) integer (undefined: 0..T-1) place the tokens for
    // RoPE; with targets defined returns the mean loss (), else the logits (B,T,V). The targets are
    // the next tokens (already shifted, as the GPT's), not transformers' unshifted labels.
    Tensor forward(const Tensor& idx, const Tensor& targets, const Tensor& position_ids) const;

    // Sampling in a line, as GPT::generate: models::generate with the KV cache (temperature 0:
    // greedy; top-k; on_token streams row 0), the prompt cropped to max_position_embeddings.
    // Returns (B,T0+max_new_tokens).
    Tensor generate(const Tensor& idx, int64_t max_new_tokens, double temperature = 1.0,
                    std::optional<int64_t> top_k = std::nullopt,
                    const std::function<void(int64_t)>& on_token = {});

    // models::CausalLM: what a trainer reports (models/causal_lm.hpp); T is the training context.
    std::string family() const override { return "llama"; }
    int64_t num_parameters() const override { return cfg_.num_parameters(); }
    double flops_per_token(int64_t context) const override;
    double llmc_flops_per_token(int64_t context) const override;
    std::string shape_text(int64_t context) const override;   // "L=3, NH=4, NKV=2, HS=24, H=96, I=256, T=64, V=65"
    std::string saved_shape_text() const override;            // shape_text at max_position_embeddings
    nlohmann::json config_json() const override;              // transformers' config.json + checkpoint_blocks
    const Tensor& token_embedding() const override { return embed_tokens->weight; }   // (V,H)

    // Incremental decoding (models/generation.hpp): a cache of NKV key/value heads per layer, and a
    // forward over new tokens whose RoPE positions come from the cache (left padding skipped).
    int64_t max_positions() const override { return cfg_.max_position_embeddings; }
    int64_t vocab_size() const override { return cfg_.vocab_size; }
    KVCache make_cache(int64_t batch, int64_t max_length) const override;
    Tensor forward_cached(const Tensor& idx, KVCache& cache, const Tensor& valid = {}) const override;

    // transformers' _init_weights: Linear and Embedding weights ~ N(0, initializer_range), biases 0,
    // RMSNorm weights 1.
    void reset_parameters();

    const LlamaConfig& config() const { return cfg_; }
    size_t num_layers() const { return layers->size(); }
    std::shared_ptr<LlamaDecoderLayer> layer(size_t i) const { return layers->at<LlamaDecoderLayer>(i); }

    std::shared_ptr<nn::Module> model;                  // holds embed_tokens, layers, norm (transformers' LlamaModel)
    std::shared_ptr<nn::Embedding> embed_tokens;        // (V,H)
    std::shared_ptr<nn::ModuleList> layers;             // the L decoder layers
    std::shared_ptr<nn::RMSNorm> norm;                  // (H)
    std::shared_ptr<nn::RotaryEmbedding> rotary_emb;    // no parameters (inv_freq is not saved)
    std::shared_ptr<nn::Linear> lm_head;                // (V,H); null when tied (embed_tokens' weight is used)

protected:
    // A model of this architecture under another name (Qwen2ForCausalLM: models/qwen2.hpp).
    Llama(const LlamaConfig& cfg, const std::string& module_name);

private:
    Tensor hidden_states(const Tensor& idx, const Tensor& position_ids) const;   // (B,T) -> (B,T,H), after norm
    Tensor logits_from(const Tensor& x) const;                                    // (B,T,H) -> (B,T,V)
    // The RoPE tables' dtype: f64 for a float64 model (computed in f64), else f32 as transformers.
    DType rope_dtype() const { return embed_tokens->weight.dtype() == kFloat64 ? kFloat64 : kFloat32; }

    LlamaConfig cfg_;
};

}  // namespace ampgrad::models

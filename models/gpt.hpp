// gpt.hpp: the GPT-2 architecture (Radford et al. 2019, as in nanoGPT and llm.c) built from
// ampgrad's nn modules: token + position embeddings, n_layer pre-LayerNorm blocks (fused QKV
// projection, causal scaled_dot_product_attention, a 4C tanh-GELU MLP), a final LayerNorm and a
// language-model head tied to the token embedding. Parameter names follow nanoGPT
// ("transformer.h.0.attn.c_attn.weight", "lm_head.weight"), so a safetensors file written by
// ampgrad loads into nanoGPT's model.py. docs/gpt.md walks through training one.
//
//   models::GPTConfig cfg = models::GPTConfig::preset("tiny");
//   auto model = std::make_shared<models::GPT>(cfg);            // GPT-2 initialisation
//   Tensor logits = model->forward(idx);                         // (B,T) int64 -> (B,T,V)
//   Tensor loss = model->forward(idx, targets);                  // () mean cross-entropy
//   Tensor out = model->generate(prompt, 100, 0.8, 40);          // (B,T0) -> (B,T0+100)
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "models/causal_lm.hpp"
#include "nn/dropout.hpp"
#include "nn/embedding.hpp"
#include "nn/layer_norm.hpp"
#include "nn/linear.hpp"
#include "nn/module.hpp"
#include "nn/module_list.hpp"

namespace ampgrad::models {

struct GPTConfig {
    int64_t vocab_size = 50257;       // V: token ids are in [0, V)
    int64_t block_size = 1024;        // T: the longest context
    int64_t n_layer = 12;             // L
    int64_t n_head = 12;              // NH
    int64_t n_embd = 768;             // C (a multiple of n_head; HS = C / NH)
    double dropout = 0.0;             // on embeddings, attention probabilities and residual branches
    double layer_norm_epsilon = 1e-5; // every LayerNorm's eps (Hugging Face's GPT-2 config names it so)
    bool checkpoint_blocks = false;   // recompute each block's activations in backward (saves memory)

    // "nano" (the CPU demo), "tiny", "small", "gpt2" (124M); ValueError naming the known presets.
    static GPTConfig preset(const std::string& name);
    static std::vector<std::string> preset_names();

    // V rounded up to a multiple of 64 (50257 -> 50304): the rows of wte and the head's GEMM size.
    int64_t padded_vocab_size() const { return (vocab_size + 63) / 64 * 64; }
    int64_t head_size() const { return n_embd / n_head; }
    // ValueError naming the field unless every size is positive, n_embd % n_head == 0 and
    // 0 <= dropout < 1 and layer_norm_epsilon > 0.
    void validate() const;
    // Parameters of the model (the tied head counted once, padded rows included).
    int64_t num_parameters() const;
    // Training FLOPs per token (forward + backward), as in nanoGPT's estimate_mfu and the PaLM
    // paper: 6 N + 12 L C T, where N excludes the position embedding and the last term is attention.
    double flops_per_token() const;
    bool operator==(const GPTConfig&) const = default;
};

// The config as a checkpoint's "model_config" (with padded_vocab_size and num_parameters; eps only
// when not GPT-2's 1e-5, so that older checkpoints compare equal).
nlohmann::json to_json(const GPTConfig& c);

// Multi-head causal self-attention with one fused (C -> 3C) projection.
class CausalSelfAttention : public nn::Module {
public:
    explicit CausalSelfAttention(const GPTConfig& cfg);
    Tensor forward(const Tensor& x) const;   // (B,T,C) -> (B,T,C)
    // The new tokens' x (B,T,C) attending over the cached keys of layer `layer` (and appending theirs).
    Tensor forward(const Tensor& x, KVCache& cache, int64_t layer) const;

    std::shared_ptr<nn::Linear> c_attn;      // weight (3C,C): q, k, v stacked
    std::shared_ptr<nn::Linear> c_proj;      // weight (C,C): a residual projection
    std::shared_ptr<nn::Dropout> resid_dropout;
    int64_t n_head;
    double attn_dropout;                     // on the attention probabilities (in SDPA), training only
};

// The position-wise MLP: C -> 4C, GELU (tanh approximation, as GPT-2), 4C -> C.
class MLP : public nn::Module {
public:
    explicit MLP(const GPTConfig& cfg);
    Tensor forward(const Tensor& x) const;   // (B,T,C) -> (B,T,C)
    Tensor project(const Tensor& x) const;   // forward without the dropout (inference over a KV cache)

    std::shared_ptr<nn::Linear> c_fc;        // weight (4C,C)
    std::shared_ptr<nn::Linear> c_proj;      // weight (C,4C): a residual projection
    std::shared_ptr<nn::Dropout> dropout;
};

// x + attn(ln_1(x)), then x + mlp(ln_2(x)).
class Block : public nn::Module {
public:
    explicit Block(const GPTConfig& cfg);
    Tensor forward(const Tensor& x) const;   // (B,T,C) -> (B,T,C)
    Tensor forward(const Tensor& x, KVCache& cache, int64_t layer) const;   // inference over a KV cache

    std::shared_ptr<nn::LayerNorm> ln_1, ln_2;
    std::shared_ptr<CausalSelfAttention> attn;
    std::shared_ptr<MLP> mlp;
};

class GPT : public nn::Module, public CausalLM {
public:
    // Builds the model and draws GPT-2's initial weights from the default generator
    // (manual_seed reproduces them); under nn::init::SkipInitGuard, allocates them only (to be loaded).
    explicit GPT(const GPTConfig& cfg);

    Tensor forward(const Tensor& idx) const override;                          // (B,T) int64 -> logits (B,T,V)
    // (B,T), (B,T) -> mean loss (); targets -1 (nanoGPT) and -100 (Hugging Face) are ignored
    Tensor forward(const Tensor& idx, const Tensor& targets) const override;
    // The final LayerNorm's output (Hugging Face GPT2Model's last_hidden_state).
    Tensor hidden_states(const Tensor& idx) const;                    // (B,T) int64 -> (B,T,C)

    // Sampling in a line: models::generate (the KV-cache loop) with do_sample = temperature > 0
    // (temperature 0 picks the most likely token), top_k, eval mode for the duration. on_token (if
    // set) sees row 0's every new token as it is drawn (for streaming). Returns (B,T0+new).
    Tensor generate(const Tensor& idx, int64_t max_new_tokens, double temperature = 1.0,
                    std::optional<int64_t> top_k = std::nullopt,
                    const std::function<void(int64_t)>& on_token = {});

    // models::CausalLM: what a trainer reports (models/causal_lm.hpp).
    std::string family() const override { return "gpt"; }
    int64_t num_parameters() const override { return cfg_.num_parameters(); }
    double flops_per_token(int64_t context) const override;
    double llmc_flops_per_token(int64_t context) const override;
    std::string shape_text(int64_t context) const override;    // "L=3, NH=4, C=96, T=64, V=65"
    std::string saved_shape_text() const override;             // "V=65, T=64, L=3, NH=4, C=96" (nanoGPT's order)
    nlohmann::json config_json() const override { return to_json(cfg_); }
    const Tensor& token_embedding() const override { return wte->weight; }   // (Vp,C)

    // Incremental decoding (models/kv_cache.hpp, models/generation.hpp): a cache of up to
    // max_length <= block_size tokens, and the logits (B,T,V) of new tokens idx (B,T) over it
    // (valid (B,T) bool marks real tokens: left padding; positions count real tokens only).
    int64_t max_positions() const override { return cfg_.block_size; }
    int64_t vocab_size() const override { return cfg_.vocab_size; }
    KVCache make_cache(int64_t batch, int64_t max_length) const override;
    Tensor forward_cached(const Tensor& idx, KVCache& cache, const Tensor& valid = {}) const override;

    // GPT-2 initialisation: every Linear and Embedding weight ~ N(0, 0.02), biases 0, LayerNorms
    // 1 and 0, and the residual projections (attn.c_proj, mlp.c_proj) ~ N(0, 0.02 / sqrt(2 L)).
    void reset_parameters();

    const GPTConfig& config() const { return cfg_; }
    size_t num_blocks() const { return h->size(); }
    std::shared_ptr<Block> block(size_t i) const { return h->at<Block>(i); }

    std::shared_ptr<nn::Module> transformer;   // holds wte, wpe, h, ln_f (nanoGPT's layout)
    std::shared_ptr<nn::Embedding> wte;        // (Vp,C): token embedding, also the head's weight
    std::shared_ptr<nn::Embedding> wpe;        // (T,C): position embedding
    std::shared_ptr<nn::ModuleList> h;         // the L blocks
    std::shared_ptr<nn::LayerNorm> ln_f;
    std::shared_ptr<nn::Module> lm_head;       // one parameter, "weight": wte's tensor (tied)

private:
    Tensor logits_from(const Tensor& x) const;       // (B,T,C) -> (B,T,V)

    GPTConfig cfg_;
};

}  // namespace ampgrad::models

// causal_lm.hpp: what every decoder-only language model in ampgrad is, seen from outside: the
// interface a trainer (app/), incremental generation (models/generation.hpp) and Hugging Face
// folders (models/pretrained.hpp) use, so that none of them asks which family a model is. GPT
// (models/gpt.hpp), Llama (models/llama.hpp) and Qwen2 (models/qwen2.hpp) implement it; each family
// is one entry of the model table (models/model_family.hpp). docs/architecture.md, "How to add a
// model", walks through adding one.
//
//   std::shared_ptr<models::CausalLM> lm = models::from_pretrained(dir).causal_lm();
//   Tensor loss = lm->forward(idx, targets);                       // (B,T), (B,T) -> ()
//   Tensor out = models::generate(*lm, prompt, Tensor(), {.max_new_tokens = 20});
//   models::as_module(lm)->parameters();                           // the nn::Module it also is
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "models/kv_cache.hpp"
#include "nn/module.hpp"

namespace ampgrad::models {

class CausalLM {
public:
    virtual ~CausalLM() = default;

    // ---- training ----
    virtual Tensor forward(const Tensor& idx) const = 0;                          // (B,T) int64 -> logits (B,T,V)
    // Mean cross-entropy of next-token targets (B,T) (already shifted: targets[t] follows idx[t]).
    virtual Tensor forward(const Tensor& idx, const Tensor& targets) const = 0;   // -> ()

    // ---- what a run reports ----
    // The family's name in the model table (models/model_family.hpp): "gpt", "llama", "qwen2".
    virtual std::string family() const = 0;
    virtual int64_t num_parameters() const = 0;
    // Training FLOPs per token (forward + backward) at context T: nanoGPT's and PaLM's 6 N + 12 L H T,
    // N the parameters a token multiplies through (models/gpt.hpp's GPTConfig::flops_per_token).
    virtual double flops_per_token(int64_t context) const = 0;
    // llm.c's count for MFU (models/gpt_mfu.hpp): 6 N (every parameter) + 6 L H T.
    virtual double llmc_flops_per_token(int64_t context) const = 0;
    // The sizes in one line for a banner, at training context T: "L=3, NH=4, C=96, T=64, V=65".
    virtual std::string shape_text(int64_t context) const = 0;
    // The sizes as a saved folder holds them (the model's own context), for `export`'s summary.
    virtual std::string saved_shape_text() const = 0;
    // The model's config as JSON (a checkpoint's "model_config": a resume compares it).
    virtual nlohmann::json config_json() const = 0;
    // The token embedding (V,C): its dtype and device are the model's.
    virtual const Tensor& token_embedding() const = 0;
    Device device() const { return token_embedding().device(); }
    DType dtype() const { return token_embedding().dtype(); }

    // ---- incremental generation (models/generation.hpp) ----
    // The longest sequence the model can position (a cache may not be longer).
    virtual int64_t max_positions() const = 0;
    virtual int64_t vocab_size() const = 0;
    // A cache for `batch` rows of up to max_length tokens, in the model's dtype and device.
    virtual KVCache make_cache(int64_t batch, int64_t max_length) const = 0;
    // idx (B,T) int64 new tokens, valid (B,T) bool (undefined: no padding) -> logits (B,T,V);
    // appends the tokens to the cache (one begin_step/end_step). Inference only: no dropout, no graph.
    virtual Tensor forward_cached(const Tensor& idx, KVCache& cache, const Tensor& valid = {}) const = 0;
};

// The nn::Module a CausalLM also is (its parameters, state_dict, train/eval, to); every model in the
// table is both. ValueError for a CausalLM that is not a module.
std::shared_ptr<nn::Module> as_module(const std::shared_ptr<CausalLM>& model);
nn::Module& as_module(CausalLM& model);

}  // namespace ampgrad::models

// language_model.hpp: the model of an `ampgrad` run, `--model gpt` (models/gpt.hpp) or `--model
// llama` (models/llama.hpp), seen through what the command needs: the module (for the optimiser,
// ZeRO, DDP, checkpoints), the loss, sampling, and the sizes and FLOPs it reports. The training
// code (trainer, precision, ZeRO, checkpoints) is written once against this and never asks which.
//
//   auto lm = LanguageModel::make(run_config, /*vocab_size=*/65, /*min_context=*/0);
//   Tensor loss = lm->forward(x, y);                      // (B,T), (B,T) -> ()
//   lm->module()->state_dict();                            // transformers' or nanoGPT's names
#pragma once
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "app/run_config.hpp"
#include "models/gpt.hpp"
#include "models/llama.hpp"
#include "models/pretrained.hpp"

namespace ampgrad::app {

class LanguageModel {
public:
    // The run's model: its preset with the run's overrides, vocab_size from the tokenizer, the
    // context at least min_context (the addition task's sequence length). Draws the initial weights.
    static std::shared_ptr<LanguageModel> make(const RunConfig& cfg, int64_t vocab_size, int64_t min_context);

    std::shared_ptr<nn::Module> module() const;
    Tensor forward(const Tensor& idx, const Tensor& targets) const;   // (B,T), (B,T) -> mean loss ()
    Tensor forward(const Tensor& idx) const;                          // (B,T) -> logits (B,T,V)

    const std::string& kind() const { return kind_; }   // "gpt" or "llama"
    int64_t block_size() const { return context_; }     // the training context T (RunConfig::context_length)
    int64_t vocab_size() const;
    int64_t num_parameters() const;
    double flops_per_token() const;                     // training, forward + backward (nanoGPT's estimate)
    double llmc_flops_per_token() const;                // llm.c's, for MFU (models/gpt_mfu.hpp)
    Device device() const;                              // where the parameters are
    std::string shape_text() const;                     // "L=3, NH=4, C=96, T=64, V=65" (GQA: "NKV=2" too)
    nlohmann::json config_json() const;                 // state.json's "model_config"
    const models::CausalLM& causal_lm() const;          // for models::generate (the KV-cache loop)
    // As a Hugging Face architecture (GPT2LMHeadModel or LlamaForCausalLM), for load/save_pretrained.
    models::PretrainedModel pretrained_model() const;
    std::shared_ptr<models::GPT> gpt() const { return gpt_; }       // null for a Llama
    std::shared_ptr<models::Llama> llama() const { return llama_; } // null for a GPT

private:
    std::string kind_;
    std::shared_ptr<models::GPT> gpt_;
    std::shared_ptr<models::Llama> llama_;
    int64_t context_ = 0;
    models::LlamaConfig llama_at_context() const;       // the Llama's config with T = the training context
};

}  // namespace ampgrad::app

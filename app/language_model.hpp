// language_model.hpp: the model of an `ampgrad` run, any family of the model table (`--model gpt`,
// `llama`, `qwen2`: models/model_family.hpp), seen through models::CausalLM (models/causal_lm.hpp)
// plus what only a run knows: its training context T. The training code (trainer, precision, ZeRO,
// checkpoints) is written once against this and never asks which family it holds.
//
//   auto lm = LanguageModel::make(run_config, /*vocab_size=*/65, /*min_context=*/0);
//   Tensor loss = lm->forward(x, y);                      // (B,T), (B,T) -> ()
//   lm->module()->state_dict();                            // transformers' or nanoGPT's names
#pragma once
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "app/run_config.hpp"
#include "models/causal_lm.hpp"
#include "models/pretrained.hpp"

namespace ampgrad::app {

class LanguageModel {
public:
    // The run's model: its family's build of cfg.model_spec (the preset with the run's overrides, or
    // the --init-from folder's config), vocab_size from the tokenizer, the context at least
    // min_context (the addition task's sequence length). Draws the initial weights.
    static std::shared_ptr<LanguageModel> make(const RunConfig& cfg, int64_t vocab_size, int64_t min_context);

    std::shared_ptr<nn::Module> module() const { return module_; }
    Tensor forward(const Tensor& idx, const Tensor& targets) const { return lm_->forward(idx, targets); }   // -> ()
    Tensor forward(const Tensor& idx) const { return lm_->forward(idx); }                                  // (B,T,V)

    std::string kind() const { return lm_->family(); }         // the family: "gpt", "llama", "qwen2"
    const std::string& title() const;                          // "GPT-2", "Llama", "Qwen2"
    int64_t block_size() const { return context_; }            // the training context T (RunConfig::context_length)
    int64_t vocab_size() const { return lm_->vocab_size(); }
    int64_t num_parameters() const { return lm_->num_parameters(); }
    double flops_per_token() const { return lm_->flops_per_token(context_); }        // nanoGPT's estimate
    double llmc_flops_per_token() const { return lm_->llmc_flops_per_token(context_); }   // llm.c's, for MFU
    Device device() const { return lm_->device(); }            // where the parameters are
    std::string shape_text() const { return lm_->shape_text(context_); }   // "L=3, NH=4, C=96, T=64, V=65"
    nlohmann::json config_json() const { return lm_->config_json(); }      // state.json's "model_config"
    const models::CausalLM& causal_lm() const { return *lm_; }             // for models::generate
    std::shared_ptr<models::CausalLM> causal_lm_ptr() const { return lm_; }
    // As its family's Hugging Face architecture (GPT2LMHeadModel, LlamaForCausalLM, ...).
    models::PretrainedModel pretrained_model() const { return models::as_pretrained(lm_); }

private:
    std::shared_ptr<models::CausalLM> lm_;
    std::shared_ptr<nn::Module> module_;
    int64_t context_ = 0;
};

}  // namespace ampgrad::app

// language_model.cpp: the run's GPT or Llama behind one interface (app/language_model.hpp).
#include "app/language_model.hpp"

#include <fmt/format.h>

#include "models/gpt_mfu.hpp"
#include "models/llama_json.hpp"

namespace ampgrad::app {

std::shared_ptr<LanguageModel> LanguageModel::make(const RunConfig& cfg, int64_t vocab_size, int64_t min_context) {
    auto lm = std::make_shared<LanguageModel>();
    lm->kind_ = cfg.model;
    if (cfg.model == "llama") {
        models::LlamaConfig c = cfg.llama_config(vocab_size);
        c.max_position_embeddings = std::max(c.max_position_embeddings, min_context);
        lm->llama_ = std::make_shared<models::Llama>(c);
        lm->context_ = std::max(cfg.context_length(vocab_size), min_context);
    } else {
        models::GPTConfig c = cfg.model_config(vocab_size);
        c.block_size = std::max(c.block_size, min_context);
        lm->gpt_ = std::make_shared<models::GPT>(c);
        lm->context_ = c.block_size;
    }
    return lm;
}

std::shared_ptr<nn::Module> LanguageModel::module() const {
    if (llama_) return llama_;
    return gpt_;
}

const models::CausalLM& LanguageModel::causal_lm() const {
    if (llama_) return *llama_;
    return *gpt_;
}

models::PretrainedModel LanguageModel::pretrained_model() const {
    if (llama_) return {"LlamaForCausalLM", "llama", llama_};
    return {"GPT2LMHeadModel", "gpt2", gpt_};
}

Tensor LanguageModel::forward(const Tensor& idx, const Tensor& targets) const {
    return llama_ ? llama_->forward(idx, targets) : gpt_->forward(idx, targets);
}

Tensor LanguageModel::forward(const Tensor& idx) const { return llama_ ? llama_->forward(idx) : gpt_->forward(idx); }

models::LlamaConfig LanguageModel::llama_at_context() const {
    models::LlamaConfig c = llama_->config();
    c.max_position_embeddings = context_;
    return c;
}

int64_t LanguageModel::vocab_size() const { return llama_ ? llama_->config().vocab_size : gpt_->config().vocab_size; }

int64_t LanguageModel::num_parameters() const {
    return llama_ ? llama_->config().num_parameters() : gpt_->config().num_parameters();
}

double LanguageModel::flops_per_token() const {
    return llama_ ? llama_at_context().flops_per_token() : gpt_->config().flops_per_token();
}

// llm.c counts every parameter (6 N) and attention once per direction (6 L C T); the Llama's
// attention width is NH * HS.
double LanguageModel::llmc_flops_per_token() const {
    if (gpt_) return models::llmc_flops_per_token(gpt_->config());
    const models::LlamaConfig c = llama_at_context();
    return 6.0 * static_cast<double>(c.num_parameters()) +
           6.0 * static_cast<double>(c.num_hidden_layers * c.num_attention_heads * c.head_size() *
                                     c.max_position_embeddings);
}

Device LanguageModel::device() const {
    return llama_ ? llama_->embed_tokens->weight.device() : gpt_->wte->weight.device();
}

std::string LanguageModel::shape_text() const {
    if (gpt_) {
        const models::GPTConfig& c = gpt_->config();
        return fmt::format("L={}, NH={}, C={}, T={}, V={}", c.n_layer, c.n_head, c.n_embd, c.block_size, c.vocab_size);
    }
    const models::LlamaConfig c = llama_at_context();
    return fmt::format("L={}, NH={}, NKV={}, HS={}, H={}, I={}, T={}, V={}", c.num_hidden_layers,
                       c.num_attention_heads, c.num_key_value_heads, c.head_size(), c.hidden_size,
                       c.intermediate_size, c.max_position_embeddings, c.vocab_size);
}

nlohmann::json LanguageModel::config_json() const {
    if (gpt_) return to_json(gpt_->config());   // unchanged since before --model: old checkpoints still match
    nlohmann::json j = models::to_hf_json(llama_->config());
    j["checkpoint_blocks"] = llama_->config().checkpoint_blocks;
    j["num_parameters"] = llama_->config().num_parameters();
    return j;
}

}  // namespace ampgrad::app

// language_model.cpp: the run's model from the model table (app/language_model.hpp).
#include "app/language_model.hpp"

#include "models/model_family.hpp"

namespace ampgrad::app {

std::shared_ptr<LanguageModel> LanguageModel::make(const RunConfig& cfg, int64_t vocab_size, int64_t min_context) {
    const models::ModelFamily& family = cfg.family();
    const models::ModelSpec spec = cfg.model_spec(vocab_size, min_context);
    auto lm = std::make_shared<LanguageModel>();
    lm->lm_ = family.build(spec);
    lm->module_ = models::as_module(lm->lm_);
    lm->context_ = family.context_length(spec);
    return lm;
}

const std::string& LanguageModel::title() const { return models::model_family(lm_->family()).title; }

}  // namespace ampgrad::app

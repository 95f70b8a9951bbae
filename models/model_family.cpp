// model_family.cpp: the model table (models/model_family.hpp). A new family is one line here and
// its own files (docs/architecture.md, "How to add a model").
#include "models/model_family.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.hpp"
#include "models/pretrained_registry.hpp"

namespace ampgrad::models {

const std::vector<ModelFamily>& model_families() {
    static const std::vector<ModelFamily> table = {detail::gpt_family(), detail::llama_family(),
                                                   detail::qwen2_family()};
    return table;
}

std::vector<std::string> model_family_names() {
    std::vector<std::string> names;
    for (const ModelFamily& f : model_families()) names.push_back(f.name);
    return names;
}

const ModelFamily& model_family(const std::string& name) {
    for (const ModelFamily& f : model_families())
        if (f.name == name) return f;
    throw ValueError(fmt::format("model family \"{}\": unknown; the families are {}", name,
                                 fmt::join(model_family_names(), ", ")));
}

const ModelFamily* family_of_preset(const std::string& preset) {
    for (const ModelFamily& f : model_families())
        if (std::find(f.presets.begin(), f.presets.end(), preset) != f.presets.end()) return &f;
    return nullptr;
}

std::shared_ptr<nn::Module> as_module(const std::shared_ptr<CausalLM>& model) {
    auto module = std::dynamic_pointer_cast<nn::Module>(model);
    if (!module) throw ValueError("as_module: this CausalLM is not an nn::Module (every model of the table is both)");
    return module;
}

nn::Module& as_module(CausalLM& model) {
    auto* module = dynamic_cast<nn::Module*>(&model);
    if (module == nullptr)
        throw ValueError("as_module: this CausalLM is not an nn::Module (every model of the table is both)");
    return *module;
}

}  // namespace ampgrad::models

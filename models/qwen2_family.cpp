// qwen2_family.cpp: the Qwen2 family's entry in the model table (models/model_family.hpp) and its
// Hugging Face architecture, Qwen2ForCausalLM (transformers' modeling_qwen2.py). Every tensor keeps
// transformers' name and layout, as a Llama's does (models/llama_pretrained.cpp), plus the q/k/v biases:
//
//   model.layers.N.self_attn.{q,k,v}_proj.{weight,bias}   (NH*HS,H)+(NH*HS), (NKV*HS,H)+(NKV*HS) x2
//   model.layers.N.self_attn.o_proj.weight                 (H,NH*HS), no bias
//   lm_head.weight                                         (V,H); absent (and skipped) when tied
#include <fmt/format.h>

#include "core/error.hpp"
#include "models/llama_family.hpp"
#include "models/pretrained_registry.hpp"
#include "models/qwen2.hpp"
#include "nn/init.hpp"

namespace ampgrad::models::detail {

namespace {

constexpr const char* kQwen2 = "Qwen2ForCausalLM";

std::shared_ptr<Qwen2> as_qwen2(const PretrainedModel& m) {
    auto q = std::dynamic_pointer_cast<Qwen2>(m.module);
    if (!q) throw ValueError(fmt::format("Qwen2 checkpoint: the model is a {} (model_type \"{}\"), not a Qwen2",
                                         m.architecture, m.model_type));
    return q;
}

LlamaConfig qwen2_config_of(const nlohmann::json& config, const std::string& config_path) {
    try {
        return qwen2_config_from_hf_json(config);
    } catch (const ValueError& e) {
        throw ValueError(fmt::format("{} config {}: {}", kQwen2, config_path, e.what()));
    }
}

PlannedModel build_qwen2(const nlohmann::json& config, const std::string& config_path, const std::string& architecture,
                         const PretrainedOptions& options) {
    if (options.dropout > 0)
        throw ValueError(fmt::format("from_pretrained {}: dropout {}: Qwen2 has no dropout", config_path, options.dropout));
    std::shared_ptr<Qwen2> model;
    {
        nn::init::SkipInitGuard allocate_only;   // every parameter is loaded
        model = std::make_shared<Qwen2>(qwen2_config_of(config, config_path));
    }
    if (options.dtype != kFloat32) model->to(options.dtype);
    WeightPlan plan = llama_plan(*model);
    return {PretrainedModel{architecture, "qwen2", model}, std::move(plan)};
}

std::pair<nlohmann::json, nn::NamedTensors> qwen2_to_hf(const PretrainedModel& m) {
    const std::shared_ptr<Qwen2> model = as_qwen2(m);
    nlohmann::json config = qwen2_to_hf_json(model->config());
    config["dtype"] = hf_dtype_name(model->embed_tokens->weight.dtype());
    nn::NamedTensors tensors;
    for (const auto& [name, param] : model->named_parameters()) tensors.insert(name, param.detach());
    return {config, std::move(tensors)};
}

Architecture qwen2_architecture() {
    Architecture a;
    a.model_type = "qwen2";
    a.family = "qwen2";
    a.architectures = {kQwen2};
    a.build = build_qwen2;
    a.describe = [](const nlohmann::json& config, const std::string& config_path, const std::string& architecture) {
        const LlamaConfig c = qwen2_config_of(config, config_path);
        return PretrainedConfig{architecture, "qwen2", std::nullopt, std::nullopt, "qwen2", qwen2_to_hf_json(c)};
    };
    a.saves = [](const PretrainedModel& m) { return std::dynamic_pointer_cast<Qwen2>(m.module) != nullptr; };
    a.plan = [](const PretrainedModel& m) { return llama_plan(*as_qwen2(m)); };
    a.to_hf = qwen2_to_hf;
    return a;
}

}  // namespace

ModelFamily qwen2_family() {
    ModelFamily f;
    f.name = "qwen2";
    f.title = "Qwen2";
    f.description = "Qwen2 (a Llama with q/k/v biases, RoPE base 1e6)";
    f.presets = qwen2_preset_names();
    f.has_dropout = false;   // attention_dropout is 0 in every Qwen2 release
    f.preset_table = [] {
        return llama_preset_lines("Qwen2 presets (--model qwen2; sizes as the Llama's):", qwen2_preset_names(),
                                  &qwen2_preset);
    };
    auto config_of = [](const ModelSpec& spec) {
        return llama_config_of(spec, spec.pretrained.is_null() ? qwen2_preset(spec.preset)
                                                               : qwen2_config_from_hf_json(spec.pretrained));
    };
    f.build = [config_of](const ModelSpec& spec) -> std::shared_ptr<CausalLM> {
        return std::make_shared<Qwen2>(config_of(spec));
    };
    f.context_length = [config_of](const ModelSpec& spec) { return llama_context_of(spec, config_of(spec)); };
    f.sizes = [](const nlohmann::json& pretrained) { return llama_sizes(qwen2_config_from_hf_json(pretrained)); };
    f.architectures = [] { return std::vector<Architecture>{qwen2_architecture()}; };
    return f;
}

}  // namespace ampgrad::models::detail

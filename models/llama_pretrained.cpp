// llama_pretrained.cpp: Hugging Face's LlamaForCausalLM and MistralForCausalLM folders
// (transformers' modeling_llama.py, modeling_mistral.py) mapped onto models::Llama, both ways.
//
// models::Llama already uses transformers' parameter names and layouts (nn::Linear stores
// (out, in) as torch.nn.Linear does), so every tensor maps to itself:
//
//   model.embed_tokens.weight                       (V,H)
//   model.layers.N.self_attn.{q,k,v,o}_proj.weight  (NH*HS,H), (NKV*HS,H), (NKV*HS,H), (H,NH*HS) (+ .bias)
//   model.layers.N.mlp.{gate,up,down}_proj.weight   (I,H), (I,H), (H,I) (+ .bias with mlp_bias)
//   model.layers.N.{input,post_attention}_layernorm.weight, model.norm.weight   (H)
//   lm_head.weight                                  (V,H); absent (and skipped if present) when tied
//   model.rotary_emb.inv_freq (old files)           a buffer recomputed from the config: skipped
//
// Mistral is a Llama with a sliding attention window: with `sliding_window` W a query sees only the
// last W keys. Every sequence of at most W tokens attends exactly as a Llama, so the model's context
// is capped at W (a ValueError names it for longer input) instead of implementing the window.
#include <algorithm>
#include <optional>

#include "autograd/grad_mode.hpp"
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"
#include "models/llama_json.hpp"
#include "models/pretrained_registry.hpp"
#include "nn/init.hpp"

namespace ampgrad::models {

namespace {

constexpr const char* kLlama = "LlamaForCausalLM";
constexpr const char* kMistral = "MistralForCausalLM";

std::shared_ptr<Llama> as_llama(const PretrainedModel& m) {
    auto llama = std::dynamic_pointer_cast<Llama>(m.module);
    if (!llama)
        throw ValueError(fmt::format("Llama checkpoint: the model is a {} (model_type \"{}\"), not a Llama",
                                     m.architecture, m.model_type));
    return llama;
}

// Mistral's sliding window W caps the context (see the file comment); a null W is a plain Llama.
void apply_sliding_window(const nlohmann::json& config, const std::string& config_path, LlamaConfig& c) {
    if (!config.contains("sliding_window") || config["sliding_window"].is_null()) return;
    if (!config["sliding_window"].is_number_integer() || config["sliding_window"].get<int64_t>() <= 0)
        throw ValueError(fmt::format("Mistral config {}: \"sliding_window\" is {}, not a positive integer",
                                     config_path, config["sliding_window"].dump()));
    c.max_position_embeddings = std::min(c.max_position_embeddings, config["sliding_window"].get<int64_t>());
}

// config.json's LlamaConfig for `architecture` (a Mistral's context capped at its window).
LlamaConfig llama_config_of(const nlohmann::json& config, const std::string& config_path,
                            const std::string& architecture) {
    if (config.contains("hidden_act") && config["hidden_act"] != "silu")
        throw ValueError(fmt::format("{} config {}: \"hidden_act\" is {}; ampgrad's Llama MLP is SwiGLU (\"silu\")",
                                     architecture, config_path, config["hidden_act"].dump()));
    LlamaConfig c;
    try {
        c = llama_config_from_hf_json(config);
        if (architecture == kMistral) apply_sliding_window(config, config_path, c);
        c.validate();
    } catch (const ValueError& e) {
        throw ValueError(fmt::format("{} config {}: {}", architecture, config_path, e.what()));
    }
    return c;
}

std::string model_type_of(const std::string& architecture) { return architecture == kMistral ? "mistral" : "llama"; }

detail::PlannedModel build_llama(const nlohmann::json& config, const std::string& config_path,
                                 const std::string& architecture, const PretrainedOptions& options) {
    if (options.dropout > 0)
        throw ValueError(fmt::format("from_pretrained {}: dropout {}: the Llama has no dropout", config_path,
                                     options.dropout));
    const LlamaConfig c = llama_config_of(config, config_path, architecture);
    std::shared_ptr<Llama> model;
    {
        nn::init::SkipInitGuard allocate_only;                               // every parameter is loaded
        model = std::make_shared<Llama>(c);
    }
    if (options.dtype != kFloat32) model->to(options.dtype);
    detail::WeightPlan plan = detail::llama_plan(*model);
    return {PretrainedModel{architecture, model_type_of(architecture), model}, std::move(plan)};
}

std::pair<nlohmann::json, nn::NamedTensors> llama_to_hf(const PretrainedModel& m) {
    const std::shared_ptr<Llama> model = as_llama(m);
    nlohmann::json config = to_hf_json(model->config());
    config["architectures"] = {kLlama};
    config["model_type"] = "llama";
    config["dtype"] = detail::hf_dtype_name(model->embed_tokens->weight.dtype());
    nn::NamedTensors tensors;
    for (const auto& [name, param] : model->named_parameters()) tensors.insert(name, param.detach());
    return {config, std::move(tensors)};
}

}  // namespace

namespace detail {

WeightPlan llama_plan(const Llama& model) {
    const LlamaConfig& c = model.config();
    WeightPlan plan;
    plan.config_facts = fmt::format("vocab_size {}, hidden_size {}, intermediate_size {}, num_hidden_layers {}, "
                                    "num_attention_heads {}, num_key_value_heads {}, head_dim {}", c.vocab_size,
                                    c.hidden_size, c.intermediate_size, c.num_hidden_layers, c.num_attention_heads,
                                    c.num_key_value_heads, c.head_size());
    for (const auto& [name, param] : model.named_parameters()) {
        Tensor dst = param;
        plan.targets[name] = {dst.sizes(), [dst](const Tensor& stored) mutable { copy_(dst, stored); }};
    }
    const bool tied = c.tie_word_embeddings;
    plan.canonical = [tied](const std::string& stored) -> std::optional<std::string> {
        if (tied && stored == "lm_head.weight") return std::nullopt;          // re-tied to embed_tokens
        if (stored.ends_with("rotary_emb.inv_freq")) return std::nullopt;    // recomputed from the config
        return stored;
    };
    return plan;
}

Architecture llama_architecture() {
    Architecture a;
    a.model_type = "llama";
    a.family = "llama";
    a.architectures = {kLlama};
    a.build = build_llama;
    a.describe = [](const nlohmann::json& config, const std::string& config_path, const std::string& architecture) {
        const LlamaConfig c = llama_config_of(config, config_path, architecture);
        return PretrainedConfig{architecture, model_type_of(architecture), std::nullopt, c, "llama", to_hf_json(c)};
    };
    a.saves = [](const PretrainedModel& m) {   // a Llama, not a Llama-shaped family (Qwen2 saves as its own)
        auto llama = std::dynamic_pointer_cast<Llama>(m.module);
        return llama != nullptr && llama->family() == "llama";
    };
    a.plan = [](const PretrainedModel& m) { return llama_plan(*as_llama(m)); };
    a.to_hf = llama_to_hf;
    return a;
}

// Loads only: a loaded Mistral (its context capped at the window) saves as a LlamaForCausalLM.
Architecture mistral_architecture() {
    Architecture a = llama_architecture();
    a.model_type = "mistral";
    a.architectures = {kMistral};
    a.saves = [](const PretrainedModel&) { return false; };
    return a;
}

}  // namespace detail

}  // namespace ampgrad::models

// llama_family.cpp: the Llama family's entry in the model table (models/model_family.hpp): its presets,
// a LlamaConfig from a preset with a trainer's overrides or from a Hugging Face Llama or Mistral
// config.json, and its Hugging Face architectures (models/llama_pretrained.cpp).
#include <algorithm>

#include <fmt/format.h>

#include "models/llama_family.hpp"
#include "models/llama_json.hpp"
#include "models/pretrained_registry.hpp"

namespace ampgrad::models {

namespace detail {

// With spec.pretrained, `base` is the folder's config and keeps its sizes (the trainer checked the
// overrides against them); else `base` is the preset, and the overrides apply. n_head sets the
// key/value heads too when the preset's no longer divide it.
LlamaConfig llama_config_of(const ModelSpec& spec, const LlamaConfig& base) {
    LlamaConfig c = base;
    if (spec.pretrained.is_null()) {
        c.vocab_size = spec.vocab_size;
        if (spec.layer_norm_epsilon > 0) c.rms_norm_eps = spec.layer_norm_epsilon;
        if (spec.n_layer > 0) c.num_hidden_layers = spec.n_layer;
        if (spec.n_head > 0) c.num_attention_heads = spec.n_head;
        if (spec.n_head > 0 && c.num_attention_heads % c.num_key_value_heads != 0) c.num_key_value_heads = spec.n_head;
        if (spec.n_embd > 0) c.hidden_size = spec.n_embd;
        if (spec.block_size > 0) c.max_position_embeddings = spec.block_size;
    }
    c.max_position_embeddings = std::max(c.max_position_embeddings, spec.min_context);
    c.checkpoint_blocks = spec.checkpoint_blocks;
    c.validate();
    return c;
}

// The training context: the model's whole context, or a pretrained model's --block-size (the
// trainer checked it is within the weights' context).
int64_t llama_context_of(const ModelSpec& spec, const LlamaConfig& c) {
    if (spec.pretrained.is_null() || spec.block_size <= 0) return c.max_position_embeddings;
    return std::max(std::min(spec.block_size, c.max_position_embeddings), spec.min_context);
}

std::vector<std::string> llama_preset_lines(const std::string& header, const std::vector<std::string>& names,
                                            LlamaConfig (*preset)(const std::string&)) {
    std::vector<std::string> lines = {fmt::format("{}\n  {:<11} {:>6} {:>5} {:>3} {:>3} {:>3} {:>5} {:>5} {:>12} {:>16}",
                                                  header, "name", "V", "T", "L", "NH", "NKV", "H", "I", "parameters",
                                                  "FLOPs/token")};
    for (const std::string& name : names) {
        const LlamaConfig c = preset(name);
        lines.push_back(fmt::format("  {:<11} {:>6} {:>5} {:>3} {:>3} {:>3} {:>5} {:>5} {:>12} {:>16.4g}", name,
                                    c.vocab_size, c.max_position_embeddings, c.num_hidden_layers,
                                    c.num_attention_heads, c.num_key_value_heads, c.hidden_size, c.intermediate_size,
                                    c.num_parameters(), c.flops_per_token()));
    }
    return lines;
}

ModelSizes llama_sizes(const LlamaConfig& c) {
    ModelSizes s;
    s.n_layer = {c.num_hidden_layers, "num_hidden_layers"};
    s.n_head = {c.num_attention_heads, "num_attention_heads"};
    s.n_embd = {c.hidden_size, "hidden_size"};
    s.context = {c.max_position_embeddings, "max_position_embeddings"};
    s.context_fixed = false;   // RoPE: any T up to the context
    s.vocab_size = c.vocab_size;
    return s;
}

ModelFamily llama_family() {
    ModelFamily f;
    f.name = "llama";
    f.title = "Llama";
    f.description = "Llama 3 (RMSNorm, RoPE, SwiGLU, grouped-query attention); Mistral folders load into it";
    f.presets = LlamaConfig::preset_names();
    f.has_dropout = false;   // transformers' attention_dropout is 0 in every Llama release
    f.preset_table = [] {
        return llama_preset_lines("Llama presets (--model llama; H hidden, I MLP width, NH query heads, NKV "
                                  "key/value heads):", LlamaConfig::preset_names(), &LlamaConfig::preset);
    };
    auto config_of = [](const ModelSpec& spec) {
        return llama_config_of(spec, spec.pretrained.is_null() ? LlamaConfig::preset(spec.preset)
                                                               : llama_config_from_hf_json(spec.pretrained));
    };
    f.build = [config_of](const ModelSpec& spec) -> std::shared_ptr<CausalLM> {
        return std::make_shared<Llama>(config_of(spec));
    };
    f.context_length = [config_of](const ModelSpec& spec) { return llama_context_of(spec, config_of(spec)); };
    f.sizes = [](const nlohmann::json& pretrained) { return llama_sizes(llama_config_from_hf_json(pretrained)); };
    f.architectures = [] { return std::vector<Architecture>{llama_architecture(), mistral_architecture()}; };
    return f;
}

}  // namespace detail

}  // namespace ampgrad::models

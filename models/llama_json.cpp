// llama_json.cpp: LlamaConfig <-> transformers' config.json (models/llama_json.hpp).
#include "models/llama_json.hpp"

#include "core/error.hpp"

namespace ampgrad::models {

nlohmann::json to_hf_json(const LlamaConfig& c) {
    nlohmann::json j = {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"},
                        {"vocab_size", c.vocab_size}, {"hidden_size", c.hidden_size},
                        {"intermediate_size", c.intermediate_size}, {"num_hidden_layers", c.num_hidden_layers},
                        {"num_attention_heads", c.num_attention_heads}, {"num_key_value_heads", c.num_key_value_heads},
                        {"head_dim", c.head_size()}, {"rms_norm_eps", c.rms_norm_eps}, {"rope_theta", c.rope_theta},
                        {"max_position_embeddings", c.max_position_embeddings},
                        {"tie_word_embeddings", c.tie_word_embeddings}, {"attention_bias", c.attention_bias},
                        {"mlp_bias", c.mlp_bias}, {"initializer_range", c.initializer_range},
                        {"hidden_act", "silu"}, {"rope_scaling", nullptr}};
    if (c.rope_scaling) {
        const nn::Llama3RopeScaling& s = *c.rope_scaling;
        j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", s.factor}, {"low_freq_factor", s.low_freq_factor},
                             {"high_freq_factor", s.high_freq_factor},
                             {"original_max_position_embeddings", s.original_max_position_embeddings}};
    }
    return j;
}

namespace {

template <typename T>
void read(const nlohmann::json& j, const char* key, T& field, bool required) {
    if (!j.contains(key) || j.at(key).is_null()) {
        if (required) throw ValueError(fmt::format("Llama config.json: the key \"{}\" is missing", key));
        return;
    }
    try {
        j.at(key).get_to(field);
    } catch (const nlohmann::json::exception& e) {
        throw ValueError(fmt::format("Llama config.json: the key \"{}\" has a bad value: {}", key, e.what()));
    }
}

// rope_scaling (4.x) or rope_parameters (5.x, which also holds rope_theta): none, "default" or "llama3".
void read_rope(const nlohmann::json& j, LlamaConfig& c) {
    const char* key = j.contains("rope_parameters") && !j.at("rope_parameters").is_null() ? "rope_parameters"
                                                                                           : "rope_scaling";
    if (!j.contains(key) || j.at(key).is_null()) return;
    const nlohmann::json& r = j.at(key);
    read(r, "rope_theta", c.rope_theta, false);
    std::string type = "default";
    if (r.contains("rope_type")) read(r, "rope_type", type, true);
    else read(r, "type", type, false);
    if (type == "default") return;
    if (type != "llama3")
        throw ValueError(fmt::format("Llama config.json: {}.rope_type \"{}\" is not supported (only \"default\" and "
                                     "\"llama3\")", key, type));
    nn::Llama3RopeScaling s;
    read(r, "factor", s.factor, true);
    read(r, "low_freq_factor", s.low_freq_factor, true);
    read(r, "high_freq_factor", s.high_freq_factor, true);
    read(r, "original_max_position_embeddings", s.original_max_position_embeddings, true);
    c.rope_scaling = s;
}

}  // namespace

LlamaConfig llama_config_from_hf_json(const nlohmann::json& j) {
    LlamaConfig c;
    read(j, "vocab_size", c.vocab_size, true);
    read(j, "hidden_size", c.hidden_size, true);
    read(j, "intermediate_size", c.intermediate_size, true);
    read(j, "num_hidden_layers", c.num_hidden_layers, true);
    read(j, "num_attention_heads", c.num_attention_heads, true);
    c.num_key_value_heads = c.num_attention_heads;   // transformers' default: multi-head attention
    read(j, "num_key_value_heads", c.num_key_value_heads, false);
    read(j, "head_dim", c.head_dim, false);
    read(j, "rms_norm_eps", c.rms_norm_eps, false);
    read(j, "rope_theta", c.rope_theta, false);
    read(j, "max_position_embeddings", c.max_position_embeddings, false);
    read(j, "tie_word_embeddings", c.tie_word_embeddings, false);
    read(j, "attention_bias", c.attention_bias, false);
    read(j, "mlp_bias", c.mlp_bias, false);
    read(j, "initializer_range", c.initializer_range, false);
    read_rope(j, c);
    c.validate();
    return c;
}

}  // namespace ampgrad::models

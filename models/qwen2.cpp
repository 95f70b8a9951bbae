// qwen2.cpp: Qwen2's presets, its config.json and the model (models/qwen2.hpp).
#include "models/qwen2.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.hpp"
#include "models/llama_json.hpp"

namespace ampgrad::models {

std::vector<std::string> qwen2_preset_names() { return {"qwen2-nano", "qwen2-0.5b"}; }

LlamaConfig qwen2_preset(const std::string& name) {
    LlamaConfig c;
    c.qkv_bias = true;
    c.rms_norm_eps = 1e-6;
    c.rope_theta = 1000000.0;
    c.tie_word_embeddings = true;
    if (name == "qwen2-nano") {          // llama-nano's sizes with Qwen2's biases and RoPE base
        c.vocab_size = 256, c.hidden_size = 96, c.intermediate_size = 256, c.num_hidden_layers = 3;
        c.num_attention_heads = 4, c.num_key_value_heads = 2, c.max_position_embeddings = 64;
    } else if (name == "qwen2-0.5b") {   // Qwen/Qwen2-0.5B's config.json sizes
        c.vocab_size = 151936, c.hidden_size = 896, c.intermediate_size = 4864, c.num_hidden_layers = 24;
        c.num_attention_heads = 14, c.num_key_value_heads = 2, c.max_position_embeddings = 1024;
    } else {
        throw ValueError(fmt::format("Qwen2: unknown preset \"{}\"; the presets are {}", name,
                                     fmt::join(qwen2_preset_names(), ", ")));
    }
    return c;
}

nlohmann::json qwen2_to_hf_json(const LlamaConfig& c) {
    nlohmann::json j = to_hf_json(c);   // the shared keys, in transformers' names
    j["architectures"] = {"Qwen2ForCausalLM"};
    j["model_type"] = "qwen2";
    for (const char* llama_only : {"attention_bias", "mlp_bias"}) j.erase(llama_only);
    if (c.head_dim == 0) j.erase("head_dim");   // Qwen2's configs leave it to H / NH
    j["use_sliding_window"] = false;
    j["sliding_window"] = nullptr;
    j["max_window_layers"] = c.num_hidden_layers;
    return j;
}

LlamaConfig qwen2_config_from_hf_json(const nlohmann::json& j) {
    if (j.contains("hidden_act") && j["hidden_act"] != "silu")
        throw ValueError(fmt::format("Qwen2 config.json: \"hidden_act\" is {}; the MLP is SwiGLU (\"silu\")",
                                     j["hidden_act"].dump()));
    for (const char* llama_only : {"attention_bias", "mlp_bias"})
        if (j.contains(llama_only) && j[llama_only] == true)
            throw ValueError(fmt::format("Qwen2 config.json: \"{}\" is true; Qwen2 has biases on q/k/v_proj only",
                                         llama_only));
    LlamaConfig c = llama_config_from_hf_json(j);
    c.qkv_bias = true;
    if (c.head_dim > 0 && c.head_dim * c.num_attention_heads == c.hidden_size) c.head_dim = 0;   // the default, spelt out
    const bool windowed = j.value("use_sliding_window", false) && j.contains("sliding_window") &&
                          !j["sliding_window"].is_null();
    if (windowed) {
        if (!j["sliding_window"].is_number_integer() || j["sliding_window"].get<int64_t>() <= 0)
            throw ValueError(fmt::format("Qwen2 config.json: \"sliding_window\" is {}, not a positive integer",
                                         j["sliding_window"].dump()));
        c.max_position_embeddings = std::min(c.max_position_embeddings, j["sliding_window"].get<int64_t>());
    }
    c.validate();
    return c;
}

namespace {

const LlamaConfig& checked(const LlamaConfig& cfg) {
    if (!cfg.qkv_bias || cfg.attention_bias || cfg.mlp_bias)
        throw ValueError("Qwen2: the config must have qkv_bias (biases on q/k/v_proj) and neither attention_bias nor "
                         "mlp_bias; use qwen2_preset or qwen2_config_from_hf_json");
    return cfg;
}

}  // namespace

Qwen2::Qwen2(const LlamaConfig& cfg) : Llama(checked(cfg), "Qwen2ForCausalLM") {}

nlohmann::json Qwen2::config_json() const {
    nlohmann::json j = qwen2_to_hf_json(config());
    j["checkpoint_blocks"] = config().checkpoint_blocks;
    j["num_parameters"] = config().num_parameters();
    return j;
}

}  // namespace ampgrad::models

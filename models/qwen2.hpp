// qwen2.hpp: Qwen2 (Qwen Team, "Qwen2 Technical Report", 2024) as Hugging Face's Qwen2ForCausalLM
// (transformers/models/qwen2/modeling_qwen2.py). Qwen2 is the Llama architecture (models/llama.hpp)
// with two differences that matter here: the q/k/v projections have biases (o_proj has none), and its
// config.json is Qwen2's (RoPE base 1e6 in the releases, the head tied in the small sizes, an optional
// sliding window). So models::Qwen2 is a models::Llama built with LlamaConfig::qkv_bias, under its own
// family name and config; the parameter names are transformers' (model.layers.0.self_attn.q_proj.bias).
// It was added through the model table alone (models/model_family.hpp): docs/architecture.md, "How to
// add a model", counts the files.
//
//   auto model = std::make_shared<models::Qwen2>(models::qwen2_preset("qwen2-nano"));
//   Tensor loss = model->forward(idx, targets);                    // (B,T), (B,T) -> ()
//   auto lm = models::from_pretrained("Qwen2-0.5B").causal_lm();   // a Hub folder
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/llama.hpp"

namespace ampgrad::models {

// "qwen2-nano" (the CPU demo, llama-nano's sizes), "qwen2-0.5b" (Qwen2-0.5B's sizes: V 151936, H 896,
// I 4864, L 24, NH 14, NKV 2, tied, with a 1024-token training context); ValueError naming the presets.
LlamaConfig qwen2_preset(const std::string& name);
std::vector<std::string> qwen2_preset_names();

// Qwen2's config.json (configuration_qwen2.py) <-> a LlamaConfig with qkv_bias. Reading accepts
// transformers 4.x (rope_theta at the top) and 5.x (rope_parameters); a sliding window in use
// (use_sliding_window true) caps the context at the window, as for a Mistral. ValueError naming the key.
nlohmann::json qwen2_to_hf_json(const LlamaConfig& c);
LlamaConfig qwen2_config_from_hf_json(const nlohmann::json& j);

class Qwen2 : public Llama {
public:
    // cfg with qkv_bias set (the presets and qwen2_config_from_hf_json set it; ValueError otherwise).
    explicit Qwen2(const LlamaConfig& cfg);

    std::string family() const override { return "qwen2"; }
    nlohmann::json config_json() const override;   // Qwen2's config.json + checkpoint_blocks, num_parameters
};

}  // namespace ampgrad::models

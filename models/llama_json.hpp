// llama_json.hpp: LlamaConfig as a transformers config.json (configuration_llama.py): written with
// the fields a LlamaForCausalLM needs, read from either layout transformers has used: rope_theta
// and rope_scaling at the top level (4.x), or both inside rope_parameters (5.x).
//
//   nlohmann::json j = models::to_hf_json(cfg);                  // {"model_type": "llama", ...}
//   models::LlamaConfig back = models::llama_config_from_hf_json(j);
#pragma once
#include <nlohmann/json.hpp>

#include "models/llama.hpp"

namespace ampgrad::models {

nlohmann::json to_hf_json(const LlamaConfig& c);
// ValueError naming the key when a required one is missing or has a bad value, or when rope_type
// is neither "default" nor "llama3"; the result is validated.
LlamaConfig llama_config_from_hf_json(const nlohmann::json& j);

}  // namespace ampgrad::models

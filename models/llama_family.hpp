// llama_family.hpp: the pieces of the Llama family's table entry (models/llama_family.cpp) that a
// Llama-shaped family reuses (Qwen2: models/qwen2_family.cpp). Not installed.
#pragma once
#include <string>
#include <vector>

#include "models/llama.hpp"
#include "models/model_family.hpp"

namespace ampgrad::models::detail {

// The model's config: `base` is the preset, with spec's overrides applied, or (spec.pretrained set)
// the folder's config as the family read it, kept. The context is at least spec.min_context; validated.
LlamaConfig llama_config_of(const ModelSpec& spec, const LlamaConfig& base);
// The training context T of a model built from `spec` with config c.
int64_t llama_context_of(const ModelSpec& spec, const LlamaConfig& c);
// `ampgrad info`'s table of Llama-shaped presets.
std::vector<std::string> llama_preset_lines(const std::string& header, const std::vector<std::string>& names,
                                            LlamaConfig (*preset)(const std::string&));
ModelSizes llama_sizes(const LlamaConfig& c);

}  // namespace ampgrad::models::detail

// model_family.hpp: the table of model families, the one place that knows which models exist. Each
// family (GPT-2, Llama, Qwen2) is one entry: its presets, how to build its model from a preset or a
// Hugging Face config.json with a trainer's overrides, and its Hugging Face architectures
// (models/pretrained_registry.hpp). `ampgrad` (app/) reads only this table and models::CausalLM
// (models/causal_lm.hpp), so a new family is a new file and one line in model_families()
// (models/model_family.cpp); docs/architecture.md, "How to add a model", walks through it.
//
//   const models::ModelFamily& f = models::model_family("llama");
//   models::ModelSpec spec{.preset = "llama-nano", .vocab_size = 65};
//   std::shared_ptr<models::CausalLM> lm = f.build(spec);         // initial weights drawn
//   int64_t T = f.context_length(spec);                            // the training context
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/causal_lm.hpp"

namespace ampgrad::models {

namespace detail {
struct Architecture;   // models/pretrained_registry.hpp
}

// What a trainer asks for: a preset with overrides, or a Hugging Face config.json (as the family's
// describe wrote it: PretrainedConfig::config) with the few fields a run may change.
struct ModelSpec {
    std::string preset;                 // one of the family's presets (ignored with `pretrained`)
    nlohmann::json pretrained;          // a folder's config (null: build the preset)
    int64_t vocab_size = 0;             // V of a preset (> 0); a pretrained config keeps its own
    int64_t n_layer = 0, n_head = 0, n_embd = 0;   // a preset's layers, query heads and width (0: keep)
    int64_t block_size = 0;             // the training context T (0: the preset's or the folder's)
    int64_t min_context = 0;            // the context is at least this (a task's sequence length)
    double layer_norm_epsilon = 0.0;    // the norms' eps (0: the preset's)
    double dropout = 0.0;               // families without dropout refuse > 0
    bool checkpoint_blocks = false;     // recompute each block's activations in backward
};

// A config.json's sizes in a trainer's terms, with the family's names for them (error messages).
struct ModelSizes {
    struct Size {
        int64_t value = 0;
        std::string key;                // config.json's name: "n_layer", "num_hidden_layers", ...
    };
    Size n_layer, n_head, n_embd;
    Size context;                       // the longest context the weights allow
    bool context_fixed = false;         // T must equal context (a learned position table), else T <= context
    int64_t vocab_size = 0;
};

struct ModelFamily {
    std::string name;                   // `--model NAME` and CausalLM::family(): "gpt", "llama", "qwen2"
    std::string title;                  // "GPT-2", "Llama", "Qwen2"
    std::string description;            // one line: what the architecture is
    std::vector<std::string> presets;   // `--preset` values; the first is the default
    bool has_dropout = true;            // false: --dropout > 0 is refused
    // `ampgrad presets`: a header line, then one line per preset.
    std::function<std::vector<std::string>()> preset_table;
    // The model `spec` describes, its initial weights drawn from the default generator (under
    // nn::init::SkipInitGuard only allocated, to be loaded). ValueError naming the field for a bad size.
    std::function<std::shared_ptr<CausalLM>(const ModelSpec& spec)> build;
    // The training context T of `spec` (ValueError for a --block-size the weights cannot take).
    std::function<int64_t(const ModelSpec& spec)> context_length;
    // The sizes of a pretrained config (PretrainedConfig::config).
    std::function<ModelSizes(const nlohmann::json& pretrained)> sizes;
    // Its Hugging Face architectures (models/pretrained_registry.hpp); the first saves the family's models.
    std::function<std::vector<detail::Architecture>()> architectures;
};

// Every family, GPT-2 first (the default of `ampgrad train`).
const std::vector<ModelFamily>& model_families();
// The family named `name`; ValueError listing the known names.
const ModelFamily& model_family(const std::string& name);
// The family one of whose presets is `preset`, or nullptr.
const ModelFamily* family_of_preset(const std::string& preset);
std::vector<std::string> model_family_names();

}  // namespace ampgrad::models

// lora.hpp: LoRA on a whole model, by module name, as Hugging Face PEFT's `get_peft_model` does
// (peft/tuners/lora/model.py, peft/tuners/tuners_utils.py), and PEFT's adapter folders both ways
// (peft/utils/save_and_load.py): adapter_config.json + adapter_model.safetensors.
//
//   auto lm = models::from_pretrained(dir).causal_lm();
//   models::LoraConfig cfg{.r = 16, .lora_alpha = 32, .target_modules = {"q_proj", "v_proj"}};
//   models::apply_lora(models::as_module(*lm), cfg);           // base frozen, adapters trainable
//   ... train ...
//   models::save_peft_adapter(*lm, cfg, "out/adapter");          // PEFT's PeftModel.from_pretrained reads it
//   models::load_peft_adapter(*lm2, "peft-written/adapter");     // and ampgrad reads PEFT's
//
// The maths, the memory budget and a walkthrough: docs/lora.md.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/causal_lm.hpp"
#include "nn/linear.hpp"
#include "nn/lora.hpp"

namespace ampgrad::models {

// PEFT's LoraConfig, with its field names (the keys of adapter_config.json).
struct LoraConfig {
    int64_t r = 8;
    double lora_alpha = 8.0;
    double lora_dropout = 0.0;
    // PEFT's matching: a module is targeted when its name equals an entry or ends with "." + entry;
    // or, when target_regex is set instead (adapter_config.json's string form), when the regex
    // matches the whole name (re.fullmatch).
    std::vector<std::string> target_modules;
    std::string target_regex;
    // Modules trained in full and saved with the adapter (e.g. "lm_head"): matched as target_modules.
    std::vector<std::string> modules_to_save;
    std::string bias = "none";          // "none", "all" (every bias trains) or "lora_only" (the targets' biases)
    bool use_rslora = false;            // scale alpha/sqrt(r) instead of alpha/r
    std::string init_lora_weights = "true";   // "true", "gaussian", "false"
    bool fan_in_fan_out = false;        // true for GPT-2's Conv1D layers (save_peft_adapter sets it)
    std::string base_model_name_or_path;

    nn::LoraOptions options() const;    // what each targeted Linear gets
    // adapter_config.json as PEFT 0.21 writes it, and back. from_json tolerates unknown keys and
    // throws ValueError for what ampgrad cannot honour (peft_type other than LORA, use_dora,
    // a non-empty rank_pattern/alpha_pattern, layers_to_transform).
    nlohmann::json to_json() const;
    static LoraConfig from_json(const nlohmann::json& j);
};

// Parses the command's `--lora r=16,alpha=32,dropout=0.05,targets=q_proj,v_proj[,rslora]` (a bare
// name after targets= is one more target). ValueError naming the bad item.
LoraConfig parse_lora_flag(const std::string& text);

// PEFT's check_target_module_exists for one module name.
bool lora_targets(const LoraConfig& config, const std::string& module_name);

// Attaches an adapter to every targeted nn::Linear of `model`, freezes every other parameter and
// unfreezes the modules_to_save and the biases `bias` names. Returns the targeted module names.
// ValueError when nothing matches, or a match is not an nn::Linear (naming it and its type).
std::vector<std::string> apply_lora(nn::Module& model, const LoraConfig& config);

// The adapted Linears of `model`, by module name.
std::vector<std::pair<std::string, std::shared_ptr<nn::Linear>>> lora_layers(nn::Module& model);
// merge()/unmerge() on every adapter (nn/lora.hpp): W += scale B A, and back.
void merge_lora(nn::Module& model);
void unmerge_lora(nn::Module& model);

// What PEFT saves: the trainable parameters (lora_A/B, trained biases, modules_to_save), by their
// names in the model; parameters stay live (detached views).
nn::NamedTensors lora_state_dict(const nn::Module& model);
// The trainable and the total parameter counts (for the progress line); the total counts NF4 base
// weights too (QLoRA), which are no longer parameters.
std::pair<int64_t, int64_t> trainable_and_total_parameters(const nn::Module& model);

// dir/adapter_config.json + dir/adapter_model.safetensors, with PEFT's key names
// ("base_model.model.<name>.lora_A.weight"); tensors in the model's dtype. Files written atomically.
// For a GPT-2 (family "gpt") the config says fan_in_fan_out = true, as PEFT does for Conv1D.
void save_peft_adapter(CausalLM& model, LoraConfig config, const std::string& dir);
// Reads dir's config, applies it to `model` (which must have no adapter yet) and loads the tensors
// (cast to the model's dtype). IOError for a missing file, FormatError for a corrupt one, ValueError
// for a missing or unexpected tensor, ShapeError for a shape that contradicts the model.
LoraConfig load_peft_adapter(CausalLM& model, const std::string& dir);
LoraConfig read_peft_config(const std::string& dir);

}  // namespace ampgrad::models

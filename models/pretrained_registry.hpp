// pretrained_registry.hpp: the pieces models/pretrained.cpp shares with each architecture's
// mapping (models/gpt2_pretrained.cpp, models/llama_pretrained.cpp, models/qwen2_pretrained.cpp),
// and the model table's entries (models/model_family.cpp: one file and one line per family). Not installed: the public API is models/pretrained.hpp.
//
// An architecture turns config.json into an empty model and a WeightPlan: for every tensor name it
// expects in the files (its canonical Hugging Face name), the shape config.json implies and how to
// copy the stored tensor into the model (a cast, a transpose, padding). The generic loader checks
// every header against the plan before reading any tensor data, then reads one file at a time.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/model_family.hpp"
#include "models/pretrained.hpp"
#include "nn/module.hpp"

namespace ampgrad::models::detail {

// One tensor the model expects: its shape as stored and how it enters the model.
struct WeightTarget {
    std::vector<int64_t> stored_shape;                    // as config.json implies it, in the file's layout
    std::function<void(const Tensor& stored)> assign;     // copies a stored tensor (file dtype, CPU) into the model
};

struct WeightPlan {
    std::map<std::string, WeightTarget> targets;          // canonical name -> target; all are required
    // A file's tensor name -> its canonical name (e.g. with or without a prefix), or nullopt for a
    // tensor to skip (a buffer such as GPT-2's attn.bias, a tied head the model re-ties).
    std::function<std::optional<std::string>(const std::string& stored_name)> canonical;
    // What config.json said that fixed the shapes, for error messages ("n_embd 768, n_layer 12").
    std::string config_facts;
};

// A built model waiting for its weights, and the plan that fills it.
struct PlannedModel {
    PretrainedModel model;
    WeightPlan plan;
};

struct Architecture {
    std::string model_type;                               // config.json's "model_type"
    std::string family;                                   // the model family it loads into: "gpt", "llama", "qwen2"
    std::vector<std::string> architectures;               // the "architectures" names it builds
    // Builds the model named `architecture` from config.json (uninitialised parameters, on the
    // host, in options.dtype) and its plan. config_path names config.json in errors.
    std::function<PlannedModel(const nlohmann::json& config, const std::string& config_path,
                               const std::string& architecture, const PretrainedOptions& options)> build;
    // config.json's model config for `architecture` (PretrainedConfig's gpt or llama), as build reads it.
    std::function<PretrainedConfig(const nlohmann::json& config, const std::string& config_path,
                                   const std::string& architecture)> describe;
    // The plan that fills `model` (one this architecture built, or saves).
    std::function<WeightPlan(const PretrainedModel& model)> plan;
    // True when this architecture saves (and plans) `model`.
    std::function<bool(const PretrainedModel& model)> saves;
    // config.json's content and the tensors to store (Hugging Face names and layouts) for `model`.
    std::function<std::pair<nlohmann::json, nn::NamedTensors>(const PretrainedModel& model)> to_hf;
};

// Every known architecture: each family's (models/model_family.hpp), GPT-2 first.
const std::vector<Architecture>& architectures();

// The model table's entries (models/model_family.cpp lists them): one file per family.
ModelFamily gpt_family();              // models/gpt_family.cpp
ModelFamily llama_family();            // models/llama_family.cpp
ModelFamily qwen2_family();            // models/qwen2_family.cpp

Architecture gpt2_architecture();      // models/gpt2_pretrained.cpp
Architecture llama_architecture();     // models/llama_pretrained.cpp: LlamaForCausalLM
Architecture mistral_architecture();   // models/llama_pretrained.cpp: MistralForCausalLM (loads only)
// A Llama-shaped model's plan: every parameter under its own (transformers') name, a tied head and
// RoPE's inv_freq skipped (models/llama_pretrained.cpp; Qwen2's too).
WeightPlan llama_plan(const Llama& model);

// config.json's "dtype" spelling of a parameter dtype: "float32", "float16", "bfloat16", "float64".
std::string hf_dtype_name(DType d);

}  // namespace ampgrad::models::detail

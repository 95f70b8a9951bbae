// pretrained.hpp: Hugging Face model folders in and out: from_pretrained reads a folder that
// transformers' save_pretrained wrote (or one downloaded from the Hub) and builds the matching
// ampgrad model with its weights; save_pretrained writes one that transformers' from_pretrained
// accepts. docs/pretrained.md walks through it (sample, fine-tune, export).
//
//   models::PretrainedModel m = models::from_pretrained("gpt2", {.dtype = kBFloat16});
//   std::shared_ptr<models::CausalLM> lm = m.causal_lm();        // any family (AutoModelForCausalLM)
//   Tensor logits = lm->forward(idx);                            // (B,T) -> (B,T,V), V = 50257
//   std::shared_ptr<models::GPT> gpt = m.gpt();                  // or the family's own class
//   models::save_pretrained(m, "out/gpt2-finetuned");            // config.json + model.safetensors
//
// A folder holds config.json ("architectures", "model_type" and the sizes) and the weights, in one
// model.safetensors or in shards named by model.safetensors.index.json ("weight_map": tensor ->
// file). The shards are read one file at a time and one tensor at a time, each copied into its
// parameter before the next is read, so peak host memory stays near one copy of the model.
//
// Architectures are a table (models/pretrained_registry.hpp): GPT-2 ("gpt2": GPT2LMHeadModel,
// GPT2Model) is in models/gpt2_pretrained.cpp; Llama ("llama": LlamaForCausalLM) and Mistral
// ("mistral": MistralForCausalLM, its context capped at its sliding window; saved back as a Llama) are
// in models/llama_pretrained.cpp; Qwen2 ("qwen2": Qwen2ForCausalLM) in models/qwen2_pretrained.cpp.
// Each belongs to a model family (models/model_family.hpp); another family adds its own.
//
// Errors name the file and the tensor: IOError for a missing file or shard, FormatError for a
// corrupt JSON or safetensors file (a truncated shard), ValueError for an unknown architecture or
// model_type, a config key ampgrad cannot honour, a missing, unexpected or duplicated tensor, and
// ShapeError for a tensor whose shape contradicts config.json.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/device.hpp"
#include "core/dtype.hpp"
#include "models/causal_lm.hpp"
#include "models/gpt.hpp"
#include "models/llama.hpp"

namespace ampgrad::models {

struct PretrainedOptions {
    DType dtype = kFloat32;          // the parameters' dtype: the file's F32/F16/BF16 tensors are cast to it
    Device device = Device(kCPU);    // where the parameters live (loaded on the host, then moved)
    double dropout = 0.0;            // the model's dropout when training (the config's *_pdrop are not used)
};

// A model built from a Hugging Face folder, with the architecture it was saved as.
struct PretrainedModel {
    std::string architecture;               // "GPT2LMHeadModel", "GPT2Model", ...
    std::string model_type;                 // config.json's "model_type": "gpt2", ...
    std::shared_ptr<nn::Module> module;     // the model (for GPT-2 a models::GPT)

    // The GPT-2 (GPT2LMHeadModel or GPT2Model: for the latter use hidden_states(idx), the
    // last_hidden_state); ValueError naming the architecture when the model is not a GPT.
    std::shared_ptr<GPT> gpt() const;
    // The Llama (LlamaForCausalLM, MistralForCausalLM); ValueError naming the architecture otherwise.
    std::shared_ptr<Llama> llama() const;
    // Whichever family it is, as the causal LM models::generate drives (AutoModelForCausalLM-like):
    //   auto lm = models::from_pretrained(dir).causal_lm();
    //   Tensor out = models::generate(*lm, prompt_ids, Tensor(), {.max_new_tokens = 20});
    std::shared_ptr<CausalLM> causal_lm() const;
};

// Reads dir/config.json and dir's weights, builds the model config.json's "architectures" (else
// its "model_type") names, and loads the weights, cast to options.dtype, onto options.device.
PretrainedModel from_pretrained(const std::string& dir, const PretrainedOptions& options = {});

// Loads dir's weights into `model`, an existing model of dir's family whose shapes match them
// (e.g. a GPT built with other dropout, activation checkpointing, in another dtype; a Llama from a
// Mistral folder): the same checks and errors as from_pretrained, each tensor cast to the
// parameter's dtype. The model must be on the host (move it afterwards).
void load_pretrained_weights(const PretrainedModel& model, const std::string& dir);

// What a folder's config.json describes, read without the weights: the architecture it names, the
// model family (models/model_family.hpp) and the config it builds. `config` is what the family's
// ModelSpec::pretrained takes (for a Mistral: a Llama's, its context capped at sliding_window).
// gpt and llama are a GPT-2's and a Llama's (or Mistral's) config as structs (at most one is set).
struct PretrainedConfig {
    std::string architecture;               // "GPT2LMHeadModel", "LlamaForCausalLM", "Qwen2ForCausalLM", ...
    std::string model_type;                 // "gpt2", "llama", "mistral", "qwen2"
    std::optional<GPTConfig> gpt;           // a GPT-2's sizes
    std::optional<LlamaConfig> llama;       // a Llama's or a Mistral's (its context capped at sliding_window)
    std::string family;                     // the model family: "gpt", "llama", "qwen2"
    nlohmann::json config;                  // the family's config (ModelSpec::pretrained)
};
// ValueError when the folder's weight files (if it has any) hold far fewer values than the config
// implies: a corrupt or mistyped size is refused before a caller builds the model.
PretrainedConfig read_pretrained_config(const std::string& dir);

// dir/config.json's GPT-2 sizes as a GPTConfig, without reading the weights; ValueError when the
// folder holds another architecture. (gpt2_config_from_json reads a config already parsed.)
GPTConfig read_gpt2_config(const std::string& dir);

// Writes dir/config.json and dir/model.safetensors in Hugging Face's layout and names, in the
// model's dtype (each file atomically: temporary file, fsync, rename). Creates dir if needed and
// removes a model.safetensors.index.json left there by an earlier sharded save.
void save_pretrained(const PretrainedModel& model, const std::string& dir);
// A GPT as GPT2LMHeadModel (e.g. one trained by `ampgrad train`).
void save_pretrained(const std::shared_ptr<GPT>& model, const std::string& dir);

// The "architectures" names from_pretrained builds: "GPT2LMHeadModel", "GPT2Model", "LlamaForCausalLM", ...
std::vector<std::string> pretrained_architectures();

// Any model of the table as the Hugging Face architecture that saves its family (GPT2LMHeadModel,
// LlamaForCausalLM, Qwen2ForCausalLM), for save_pretrained and load_pretrained_weights.
PretrainedModel as_pretrained(const std::shared_ptr<CausalLM>& model);

// GPT-2's config.json as a GPTConfig (n_positions -> block_size, layer_norm_epsilon, ...): what
// from_pretrained builds, without reading the weights. `source` names the file in errors.
GPTConfig gpt2_config_from_json(const nlohmann::json& config, const std::string& source);

}  // namespace ampgrad::models

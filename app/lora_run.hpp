// lora_run.hpp: LoRA in the `ampgrad` command (docs/lora.md): `train --lora SPEC` attaches adapters to
// the loaded base model (models::apply_lora), `sample`/`eval --hf BASE --adapter DIR` loads a PEFT
// adapter folder onto the base, and `export` writes the adapter folder (or, with --merge-lora, the
// merged model). `--qlora` first puts the frozen base in NF4 (models::quantize_base_nf4, docs/nf4.md):
// every Linear but lm_head, dequantised again only for `export --merge-lora`.
#pragma once
#include <string>

#include "app/run_config.hpp"
#include "models/causal_lm.hpp"
#include "models/lora.hpp"

namespace ampgrad::app {

// Attaches what cfg asks for (--lora or --adapter) to `model`, after its base weights are loaded and
// before the optimizer, DDP or ZeRO see its parameters. Does nothing for a run without either.
void attach_lora_adapters(const RunConfig& cfg, models::CausalLM& model);

// "  lora: r=16, alpha=32 on 24 modules (q_proj, v_proj): 1.57M of 125.0M parameters train (1.26%)",
// or "" when the model has no adapter.
std::string lora_banner_line(const RunConfig& cfg, models::CausalLM& model);

// `export`: the adapter folder (adapter_config.json + adapter_model.safetensors) of a LoRA run.
void export_lora_adapter(const RunConfig& cfg, models::CausalLM& model, const std::string& dir);

}  // namespace ampgrad::app

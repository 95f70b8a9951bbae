// lora_run.cpp: LoRA in the `ampgrad` command (app/lora_run.hpp).
#include "app/lora_run.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "models/quantize_nf4.hpp"

namespace ampgrad::app {

void attach_lora_adapters(const RunConfig& cfg, models::CausalLM& model) {
    if (cfg.qlora) {   // QLoRA: the frozen base in NF4 first (every Linear but lm_head), then the adapters
        if (cfg.lora.empty()) throw ValueError("--qlora: QLoRA trains LoRA adapters on an NF4 base; give --lora too");
        models::quantize_base_nf4(models::as_module(model));
    }
    if (!cfg.adapter.empty()) {
        models::load_peft_adapter(model, cfg.adapter);
        return;
    }
    if (cfg.lora.empty()) return;
    if (cfg.init_from.empty())
        throw ValueError(fmt::format("--lora {}: LoRA adapts a pretrained model; give --init-from HF_DIR", cfg.lora));
    models::apply_lora(models::as_module(model), models::parse_lora_flag(cfg.lora));
}

std::string lora_banner_line(const RunConfig& cfg, models::CausalLM& model) {
    nn::Module& module = models::as_module(model);
    const auto layers = models::lora_layers(module);
    if (layers.empty()) return "";
    const nn::LoraOptions& o = layers.front().second->lora->options;
    const auto [trainable, total] = models::trainable_and_total_parameters(module);
    const std::string source = cfg.adapter.empty() ? cfg.lora : "adapter " + cfg.adapter;
    return fmt::format("  lora: r={}, alpha={} on {} modules ({}): {:.3f}M of {:.3f}M parameters train ({:.2f}%)",
                       o.r, o.alpha, layers.size(), source, static_cast<double>(trainable) / 1e6,
                       static_cast<double>(total) / 1e6, 100.0 * static_cast<double>(trainable) / static_cast<double>(total));
}

void export_lora_adapter(const RunConfig& cfg, models::CausalLM& model, const std::string& dir) {
    models::LoraConfig config = models::parse_lora_flag(cfg.lora);
    config.base_model_name_or_path = cfg.init_from;
    models::save_peft_adapter(model, config, dir);
}

}  // namespace ampgrad::app

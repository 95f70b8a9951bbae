// run_config.cpp: RunConfig's checks and its JSON form (app/run_config.hpp).
#include "app/run_config.hpp"

#include <algorithm>
#include <vector>

#include "core/error.hpp"
#include "core/json_file.hpp"

namespace ampgrad::app {

models::ModelSpec RunConfig::model_spec(int64_t tokenizer_vocab, int64_t min_context) const {
    models::ModelSpec spec;
    spec.preset = preset;
    spec.pretrained = pretrained_config;
    spec.vocab_size = model_vocab_size(tokenizer_vocab);
    spec.n_layer = n_layer, spec.n_head = n_head, spec.n_embd = n_embd, spec.block_size = block_size;
    spec.min_context = min_context;
    spec.layer_norm_epsilon = layer_norm_epsilon;
    spec.dropout = dropout;
    spec.checkpoint_blocks = checkpoint_blocks;
    return spec;
}

int64_t RunConfig::context_length(int64_t tokenizer_vocab) const {
    return family().context_length(model_spec(tokenizer_vocab));
}

void RunConfig::settle_model(bool model_given, bool preset_given) {
    this->model_given = model_given;
    if (model_given && !preset_given) {
        const auto& names = models::model_family_names();
        if (std::find(names.begin(), names.end(), model) != names.end()) preset = family().presets.front();
    }
    if (!model_given && preset_given)
        if (const models::ModelFamily* f = models::family_of_preset(preset)) model = f->name;
}

std::vector<std::string> all_preset_names() {
    std::vector<std::string> names;
    for (const models::ModelFamily& f : models::model_families()) names.insert(names.end(), f.presets.begin(), f.presets.end());
    return names;
}

namespace {

void one_of(const char* flag, const std::string& value, const std::vector<std::string>& allowed) {
    if (std::find(allowed.begin(), allowed.end(), value) == allowed.end())
        throw ValueError(fmt::format("{}: unknown value \"{}\"; expected one of {}", flag, value, fmt::join(allowed, ", ")));
}

void positive(const char* flag, double value) {
    if (!(value > 0)) throw ValueError(fmt::format("{}: must be positive, but is {}", flag, value));
}

}  // namespace

void RunConfig::validate() const {
    one_of("--model", model, models::model_family_names());
    one_of(fmt::format("--preset (with --model {})", model).c_str(), preset, family().presets);
    if (!family().has_dropout && dropout > 0)
        throw ValueError(fmt::format("--dropout {}: the {} has no dropout (transformers' attention_dropout is 0 in "
                                     "every release); drop --dropout", dropout, family().title));
    one_of("--task", task, {"text", "addition"});
    if (!tokenizer.starts_with("gpt2:") && !tokenizer.starts_with("tiktoken:"))
        one_of("--tokenizer", tokenizer, {"auto", "char", "byte", "gpt2", "gpt2:DIR", "tiktoken:FILE"});
    else if (tokenizer.ends_with(":"))
        throw ValueError(fmt::format("--tokenizer: \"{}\" names no path (gpt2:DIR with vocab.json and merges.txt, or "
                                     "tiktoken:FILE)", tokenizer));
    one_of("--prec", prec, {"fp32", "bf16", "fp16", "fp16-master", "fp8"});
    one_of("--fp8-recipe", fp8_recipe, {"delayed", "tensorwise", "rowwise"});
    one_of("--device", device, {"cpu", "cuda"});
    positive("--steps", static_cast<double>(steps));
    positive("--batch-size", static_cast<double>(batch_size));
    positive("--lr", lr);
    positive("--init-scale", init_scale);
    positive("--scale-window", static_cast<double>(scale_window));
    positive("--eval-iters", static_cast<double>(eval_iters));
    positive("--grad-accum", static_cast<double>(grad_accum));
    if (total_batch_size < 0)
        throw ValueError(fmt::format("--total-batch-size: must be >= 0 (0: --grad-accum sets it), but is {}", total_batch_size));
    if (min_lr < 0 || min_lr > lr) throw ValueError(fmt::format("--min-lr: must be in [0, --lr], but is {}", min_lr));
    if (warmup < 0) throw ValueError(fmt::format("--warmup: must be >= 0, but is {}", warmup));
    if (grad_clip < 0) throw ValueError(fmt::format("--grad-clip: must be >= 0 (0: off), but is {}", grad_clip));
    if (!(dropout >= 0 && dropout < 1)) throw ValueError(fmt::format("--dropout: must be in [0, 1), but is {}", dropout));
    if (zero < -1 || zero > 3) throw ValueError(fmt::format("--zero: must be 0, 1, 2 or 3, but is {}", zero));
    if (digits < 1 || digits > 9) throw ValueError(fmt::format("--digits: must be between 1 and 9, but is {}", digits));
    if (hellaswag_every < 0 || hellaswag_limit < 0)
        throw ValueError(fmt::format("--hellaswag-every {}, --hellaswag-limit {}: must be >= 0", hellaswag_every,
                                     hellaswag_limit));
    if (!hellaswag.empty() && task != "text")
        throw ValueError(fmt::format("--hellaswag {}: scores endings of a text, so it needs --task text", hellaswag));
}

void RunConfig::resolve_accumulation(int64_t T) {
    if (total_batch_size <= 0) return;
    const int64_t micro_tokens = batch_size * T;
    if (total_batch_size % micro_tokens != 0)
        throw ValueError(fmt::format("--total-batch-size {}: not a multiple of the tokens of one micro-step, --batch-size "
                                     "{} x block size {} = {}", total_batch_size, batch_size, T, micro_tokens));
    const int64_t accum = total_batch_size / micro_tokens;
    if (grad_accum != 1 && grad_accum != accum)
        throw ValueError(fmt::format("--grad-accum {} disagrees with --total-batch-size {} (= {} micro-steps of {} "
                                     "tokens); give one of them", grad_accum, total_batch_size, accum, micro_tokens));
    grad_accum = accum;
}

nlohmann::json to_json(const RunConfig& c) {
    return {{"model", c.model}, {"preset", c.preset}, {"n_layer", c.n_layer}, {"n_head", c.n_head}, {"n_embd", c.n_embd},
            {"block_size", c.block_size}, {"dropout", c.dropout}, {"checkpoint_blocks", c.checkpoint_blocks},
            {"init_from", c.init_from}, {"vocab_size", c.vocab_size}, {"layer_norm_epsilon", c.layer_norm_epsilon},
            {"pretrained_config", c.pretrained_config}, {"pretrained_files", c.pretrained_files}, {"task", c.task}, {"data_file", c.data_file}, {"tokenizer", c.tokenizer}, {"digits", c.digits},
            {"steps", c.steps}, {"batch_size", c.batch_size}, {"lr", c.lr}, {"min_lr", c.min_lr},
            {"warmup", c.warmup}, {"weight_decay", c.weight_decay}, {"beta1", c.beta1}, {"beta2", c.beta2},
            {"grad_clip", c.grad_clip}, {"seed", c.seed}, {"prec", c.prec}, {"device", c.device},
            {"init_scale", c.init_scale}, {"scale_window", c.scale_window}, {"hysteresis", c.hysteresis},
            {"eval_every", c.eval_every}, {"eval_iters", c.eval_iters},
            {"zero_stage", c.zero >= 0 ? nlohmann::json(c.zero) : nlohmann::json(nullptr)},
            {"grad_accum", c.grad_accum}, {"total_batch_size", c.total_batch_size}, {"val_data", c.val_data},
            {"data_format", c.data_format},
            {"hellaswag", c.hellaswag}, {"hellaswag_every", c.hellaswag_every}, {"hellaswag_limit", c.hellaswag_limit},
            {"lora", c.lora}, {"qlora", c.qlora}, {"fp8_recipe", c.fp8_recipe}, {"deterministic", c.deterministic}};
}

RunConfig run_config_from_json(const nlohmann::json& j) {
    RunConfig c;
    auto get = [&](const char* key, auto& field) {
        if (!j.contains(key)) throw ValueError(fmt::format("run config: the key \"{}\" is missing", key));
        try {
            j.at(key).get_to(field);
        } catch (const nlohmann::json::exception& e) {
            throw ValueError(fmt::format("run config: the key \"{}\" has a bad value: {}", key, json_error_text(e)));
        }
    };
    if (j.contains("model")) get("model", c.model);   // absent before --model: a GPT
    get("preset", c.preset), get("n_layer", c.n_layer), get("n_head", c.n_head), get("n_embd", c.n_embd);
    get("block_size", c.block_size), get("dropout", c.dropout), get("checkpoint_blocks", c.checkpoint_blocks);
    get("task", c.task), get("data_file", c.data_file), get("tokenizer", c.tokenizer), get("digits", c.digits);
    get("steps", c.steps), get("batch_size", c.batch_size), get("lr", c.lr), get("min_lr", c.min_lr);
    get("warmup", c.warmup), get("weight_decay", c.weight_decay), get("beta1", c.beta1), get("beta2", c.beta2);
    get("grad_clip", c.grad_clip), get("seed", c.seed), get("prec", c.prec), get("device", c.device);
    get("init_scale", c.init_scale), get("scale_window", c.scale_window), get("hysteresis", c.hysteresis);
    get("eval_every", c.eval_every), get("eval_iters", c.eval_iters);
    if (j.contains("fp8_recipe")) get("fp8_recipe", c.fp8_recipe);   // since --prec fp8
    if (j.contains("init_from")) {   // since issue 26 (--init-from); earlier runs started from random weights
        get("init_from", c.init_from), get("vocab_size", c.vocab_size), get("layer_norm_epsilon", c.layer_norm_epsilon);
    }
    if (j.contains("grad_accum")) {   // since --grad-accum and token shards; earlier runs: 1, a text file
        get("grad_accum", c.grad_accum), get("total_batch_size", c.total_batch_size), get("val_data", c.val_data);
    }
    if (j.contains("data_format")) get("data_format", c.data_format);
    if (j.contains("pretrained_config")) c.pretrained_config = j.at("pretrained_config");   // since issue 33
    else if (j.contains("pretrained_llama")) c.pretrained_config = j.at("pretrained_llama");   // a Llama's, before
    if (j.contains("pretrained_files")) c.pretrained_files = j.at("pretrained_files");   // since export keeps them
    if (j.contains("lora")) get("lora", c.lora);   // since issue 37 (--lora); earlier runs trained every weight
    if (j.contains("qlora")) get("qlora", c.qlora);   // since --qlora (an NF4 base)
    if (j.contains("deterministic")) get("deterministic", c.deterministic);   // since issue 35
    if (j.contains("hellaswag")) {   // since --hellaswag; earlier runs had none
        get("hellaswag", c.hellaswag), get("hellaswag_every", c.hellaswag_every), get("hellaswag_limit", c.hellaswag_limit);
    }
    // "zero_stage": null (no engine) or the stage. Before stage 0 existed, "zero" held 0 for "off" (and
    // before --zero, nothing).
    if (j.contains("zero_stage")) {
        if (!j.at("zero_stage").is_null()) get("zero_stage", c.zero);
    } else if (j.contains("zero")) {
        get("zero", c.zero);
        if (c.zero == 0) c.zero = -1;
    }
    c.validate();
    return c;
}

}  // namespace ampgrad::app

// gpt_family.cpp: the GPT-2 family's entry in the model table (models/model_family.hpp): its presets,
// a GPTConfig from a preset with a trainer's overrides or from a Hugging Face GPT-2 config.json, and
// its Hugging Face architectures (models/gpt2_pretrained.cpp).
#include <algorithm>

#include <fmt/format.h>

#include "core/error.hpp"
#include "models/gpt.hpp"
#include "models/model_family.hpp"
#include "models/pretrained.hpp"
#include "models/pretrained_registry.hpp"

namespace ampgrad::models {

namespace {

// A folder's config (the sizes are its own), or a preset with the overrides; the context is at
// least spec.min_context.
GPTConfig gpt_config_of(const ModelSpec& spec) {
    GPTConfig c;
    if (!spec.pretrained.is_null()) {
        c = gpt2_config_from_json(spec.pretrained, "the run's GPT-2 config");
    } else {
        c = GPTConfig::preset(spec.preset);
        c.vocab_size = spec.vocab_size;
        if (spec.layer_norm_epsilon > 0) c.layer_norm_epsilon = spec.layer_norm_epsilon;
        if (spec.n_layer > 0) c.n_layer = spec.n_layer;
        if (spec.n_head > 0) c.n_head = spec.n_head;
        if (spec.n_embd > 0) c.n_embd = spec.n_embd;
        if (spec.block_size > 0) c.block_size = spec.block_size;
    }
    c.block_size = std::max(c.block_size, spec.min_context);
    c.dropout = spec.dropout;
    c.checkpoint_blocks = spec.checkpoint_blocks;
    c.validate();
    return c;
}

std::vector<std::string> gpt_preset_table() {
    std::vector<std::string> lines = {fmt::format("GPT-2 presets (--model gpt; V is the preset's: a char tokenizer "
                                                  "replaces it with the text's):\n  {:<6} {:>6} {:>5} {:>3} {:>3} {:>5} "
                                                  "{:>12} {:>16}", "name", "V", "T", "L", "NH", "C", "parameters",
                                                  "FLOPs/token")};
    for (const std::string& name : GPTConfig::preset_names()) {
        const GPTConfig c = GPTConfig::preset(name);
        lines.push_back(fmt::format("  {:<6} {:>6} {:>5} {:>3} {:>3} {:>5} {:>12} {:>16.4g}", name, c.vocab_size,
                                    c.block_size, c.n_layer, c.n_head, c.n_embd, c.num_parameters(),
                                    c.flops_per_token()));
    }
    lines.push_back("  (FLOPs per token: training, forward + backward: 6N + 12 L C T)");
    return lines;
}

ModelSizes gpt_sizes(const nlohmann::json& pretrained) {
    const GPTConfig c = gpt2_config_from_json(pretrained, "the GPT-2 config");
    ModelSizes s;
    s.n_layer = {c.n_layer, "n_layer"};
    s.n_head = {c.n_head, "n_head"};
    s.n_embd = {c.n_embd, "n_embd"};
    s.context = {c.block_size, "n_positions"};
    s.context_fixed = true;   // a learned position table of n_positions rows
    s.vocab_size = c.vocab_size;
    return s;
}

}  // namespace

namespace detail {

ModelFamily gpt_family() {
    ModelFamily f;
    f.name = "gpt";
    f.title = "GPT-2";
    f.description = "GPT-2 (LayerNorm, learned positions, GELU MLP, tied head)";
    f.presets = GPTConfig::preset_names();
    f.has_dropout = true;
    f.preset_table = gpt_preset_table;
    f.build = [](const ModelSpec& spec) -> std::shared_ptr<CausalLM> {
        return std::make_shared<GPT>(gpt_config_of(spec));
    };
    f.context_length = [](const ModelSpec& spec) { return gpt_config_of(spec).block_size; };
    f.sizes = gpt_sizes;
    f.architectures = [] { return std::vector<Architecture>{gpt2_architecture()}; };
    return f;
}

}  // namespace detail

}  // namespace ampgrad::models

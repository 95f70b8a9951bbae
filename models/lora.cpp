// lora.cpp: LoRA by module name (models/lora.hpp): PEFT's config, its target matching, and
// attaching adapters to a model's nn::Linear layers. The adapter files are models/peft_adapter.cpp.
#include "models/lora.hpp"

#include <regex>
#include <set>
#include <sstream>

#include "autograd/grad_mode.hpp"
#include "core/error.hpp"

namespace ampgrad::models {

nn::LoraOptions LoraConfig::options() const {
    nn::LoraOptions o;
    o.r = r;
    o.alpha = lora_alpha;
    o.dropout = lora_dropout;
    o.use_rslora = use_rslora;
    o.init = nn::lora_init_from_string(init_lora_weights);
    return o;
}

namespace {

bool matches_suffix(const std::vector<std::string>& names, const std::string& module_name) {
    for (const std::string& t : names) {
        if (module_name == t) return true;
        if (module_name.size() > t.size() && module_name.ends_with(t) &&
            module_name[module_name.size() - t.size() - 1] == '.')
            return true;
    }
    return false;
}

// The item "key=value" of the --lora flag as (key, value); a bare word is ("", word).
std::pair<std::string, std::string> split_item(const std::string& item) {
    size_t eq = item.find('=');
    if (eq == std::string::npos) return {"", item};
    return {item.substr(0, eq), item.substr(eq + 1)};
}

double parse_number(const std::string& key, const std::string& value) {
    try {
        size_t used = 0;
        double v = std::stod(value, &used);
        if (used == value.size()) return v;
    } catch (const std::exception&) {
    }
    throw ValueError(fmt::format("--lora: {}={} is not a number", key, value));
}

}  // namespace

bool lora_targets(const LoraConfig& config, const std::string& module_name) {
    if (!config.target_regex.empty()) return std::regex_match(module_name, std::regex(config.target_regex));
    return matches_suffix(config.target_modules, module_name);
}

LoraConfig parse_lora_flag(const std::string& text) {
    LoraConfig cfg;
    cfg.lora_alpha = -1.0;   // defaults to r below, as the flag reads
    std::stringstream in(text);
    std::string item;
    bool in_targets = false;
    while (std::getline(in, item, ',')) {
        auto [key, value] = split_item(item);
        if (key.empty() && in_targets && !value.empty() && value != "rslora") {
            cfg.target_modules.push_back(value);
            continue;
        }
        in_targets = false;
        if (key == "r") cfg.r = static_cast<int64_t>(parse_number(key, value));
        else if (key == "alpha") cfg.lora_alpha = parse_number(key, value);
        else if (key == "dropout") cfg.lora_dropout = parse_number(key, value);
        else if (key == "init") cfg.init_lora_weights = value;
        else if (key == "bias") cfg.bias = value;
        else if (key == "targets") cfg.target_modules.push_back(value), in_targets = true;
        else if (key == "regex") cfg.target_regex = value;
        else if (key == "save") cfg.modules_to_save.push_back(value);
        else if (key.empty() && value == "rslora") cfg.use_rslora = true;
        else
            throw ValueError(fmt::format("--lora: unknown item \"{}\" in \"{}\" (expected r=, alpha=, dropout=, "
                                         "targets=a,b, regex=, save=, bias=, init=, rslora)", item, text));
    }
    if (cfg.r < 1) throw ValueError(fmt::format("--lora: r must be at least 1, got {} in \"{}\"", cfg.r, text));
    if (cfg.lora_alpha < 0) cfg.lora_alpha = static_cast<double>(cfg.r);
    if (cfg.target_modules.empty() && cfg.target_regex.empty())
        cfg.target_modules = {"q_proj", "v_proj"};   // PEFT's default for Llama-like models
    nn::lora_init_from_string(cfg.init_lora_weights);   // validates
    return cfg;
}

std::vector<std::string> apply_lora(nn::Module& model, const LoraConfig& config) {
    if (config.bias != "none" && config.bias != "all" && config.bias != "lora_only")
        throw ValueError(fmt::format("apply_lora: bias must be \"none\", \"all\" or \"lora_only\", got \"{}\"",
                                     config.bias));
    NoGradGuard no_grad;
    for (Tensor p : model.parameters()) p.requires_grad_(false);   // PEFT freezes the whole base
    std::vector<std::string> targeted;
    for (const auto& [name, module] : model.named_modules()) {
        if (name.empty() || !lora_targets(config, name)) continue;
        auto linear = std::dynamic_pointer_cast<nn::Linear>(module);
        if (!linear)
            throw ValueError(fmt::format("apply_lora: target module {} is a {}, not a Linear; LoRA targets Linear "
                                         "layers only", name, module->name()));
        if (linear->lora) continue;   // lora_A/lora_B themselves are Linears under a target
        nn::attach_lora(*linear, config.options());
        if (config.bias == "lora_only" && linear->bias.defined()) linear->bias.requires_grad_(true);
        targeted.push_back(name);
    }
    if (targeted.empty())
        throw ValueError(fmt::format("apply_lora: target modules {} not found in the base model",
                                     config.target_regex.empty() ? nlohmann::json(config.target_modules).dump()
                                                                 : config.target_regex));
    for (const auto& [name, module] : model.named_modules()) {
        if (matches_suffix(config.modules_to_save, name))
            for (Tensor p : module->parameters()) p.requires_grad_(true);
    }
    if (config.bias == "all")
        for (const auto& [name, p] : model.named_parameters())
            if (name == "bias" || name.ends_with(".bias")) Tensor(p).requires_grad_(true);
    return targeted;
}

std::vector<std::pair<std::string, std::shared_ptr<nn::Linear>>> lora_layers(nn::Module& model) {
    std::vector<std::pair<std::string, std::shared_ptr<nn::Linear>>> out;
    for (const auto& [name, module] : model.named_modules())
        if (auto linear = std::dynamic_pointer_cast<nn::Linear>(module); linear && linear->lora)
            out.emplace_back(name, linear);
    return out;
}

void merge_lora(nn::Module& model) {
    for (auto& [name, linear] : lora_layers(model)) linear->lora->merge(*linear);
}

void unmerge_lora(nn::Module& model) {
    for (auto& [name, linear] : lora_layers(model)) linear->lora->unmerge(*linear);
}

nn::NamedTensors lora_state_dict(const nn::Module& model) {
    nn::NamedTensors out;
    for (const auto& [name, p] : model.named_parameters())
        if (p.requires_grad()) out.insert(name, p.detach());
    return out;
}

std::pair<int64_t, int64_t> trainable_and_total_parameters(const nn::Module& model) {
    int64_t trainable = 0, total = 0;
    for (const Tensor& p : model.parameters()) {
        total += p.numel();
        if (p.requires_grad()) trainable += p.numel();
    }
    for (const auto& [name, module] : model.named_modules("", /*include_self=*/false)) {   // QLoRA's NF4 base
        auto layer = std::dynamic_pointer_cast<const nn::Linear>(module);
        if (layer && layer->is_nf4()) total += layer->nf4_weight().numel();   // frozen, and no longer a parameter
    }
    return {trainable, total};
}

}  // namespace ampgrad::models

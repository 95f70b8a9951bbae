// peft_adapter.cpp: Hugging Face PEFT's adapter folders in and out (models/lora.hpp):
// adapter_config.json (PEFT's LoraConfig as JSON) and adapter_model.safetensors, whose keys are the
// trainable parameters' names under "base_model.model." (peft/utils/save_and_load.py strips the
// adapter name "default"), e.g. base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight (r,in).
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "autograd/grad_mode.hpp"
#include "autograd/ops/ops.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/json_file.hpp"
#include "io/safetensors.hpp"
#include "models/lora.hpp"

namespace ampgrad::models {

namespace {

constexpr const char* kKeyPrefix = "base_model.model.";
constexpr const char* kConfigFile = "adapter_config.json";
constexpr const char* kWeightsFile = "adapter_model.safetensors";

// PEFT writes init_lora_weights as true, false or a string ("gaussian", ...).
std::string init_text(const nlohmann::json& j) {
    if (j.is_boolean()) return j.get<bool>() ? "true" : "false";
    return j.get<std::string>();
}

bool is_empty_or_null(const nlohmann::json& j, const char* key) {
    return !j.contains(key) || j[key].is_null() || j[key].empty();
}

}  // namespace

nlohmann::json LoraConfig::to_json() const {
    nlohmann::json j;
    j["peft_type"] = "LORA";
    j["task_type"] = "CAUSAL_LM";
    j["r"] = r;
    j["lora_alpha"] = lora_alpha;
    j["lora_dropout"] = lora_dropout;
    if (target_regex.empty()) {
        std::set<std::string> sorted(target_modules.begin(), target_modules.end());   // PEFT stores a set
        j["target_modules"] = std::vector<std::string>(sorted.begin(), sorted.end());
    } else {
        j["target_modules"] = target_regex;
    }
    j["modules_to_save"] = modules_to_save.empty() ? nlohmann::json(nullptr) : nlohmann::json(modules_to_save);
    j["bias"] = bias;
    j["use_rslora"] = use_rslora;
    j["use_dora"] = false;
    j["init_lora_weights"] = init_lora_weights == "true"    ? nlohmann::json(true)
                             : init_lora_weights == "false" ? nlohmann::json(false)
                                                            : nlohmann::json(init_lora_weights);
    j["fan_in_fan_out"] = fan_in_fan_out;
    j["base_model_name_or_path"] = base_model_name_or_path;
    j["inference_mode"] = true;
    j["rank_pattern"] = nlohmann::json::object();
    j["alpha_pattern"] = nlohmann::json::object();
    j["layers_to_transform"] = nullptr;
    j["layers_pattern"] = nullptr;
    j["revision"] = nullptr;
    return j;
}

LoraConfig LoraConfig::from_json(const nlohmann::json& j) {
    const std::string where = "adapter_config.json";
    try {
        if (j.value("peft_type", std::string("LORA")) != "LORA")
            throw ValueError(fmt::format("{}: peft_type is {}; ampgrad reads LORA adapters only", where,
                                         j["peft_type"].dump()));
        if (j.value("use_dora", false))
            throw ValueError(fmt::format("{}: use_dora is true; ampgrad does not implement DoRA", where));
        for (const char* key : {"rank_pattern", "alpha_pattern", "layers_to_transform"})
            if (!is_empty_or_null(j, key))
                throw ValueError(fmt::format("{}: {} is {}; ampgrad supports one r and lora_alpha for every "
                                             "layer", where, key, j[key].dump()));
        LoraConfig c;
        if (!j.at("r").is_number_integer())   // PEFT's r is an int; get<int64_t> would truncate 1.5 and wrap 1e300
            throw FormatError(fmt::format("{}: r is {}, not an integer", where, j["r"].dump()));
        c.r = j.at("r").get<int64_t>();
        c.lora_alpha = j.value("lora_alpha", 8.0);
        c.lora_dropout = j.value("lora_dropout", 0.0);
        const nlohmann::json& targets = j.at("target_modules");
        if (targets.is_string()) c.target_regex = targets.get<std::string>();
        else c.target_modules = targets.get<std::vector<std::string>>();
        if (!is_empty_or_null(j, "modules_to_save")) c.modules_to_save = j["modules_to_save"].get<std::vector<std::string>>();
        c.bias = j.value("bias", std::string("none"));
        c.use_rslora = j.value("use_rslora", false);
        if (j.contains("init_lora_weights")) c.init_lora_weights = init_text(j["init_lora_weights"]);
        if (c.init_lora_weights != "true" && c.init_lora_weights != "false" && c.init_lora_weights != "gaussian")
            c.init_lora_weights = "true";   // another scheme (pissa, olora, ...): the loaded weights decide
        c.fan_in_fan_out = j.value("fan_in_fan_out", false);
        if (j.contains("base_model_name_or_path") && j["base_model_name_or_path"].is_string())
            c.base_model_name_or_path = j["base_model_name_or_path"].get<std::string>();
        return c;
    } catch (const nlohmann::json::exception& e) {
        throw FormatError(fmt::format("{}: a key has the wrong type or is missing: {}", where, e.what()));
    }
}

LoraConfig read_peft_config(const std::string& dir) {
    return LoraConfig::from_json(read_json_file((std::filesystem::path(dir) / kConfigFile).string(), "load_peft_adapter"));
}

void save_peft_adapter(CausalLM& model, LoraConfig config, const std::string& dir) {
    nn::Module& module = as_module(model);
    if (lora_layers(module).empty())
        throw ValueError(fmt::format("save_peft_adapter: the model has no LoRA adapter to save into {}", dir));
    if (model.family() == "gpt") config.fan_in_fan_out = true;   // Hugging Face's GPT-2 layers are Conv1D
    nn::NamedTensors tensors;
    for (const auto& [name, t] : lora_state_dict(module)) tensors.insert(kKeyPrefix + name, t);
    ampgrad::create_directories(dir, "save_peft_adapter");
    io::save_safetensors((std::filesystem::path(dir) / kWeightsFile).string(), tensors, {{"format", "pt"}});
    io::write_file_atomic((std::filesystem::path(dir) / kConfigFile).string(), config.to_json().dump(2) + "\n");
}

namespace {

// The config's r against the rank of the file's lora_A matrices (r, in), before any adapter is
// built: a corrupt r (2^40) would otherwise allocate (r, in) matrices first.
void check_rank(const LoraConfig& config, const io::SafetensorsReader& file, const std::string& dir) {
    for (const io::TensorEntry& entry : file.header().tensors)
        if (entry.name.ends_with(".lora_A.weight") && (entry.shape.size() != 2 || entry.shape[0] != config.r))
            throw ValueError(fmt::format("load_peft_adapter: {} says r = {}, but {} holds {} of shape ({})",
                                         (std::filesystem::path(dir) / kConfigFile).string(), config.r, file.path(),
                                         entry.name, fmt::join(entry.shape, ",")));
}

}  // namespace

LoraConfig load_peft_adapter(CausalLM& model, const std::string& dir) {
    LoraConfig config = read_peft_config(dir);
    nn::Module& module = as_module(model);
    if (!lora_layers(module).empty())
        throw ValueError(fmt::format("load_peft_adapter: the model already has LoRA adapters; load {} onto a "
                                     "fresh base model", dir));
    const std::string path = (std::filesystem::path(dir) / kWeightsFile).string();
    io::SafetensorsReader file(path);
    check_rank(config, file, dir);
    try {
        apply_lora(module, config);
    } catch (const ValueError& e) {   // targets, bias, dropout: facts of the config file
        throw ValueError(fmt::format("load_peft_adapter: {}: {}", (std::filesystem::path(dir) / kConfigFile).string(),
                                     e.what()));
    }
    nn::NamedTensors params = module.named_parameters();
    std::set<std::string> loaded;
    NoGradGuard no_grad;
    for (const io::TensorEntry& entry : file.header().tensors) {
        std::string name = entry.name.starts_with(kKeyPrefix) ? entry.name.substr(std::string(kKeyPrefix).size())
                                                               : entry.name;
        const Tensor* p = params.find(name);
        if (!p)
            throw ValueError(fmt::format("load_peft_adapter: {}: tensor {} names no parameter of the {} model with the "
                                         "adapters adapter_config.json asks for (target_modules {})", path, entry.name,
                                         model.family(), config.target_regex.empty()
                                             ? fmt::format("[{}]", fmt::join(config.target_modules, ", "))
                                             : config.target_regex));
        Tensor t = file.read(entry.name);
        if (t.sizes() != p->sizes())
            throw ShapeError(fmt::format("load_peft_adapter: {}: tensor {} is {} but the model's {} is {}", path,
                                         entry.name, t.describe(), name, p->describe()));
        p->detach().copy_(t.to(p->dtype()).to(p->device()));
        loaded.insert(name);
    }
    for (const auto& [name, linear] : lora_layers(module))
        for (const char* part : {".lora_A.weight", ".lora_B.weight"})
            if (!loaded.count(name + part))
                throw ValueError(fmt::format("load_peft_adapter: {} has no tensor {}{}{}", path, kKeyPrefix, name,
                                             part));
    return config;
}

}  // namespace ampgrad::models

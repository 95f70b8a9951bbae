// pretrained.cpp: the architecture-independent half of Hugging Face folders (models/pretrained.hpp):
// config.json, choosing the architecture, finding the weight files (one file or an index and its
// shards), checking every header against the architecture's plan, then reading one file at a time.
#include "models/pretrained.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "autograd/grad_mode.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/json_file.hpp"
#include "io/safetensors.hpp"
#include "models/lora.hpp"
#include "models/pretrained_registry.hpp"

namespace ampgrad::models {

namespace fs = std::filesystem;
using detail::Architecture;
using detail::WeightPlan;

namespace detail {

const std::vector<Architecture>& architectures() {
    static const std::vector<Architecture> table = [] {
        std::vector<Architecture> all;
        for (const ModelFamily& f : model_families())
            for (Architecture& a : f.architectures()) all.push_back(std::move(a));
        return all;
    }();
    return table;
}

std::string hf_dtype_name(DType d) {
    switch (d) {
        case kFloat16: return "float16";
        case kBFloat16: return "bfloat16";
        case kFloat64: return "float64";
        default: return "float32";
    }
}

}  // namespace detail

namespace {

// A JSON object from a file: IOError when it cannot be read, FormatError when it is not a JSON object.
nlohmann::json read_json_object(const fs::path& path) {
    nlohmann::json j = read_json_file(path.string(), "from_pretrained");
    if (!j.is_object()) throw FormatError(fmt::format("from_pretrained: {}: not a JSON object", path.string()));
    return j;
}

std::string known_architectures() {
    std::vector<std::string> names;
    for (const Architecture& a : detail::architectures())
        names.push_back(fmt::format("{} (model_type \"{}\")", fmt::join(a.architectures, ", "), a.model_type));
    return fmt::format("{}", fmt::join(names, "; "));
}

}  // namespace

std::vector<std::string> pretrained_architectures() {
    std::vector<std::string> names;
    for (const Architecture& a : detail::architectures()) names.insert(names.end(), a.architectures.begin(), a.architectures.end());
    return names;
}

namespace {

// The architecture config.json names: the first known entry of "architectures", else the first
// architecture of "model_type". ValueError naming what it found and what is known.
std::pair<const Architecture*, std::string> choose_architecture(const nlohmann::json& config, const std::string& path) {
    const std::string model_type = config.contains("model_type") && config["model_type"].is_string()
                                       ? config["model_type"].get<std::string>() : "";
    std::vector<std::string> named;
    if (config.contains("architectures") && config["architectures"].is_array())
        for (const nlohmann::json& n : config["architectures"])
            if (n.is_string()) named.push_back(n.get<std::string>());
    for (const std::string& name : named)
        for (const Architecture& a : detail::architectures())
            if (std::find(a.architectures.begin(), a.architectures.end(), name) != a.architectures.end()) {
                if (!model_type.empty() && model_type != a.model_type)
                    throw ValueError(fmt::format("from_pretrained: {}: \"architectures\" names {}, a \"{}\" model, but "
                                                 "\"model_type\" is \"{}\"", path, name, a.model_type, model_type));
                return {&a, name};
            }
    if (!named.empty())
        throw ValueError(fmt::format("from_pretrained: {}: unknown architecture {} (model_type \"{}\"); ampgrad builds {}",
                                     path, fmt::join(named, ", "), model_type, known_architectures()));
    for (const Architecture& a : detail::architectures())
        if (a.model_type == model_type) return {&a, a.architectures.front()};
    throw ValueError(fmt::format("from_pretrained: {}: unknown model_type \"{}\" and no \"architectures\"; ampgrad "
                                 "builds {}", path, model_type, known_architectures()));
}

// The folder's weight files: model.safetensors, or the shards model.safetensors.index.json maps
// tensors to (each must exist). `index` is empty for a single file.
struct WeightFiles {
    std::vector<std::string> files;
    std::string index;
    std::map<std::string, std::string> weight_map;   // tensor -> file path (sharded only)
};

WeightFiles find_weight_files(const fs::path& dir) {
    WeightFiles w;
    if (fs::exists(dir / "model.safetensors")) {
        w.files.push_back((dir / "model.safetensors").string());
        return w;
    }
    const fs::path index = dir / "model.safetensors.index.json";
    if (!fs::exists(index))
        throw IOError(fmt::format("from_pretrained: {}: no model.safetensors and no model.safetensors.index.json "
                                  "(PyTorch .bin weights are not read: save them as safetensors first)", dir.string()));
    w.index = index.string();
    const nlohmann::json j = read_json_object(index);
    if (!j.contains("weight_map") || !j["weight_map"].is_object())
        throw FormatError(fmt::format("from_pretrained: {}: no \"weight_map\" object", w.index));
    for (const auto& [tensor, file] : j["weight_map"].items()) {
        if (!file.is_string())
            throw FormatError(fmt::format("from_pretrained: {}: \"weight_map\" maps \"{}\" to a non-string", w.index, tensor));
        const fs::path shard = dir / file.get<std::string>();
        if (!fs::exists(shard))
            throw IOError(fmt::format("from_pretrained: {}: maps tensor \"{}\" to the shard {}, which does not exist",
                                      w.index, tensor, shard.string()));
        w.weight_map[tensor] = shard.string();
        if (std::find(w.files.begin(), w.files.end(), shard.string()) == w.files.end()) w.files.push_back(shard.string());
    }
    return w;
}

std::string shape_text(const std::vector<int64_t>& s) { return fmt::format("({})", fmt::join(s, ",")); }

// Checks one file's header against the plan and records which canonical names it supplies.
void check_file(const io::SafetensorsReader& file, const WeightFiles& w, const WeightPlan& plan,
                const std::string& config_path, std::map<std::string, std::string>& found) {
    for (const io::TensorEntry& e : file.header().tensors) {
        if (!w.index.empty() && w.weight_map.count(e.name) && w.weight_map.at(e.name) != file.path())
            throw ValueError(fmt::format("from_pretrained: {}: holds tensor \"{}\", which {} maps to {}", file.path(),
                                         e.name, w.index, w.weight_map.at(e.name)));
        const std::optional<std::string> name = plan.canonical(e.name);
        if (!name) continue;                                           // a buffer, or a tied head
        auto target = plan.targets.find(*name);
        if (target == plan.targets.end())
            throw ValueError(fmt::format("from_pretrained: {}: unexpected tensor \"{}\": {} ({}) has no such tensor",
                                         file.path(), e.name, config_path, plan.config_facts));
        if (found.count(*name))
            throw ValueError(fmt::format("from_pretrained: {}: tensor \"{}\" is stored twice (also in {})", file.path(),
                                         e.name, found.at(*name)));
        if (e.dtype != "F32" && e.dtype != "F16" && e.dtype != "BF16" && e.dtype != "F64")
            throw ValueError(fmt::format("from_pretrained: {}: tensor \"{}\" has dtype {}; weights must be F32, F16, "
                                         "BF16 or F64", file.path(), e.name, e.dtype));
        if (e.shape != target->second.stored_shape)
            throw ShapeError(fmt::format("from_pretrained: {}: tensor \"{}\" has shape {}, but {} ({}) implies {}",
                                         file.path(), e.name, shape_text(e.shape), config_path, plan.config_facts,
                                         shape_text(target->second.stored_shape)));
        found[*name] = file.path();
    }
}

// Every header against the plan, before any tensor data is read: each tensor known, with its
// shape, stored once; each planned tensor present; each index entry in its shard.
void check_weights(const std::vector<std::unique_ptr<io::SafetensorsReader>>& files, const WeightFiles& w,
                   const WeightPlan& plan, const std::string& config_path) {
    std::map<std::string, std::string> found;                        // canonical name -> file
    for (const auto& f : files) check_file(*f, w, plan, config_path, found);
    for (const auto& [tensor, file] : w.weight_map) {
        const auto& holder = *std::find_if(files.begin(), files.end(), [&](const auto& f) { return f->path() == file; });
        if (holder->find(tensor) == nullptr)
            throw ValueError(fmt::format("from_pretrained: {}: maps tensor \"{}\" to {}, which has no such tensor",
                                         w.index, tensor, file));
    }
    const std::string where = w.index.empty() ? files.front()->path() : w.index;
    for (const auto& [name, target] : plan.targets)
        if (!found.count(name))
            throw ValueError(fmt::format("from_pretrained: {}: missing tensor \"{}\" (shape {}), which {} ({}) implies",
                                         where, name, shape_text(target.stored_shape), config_path, plan.config_facts));
}


// A config.json that does not belong to the weights beside it (a corrupt or edited size) is refused
// before the model is built, from the headers alone: the parameters it implies must be held by the
// weight files. The slack covers what a file leaves out (GPT-2's padded vocabulary rows, a tied
// head); a config that is only slightly off is caught tensor by tensor by check_weights.
void check_config_fits_weights(const PretrainedConfig& c, const std::string& dir, const std::string& config_path) {
    const double implied = c.gpt ? static_cast<double>(c.gpt->num_parameters())
                                 : c.llama ? static_cast<double>(c.llama->num_parameters()) : 0.0;
    double stored = 0;
    for (const std::string& f : find_weight_files(dir).files)
        for (const io::TensorEntry& e : io::read_safetensors_header(f).tensors) {
            double numel = 1;
            for (int64_t d : e.shape) numel *= static_cast<double>(d);
            stored += numel;
        }
    if (implied > 2 * stored + (1 << 20))
        throw ValueError(fmt::format("from_pretrained: {} describes a model of {:.4g} parameters, but the weight files "
                                     "in {} hold only {:.4g} values: the config does not belong to these weights",
                                     config_path, implied, dir, stored));
}

// A model with LoRA adapters saves as a plain folder only once they are merged into the weights
// (models/lora.hpp): the adapters' own tensors are left out. Unmerged adapters are refused.
nn::NamedTensors without_merged_lora(nn::Module& module, nn::NamedTensors tensors, const std::string& dir) {
    const auto layers = lora_layers(module);
    if (layers.empty()) return tensors;
    for (const auto& [name, linear] : layers)
        if (!linear->lora->merged)
            throw ValueError(fmt::format("save_pretrained: {}: the LoRA adapter on {} is not merged; call "
                                         "models::merge_lora first, or save the adapter with save_peft_adapter",
                                         dir, name));
    nn::NamedTensors out;
    for (const auto& [name, t] : tensors)
        if (name.find(".lora_A.") == std::string::npos && name.find(".lora_B.") == std::string::npos) out.insert(name, t);
    return out;
}

}  // namespace

std::shared_ptr<GPT> PretrainedModel::gpt() const {
    auto g = std::dynamic_pointer_cast<GPT>(module);
    if (!g) throw ValueError(fmt::format("PretrainedModel::gpt: the model is a {} (model_type \"{}\"), not a GPT-2",
                                         architecture, model_type));
    return g;
}

std::shared_ptr<Llama> PretrainedModel::llama() const {
    auto l = std::dynamic_pointer_cast<Llama>(module);
    if (!l) throw ValueError(fmt::format("PretrainedModel::llama: the model is a {} (model_type \"{}\"), not a Llama",
                                         architecture, model_type));
    return l;
}

std::shared_ptr<CausalLM> PretrainedModel::causal_lm() const {
    auto lm = architecture == "GPT2Model" ? nullptr : std::dynamic_pointer_cast<CausalLM>(module);   // no head
    if (!lm) throw ValueError(fmt::format("PretrainedModel::causal_lm: the model is a {} (model_type \"{}\"), which has no "
                                          "language-model head", architecture, model_type));
    return lm;
}

namespace {

const Architecture& architecture_of(const PretrainedModel& model, const std::string& op, const std::string& dir) {
    const auto& table = detail::architectures();
    auto arch = std::find_if(table.begin(), table.end(), [&](const Architecture& a) { return a.saves(model); });
    if (!model.module || arch == table.end())
        throw ValueError(fmt::format("{}: {}: no Hugging Face layout for a {} (model_type \"{}\"); ampgrad handles {}", op,
                                     dir, model.architecture, model.model_type, known_architectures()));
    return *arch;
}

// Checks every header of dir's weight files against `plan`, then reads them one file, one tensor at
// a time into the model.
void load_weights(detail::WeightPlan& plan, const std::string& dir, const std::string& config_path) {
    const WeightFiles w = find_weight_files(dir);
    std::vector<std::unique_ptr<io::SafetensorsReader>> files;      // headers read and validated on open
    for (const std::string& f : w.files) files.push_back(std::make_unique<io::SafetensorsReader>(f));
    check_weights(files, w, plan, config_path);
    NoGradGuard no_grad;
    for (auto& f : files) {
        for (const io::TensorEntry& e : f->header().tensors)
            if (const std::optional<std::string> canonical = plan.canonical(e.name))
                plan.targets.at(*canonical).assign(f->read(e.name));
        f.reset();                                                   // closed before the next is read
    }
}

std::string config_path_of(const std::string& dir) { return (fs::path(dir) / "config.json").string(); }

}  // namespace

PretrainedModel from_pretrained(const std::string& dir, const PretrainedOptions& options) {
    if (!is_floating(options.dtype))
        throw ValueError(fmt::format("from_pretrained: {}: dtype {} is not a floating dtype", dir,
                                     dtype_name(options.dtype)));
    const std::string config_path = config_path_of(dir);
    const nlohmann::json config = read_json_object(config_path);
    detail::PlannedModel planned = with_json_errors("from_pretrained", config_path, [&] {
        const auto [arch, name] = choose_architecture(config, config_path);
        check_config_fits_weights(arch->describe(config, config_path, name), dir, config_path);
        return arch->build(config, config_path, name, options);
    });
    load_weights(planned.plan, dir, config_path);
    if (options.device != Device(kCPU)) planned.model.module->to(options.device);
    return planned.model;
}

void load_pretrained_weights(const PretrainedModel& model, const std::string& dir) {
    const std::string config_path = config_path_of(dir);
    const nlohmann::json config = read_json_object(config_path);
    const auto [arch, name] = with_json_errors("load_pretrained_weights", config_path,
                                               [&] { return choose_architecture(config, config_path); });
    const Architecture& mine = architecture_of(model, "load_pretrained_weights", dir);
    if (arch->family != mine.family)
        throw ValueError(fmt::format("load_pretrained_weights: {} holds a {} (model_type \"{}\"), not a \"{}\" model",
                                     dir, name, arch->model_type, mine.model_type));
    detail::WeightPlan plan = mine.plan(model);
    load_weights(plan, dir, config_path);
}

PretrainedConfig read_pretrained_config(const std::string& dir) {
    const std::string config_path = config_path_of(dir);
    const nlohmann::json config = read_json_object(config_path);
    PretrainedConfig described = with_json_errors("from_pretrained", config_path, [&] {
        const auto [arch, name] = choose_architecture(config, config_path);
        return arch->describe(config, config_path, name);
    });
    const bool has_weights = fs::exists(fs::path(dir) / "model.safetensors") ||
                             fs::exists(fs::path(dir) / "model.safetensors.index.json");
    if (has_weights) check_config_fits_weights(described, dir, config_path);   // before a caller builds the model
    return described;
}

GPTConfig read_gpt2_config(const std::string& dir) {
    const PretrainedConfig c = read_pretrained_config(dir);
    if (!c.gpt)
        throw ValueError(fmt::format("{}: holds a {} (model_type \"{}\"), not a GPT-2", config_path_of(dir),
                                     c.architecture, c.model_type));
    return *c.gpt;
}

void save_pretrained(const PretrainedModel& model, const std::string& dir) {
    auto [config, hf_tensors] = architecture_of(model, "save_pretrained", dir).to_hf(model);
    const nn::NamedTensors tensors = without_merged_lora(*model.module, std::move(hf_tensors), dir);
    ampgrad::create_directories(dir, "save_pretrained");
    io::save_safetensors((fs::path(dir) / "model.safetensors").string(), tensors, {{"format", "pt"}});
    io::write_file_atomic((fs::path(dir) / "config.json").string(), config.dump(2) + "\n");
    fs::remove(fs::path(dir) / "model.safetensors.index.json");     // an earlier sharded save's index would mislead
}

void save_pretrained(const std::shared_ptr<GPT>& model, const std::string& dir) {
    save_pretrained(PretrainedModel{"GPT2LMHeadModel", "gpt2", model}, dir);
}

PretrainedModel as_pretrained(const std::shared_ptr<CausalLM>& model) {
    PretrainedModel m{"", "", as_module(model)};
    const Architecture& arch = architecture_of(m, "as_pretrained", "a " + model->family() + " model");
    m.architecture = arch.architectures.front();
    m.model_type = arch.model_type;
    return m;
}

}  // namespace ampgrad::models

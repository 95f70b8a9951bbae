// run_states.cpp: reads a checkpoint of the plain trainer or of the ZeRO engine into one naming
// (see run_states.hpp). Only reads: nothing here writes a file.
#include "app/run_states.hpp"

#include <filesystem>

#include <fmt/format.h>

#include "app/checkpoint.hpp"
#include "core/error.hpp"
#include "core/json_file.hpp"
#include "io/safetensors.hpp"
#include "zero/checkpoint.hpp"
#include "zero/checkpoint_files.hpp"

namespace fs = std::filesystem;

namespace ampgrad::app {
namespace {

// The plain trainer's optimizer file names each state "<state>.<parameter>". The state is the part
// before the first parameter name that matches, so "exp_avg_sq.a.b" is exp_avg_sq of parameter a.b.
std::pair<std::string, std::string> split_optimizer_name(const std::string& key, const CanonicalState& params) {
    for (size_t dot = key.find('.'); dot != std::string::npos; dot = key.find('.', dot + 1)) {
        const std::string param = key.substr(dot + 1);
        if (params.count("param/" + param)) return {key.substr(0, dot), param};
    }
    throw FormatError(fmt::format("verify: optimizer.safetensors entry '{}' names no parameter of model.safetensors", key));
}

CanonicalState read_plain_checkpoint(const fs::path& dir) {
    CanonicalState state;
    for (auto& [name, t] : io::load_safetensors((dir / "model.safetensors").string()).tensors)
        state.emplace("param/" + name, t);
    const fs::path optimizer = dir / "optimizer.safetensors";
    if (!fs::exists(optimizer)) return state;
    CanonicalState optimizer_states;
    for (auto& [key, t] : io::load_safetensors(optimizer.string()).tensors) {
        auto [state_name, param] = split_optimizer_name(key, state);
        optimizer_states.emplace(state_name + "/" + param, t);
    }
    state.merge(optimizer_states);
    return state;
}

// A ZeRO checkpoint: each trainable parameter's slice of every flat tensor ("param", "master",
// "optim.<state>"), whichever ranks' files hold it; the scalar optimizer states once per parameter;
// rank 0's saved buffers and frozen parameters ("module.<name>").
CanonicalState read_zero_checkpoint(const fs::path& dir) {
    using namespace zero::detail;
    const SavedCheckpoint ck = open_checkpoint(dir.string());
    const nlohmann::json& m = ck.manifest;
    std::vector<std::pair<std::string, std::string>> flats = {{"param", "param"}};   // flat name -> canonical prefix
    if (has_tensor(ck.files.at(0), "master")) flats.emplace_back("master", "master");
    for (const auto& s : m.at("optimizer").value("flat_state", nlohmann::json::array()))
        flats.emplace_back("optim." + s.get<std::string>(), s.get<std::string>());
    CanonicalState state;
    for (const auto& p : m.at("parameters")) {
        const std::string name = p.at("name").get<std::string>();
        const int64_t begin = p.at("flat_begin").get<int64_t>(), numel = p.at("numel").get<int64_t>();
        const auto shape = p.at("shape").get<std::vector<int64_t>>();
        for (const auto& [flat, prefix] : flats)
            state.emplace(prefix + "/" + name, read_flat_range(ck, flat, begin, begin + numel).view(shape));
        for (const auto& s : m.at("optimizer").value("scalar_state", nlohmann::json::array()))
            state.emplace(s.get<std::string>() + "/" + name, read_whole(ck.files.at(0), "optim." + s.get<std::string>()));
    }
    for (const auto& entry : ck.files.at(0).header.tensors) {
        if (entry.name.rfind("module.", 0) == 0)
            state.emplace("param/" + entry.name.substr(7), read_whole(ck.files.at(0), entry.name));
    }
    return state;
}

}  // namespace

CanonicalState read_canonical_state(const std::string& checkpoint_dir) {
    const fs::path dir(checkpoint_dir);
    if (fs::exists(dir / zero::kManifestName))
        return with_json_errors("verify", checkpoint_dir, [&] { return read_zero_checkpoint(dir); });
    if (fs::exists(dir / "model.safetensors"))
        return with_json_errors("verify", checkpoint_dir, [&] { return read_plain_checkpoint(dir); });
    throw IOError(fmt::format("verify: '{}' is not a checkpoint (no model.safetensors and no {})", checkpoint_dir,
                              zero::kManifestName));
}

std::map<int64_t, std::string> list_checkpoints(const std::string& run_dir) {
    fs::path root(run_dir);
    if (fs::is_directory(root / "checkpoints")) root /= "checkpoints";
    if (!fs::is_directory(root)) throw IOError(fmt::format("verify: no folder '{}'", run_dir));
    std::map<int64_t, std::string> steps;
    for (const auto& entry : fs::directory_iterator(root)) {
        const std::string n = entry.path().filename().string();
        if (!entry.is_directory() || n.rfind("step-", 0) != 0) continue;
        try {
            steps.emplace(std::stoll(n.substr(5)), entry.path().string());
        } catch (const std::exception&) {
            continue;   // not one of ours: step-<digits>
        }
    }
    return steps;
}

}  // namespace ampgrad::app

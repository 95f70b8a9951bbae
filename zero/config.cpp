// zero/config.cpp: DeepSpeed JSON keys -> ZeroConfig. Every key is looked up in a table of the
// ones we support (and of DeepSpeed's scheduling knobs, accepted without effect); anything else is
// an error that names the key and lists the known ones, rather than a silently ignored setting.
#include "zero/config.hpp"

#include "core/error.hpp"

#include <fmt/format.h>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

namespace ampgrad::zero {

namespace {

using json = nlohmann::json;
using Setter = std::function<void(ZeroConfig&, const json&)>;

template <typename T>
T get_as(const json& v, const std::string& key, const std::string& source) {
    try {
        if constexpr (std::is_same_v<T, bool>) {
            if (!v.is_boolean()) throw std::runtime_error("not a boolean");
        } else if constexpr (std::is_same_v<T, std::string>) {
            if (!v.is_string()) throw std::runtime_error("not a string");
            return v.get<std::string>();
        } else {
            if (!v.is_number()) throw std::runtime_error("not a number");
        }
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
            double d = v.get<double>();   // DeepSpeed configs write 5e8 for counts
            constexpr double lowest = static_cast<double>(std::numeric_limits<T>::lowest());
            constexpr double past_max = 2.0 * (static_cast<double>(std::numeric_limits<T>::max() / 2) + 1);
            if (!(d >= lowest && d < past_max)) throw std::runtime_error("out of range");
            if (d != static_cast<double>(static_cast<T>(d))) throw std::runtime_error("not an integer");
            return static_cast<T>(d);
        }
        return v.get<T>();
    } catch (const std::exception& e) {
        throw ValueError(fmt::format("ZeRO config {}: \"{}\" is {} ({})", source, key, v.dump(), e.what()));
    }
}

// key path -> setter; a section (object) has its own table.
void apply(const json& obj, const std::string& prefix, const std::map<std::string, Setter>& table, ZeroConfig& c,
           const std::string& source) {
    if (!obj.is_object()) throw ValueError(fmt::format("ZeRO config {}: \"{}\" must be an object", source, prefix));
    for (auto it = obj.begin(); it != obj.end(); ++it) {
        std::string key = prefix.empty() ? it.key() : prefix + "." + it.key();
        auto found = table.find(key);
        if (found == table.end()) {
            std::vector<std::string> known;
            for (const auto& [k, s] : table)
                if (k.rfind(prefix, 0) == 0) known.push_back(k);
            throw ValueError(fmt::format("ZeRO config {}: unknown key \"{}\" (known keys: {})", source, key,
                                         fmt::join(known, ", ")));
        }
        found->second(c, it.value());
    }
}

// DeepSpeed keys that tune how DeepSpeed schedules its own work, where ampgrad has one way
// (contiguous gradient partitions, one reduce-scatter per bucket, gathers on demand): accepted,
// their type checked, without effect, so that a DeepSpeed config file loads as it is.
void add_accepted_keys(std::map<std::string, Setter>& table, const std::string& source) {
    auto accepted = [&](const std::string& key, bool is_bool) {
        table[key] = [key, is_bool, &source](ZeroConfig&, const json& v) {
            if (is_bool) get_as<bool>(v, key, source);
            else get_as<double>(v, key, source);
        };
    };
    for (const char* key : {"zero_optimization.contiguous_gradients", "zero_optimization.reduce_scatter",
                            "zero_optimization.allgather_partitions", "zero_optimization.round_robin_gradients",
                            "zero_optimization.ignore_unused_parameters",
                            "zero_optimization.stage3_gather_16bit_weights_on_model_save", "wall_clock_breakdown"})
        accepted(key, true);
    for (const char* key : {"zero_optimization.allgather_bucket_size", "zero_optimization.sub_group_size",
                            "zero_optimization.stage3_max_live_parameters", "zero_optimization.stage3_max_reuse_distance",
                            "zero_optimization.stage3_param_persistence_threshold", "steps_per_print"})
        accepted(key, false);
}

}  // namespace

ZeroConfig parse_config(const std::string& json_text, const std::string& source) {
    json root;
    try {
        root = json::parse(json_text);
    } catch (const json::parse_error& e) {
        throw ValueError(fmt::format("ZeRO config {}: not valid JSON: {}", source, e.what()));
    }
    std::map<std::string, Setter> table;
    auto num = [&](const std::string& key, auto member) {
        table[key] = [key, member, &source](ZeroConfig& c, const json& v) {
            using T = std::remove_reference_t<decltype(c.*member)>;
            c.*member = get_as<T>(v, key, source);
        };
    };
    num("train_batch_size", &ZeroConfig::train_batch_size);
    num("train_micro_batch_size_per_gpu", &ZeroConfig::train_micro_batch_size_per_gpu);
    num("gradient_accumulation_steps", &ZeroConfig::gradient_accumulation_steps);
    num("gradient_clipping", &ZeroConfig::gradient_clipping);
    num("zero_optimization.stage", &ZeroConfig::stage);
    num("zero_optimization.reduce_bucket_size", &ZeroConfig::reduce_bucket_size);
    num("zero_optimization.overlap_comm", &ZeroConfig::overlap_comm);
    num("zero_optimization.stage3_prefetch_bucket_size", &ZeroConfig::stage3_prefetch_bucket_size);
    num("fp16.enabled", &ZeroConfig::fp16);
    num("fp16.loss_scale", &ZeroConfig::loss_scale);
    num("fp16.initial_scale_power", &ZeroConfig::initial_scale_power);
    num("fp16.loss_scale_window", &ZeroConfig::loss_scale_window);
    num("fp16.hysteresis", &ZeroConfig::hysteresis);
    num("fp16.consecutive_hysteresis", &ZeroConfig::consecutive_hysteresis);
    num("fp16.min_loss_scale", &ZeroConfig::min_loss_scale);
    num("bf16.enabled", &ZeroConfig::bf16);
    num("bf16.check_grad_overflow", &ZeroConfig::bf16_check_grad_overflow);
    num("data_types.grad_accum_dtype", &ZeroConfig::grad_accum_dtype);
    add_accepted_keys(table, source);
    ZeroConfig c;
    auto section = [&](const std::string& name) {
        table[name] = [&, name](ZeroConfig& cfg, const json& v) { apply(v, name, table, cfg, source); };
    };
    section("zero_optimization");
    section("fp16");
    section("bf16");
    section("data_types");
    apply(root, "", table, c, source);
    try {
        c.validate();
    } catch (const ValueError& e) {   // "ZeRO config: <fact>" -> "ZeRO config <source>: <fact>"
        const std::string fact = std::string(e.what()).substr(std::string("ZeRO config: ").size());
        throw ValueError(fmt::format("ZeRO config {}: {}", source, fact));
    }
    return c;
}

ZeroConfig load_config(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw IOError(fmt::format("ZeRO config: cannot open \"{}\"", path));
    std::stringstream text;
    text << in.rdbuf();
    return parse_config(text.str(), path);
}

void ZeroConfig::validate() const {
    auto fail = [](const std::string& what) { throw ValueError("ZeRO config: " + what); };
    if (stage < 0 || stage > 3)
        fail(fmt::format("zero_optimization.stage is {}; expected 0 (data parallel), 1, 2 or 3", stage));
    if (stage3_prefetch_bucket_size < 0)
        fail(fmt::format("zero_optimization.stage3_prefetch_bucket_size is {}, must be >= 0", stage3_prefetch_bucket_size));
    if (train_micro_batch_size_per_gpu < 1) fail(fmt::format("train_micro_batch_size_per_gpu is {}, must be >= 1", train_micro_batch_size_per_gpu));
    if (gradient_accumulation_steps < 1) fail(fmt::format("gradient_accumulation_steps is {}, must be >= 1", gradient_accumulation_steps));
    if (reduce_bucket_size < 1) fail(fmt::format("zero_optimization.reduce_bucket_size is {}, must be >= 1", reduce_bucket_size));
    if (gradient_clipping < 0) fail(fmt::format("gradient_clipping is {}, must be >= 0", gradient_clipping));
    if (fp16 && bf16) fail("fp16.enabled and bf16.enabled are both true");
    if (!grad_accum_dtype.empty() && grad_accum_dtype != "fp32" && grad_accum_dtype != "fp16" && grad_accum_dtype != "bf16")
        fail(fmt::format("data_types.grad_accum_dtype is \"{}\"; expected \"fp32\", \"fp16\" or \"bf16\"", grad_accum_dtype));
    if (fp16 && loss_scale == 0 && (loss_scale_window <= 0 || min_loss_scale <= 0 || hysteresis < 1))
        fail(fmt::format("dynamic loss scaling needs loss_scale_window > 0, min_loss_scale > 0, hysteresis >= 1 "
                         "(got {}, {}, {})", loss_scale_window, min_loss_scale, hysteresis));
}

}  // namespace ampgrad::zero

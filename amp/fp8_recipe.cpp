// fp8_recipe.cpp: Fp8Training (amp/fp8_recipe.hpp): the per-layer amax histories and scales of
// Transformer Engine's DelayedScaling (transformer_engine/pytorch/fp8.py: _default_get_amax_and_update_history,
// _default_sf_compute), kept as tensors and updated with tensor ops, so an update never waits for the device.
#include "amp/fp8_recipe.hpp"

#include <cmath>
#include <limits>

#include "autograd/grad_mode.hpp"
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"

namespace ampgrad::amp {

namespace {

// The nn::Linear layers of `model` in module order, with their paths.
std::vector<std::pair<std::string, std::shared_ptr<nn::Linear>>> linear_layers(nn::Module& model) {
    std::vector<std::pair<std::string, std::shared_ptr<nn::Linear>>> out;
    for (const auto& [name, module] : model.named_modules("", /*include_self=*/false))
        if (auto linear = std::dynamic_pointer_cast<nn::Linear>(module)) out.emplace_back(name, linear);
    return out;
}

// (3) f32: each role's fp8 maximum (448 for e4m3fn, 57344 for e5m2).
Tensor role_maxima(const Fp8LinearState& state, Device device) {
    std::vector<float> maxima;
    for (Fp8Role role : kAllFp8Roles) maxima.push_back(static_cast<float>(fp8_max(state.dtype(role))));
    return tensor(maxima, {kFp8Roles}).to(device);
}

// TE's _default_sf_compute: scale = (fp8_max / amax) / 2^margin, kept where amax is 0 or not
// finite, and f32's max where the division overflowed. amax, old_scale, maxima: (3) f32.
Tensor delayed_scale(const Tensor& amax, const Tensor& old_scale, const Tensor& maxima, int margin) {
    Tensor scale = reciprocal(amax) * maxima / std::ldexp(1.0, margin);
    scale = where(amax > 0.0, scale, old_scale);
    scale = where(isfinite(amax), scale, old_scale);
    return where(isfinite(scale), scale, static_cast<double>(std::numeric_limits<float>::max()));
}

}  // namespace

void Fp8Recipe::check() const {
    if (margin < 0) throw ValueError(fmt::format("Fp8Recipe: margin must be >= 0, got {}", margin));
    if (amax_history_len < 1)
        throw ValueError(fmt::format("Fp8Recipe: amax_history_len must be >= 1, got {}", amax_history_len));
}

Fp8Scaling parse_fp8_scaling(const std::string& name) {
    for (Fp8Scaling s : {Fp8Scaling::kDelayed, Fp8Scaling::kTensorwise, Fp8Scaling::kRowwise})
        if (name == fp8_scaling_name(s)) return s;
    throw ValueError(fmt::format("fp8 recipe '{}': expected delayed, tensorwise or rowwise", name));
}

std::string Fp8Event::str() const {
    std::string what = saturated && collapsed ? "amax saturated and scale collapsed"
                       : saturated            ? "amax saturated"
                                              : "scale collapsed";
    return fmt::format("fp8: {} in {} {} (amax {:.6g}, scale {:.6g}{})", what, layer, fp8_role_name(role), amax, scale,
                       collapsed ? ", the previous scale was kept" : "");
}

Fp8Training::Fp8Training(nn::Module& model, Fp8Recipe recipe) : recipe_(recipe) {
    recipe_.check();
    auto linears = linear_layers(model);
    const size_t skip = recipe_.keep_first_last_in_bf16 ? 1 : 0;
    for (size_t i = skip; i + skip < linears.size(); ++i) {
        auto& [name, linear] = linears[i];
        if (linear->is_nf4() || !linear->weight.defined()) continue;   // a frozen NF4 base stays as it is
        const Device device = linear->weight.device();
        Layer layer{name, linear, std::make_shared<Fp8LinearState>(Fp8LinearState::make(recipe_.scaling, device)),
                    zeros({recipe_.amax_history_len, kFp8Roles}, TensorOptions().device(device))};   // (L,3)
        layer.state->amax = layer.amax_history.select(0, 0);                                          // (3) view
        linear->fp8 = layer.state;
        layers_.push_back(std::move(layer));
    }
    if (!layers_.empty()) maxima_ = role_maxima(*layers_[0].state, layers_[0].amax_history.device());   // copied once, here
}

Fp8Training::~Fp8Training() {
    for (Layer& layer : layers_)
        if (layer.linear->fp8 == layer.state) layer.linear->fp8.reset();
}

std::vector<std::string> Fp8Training::layer_names() const {
    std::vector<std::string> names;
    for (const Layer& layer : layers_) names.push_back(layer.name);
    return names;
}

void Fp8Training::update(const std::function<void(Tensor&)>& reduce_max) {
    if (layers_.empty()) return;
    NoGradGuard no_grad;
    tensor_list amaxes, scales;
    for (const Layer& layer : layers_) {
        amaxes.push_back(layer.amax_history.select(0, 0));
        scales.push_back(layer.state->scale);
    }
    Tensor step_amax = stack(amaxes);                                           // (layers,3)
    if (reduce_max) reduce_max(step_amax);                                      // all ranks see the same amaxes
    const Tensor& maxima = maxima_;                                             // (3)
    last_amax_ = step_amax;
    last_scale_ = stack(scales);                                                // (layers,3) the scales this step used
    const bool delayed = recipe_.scaling == Fp8Scaling::kDelayed;
    saturated_ = delayed ? logical_and(isfinite(step_amax), step_amax * last_scale_ > maxima)
                         : zeros_like(step_amax, TensorOptions().dtype(kBool));
    collapsed_ = logical_not(isfinite(step_amax));
    for (size_t i = 0; i < layers_.size(); ++i) {
        Tensor history = layers_[i].amax_history;                               // (L,3)
        Tensor newest = history.select(0, 0);
        newest.copy_(step_amax.select(0, static_cast<int64_t>(i)));
        if (delayed) {
            Tensor window = recipe_.amax_compute_algo == Fp8AmaxAlgo::kMax ? amax(history, {0}) : newest.clone();   // (3)
            Tensor scale = delayed_scale(window, layers_[i].state->scale, maxima, recipe_.margin);
            Tensor collapsed_row = collapsed_.select(0, static_cast<int64_t>(i));
            collapsed_row.copy_(logical_or(collapsed_row, logical_not(scale < static_cast<double>(std::numeric_limits<float>::max()))));
            layers_[i].state->scale.copy_(scale);
        }
        if (history.size(0) > 1) history.copy_(roll(history, {-1}, {0}));      // TE's _update_amax_history
        newest.fill_(0.0);
    }
}

std::vector<Fp8Event> Fp8Training::events() const {
    std::vector<Fp8Event> out;
    if (!saturated_.defined()) return out;
    const std::vector<int64_t> sat = saturated_.to(kInt64).to(kCPU).to_vector<int64_t>();
    const std::vector<int64_t> col = collapsed_.to(kInt64).to(kCPU).to_vector<int64_t>();
    const std::vector<double> amax = last_amax_.to(kFloat64).to(kCPU).to_vector<double>();
    const std::vector<double> scale = last_scale_.to(kFloat64).to(kCPU).to_vector<double>();
    for (size_t i = 0; i < sat.size(); ++i)
        if (sat[i] || col[i])
            out.push_back({layers_[i / kFp8Roles].name, kAllFp8Roles[i % kFp8Roles], sat[i] != 0, col[i] != 0, amax[i], scale[i]});
    return out;
}

nlohmann::json Fp8Training::amax_json(int64_t rows) const {
    nlohmann::json out = nlohmann::json::object();
    for (const Layer& layer : layers_) {
        const int64_t L = layer.amax_history.size(0), n = std::min(rows, L);
        // After the roll the newest step sits in row L-1, the one before in L-2, ...
        std::vector<double> h = layer.amax_history.to(kFloat64).to(kCPU).to_vector<double>();   // (L,3)
        nlohmann::json entry = nlohmann::json::object();
        for (Fp8Role role : kAllFp8Roles) {
            std::vector<double> newest_first;
            for (int64_t r = 0; r < n; ++r) newest_first.push_back(h[static_cast<size_t>((L - 1 - r) * kFp8Roles + static_cast<int>(role))]);
            entry[std::string(fp8_role_name(role))] = newest_first;
        }
        entry["scale"] = layer.state->scale.to(kFloat64).to(kCPU).to_vector<double>();
        out[layer.name] = entry;
    }
    return out;
}

nn::NamedTensors Fp8Training::state_tensors() const {
    nn::NamedTensors out;
    for (const Layer& layer : layers_) {
        out.insert("fp8." + layer.name + ".amax_history", layer.amax_history);
        out.insert("fp8." + layer.name + ".scale", layer.state->scale);
    }
    return out;
}

void Fp8Training::load_state_tensors(const nn::NamedTensors& tensors) {
    NoGradGuard no_grad;
    for (Layer& layer : layers_) {
        for (auto [key, target] : {std::pair{".amax_history", &layer.amax_history}, std::pair{".scale", &layer.state->scale}}) {
            const std::string name = "fp8." + layer.name + key;
            const Tensor* saved = tensors.find(name);
            if (!saved)
                throw ValueError(fmt::format("fp8 checkpoint: no entry \"{}\" (was the run saved with another --prec or "
                                             "--fp8-recipe?)", name));
            if (saved->sizes() != target->sizes())
                throw ValueError(fmt::format("fp8 checkpoint: \"{}\" is {}, expected shape {} (amax_history_len differs?)",
                                             name, saved->describe(), shape_str(target->sizes())));
            target->copy_(saved->to(target->dtype()).to(target->device()));
        }
    }
}

}  // namespace ampgrad::amp

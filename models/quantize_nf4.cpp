// quantize_nf4.cpp: models::quantize_base_nf4, QLoRA's NF4 base for a whole model (the layer's
// part: nn::Linear::quantize_nf4; the formulas: kernels/nf4.hpp).
#include "models/quantize_nf4.hpp"

#include <algorithm>
#include <memory>

#include "nn/linear.hpp"

namespace ampgrad::models {

namespace {

bool excluded(const std::string& name, const std::vector<std::string>& exclude) {
    return std::any_of(exclude.begin(), exclude.end(), [&](const std::string& e) {
        return name == e || (name.size() > e.size() && name.ends_with(e) && name[name.size() - e.size() - 1] == '.');
    });
}

}  // namespace

NF4Summary quantize_base_nf4(nn::Module& model, const std::vector<std::string>& exclude, NF4Options options) {
    NF4Summary summary;
    for (const auto& [name, module] : model.named_modules("", /*include_self=*/false)) {
        auto layer = std::dynamic_pointer_cast<nn::Linear>(module);
        if (!layer || layer->is_nf4() || excluded(name, exclude)) continue;
        layer->quantize_nf4(options);
        summary.layers += 1;
        summary.parameters += layer->nf4_weight().numel();
        summary.bytes += layer->nf4_weight().nbytes();
    }
    return summary;
}

int64_t dequantize_base_nf4(nn::Module& model) {
    int64_t layers = 0;
    for (const auto& [name, module] : model.named_modules("", /*include_self=*/false)) {
        auto layer = std::dynamic_pointer_cast<nn::Linear>(module);
        if (!layer || !layer->is_nf4()) continue;
        layer->dequantize();
        layers += 1;
    }
    return layers;
}

}  // namespace ampgrad::models

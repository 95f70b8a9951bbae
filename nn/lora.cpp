// lora.cpp: LoRA adapters on nn::Linear (nn/lora.hpp); the op is F::lora_linear (autograd/ops/lora.cpp).
// A quantised base (a non-floating or 8-bit weight, e.g. QLoRA's NF4) gets f32 adapters, and merge/unmerge
// refuse it with a DTypeError: W + scale B A needs a floating W.
#include "nn/lora.hpp"

#include <cmath>

#include "autograd/grad_mode.hpp"
#include "autograd/ops/lora.hpp"
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"
#include "nn/init.hpp"

namespace ampgrad::nn {

LoraInit lora_init_from_string(const std::string& text) {
    if (text == "true" || text == "True") return LoraInit::kKaiming;
    if (text == "gaussian") return LoraInit::kGaussian;
    if (text == "false" || text == "False") return LoraInit::kNone;
    throw ValueError(fmt::format("LoRA: init_lora_weights must be true, \"gaussian\" or false, got \"{}\"", text));
}

std::string lora_init_to_string(LoraInit init) {
    switch (init) {
        case LoraInit::kKaiming: return "true";
        case LoraInit::kGaussian: return "gaussian";
        case LoraInit::kNone: return "false";
    }
    return "true";
}

double LoraOptions::scale() const {
    return use_rslora ? alpha / std::sqrt(static_cast<double>(r)) : alpha / static_cast<double>(r);
}

Tensor LoraAdapter::forward(const Tensor& y, const Tensor& x, bool training) const {
    // ZeRO stage 3 gathers a module's parameters in its forward hooks: run A's and B's around the op.
    return lora_A->with_forward_hooks(x, [&](const Tensor& x_in) {
        return lora_B->with_forward_hooks(x_in, [&](const Tensor&) {
            Tensor x_drop = functional::dropout(x_in, options.dropout, training);           // (*,in)
            return functional::lora_linear(y, x_drop, lora_A->weight, lora_B->weight, options.scale());
        });
    });
}

void LoraAdapter::reset_parameters() {
    switch (options.init) {
        case LoraInit::kKaiming:   // PEFT: nn.init.kaiming_uniform_(A, a=sqrt(5)), i.e. U(-1/sqrt(in), 1/sqrt(in))
            lora_A->reset_parameters();
            init::zeros_(lora_B->weight);
            break;
        case LoraInit::kGaussian:  // PEFT: nn.init.normal_(A, std=1/r)
            init::normal_(lora_A->weight, 0.0, 1.0 / static_cast<double>(options.r));
            init::zeros_(lora_B->weight);
            break;
        case LoraInit::kNone:      // both keep nn.Linear's default draw
            lora_A->reset_parameters();
            lora_B->reset_parameters();
            break;
    }
}

namespace {

// scale * B A (out,in) in the accumulation dtype (f32, or f64 for f64 weights)
Tensor lora_delta(const LoraAdapter& adapter, DType weight_dtype) {
    DType acc = weight_dtype == kFloat64 ? kFloat64 : kFloat32;
    Tensor b = adapter.lora_B->weight.detach().to(acc), a = adapter.lora_A->weight.detach().to(acc);
    return mm(b, a) * adapter.options.scale();
}

void fold(Linear& base, const LoraAdapter& adapter, double sign) {
    NoGradGuard no_grad;
    if (base.is_nf4())
        throw DTypeError(fmt::format("LoraAdapter::{}: the base weight is NF4 ({}); dequantise it first "
                                     "(nn::Linear::dequantize, models::dequantize_base_nf4)",
                                     sign > 0 ? "merge" : "unmerge", base.nf4_weight().describe()));
    Tensor w = base.weight.detach();                                         // (out,in)
    if (!is_floating(w.dtype()) || w.element_size() < 2)
        throw DTypeError(fmt::format("LoraAdapter::{}: the base weight is {}, not a floating dtype that can hold "
                                     "W + scale B A (a quantised base must be dequantised first)",
                                     sign > 0 ? "merge" : "unmerge", w.describe()));
    DType acc = w.dtype() == kFloat64 ? kFloat64 : kFloat32;
    Tensor folded = add(w.to(acc), lora_delta(adapter, w.dtype()), sign);   // (out,in) in acc
    w.copy_(folded.to(w.dtype()));
}

}  // namespace

void LoraAdapter::merge(Linear& base) {
    if (merged) throw ValueError("LoraAdapter::merge: the adapter is already merged into the base weight");
    fold(base, *this, +1.0);
    merged = true;
}

void LoraAdapter::unmerge(Linear& base) {
    if (!merged) throw ValueError("LoraAdapter::unmerge: the adapter is not merged");
    fold(base, *this, -1.0);
    merged = false;
}

void attach_lora(Linear& linear, const LoraOptions& options) {
    if (linear.lora)
        throw ValueError(fmt::format("attach_lora: this Linear ({} -> {}) already has a LoRA adapter",
                                     linear.in_features, linear.out_features));
    if (options.r < 1) throw ValueError(fmt::format("attach_lora: r must be at least 1, got {}", options.r));
    if (!(options.dropout >= 0.0 && options.dropout < 1.0))
        throw ValueError(fmt::format("attach_lora: lora_dropout must be in [0, 1), got {}", options.dropout));
    // A and B take the base weight's dtype; a quantised base (NF4, or a non-floating or 8-bit weight)
    // gets f32 adapters, as PEFT gives a bitsandbytes 4-bit base.
    const bool quantised = linear.is_nf4() || !is_floating(linear.weight.dtype()) || linear.weight.element_size() < 2;
    const Device device = linear.is_nf4() ? linear.nf4_weight().device() : linear.weight.device();
    TensorOptions opts = TensorOptions().dtype(quantised ? kFloat32 : linear.weight.dtype()).device(device);
    auto adapter = std::make_shared<LoraAdapter>();
    adapter->options = options;
    {
        init::SkipInitGuard defer;   // drawn below, as options.init says
        adapter->lora_A = std::make_shared<Linear>(linear.in_features, options.r, false, opts);
        adapter->lora_B = std::make_shared<Linear>(options.r, linear.out_features, false, opts);
    }
    linear.register_module("lora_A", adapter->lora_A);
    linear.register_module("lora_B", adapter->lora_B);
    adapter->reset_parameters();
    adapter->lora_A->weight.requires_grad_(true);
    adapter->lora_B->weight.requires_grad_(true);
    if (linear.weight.defined()) linear.weight.requires_grad_(false);   // an NF4 weight is no parameter at all
    if (linear.bias.defined()) linear.bias.requires_grad_(false);
    adapter->lora_A->train(linear.is_training());
    adapter->lora_B->train(linear.is_training());
    linear.lora = std::move(adapter);
}

}  // namespace ampgrad::nn

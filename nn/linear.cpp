// linear.cpp: nn::Linear (the math is ampgrad::linear in autograd/ops/matmul.cpp).
#include "nn/linear.hpp"

#include <cmath>

#include "autograd/grad_mode.hpp"
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"
#include "nn/init.hpp"
#include "nn/lora.hpp"

namespace ampgrad::nn {

Linear::Linear(int64_t in, int64_t out, bool with_bias, TensorOptions options)
    : Module("Linear"), in_features(in), out_features(out) {
    if (in < 0 || out < 0)
        throw ValueError(fmt::format("Linear: feature counts must be non-negative, got in_features={} out_features={}",
                                     in, out));
    TensorOptions opts = options.requires_grad(false);
    weight = register_parameter("weight", empty({out, in}, opts));
    if (with_bias) bias = register_parameter("bias", empty({out}, opts));
    if (!init::skipping_init()) reset_parameters();   // deferred: loaded later (nn/init.hpp)
}

void Linear::reset_parameters() {
    // kaiming_uniform_(a=sqrt(5)): gain = sqrt(2 / (1 + 5)), bound = gain * sqrt(3 / fan_in) = 1 / sqrt(fan_in).
    double bound = in_features > 0 ? 1.0 / std::sqrt(static_cast<double>(in_features)) : 0.0;
    init::uniform_(weight, -bound, bound);
    if (bias.defined()) init::uniform_(bias, -bound, bound);
}

Tensor Linear::forward(const Tensor& x) const {
    return with_forward_hooks(x, [&](const Tensor& in) {
        Tensor y = base_forward(in);                                        // (*,out)
        if (lora && !lora->merged) y = lora->forward(y, in, is_training());
        return y;
    });
}

// ---- QLoRA: the NF4 base weight (autograd/ops/nf4.hpp, docs/nf4.md) ----

Tensor Linear::base_forward(const Tensor& x) const {
    if (fp8 && !nf4_ && fp8_autocast::enabled()) {
        const int64_t rows = x.dim() == 0 ? 0 : x.numel() / std::max<int64_t>(in_features, 1);
        if (x.dim() >= 1 && x.size(-1) == in_features && F::fp8_linear_supports(rows, in_features, out_features))
            return fp8_forward(x);
    }
    return nf4_ ? F::nf4_linear(x, *nf4_, bias) : linear(x, weight, bias);    // (*,in) -> (*,out)
}

// As torchao's Float8Linear under autocast: the input is cast to bf16, the f32 weight quantised as it
// is, the bias added in bf16 after the fp8 GEMM.
Tensor Linear::fp8_forward(const Tensor& x) const {
    Tensor rows = x.reshape({-1, in_features});                                   // (M,in)
    if (rows.dtype() == kFloat32) rows = rows.to(kBFloat16);
    Tensor y = F::fp8_linear(rows, weight, fp8, kBFloat16);                       // (M,out) bf16
    if (bias.defined()) y = y + bias.to(kBFloat16);
    Shape out_shape = x.sizes();
    out_shape.back() = out_features;
    return y.reshape(out_shape);                                                  // (*,out)
}

void Linear::quantize_nf4(NF4Options options) {
    if (nf4_) throw ValueError(fmt::format("Linear::quantize_nf4: the weight is already NF4 ({})", nf4_->describe()));
    nf4_ = std::make_shared<const NF4Tensor>(ampgrad::quantize_nf4(weight, options));
    remove_parameter("weight");
    weight = Tensor();
}

void Linear::dequantize() {
    if (!nf4_) throw ValueError("Linear::dequantize: the weight is not NF4 (call quantize_nf4 first)");
    Tensor dense = dequantize_nf4(*nf4_, nf4_->dtype);                                   // (out,in)
    nf4_.reset();
    weight = register_parameter("weight", dense, /*requires_grad=*/true);
}

const NF4Tensor& Linear::nf4_weight() const {
    if (!nf4_) throw ValueError("Linear::nf4_weight: the weight is not NF4 (call quantize_nf4 first)");
    return *nf4_;
}

}  // namespace ampgrad::nn

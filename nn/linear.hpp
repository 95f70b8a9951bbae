// linear.hpp: nn::Linear, y = x W^T + b, with PyTorch's default initialisation
// (kaiming_uniform with a = sqrt(5), i.e. W and b ~ U(-1/sqrt(in), 1/sqrt(in))).
//
//   auto fc = std::make_shared<nn::Linear>(4, 8);   // weight (8,4), bias (8)
//   Tensor y = fc->forward(x);                      // (B,4) -> (B,8)
#pragma once
#include <memory>

#include "autograd/ops/fp8_linear.hpp"
#include "autograd/ops/nf4.hpp"
#include "nn/module.hpp"

namespace ampgrad::nn {

struct LoraAdapter;   // nn/lora.hpp

class Linear : public Module {
public:
    // `options` sets the parameters' dtype and device (f32 cpu by default).
    Linear(int64_t in_features, int64_t out_features, bool bias = true, TensorOptions options = {});
    // (*,in) -> (*,out): base_forward(x), plus the LoRA adapter's update when one is attached (nn/lora.hpp)
    Tensor forward(const Tensor& x) const;
    void reset_parameters();                 // redraws weight and bias from the default generator

    int64_t in_features, out_features;
    Tensor weight;                           // (out,in)
    Tensor bias;                             // (out), undefined without bias
    std::shared_ptr<LoraAdapter> lora;       // null unless nn::attach_lora added one (submodules lora_A, lora_B)
    // fp8 training (docs/fp8.md): the scales and amaxes of this layer's three tensor roles, set by
    // amp::Fp8Training. Inside an fp8 autocast region base_forward then runs F::fp8_linear.
    std::shared_ptr<Fp8LinearState> fp8;

    // ---- QLoRA: a frozen NF4 base weight (docs/nf4.md) ----
    // x W^T + b with the dense weight, or with the NF4 one (F::nf4_linear) once quantised.
    Tensor base_forward(const Tensor& x) const;              // (*,in) -> (*,out)
    // Replaces the dense weight by its NF4 codes: `weight` leaves parameters() and state_dict() and
    // becomes undefined; nf4_weight() holds it. The bias stays a parameter.
    void quantize_nf4(NF4Options options = {});
    // Back to a dense weight parameter (of the dtype it had), registered again as "weight".
    void dequantize();
    bool is_nf4() const { return nf4_ != nullptr; }
    const NF4Tensor& nf4_weight() const;                     // ValueError unless is_nf4()

private:
    Tensor fp8_forward(const Tensor& x) const;               // (*,in) -> (*,out) bf16, F::fp8_linear
    std::shared_ptr<const NF4Tensor> nf4_;                   // set while the weight is NF4
};

}  // namespace ampgrad::nn

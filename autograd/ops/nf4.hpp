// nf4.hpp: QLoRA's frozen base weights in NF4 (4-bit NormalFloat, blocks of 64, optional double
// quantisation of the block scales), and F::nf4_linear, the linear layer that dequantises them on the
// fly in its forward and again in its backward (docs/nf4.md). The formulas: kernels/nf4.hpp.
//
//   NF4Tensor w4 = quantize_nf4(w);                      // w (N,K) float -> codes + absmax
//   Tensor w_bf16 = dequantize_nf4(w4, kBFloat16);       // (N,K), as bitsandbytes' dequantize_4bit
//   Tensor y = F::nf4_linear(x, w4, b);                  // (*,K) -> (*,N): x deq(W)^T + b, in x's dtype
// Not here: the LoRA adapters (nn::Linear), the model-wide quantiser (models/quantize_nf4.hpp).
#pragma once
#include <cstdint>

#include "core/tensor.hpp"

namespace ampgrad {

struct NF4Options {
    int64_t block_size = 64;        // values per absmax (QLoRA: 64); even, >= 2
    bool double_quant = false;      // QLoRA's "double quantisation" of the absmax (8-bit, blocks of 256)
};

// A tensor quantised to NF4. All of its tensors live on one device; none requires grad.
struct NF4Tensor {
    Shape shape;                    // the original shape, e.g. (N,K)
    DType dtype = kFloat32;         // the original dtype (what dequantize_nf4 gives by default)
    int64_t block_size = 64;
    Tensor codes;                   // (ceil(numel/2)) u8: two codes a byte, the first in the high nibble
    Tensor absmax;                  // (ceil(numel/block_size)) f32; undefined with double quantisation
    // double quantisation: absmax = map[absmax_codes] * absmax2[block of 256] + absmax_offset
    Tensor absmax_codes;            // (ceil(numel/block_size)) u8
    Tensor absmax2;                 // (ceil(numel/block_size/256)) f32
    Tensor absmax_offset;           // (1) f32: the mean of the absmax values

    bool defined() const { return codes.defined(); }
    bool double_quantized() const { return absmax_codes.defined(); }
    int64_t numel() const { return shape_numel(shape); }
    Device device() const { return codes.device(); }
    int64_t nbytes() const;         // bytes of every tensor held (codes, scales)
    std::string describe() const;   // "nf4 (8,64) block 64 cpu" (+ " double-quant")
};

// Quantises a floating tensor (f32, f64, f16, bf16; any shape; on any device) to NF4 as
// bitsandbytes' quantize_4bit(quant_type="nf4") does. Not differentiable (the result is frozen).
NF4Tensor quantize_nf4(const Tensor& w, NF4Options options = {});
// The f32 absmax per block (double quantisation undone when there was one).
Tensor nf4_absmax(const NF4Tensor& w);
// The dequantised tensor, shape w.shape, in `dtype` (f32, f64, f16, bf16); level * absmax in f32,
// rounded once to dtype. A plain tensor that does not require grad.
Tensor dequantize_nf4(const NF4Tensor& w, DType dtype);

namespace nn::functional {
// y (*,N) = x (*,K) deq(W)^T (N,K) + b (N): the weight dequantised to x's dtype in the forward and
// again in the backward, so nothing of size N x K is kept between them. Gradients for x and b only
// (W is frozen). Under autocast, x and b are cast as for linear, and the weight follows x.
Tensor nf4_linear(const Tensor& x, const NF4Tensor& w, const Tensor& b = {});
}  // namespace nn::functional

}  // namespace ampgrad

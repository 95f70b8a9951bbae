// gemm_epilogue.hpp: GEMM whose epilogue adds a bias and optionally applies tanh-GELU while the
// product is still in cache (cpu/gemm.cpp). Linear uses the bias form instead of copying the bias
// into the output and running the GEMM with beta = 1.
#pragma once
#include <cstdint>

#include "core/tensor.hpp"

namespace ampgrad {

enum class GemmEpilogue : uint8_t {
    kBias,           // out = op(a) @ op(b) + bias
    kBiasGeluTanh,   // aux = op(a) @ op(b) + bias (pre-activation, for the backward); out = gelu_tanh(aux)
};

namespace cpu {
// out (M,N) contiguous; a (M,K) or (K,M) if trans_a; b (K,N) or (N,K) if trans_b; bias (N) or
// undefined; aux (M,N) contiguous or undefined (kBiasGeluTanh only). One floating dtype.
void gemm_epilogue(const Tensor& out, const Tensor& aux, const Tensor& a, const Tensor& b, bool trans_a, bool trans_b,
                   const Tensor& bias, GemmEpilogue epilogue);
}  // namespace cpu

}  // namespace ampgrad

// vec_math.hpp: SIMD paths for the transcendental elementwise ops on contiguous tensors. The
// scalar loops in elementwise.cpp call libm one element at a time (tanhf, expf), which is most
// of a GELU's cost; here the same formulas (kernels/scalar_math.hpp, instantiated with a SIMD packet
// type) run on Eigen's packet math (vectorised exp and tanh, AVX2/FMA with -march=x86-64-v3).
// Only f32 and the f16/bf16 storage types (widened to f32 in blocks) take these paths; f64 keeps
// the exact libm loops. Each function returns false when it does not apply (the caller then runs
// the scalar loop), so the scalar formulas stay the reference.
#pragma once
#include "kernels/kernels.hpp"

namespace ampgrad::cpu {

// out = op(in) when op is tanh, sigmoid, gelu (tanh form) or silu, and out and in are
// contiguous f32/f16/bf16 of one dtype.
bool vectorised_unary(UnaryOp op, const Tensor& out, const Tensor& in);

// dx = dy * f'(x) for the same activations, all three contiguous and of one dtype; for tanh and
// sigmoid `x` is the saved output y, as for CpuBackend::activation_backward.
bool vectorised_activation_backward(ActivationGrad op, const Tensor& dx, const Tensor& x, const Tensor& dy);

// x[i] = gelu_tanh(x[i]) for n contiguous floats (one thread; the GEMM epilogue's activation).
void gelu_tanh_inplace(float* x, int64_t n);

}  // namespace ampgrad::cpu

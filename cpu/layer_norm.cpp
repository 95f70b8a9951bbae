// layer_norm.cpp: placeholder until implemented.
#include "cpu/backend_cpu.hpp"
#include "cpu/loops.hpp"

namespace ampgrad::cpu {
void CpuBackend::layer_norm(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, double) { throw Error("cpu kernel not implemented yet"); }
void CpuBackend::layer_norm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&) { throw Error("cpu kernel not implemented yet"); }
}  // namespace ampgrad::cpu

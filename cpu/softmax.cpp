// softmax.cpp: placeholder until implemented.
#include "cpu/backend_cpu.hpp"
#include "cpu/loops.hpp"

namespace ampgrad::cpu {
void CpuBackend::softmax(const Tensor&, const Tensor&, bool) { throw Error("cpu kernel not implemented yet"); }
void CpuBackend::softmax_backward(const Tensor&, const Tensor&, const Tensor&, bool) { throw Error("cpu kernel not implemented yet"); }
}  // namespace ampgrad::cpu

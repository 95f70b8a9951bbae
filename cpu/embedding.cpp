// embedding.cpp: placeholder until implemented.
#include "cpu/backend_cpu.hpp"
#include "cpu/loops.hpp"

namespace ampgrad::cpu {
void CpuBackend::embedding(const Tensor&, const Tensor&, const Tensor&) { throw Error("cpu kernel not implemented yet"); }
void CpuBackend::embedding_backward(const Tensor&, const Tensor&, const Tensor&) { throw Error("cpu kernel not implemented yet"); }
}  // namespace ampgrad::cpu

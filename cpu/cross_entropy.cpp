// cross_entropy.cpp: placeholder until implemented.
#include "cpu/backend_cpu.hpp"
#include "cpu/loops.hpp"

namespace ampgrad::cpu {
void CpuBackend::cross_entropy(const Tensor&, const Tensor&, const Tensor&, const Tensor&, int64_t) { throw Error("cpu kernel not implemented yet"); }
void CpuBackend::cross_entropy_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, int64_t) { throw Error("cpu kernel not implemented yet"); }
}  // namespace ampgrad::cpu

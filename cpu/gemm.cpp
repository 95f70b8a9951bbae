// gemm.cpp: placeholder until implemented.
#include "cpu/backend_cpu.hpp"
#include "cpu/loops.hpp"

namespace ampgrad::cpu {
void CpuBackend::gemm(const Tensor&, const Tensor&, const Tensor&, bool, bool, double, double) { throw Error("cpu kernel not implemented yet"); }
}  // namespace ampgrad::cpu

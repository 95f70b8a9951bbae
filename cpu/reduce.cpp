// reduce.cpp: placeholder until implemented.
#include "cpu/backend_cpu.hpp"
#include "cpu/loops.hpp"

namespace ampgrad::cpu {
void CpuBackend::reduce(ReduceOp, const Tensor&, const Tensor&, std::span<const int64_t>) { throw Error("cpu kernel not implemented yet"); }
void CpuBackend::max_with_indices(const Tensor&, const Tensor&, const Tensor&, int64_t) { throw Error("cpu kernel not implemented yet"); }
}  // namespace ampgrad::cpu

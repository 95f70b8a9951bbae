// amp.cpp: placeholder until implemented.
#include "cpu/backend_cpu.hpp"
#include "cpu/loops.hpp"

namespace ampgrad::cpu {
void CpuBackend::non_finite_check_and_unscale(std::span<Tensor>, const Tensor&, const Tensor&) { throw Error("cpu kernel not implemented yet"); }
void CpuBackend::update_scale(const Tensor&, const Tensor&, const Tensor&, double, double, int64_t, double, double) { throw Error("cpu kernel not implemented yet"); }
}  // namespace ampgrad::cpu

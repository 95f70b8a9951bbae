// rotary_layout.hpp: what the CPU and CUDA rotary kernels (cpu/rotary.cpp, cuda/rotary.cu) share:
// the checks on their operands, and the split of each (*,HS) operand into its pairs. A pair view has
// shape (*,HS/2) and addresses the first element of each pair; the second lies `partner` elements
// further on: HS/2 steps along the last dim in the half-split layout, one step when interleaved.
// The kernels then walk four same-shaped views (out, x, cos, sin) with their usual strided loops.
// Host layout code only; the pair formula is kernels/scalar_math.hpp's Rotary.
#pragma once
#include <array>
#include <cstdint>

#include "core/error.hpp"
#include "core/tensor.hpp"

namespace ampgrad {

struct RotaryPairs {
    std::array<Tensor, 4> first;         // out, x, cos, sin as (*,HS/2) views of each pair's first element
    std::array<int64_t, 4> partner{};    // elements from a pair's first element to its second
};

inline RotaryPairs rotary_pairs(const char* kernel, const Tensor& out, const Tensor& x, const Tensor& cos,
                                const Tensor& sin, bool interleaved) {
    AMPGRAD_CHECK(out.is_contiguous() && out.dim() >= 1 && out.size(-1) % 2 == 0,
                  "{}: out must be contiguous (*,HS) with HS even, got {}", kernel, out.describe());
    RotaryPairs pairs;
    const std::array<const Tensor*, 4> operands = {&out, &x, &cos, &sin};
    Shape shape = out.sizes();
    const int64_t half = shape.back() / 2;
    shape.back() = half;
    for (size_t k = 0; k < operands.size(); ++k) {
        const Tensor& t = *operands[k];
        AMPGRAD_CHECK(t.sizes() == out.sizes() && t.dtype() == out.dtype(),
                      "{}: operand {} is {} but out is {}", kernel, k, t.describe(), out.describe());
        const int64_t step = t.strides().back();
        Shape strides = t.strides();
        strides.back() = interleaved ? 2 * step : step;
        pairs.first[k] = make_view(t, shape, strides, t.storage_offset());
        pairs.partner[k] = interleaved ? step : half * step;
    }
    return pairs;
}

}  // namespace ampgrad

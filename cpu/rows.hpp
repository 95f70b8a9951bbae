// rows.hpp: helpers for the row-wise nn kernels (softmax, layer_norm, cross_entropy), which all
// treat a contiguous (N,C) tensor as N independent rows of C values and split rows over threads.
// Not here: anything strided (see loops.hpp) or any autograd.
#pragma once
#include <algorithm>
#include <type_traits>
#include <vector>

#include "cpu/loops.hpp"

namespace ampgrad::cpu {

// Rows per thread chunk so that a chunk holds about kGrainSize elements.
inline int64_t row_grain(int64_t C) { return std::max<int64_t>(1, kGrainSize / std::max<int64_t>(C, 1)); }

// One row of T read as compute_t<T>: f32/f64 rows are used in place; f16/bf16 rows are widened
// once into a per-thread buffer, so the several passes over a row convert each value only once.
template <typename T>
class WideRow {
public:
    using Acc = compute_t<T>;
    explicit WideRow(int64_t C) {
        if constexpr (!std::is_same_v<T, Acc>) buf_.resize(static_cast<size_t>(C));
    }
    const Acc* load(const T* row) {
        if constexpr (std::is_same_v<T, Acc>) {
            return row;
        } else {
            for (size_t c = 0; c < buf_.size(); ++c) buf_[c] = static_cast<Acc>(row[c]);
            return buf_.data();
        }
    }

private:
    std::vector<Acc> buf_;
};

}  // namespace ampgrad::cpu

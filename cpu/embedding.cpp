// embedding.cpp: the embedding table's row gather (forward) and scatter-add (backward).
// Backward groups the N gradient rows by their index with a stable sort, so every table row is
// written by exactly one thread, always summing in the same order: race-free and deterministic,
// and f16/bf16 sums stay in fp32 until the one rounding on store.
#include <algorithm>
#include <numeric>

#include "kernels/kernels.hpp"
#include "kernels/kernel_preconditions.hpp"
#include "cpu/rows.hpp"

namespace ampgrad::cpu {

namespace {

// The N indices of a 1-d int64/int32 tensor (any stride) as int64; throws IndexError for an
// index outside [0, V) before any kernel starts (an exception must not leave an OpenMP region).
std::vector<int64_t> read_indices(const char* op, const Tensor& idx, const Tensor& weight) {
    AMPGRAD_CHECK(idx.dim() == 1, "{}: indices must be 1-d here, got {}", op, idx.describe());
    std::vector<int64_t> out(static_cast<size_t>(idx.numel()));
    auto gather = [&](auto tag) {
        using I = decltype(tag);
        const I* p = static_cast<const I*>(idx.raw_data());
        for (size_t i = 0; i < out.size(); ++i)
            out[i] = static_cast<int64_t>(p[static_cast<int64_t>(i) * idx.stride(0)]);
    };
    if (idx.dtype() == kInt64) gather(int64_t{});
    else if (idx.dtype() == kInt32) gather(int32_t{});
    else throw DTypeError(fmt::format("{}: indices must be int64 or int32 but got {}", op, idx.describe()));
    int64_t V = weight.size(0);
    for (size_t i = 0; i < out.size(); ++i)
        if (out[i] < 0 || out[i] >= V)
            throw IndexError(fmt::format("{}: index {} is out of range for weight {} (vocab size {}): expected "
                                         "0 <= index < {}; found at flat position {} of the indices",
                                         op, out[i], weight.describe(), V, V, i));
    return out;
}

// ---- kernels ----

// out (N,C) = weight (V,C) rows at idx
template <typename T>
void embedding_forward_kernel(T* out, const T* weight, const std::vector<int64_t>& idx, int64_t C) {
    int64_t N = static_cast<int64_t>(idx.size());
    parallel_for(N, row_grain(C), [&](int64_t begin, int64_t end) {
        for (int64_t n = begin; n < end; ++n) std::copy_n(weight + idx[n] * C, C, out + n * C);
    });
}

// dweight (V,C) += dout (N,C) rows at idx, one thread per group of equal indices
template <typename T>
void embedding_backward_kernel(T* dweight, const T* dout, const std::vector<int64_t>& idx, int64_t C) {
    using Acc = compute_t<T>;
    int64_t N = static_cast<int64_t>(idx.size());
    std::vector<int64_t> order(static_cast<size_t>(N));                       // rows sorted by index
    std::iota(order.begin(), order.end(), int64_t{0});
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return idx[a] < idx[b]; });
    std::vector<int64_t> group_start;                                          // into `order`
    for (int64_t i = 0; i < N; ++i)
        if (i == 0 || idx[order[i]] != idx[order[i - 1]]) group_start.push_back(i);
    group_start.push_back(N);
    int64_t groups = static_cast<int64_t>(group_start.size()) - 1;
    int64_t grain = std::max<int64_t>(1, groups * kGrainSize / std::max<int64_t>(N * C, 1));   // ~kGrainSize elements
    parallel_for(groups, grain, [&](int64_t begin, int64_t end) {
        std::vector<Acc> acc(static_cast<size_t>(C));
        for (int64_t g = begin; g < end; ++g) {
            std::fill(acc.begin(), acc.end(), Acc(0));
            for (int64_t i = group_start[g]; i < group_start[g + 1]; ++i) {
                const T* row = dout + order[i] * C;
                for (int64_t c = 0; c < C; ++c) acc[c] += static_cast<Acc>(row[c]);
            }
            T* drow = dweight + idx[order[group_start[g]]] * C;
            for (int64_t c = 0; c < C; ++c) drow[c] = static_cast<T>(static_cast<Acc>(drow[c]) + acc[c]);
        }
    });
}

}  // namespace

// ---- launchers ----

void embedding(const Tensor& out, const Tensor& idx, const Tensor& weight) {
    check_embedding_shapes(out, idx, weight);
    std::vector<int64_t> indices = read_indices("embedding", idx, weight);
    if (out.numel() == 0) return;
    dispatch_float(weight.dtype(), "embedding", [&](auto tag) {
        using T = decltype(tag);
        embedding_forward_kernel(static_cast<T*>(out.raw_data()), static_cast<const T*>(weight.raw_data()), indices,
                                 weight.size(1));
    });
}

void embedding_backward(const Tensor& dweight, const Tensor& idx, const Tensor& dout) {
    AMPGRAD_CHECK(dweight.dim() == 2 && dweight.is_contiguous() && dout.is_contiguous() &&
                      dout.dtype() == dweight.dtype() && dout.numel() == idx.numel() * dweight.size(1),
                  "embedding_backward kernel: dweight {} / dout {} / idx {} do not fit", dweight.describe(),
                  dout.describe(), idx.describe());
    std::vector<int64_t> indices = read_indices("embedding_backward", idx, dweight);
    if (dout.numel() == 0) return;
    dispatch_float(dweight.dtype(), "embedding_backward", [&](auto tag) {
        using T = decltype(tag);
        embedding_backward_kernel(static_cast<T*>(dweight.raw_data()), static_cast<const T*>(dout.raw_data()), indices,
                                  dweight.size(1));
    });
}

AMPGRAD_REGISTER_KERNEL(kernels::embedding, kCPU, embedding);
AMPGRAD_REGISTER_KERNEL(kernels::embedding_backward, kCPU, embedding_backward);

}  // namespace ampgrad::cpu

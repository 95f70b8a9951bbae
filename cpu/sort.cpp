// sort.cpp: the row kernels behind sort, argsort, topk and flip: a stable sort of each row, and
// the gather (take_along_last) and its inverse scatter (put_along_last) along the last dim. Rows
// are contiguous (R,N); the order is kernels/scalar_math.hpp's SortBefore, shared with cuda/sort.cu.
// f16/bf16 values compare in fp32 (exact: the conversion is monotone), and indices are int64.
#include <algorithm>
#include <numeric>

#include "kernels/kernels.hpp"
#include "kernels/kernel_preconditions.hpp"
#include "kernels/scalar_math.hpp"
#include "cpu/loops.hpp"
#include "cpu/rows.hpp"

namespace ampgrad::cpu {

namespace {

// The compare type: fp32 for f16/bf16, the type itself otherwise (bool compares as false < true).
template <typename T> using compare_t = std::conditional_t<std::is_same_v<T, bool>, bool, compute_t<T>>;

// ---- kernels ----

// values, indices (R,N) = each row of in (R,N) stably sorted
template <typename T>
void sort_rows(T* values, int64_t* indices, const T* in, int64_t R, int64_t N, bool descending) {
    using C = compare_t<T>;
    parallel_for(R, row_grain(N * 8), [&](int64_t begin, int64_t end) {
        std::vector<int64_t> order(static_cast<size_t>(N));
        for (int64_t r = begin; r < end; ++r) {
            const T* row = in + r * N;
            std::iota(order.begin(), order.end(), int64_t{0});
            std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
                return formulas::SortBefore::value(static_cast<C>(row[a]), static_cast<C>(row[b]), descending);
            });
            for (int64_t j = 0; j < N; ++j) {
                values[r * N + j] = row[order[j]];
                indices[r * N + j] = order[j];
            }
        }
    });
}

// The index of row r, column j: `index` is (R,K) or (1,K) (shared by every row).
inline int64_t index_at(const int64_t* index, bool shared, int64_t K, int64_t r, int64_t j) {
    return index[(shared ? 0 : r * K) + j];
}

// Throws IndexError before any parallel loop (an exception must not leave one).
void check_indices(const char* op, const Tensor& index, int64_t N) {
    const int64_t* p = static_cast<const int64_t*>(index.raw_data());
    for (int64_t i = 0; i < index.numel(); ++i)
        if (p[i] < 0 || p[i] >= N)
            throw IndexError(fmt::format("{}: index {} is out of range for a dim of size {} (at flat position {})", op,
                                         p[i], N, i));
}

}  // namespace

// ---- launchers ----

void sort(const Tensor& values, const Tensor& indices, const Tensor& in, bool descending) {
    check_sort_rows(values, indices, in);
    if (in.numel() == 0) return;
    dispatch_all(in.dtype(), "sort", [&](auto tag) {
        using T = decltype(tag);
        sort_rows(static_cast<T*>(values.raw_data()), static_cast<int64_t*>(indices.raw_data()),
                  static_cast<const T*>(in.raw_data()), in.size(0), in.size(1), descending);
    });
}

void take_along_last(const Tensor& out, const Tensor& in, const Tensor& index) {
    check_along_last("take_along_last", in, out, index);
    if (out.numel() == 0) return;
    check_indices("take_along_last", index, in.size(1));
    const int64_t R = out.size(0), K = out.size(1), N = in.size(1);
    const bool shared = index.size(0) == 1 && R != 1;
    const int64_t* idx = static_cast<const int64_t*>(index.raw_data());
    dispatch_all(in.dtype(), "take_along_last", [&](auto tag) {
        using T = decltype(tag);
        T* o = static_cast<T*>(out.raw_data());
        const T* x = static_cast<const T*>(in.raw_data());
        parallel_for(R, row_grain(K), [&](int64_t begin, int64_t end) {
            for (int64_t r = begin; r < end; ++r)
                for (int64_t j = 0; j < K; ++j) o[r * K + j] = x[r * N + index_at(idx, shared, K, r, j)];
        });
    });
}

void put_along_last(const Tensor& out, const Tensor& src, const Tensor& index) {
    check_along_last("put_along_last", out, src, index);
    if (src.numel() == 0) return;
    check_indices("put_along_last", index, out.size(1));
    const int64_t R = src.size(0), K = src.size(1), N = out.size(1);
    const bool shared = index.size(0) == 1 && R != 1;
    const int64_t* idx = static_cast<const int64_t*>(index.raw_data());
    dispatch_all(out.dtype(), "put_along_last", [&](auto tag) {
        using T = decltype(tag);
        T* o = static_cast<T*>(out.raw_data());
        const T* s = static_cast<const T*>(src.raw_data());
        parallel_for(R, row_grain(K), [&](int64_t begin, int64_t end) {
            for (int64_t r = begin; r < end; ++r)
                for (int64_t j = 0; j < K; ++j) o[r * N + index_at(idx, shared, K, r, j)] = s[r * K + j];
        });
    });
}

AMPGRAD_REGISTER_KERNEL(kernels::sort, kCPU, sort);
AMPGRAD_REGISTER_KERNEL(kernels::take_along_last, kCPU, take_along_last);
AMPGRAD_REGISTER_KERNEL(kernels::put_along_last, kCPU, put_along_last);

}  // namespace ampgrad::cpu

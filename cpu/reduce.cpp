// reduce.cpp: sum/mean/max/min/prod/sum-of-squares over a set of dims, and max with indices.
// The input is viewed as (outer, inner): outer = the kept dims (one output element each),
// inner = the reduced dims. Floating sums accumulate in double, so f16/bf16/f32 reductions do
// not drift with length; max/min run in the compute type. Two layouts avoid the per-element
// strided walk: a contiguous reduced run is folded with 8 independent (vectorisable) accumulators,
// and a contiguous kept run (sum over rows) adds whole rows into per-column accumulators.
#include <cmath>
#include <limits>

#include "kernels/bounds.hpp"
#include "kernels/reduction.hpp"
#include "kernels/kernels.hpp"
#include "cpu/loops.hpp"

namespace ampgrad::cpu {

namespace {

// Folds n contiguous values with kLanes independent accumulators (so the compiler can vectorise
// the loop), then combines the lanes.
template <typename T, typename Acc, typename Step, typename Combine>
Acc fold_contiguous(const T* p, int64_t n, Acc init, Step step, Combine combine) {
    constexpr int kLanes = 8;
    Acc lanes[kLanes];
    for (Acc& l : lanes) l = init;
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
        for (int l = 0; l < kLanes; ++l) lanes[l] = step(lanes[l], static_cast<compute_t<T>>(p[i + l]));
    for (; i < n; ++i) lanes[0] = step(lanes[0], static_cast<compute_t<T>>(p[i]));
    Acc acc = lanes[0];
    for (int l = 1; l < kLanes; ++l) acc = combine(acc, lanes[l]);
    return acc;
}

// The kept dims form one contiguous run (e.g. a bias gradient: sum over the rows of (R,N)): walk
// the reduced positions in the outer loop and accumulate whole rows into per-column accumulators,
// threads splitting the columns. No strided gather per element.
template <typename T, typename Acc, typename Step, typename Finish>
void reduce_columns(T* dst, const T* src, int64_t n_out, const DimWalker& inner, Acc init, Step step,
                    Finish finish) {
    const int64_t n_in = inner.count();
    parallel_for(n_out, std::max<int64_t>(64, kGrainSize / std::max<int64_t>(n_in, 1)), [&](int64_t b, int64_t e) {
        std::vector<Acc> acc(static_cast<size_t>(e - b), init);
        for (int64_t i = 0; i < n_in; ++i) {
            const T* row = src + inner.offset_of(i) + b;
            for (int64_t j = 0; j < e - b; ++j) acc[j] = step(acc[j], static_cast<compute_t<T>>(row[j]));
        }
        for (int64_t j = 0; j < e - b; ++j) dst[b + j] = static_cast<T>(static_cast<compute_t<T>>(finish(acc[j], n_in)));
    });
}

// combine(a, b) merges two partial accumulators (a + b for sums, the step itself for max/min).
template <typename T, typename Acc, typename Step, typename Combine, typename Finish>
void reduce_loop(const Tensor& out, const Tensor& in, std::span<const int64_t> dims, Acc init, Step step,
                 Combine combine, Finish finish) {
    DimWalker outer, inner;
    split_dims(in, dims, outer, inner);
    const T* src = static_cast<const T*>(in.raw_data());
    T* dst = static_cast<T*>(out.raw_data());              // out is contiguous, keepdim shape
    const int64_t n_out = outer.count(), n_in = inner.count();
    if (outer.sizes.size() == 1 && outer.strides[0] == 1 && n_in > 1)
        return reduce_columns<T>(dst, src, n_out, inner, init, step, finish);
    const bool unit_inner = inner.sizes.size() == 1 && inner.strides[0] == 1;
    auto reduce_one = [&](int64_t o) {
        const T* base = src + outer.offset_of(o);
        Acc acc = init;
        if (inner.sizes.empty()) {
            acc = step(acc, static_cast<compute_t<T>>(base[0]));
        } else if (unit_inner) {
            acc = fold_contiguous<T>(base, n_in, init, step, combine);
        } else {
            for (int64_t i = 0; i < n_in; ++i) acc = step(acc, static_cast<compute_t<T>>(base[inner.offset_of(i)]));
        }
        dst[o] = static_cast<T>(static_cast<compute_t<T>>(finish(acc, n_in)));
    };
    parallel_for(n_out, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(n_in, 1)), [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o) reduce_one(o);
    });
}

template <typename T>
void reduce_typed(ReduceOp op, const Tensor& out, const Tensor& in, std::span<const int64_t> dims) {
    using C = compute_t<T>;
    using Acc = std::conditional_t<std::is_floating_point_v<C>, double, int64_t>;
    auto ident = [](Acc a, int64_t) { return a; };
    auto add = [](Acc a, Acc b) { return a + b; };
    auto max_step = [](C a, C x) { return formulas::max_step(a, x); };
    auto min_step = [](C a, C x) { return formulas::min_step(a, x); };
    switch (op) {
        case ReduceOp::kSum:
            return reduce_loop<T>(out, in, dims, Acc(0), [](Acc a, C x) { return a + static_cast<Acc>(x); }, add, ident);
        case ReduceOp::kMean:
            return reduce_loop<T>(out, in, dims, Acc(0), [](Acc a, C x) { return a + static_cast<Acc>(x); }, add,
                                  [](Acc a, int64_t n) { return n ? a / static_cast<Acc>(n) : Acc(NAN); });
        case ReduceOp::kProd:
            return reduce_loop<T>(out, in, dims, Acc(1), [](Acc a, C x) { return a * static_cast<Acc>(x); },
                                  [](Acc a, Acc b) { return a * b; }, ident);
        case ReduceOp::kSumSquares:
            return reduce_loop<T>(out, in, dims, Acc(0),
                                  [](Acc a, C x) { return a + static_cast<Acc>(x) * static_cast<Acc>(x); }, add, ident);
        case ReduceOp::kMax:
            return reduce_loop<T>(out, in, dims, no_lower_bound<C>(), max_step, max_step,
                                  [](C a, int64_t) { return a; });
        case ReduceOp::kMin:
            return reduce_loop<T>(out, in, dims, no_upper_bound<C>(), min_step, min_step,
                                  [](C a, int64_t) { return a; });
    }
}

}  // namespace

void reduce(ReduceOp op, const Tensor& out, const Tensor& in, std::span<const int64_t> dims) {
    if (reduce_preconditions(op, out, in)) return;                  // checked, or empty and filled
    dispatch_all(in.dtype(), "reduce", [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_same_v<T, bool>) {
            throw DTypeError(fmt::format("reduce: bool tensors must be converted first ({})", in.describe()));
        } else {
            reduce_typed<T>(op, out, in, dims);
        }
    });
}

void max_with_indices(const Tensor& values, const Tensor& indices, const Tensor& in, int64_t dim) {
    if (in.size(dim) == 0)
        throw IndexError(fmt::format("max: cannot take the max over empty dimension {} of {}", dim, in.describe()));
    dispatch_all(in.dtype(), "max_with_indices", [&](auto tag) {
        using T = decltype(tag);
        using C = compute_t<T>;
        if constexpr (std::is_same_v<T, bool>) {
            throw DTypeError(fmt::format("max: not supported for bool tensor {}", in.describe()));
        } else {
            DimWalker outer, inner;
            int64_t dims[1] = {dim};
            split_dims(in, dims, outer, inner);
            const T* src = static_cast<const T*>(in.raw_data());
            T* vals = static_cast<T*>(values.raw_data());
            int64_t* idx = indices.data_ptr<int64_t>();
            const int64_t n = in.size(dim), stride = in.stride(dim);
            parallel_for(outer.count(), 1024, [&](int64_t b, int64_t e) {
                for (int64_t o = b; o < e; ++o) {
                    const T* base = src + outer.offset_of(o);
                    C best = static_cast<C>(base[0]);
                    int64_t best_i = 0;
                    for (int64_t i = 1; i < n && best == best; ++i) {     // stop at the first NaN
                        C x = static_cast<C>(base[i * stride]);
                        if (x != x || x > best) { best = x; best_i = i; }
                    }
                    vals[o] = static_cast<T>(best);
                    idx[o] = best_i;
                }
            });
        }
    });
}

AMPGRAD_REGISTER_KERNEL(kernels::reduce, kCPU, reduce);
AMPGRAD_REGISTER_KERNEL(kernels::max_with_indices, kCPU, max_with_indices);

}  // namespace ampgrad::cpu

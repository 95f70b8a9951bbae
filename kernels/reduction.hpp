// reduction.hpp: what the CPU and CUDA reduce kernels (cpu/reduce.cpp, cuda/reduce.cu) share: the
// split of an input's dims into kept (outer: one output element each) and reduced (inner) dims, with
// neighbouring dims merged where their strides allow, and the NaN-propagating max/min steps.
// Host layout code plus AMPGRAD_HOST_DEVICE formulas; no kernels here.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "core/error.hpp"
#include "kernels/kernels.hpp"
#include "kernels/scalar_math.hpp"
#include "core/tensor.hpp"

namespace ampgrad {

// Checks out/in and handles an empty input (sum 0, prod 1, mean NaN; max/min have no identity and
// throw). Returns true when nothing is left for the kernel to do.
inline bool reduce_preconditions(ReduceOp op, const Tensor& out, const Tensor& in) {
    AMPGRAD_CHECK(out.is_contiguous() && out.dtype() == in.dtype(), "reduce: out {} in {}", out.describe(),
                  in.describe());
    if (in.numel() != 0) return false;
    if (out.numel() == 0) return true;           // nothing to write (a kept dim is empty)
    if (op == ReduceOp::kMax || op == ReduceOp::kMin)
        throw ValueError(fmt::format("max/min: cannot reduce an empty tensor {} (no identity)", in.describe()));
    kernels::fill(out, op == ReduceOp::kProd ? 1.0 : (op == ReduceOp::kMean ? NAN : 0.0));
    return true;
}

// A list of (size, stride-in-elements) dims walked as a flat row-major index.
struct DimWalker {
    std::vector<int64_t> sizes, strides;
    int64_t count() const {
        int64_t n = 1;
        for (int64_t s : sizes) n *= s;
        return n;
    }
    int64_t offset_of(int64_t flat) const {
        int64_t off = 0;
        for (size_t d = sizes.size(); d-- > 0;) {
            off += (flat % sizes[d]) * strides[d];
            flat /= sizes[d];
        }
        return off;
    }
};

// Split in's dims into kept (outer) and reduced (inner), dropping size-1 dims and merging a dim with
// the previous one of its kind when no dim of the other kind lies between and the strides are
// contiguous. The outer walk's flat order is the row-major order of the (keepdim) output.
inline void split_dims(const Tensor& in, std::span<const int64_t> dims, DimWalker& outer, DimWalker& inner) {
    std::vector<bool> reduced(static_cast<size_t>(in.dim()), false);
    for (int64_t d : dims) reduced[static_cast<size_t>(d)] = true;
    int64_t last_dim[2] = {-2, -2};                        // last non-trivial dim added to outer / inner
    int64_t prev = -2;                                      // last non-trivial dim of either kind
    for (int64_t d = 0; d < in.dim(); ++d) {
        bool is_inner = reduced[static_cast<size_t>(d)];
        DimWalker& w = is_inner ? inner : outer;
        int64_t size = in.sizes()[d], stride = in.strides()[d];
        if (size == 1) continue;
        bool adjacent = last_dim[is_inner] == prev;         // no dim of the other kind in between
        last_dim[is_inner] = d;
        prev = d;
        if (adjacent && !w.sizes.empty() && w.strides.back() == stride * size) {   // merge with previous dim
            w.sizes.back() *= size;
            w.strides.back() = stride;
        } else {
            w.sizes.push_back(size);
            w.strides.push_back(stride);
        }
    }
}

namespace formulas {

// One step of a max/min reduction: x replaces the running value a when x is NaN or beyond it, so a
// NaN anywhere makes the result NaN (as torch.max/amax). Also merges two partial results.
template <class C>
AMPGRAD_HOST_DEVICE inline C max_step(C a, C x) { return (x != x || x > a) ? x : a; }
template <class C>
AMPGRAD_HOST_DEVICE inline C min_step(C a, C x) { return (x != x || x < a) ? x : a; }

}  // namespace formulas

}  // namespace ampgrad

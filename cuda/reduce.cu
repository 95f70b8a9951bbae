// reduce.cu: sum/mean/max/min/prod/sum-of-squares over any set of dims, and max with indices: the
// GPU twin of cpu/reduce.cpp, with the same (outer, inner) view of the input (kernels/reduction.hpp:
// outer = the kept dims, one output element each; inner = the reduced dims, any strides).
//   - general case: a warp per output element (a block when the reduced run is long); the lanes
//     stride over the inner elements, which are adjacent in memory when the reduced dims are the
//     contiguous innermost ones (the fast path: coalesced loads, no index division);
//   - kept dims one contiguous run (e.g. a bias gradient: sum over the rows of (R,N)): a thread per
//     output column, so neighbouring threads read neighbouring columns; long reductions are cut into
//     row chunks whose partials a second kernel combines in chunk order;
//   - few outputs over long runs (a whole-tensor sum of squares for clip_grad_norm_, a one-row
//     softmax's statistics): each output's run is cut into chunks, a block per (output, chunk), so the
//     whole GPU reads, not one block per output; the partials are combined in chunk order as above.
// As on the CPU, floating sums/products accumulate in double (integers in int64), so f16/bf16/f32
// sums do not drift with length; max/min run in the compute type and propagate NaN. Every
// combination order is fixed by the launch shape: results are deterministic (no atomics).
#include <cmath>
#include <limits>

#include "kernels/bounds.hpp"
#include "kernels/reduction.hpp"
#include "cuda/rows.cuh"

namespace ampgrad::cuda {

namespace {

// ---- strided walks on the device ----

// kernels/reduction.hpp's DimWalker with fixed storage, passed to kernels by value.
struct DeviceWalk {
    int ndim = 0;                          // 0: a single element at offset 0
    int64_t sizes[kMaxDims] = {};
    int64_t strides[kMaxDims] = {};

    __device__ __forceinline__ int64_t offset_of(int64_t flat) const {
        if (ndim == 1) return flat * strides[0];        // the common case: no division
        int64_t off = 0;
        for (int d = ndim - 1; d >= 0; --d) {
            off += (flat % sizes[d]) * strides[d];
            flat /= sizes[d];
        }
        return off;
    }
};

DeviceWalk to_device(const DimWalker& w, const Tensor& in) {
    AMPGRAD_CHECK(w.sizes.size() <= static_cast<size_t>(kMaxDims), "reduce: {} has more than {} dims", in.describe(),
                  kMaxDims);
    DeviceWalk d;
    d.ndim = static_cast<int>(w.sizes.size());
    for (int k = 0; k < d.ndim; ++k) {
        d.sizes[k] = w.sizes[static_cast<size_t>(k)];
        d.strides[k] = w.strides[static_cast<size_t>(k)];
    }
    return d;
}

// ---- the reduction ops: sums/products (Acc double or int64) or max/min (Acc = the compute type C) ----

template <typename C, bool kMinMax>
struct Reducer {
    using Acc = std::conditional_t<kMinMax, C, std::conditional_t<std::is_floating_point_v<C>, double, int64_t>>;
    ReduceOp op;

    __device__ Acc identity() const {
        if constexpr (kMinMax) return op == ReduceOp::kMax ? no_lower_bound<C>() : no_upper_bound<C>();
        else return op == ReduceOp::kProd ? Acc(1) : Acc(0);
    }
    __device__ Acc step(Acc a, C x) const {
        if constexpr (kMinMax) {
            return op == ReduceOp::kMax ? formulas::max_step(a, x) : formulas::min_step(a, x);
        } else {
            Acc v = static_cast<Acc>(x);
            if (op == ReduceOp::kProd) return a * v;
            return op == ReduceOp::kSumSquares ? a + v * v : a + v;
        }
    }
    __device__ Acc combine(Acc a, Acc b) const {
        if constexpr (kMinMax) return op == ReduceOp::kMax ? formulas::max_step(a, b) : formulas::min_step(a, b);
        else return op == ReduceOp::kProd ? a * b : a + b;
    }
    // n >= 1: empty inputs never reach the kernels
    __device__ Acc finish(Acc a, int64_t n) const {
        if constexpr (!kMinMax) {
            if (op == ReduceOp::kMean) return a / static_cast<Acc>(n);
        }
        return a;
    }
};

// out[o] = finish(acc) rounded as the CPU does: to the compute type, then to T
template <typename T, typename R>
__device__ __forceinline__ void store_result(T* dst, int64_t o, const R& r, typename R::Acc acc, int64_t n_in) {
    dst[o] = store_compute<T>(static_cast<device_compute_t<T>>(r.finish(acc, n_in)));
}

// ---- kernels ----

// A warp (kBlock false) or a block per output element o; in viewed through (outer, inner).
template <typename T, typename R, bool kBlock>
__global__ void reduce_group_kernel(int64_t n_out, int64_t n_in, DeviceWalk outer, DeviceWalk inner, T* dst,
                                    const T* src, R r) {
    using Acc = typename R::Acc;
    const RowSlot slot = row_slot<kBlock>();
    auto combine = [r](Acc a, Acc b) { return r.combine(a, b); };
    for (int64_t o = slot.first_row; o < n_out; o += slot.row_stride) {
        const T* base = src + outer.offset_of(o);
        Acc acc = r.identity();
        for (int64_t i = slot.lane; i < n_in; i += slot.lanes) acc = r.step(acc, load_compute(base[inner.offset_of(i)]));
        acc = group_reduce<kBlock>(acc, combine, r.identity());
        if (slot.lane == 0) store_result(dst, o, r, acc, n_in);
    }
}

// Kept dims one contiguous run: thread o reduces output column o over inner positions
// [chunk * blockIdx.y, chunk * (blockIdx.y + 1)); with one chunk it writes dst, else partial (chunks, n_out).
template <typename T, typename R>
__global__ void reduce_columns_kernel(int64_t n_out, int64_t n_in, int64_t chunk, DeviceWalk inner, T* dst,
                                      typename R::Acc* partial, const T* src, R r) {
    const int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (o >= n_out) return;
    const int64_t begin = chunk * blockIdx.y, end = begin + chunk < n_in ? begin + chunk : n_in;
    typename R::Acc acc = r.identity();
    for (int64_t i = begin; i < end; ++i) acc = r.step(acc, load_compute(src[o + inner.offset_of(i)]));
    if (partial) partial[blockIdx.y * n_out + o] = acc;
    else store_result(dst, o, r, acc, n_in);
}

// Few outputs, long runs: block (o, c) reduces output o's inner positions [chunk * c, chunk * (c + 1))
// into partial[c * n_out + o]; every thread of the block takes part in the block reduction.
template <typename T, typename R>
__global__ void reduce_split_kernel(int64_t n_out, int64_t n_in, int64_t chunk, DeviceWalk outer, DeviceWalk inner,
                                    typename R::Acc* partial, const T* src, R r) {
    using Acc = typename R::Acc;
    const int64_t o = blockIdx.x, c = blockIdx.y;
    const int64_t begin = chunk * c, end = begin + chunk < n_in ? begin + chunk : n_in;
    const T* base = src + outer.offset_of(o);
    Acc acc = r.identity();
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) acc = r.step(acc, load_compute(base[inner.offset_of(i)]));
    acc = block_reduce(acc, [r](Acc a, Acc b) { return r.combine(a, b); }, r.identity());
    if (threadIdx.x == 0) partial[c * n_out + o] = acc;
}

// dst[o] = the chunk partials of column o combined in chunk order; partial: (chunks, n_out)
template <typename T, typename R>
__global__ void reduce_chunks_kernel(int64_t n_out, int64_t chunks, int64_t n_in, T* dst,
                                     const typename R::Acc* partial, R r) {
    for (int64_t o = first_index(); o < n_out; o += grid_stride()) {
        typename R::Acc acc = partial[o];
        for (int64_t k = 1; k < chunks; ++k) acc = r.combine(acc, partial[k * n_out + o]);
        store_result(dst, o, r, acc, n_in);
    }
}

// ---- launchers ----

inline constexpr int64_t kBlockReduceLimit = 4096;   // reduced runs longer than this get a block each
inline constexpr int64_t kColumnChunkTarget = 1024;  // blocks the column path aims for, chunks included
inline constexpr int64_t kSplitMaxOutputs = 64;      // at most this many outputs ...
inline constexpr int64_t kSplitMinRun = 65536;       // ... over runs this long take the split path
inline constexpr int64_t kSplitBlocks = 1024;        // blocks the split path aims for (several per SM)
inline constexpr int64_t kSplitThreads = 512;

// A device buffer of n values of Acc from the tensor allocator (stream-ordered with the kernels).
template <typename Acc>
Tensor scratch(int64_t n, Device device) {
    return make_empty({(n * static_cast<int64_t>(sizeof(Acc)) + 7) / 8}, kFloat64, device);
}

template <typename T, typename R>
void reduce_columns(const Tensor& out, const Tensor& in, const DimWalker& inner, R r) {
    using Acc = typename R::Acc;
    const int64_t n_out = out.numel(), n_in = inner.count();
    const int64_t col_blocks = (n_out + kBlockSize - 1) / kBlockSize;
    int64_t chunks = std::clamp<int64_t>(std::min(n_in / 64, kColumnChunkTarget / col_blocks), 1, 1024);
    const int64_t chunk = (n_in + chunks - 1) / chunks;
    chunks = (n_in + chunk - 1) / chunk;                 // no empty chunk
    Tensor buffer = chunks > 1 ? scratch<Acc>(chunks * n_out, in.device()) : Tensor();
    Acc* partial = chunks > 1 ? static_cast<Acc*>(buffer.raw_data()) : nullptr;
    AMPGRAD_CHECK(col_blocks <= std::numeric_limits<int32_t>::max(), "reduce: {} outputs", n_out);
    dim3 grid(static_cast<unsigned>(col_blocks), static_cast<unsigned>(chunks));
    reduce_columns_kernel<T, R><<<grid, kBlockSize, 0, current_stream()>>>(
        n_out, n_in, chunk, to_device(inner, in), device_ptr<T>(out), partial, device_ptr<const T>(in), r);
    CUDA_CHECK(cudaGetLastError());
    if (chunks == 1) return;
    reduce_chunks_kernel<T, R><<<grid_for(n_out), kBlockSize, 0, current_stream()>>>(n_out, chunks, n_in,
                                                                                     device_ptr<T>(out), partial, r);
    CUDA_CHECK(cudaGetLastError());
}

// Few outputs over long runs: chunks of at least kBlockReduceLimit elements, a block per (output,
// chunk), then reduce_chunks_kernel combines each output's partials in chunk order.
template <typename T, typename R>
void reduce_split(const Tensor& out, const Tensor& in, const DimWalker& outer, const DimWalker& inner, R r) {
    using Acc = typename R::Acc;
    const int64_t n_out = outer.count(), n_in = inner.count();
    int64_t chunks = std::clamp<int64_t>(std::min(kSplitBlocks / n_out, n_in / kBlockReduceLimit), 1, 65535);
    const int64_t chunk = (n_in + chunks - 1) / chunks;
    chunks = (n_in + chunk - 1) / chunk;                 // no empty chunk
    Tensor buffer = scratch<Acc>(chunks * n_out, in.device());
    Acc* partial = static_cast<Acc*>(buffer.raw_data());
    dim3 grid(static_cast<unsigned>(n_out), static_cast<unsigned>(chunks));
    reduce_split_kernel<T, R><<<grid, kSplitThreads, 0, current_stream()>>>(
        n_out, n_in, chunk, to_device(outer, in), to_device(inner, in), partial, device_ptr<const T>(in), r);
    CUDA_CHECK(cudaGetLastError());
    reduce_chunks_kernel<T, R><<<grid_for(n_out), kBlockSize, 0, current_stream()>>>(n_out, chunks, n_in,
                                                                                     device_ptr<T>(out), partial, r);
    CUDA_CHECK(cudaGetLastError());
}

template <typename T, typename R>
void reduce_typed(const Tensor& out, const Tensor& in, std::span<const int64_t> dims, R r) {
    DimWalker outer, inner;
    split_dims(in, dims, outer, inner);
    const int64_t n_out = outer.count(), n_in = inner.count();
    if (outer.sizes.size() == 1 && outer.strides[0] == 1 && n_in > 1) return reduce_columns<T>(out, in, inner, r);
    if (n_out <= kSplitMaxOutputs && n_in >= kSplitMinRun) return reduce_split<T>(out, in, outer, inner, r);
    RowLaunch l = row_launch(n_out, n_in, kBlockReduceLimit);
    DeviceWalk o = to_device(outer, in), i = to_device(inner, in);
    if (l.block)
        reduce_group_kernel<T, R, true><<<l.blocks, l.threads, 0, current_stream()>>>(
            n_out, n_in, o, i, device_ptr<T>(out), device_ptr<const T>(in), r);
    else
        reduce_group_kernel<T, R, false><<<l.blocks, l.threads, 0, current_stream()>>>(
            n_out, n_in, o, i, device_ptr<T>(out), device_ptr<const T>(in), r);
    CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void reduce(ReduceOp op, const Tensor& out, const Tensor& in, std::span<const int64_t> dims) {
    const int index = out.device().index;
    require_on_device("reduce", index, {&out, &in});
    if (reduce_preconditions(op, out, in)) return;                  // checked, or empty and filled
    DeviceGuard guard(index);
    dispatch_all(in.dtype(), "reduce", [&](auto tag) {
        using T = decltype(tag);
        using C = device_compute_t<T>;
        if constexpr (std::is_same_v<T, bool>) {
            throw DTypeError(fmt::format("reduce: bool tensors must be converted first ({})", in.describe()));
        } else if (op == ReduceOp::kMax || op == ReduceOp::kMin) {
            reduce_typed<T>(out, in, dims, Reducer<C, true>{op});
        } else {
            reduce_typed<T>(out, in, dims, Reducer<C, false>{op});
        }
    });
}

// ---- max with indices ----

namespace {

// A candidate maximum: its value and its index along the reduced dim.
template <typename C>
struct ValueIndex {
    C value;
    int64_t index;
};

template <typename C>
__device__ __forceinline__ ValueIndex<C> shfl_xor(ValueIndex<C> v, int lane_mask) {
    return {__shfl_xor_sync(kFullMask, v.value, lane_mask), __shfl_xor_sync(kFullMask, v.index, lane_mask)};
}

// The better of two candidates, as the CPU's sequential scan picks: the first NaN if there is one,
// else the largest value, the lower index among equals.
template <typename C>
__device__ __forceinline__ ValueIndex<C> better(ValueIndex<C> a, ValueIndex<C> b) {
    if (a.value != a.value) return (b.value != b.value && b.index < a.index) ? b : a;
    if (b.value != b.value) return b;
    return (b.value > a.value || (b.value == a.value && b.index < a.index)) ? b : a;
}

// A warp or a block per output o: the max over n values at stride `stride` from outer's offset of o.
template <typename T, bool kBlock>
__global__ void max_index_kernel(int64_t n_out, int64_t n, int64_t stride, DeviceWalk outer, T* values,
                                 int64_t* indices, const T* src) {
    using C = device_compute_t<T>;
    const RowSlot slot = row_slot<kBlock>();
    const ValueIndex<C> none{no_lower_bound<C>(), std::numeric_limits<int64_t>::max()};
    auto combine = [](ValueIndex<C> a, ValueIndex<C> b) { return better(a, b); };
    for (int64_t o = slot.first_row; o < n_out; o += slot.row_stride) {
        const T* base = src + outer.offset_of(o);
        ValueIndex<C> best = none;
        for (int64_t i = slot.lane; i < n; i += slot.lanes) best = better(best, ValueIndex<C>{load_compute(base[i * stride]), i});
        best = group_reduce<kBlock>(best, combine, none);
        if (slot.lane == 0) {
            values[o] = store_compute<T>(best.value);
            indices[o] = best.index;
        }
    }
}

}  // namespace

void max_with_indices(const Tensor& values, const Tensor& indices, const Tensor& in, int64_t dim) {
    const int index = in.device().index;
    require_on_device("max_with_indices", index, {&values, &indices, &in});
    if (in.size(dim) == 0)
        throw IndexError(fmt::format("max: cannot take the max over empty dimension {} of {}", dim, in.describe()));
    AMPGRAD_CHECK(values.is_contiguous() && indices.is_contiguous() && indices.dtype() == kInt64 &&
                      values.dtype() == in.dtype(),
                  "max_with_indices: values {} indices {} in {}", values.describe(), indices.describe(), in.describe());
    if (in.numel() == 0) return;                 // an empty kept dim: nothing to write
    DeviceGuard guard(index);
    dispatch_all(in.dtype(), "max_with_indices", [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_same_v<T, bool>) {
            throw DTypeError(fmt::format("max: not supported for bool tensor {}", in.describe()));
        } else {
            DimWalker outer, inner;
            int64_t dims[1] = {dim};
            split_dims(in, dims, outer, inner);
            const int64_t n_out = outer.count(), n = in.size(dim), stride = in.stride(dim);
            RowLaunch l = row_launch(n_out, n, kBlockReduceLimit);
            DeviceWalk o = to_device(outer, in);
            if (l.block)
                max_index_kernel<T, true><<<l.blocks, l.threads, 0, current_stream()>>>(
                    n_out, n, stride, o, device_ptr<T>(values), device_ptr<int64_t>(indices), device_ptr<const T>(in));
            else
                max_index_kernel<T, false><<<l.blocks, l.threads, 0, current_stream()>>>(
                    n_out, n, stride, o, device_ptr<T>(values), device_ptr<int64_t>(indices), device_ptr<const T>(in));
            CUDA_CHECK(cudaGetLastError());
        }
    });
}

AMPGRAD_REGISTER_KERNEL(kernels::reduce, kCUDA, reduce);
AMPGRAD_REGISTER_KERNEL(kernels::max_with_indices, kCUDA, max_with_indices);

}  // namespace ampgrad::cuda

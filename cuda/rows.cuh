// rows.cuh: the GPU twin of cpu/rows.hpp: how the row kernels (reduce, softmax, layer_norm) give
// each row of C values to one warp or one block, and the warp-shuffle / block reductions they use.
// Every reduction here combines values in an order fixed by the thread ids and the launch shape,
// so a result never depends on scheduling (no atomics). Also the pieces the two norms share (the
// weight gradients' in-order column sums, the statistics' dtype). Not here: strided indexing (loops.cuh).
#pragma once
#include <algorithm>

#include "cuda/loops.cuh"

namespace ampgrad::cuda {

inline constexpr int kWarpSize = 32;
inline constexpr unsigned kFullMask = 0xffffffffu;

// The partner's value in a butterfly step; reduce.cu adds an overload for its (value, index) pairs.
template <typename V>
__device__ __forceinline__ V shfl_xor(V v, int lane_mask) { return __shfl_xor_sync(kFullMask, v, lane_mask); }

// Every lane of a full warp gets lane 0's combination of all 32 values (tree order fixed by lane ids).
template <typename V, typename Combine>
__device__ __forceinline__ V warp_reduce(V v, Combine combine) {
    for (int mask = kWarpSize / 2; mask > 0; mask /= 2) v = combine(v, shfl_xor(v, mask));
    return v;     // lanes may differ only in the sign of a zero max; callers use lane 0's or a broadcast
}

// All threads of the block call it (blockDim.x a multiple of 32, at most 1024) and all get the
// block's combination; `identity` pads the missing warps.
template <typename V, typename Combine>
__device__ V block_reduce(V v, Combine combine, V identity) {
    __shared__ V partial[kWarpSize];
    __shared__ V result;
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    v = warp_reduce(v, combine);
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    if (warp == 0) {
        V w = lane < static_cast<int>(blockDim.x) / kWarpSize ? partial[lane] : identity;
        w = warp_reduce(w, combine);
        if (lane == 0) result = w;
    }
    __syncthreads();
    V out = result;
    __syncthreads();                                   // partial/result are free for the next call
    return out;
}

// ---- rows to threads: a warp per row (short rows) or a block per row (long rows) ----

struct RowSlot {
    int64_t first_row, row_stride;   // grid-stride loop over rows: for (r = first_row; r < N; r += row_stride)
    int lane, lanes;                 // this thread's first column and the column stride
};

template <bool kBlock>
__device__ __forceinline__ RowSlot row_slot() {
    if constexpr (kBlock) {
        return {blockIdx.x, gridDim.x, static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x)};
    } else {
        const int warps = static_cast<int>(blockDim.x) / kWarpSize;
        return {static_cast<int64_t>(blockIdx.x) * warps + threadIdx.x / kWarpSize,
                static_cast<int64_t>(gridDim.x) * warps, static_cast<int>(threadIdx.x % kWarpSize), kWarpSize};
    }
}

// The combination over the row's group (warp or block), valid in the group's thread 0 (lane 0).
template <bool kBlock, typename V, typename Combine>
__device__ __forceinline__ V group_reduce(V v, Combine combine, V identity) {
    if constexpr (kBlock) return block_reduce(v, combine, identity);
    else return warp_reduce(v, combine);
}

// The combination over the row's group (warp or block), the same value in every thread of it.
template <bool kBlock, typename V, typename Combine>
__device__ __forceinline__ V row_reduce(V v, Combine combine, V identity) {
    if constexpr (kBlock) {
        return block_reduce(v, combine, identity);
    } else {
        return __shfl_sync(kFullMask, warp_reduce(v, combine), 0);
    }
}

// Launch shape for N rows of C values: rows up to warp_limit values get a warp (8 per block of
// 256 threads); longer rows get a block of 512 threads. Every thread of a group walks the same rows,
// so the shuffles and __syncthreads above are never divergent.
inline constexpr int64_t kWarpRowLimit = 1024;

struct RowLaunch {
    bool block;
    int blocks, threads;
};

inline RowLaunch row_launch(int64_t rows, int64_t C, int64_t warp_limit = kWarpRowLimit) {
    if (C > warp_limit) return {true, static_cast<int>(std::clamp<int64_t>(rows, 1, kMaxBlocks)), 512};
    const int64_t rows_per_block = kBlockSize / kWarpSize;
    return {false, static_cast<int>(std::clamp<int64_t>((rows + rows_per_block - 1) / rows_per_block, 1, kMaxBlocks)),
            kBlockSize};
}

// ---- shared by the norms (cuda/layer_norm.cu, cuda/rms_norm.cu) ----

// The weight gradients' second pass: out[c] = the sum of partial[k, c] over k in order, so the
// result does not depend on scheduling (no atomics); partial: (chunks, C).
template <typename T>
__global__ void sum_chunks_kernel(T* out, const device_compute_t<T>* partial, int64_t chunks, int64_t C) {
    for (int64_t c = first_index(); c < C; c += grid_stride()) {
        device_compute_t<T> total = 0;
        for (int64_t k = 0; k < chunks; ++k) total += partial[k * C + c];
        out[c] = store_compute<T>(total);
    }
}

// The norms' weight-gradient plan (cuda/layer_norm.cu, cuda/rms_norm.cu): a thread per column sums
// its column over a chunk of rows into (chunks, C) partials (grid: col_blocks x chunks), then
// sum_chunks adds each column's partials in chunk order. Chunks of at least 16 rows, about 1024
// blocks in all, at most 65535 chunks (gridDim.y), none empty.
struct ColumnChunks {
    int64_t col_blocks = 1, chunks = 1, rows_per_chunk = 1;
    dim3 grid() const { return dim3(static_cast<unsigned>(col_blocks), static_cast<unsigned>(chunks)); }
};

inline ColumnChunks plan_column_chunks(int64_t N, int64_t C) {
    constexpr int64_t kChunkTarget = 1024, kMinRowsPerChunk = 16;
    ColumnChunks p;
    p.col_blocks = (C + kBlockSize - 1) / kBlockSize;
    p.chunks = std::clamp<int64_t>(std::min((N + kMinRowsPerChunk - 1) / kMinRowsPerChunk, kChunkTarget / p.col_blocks),
                                   1, 65535);
    p.rows_per_chunk = (N + p.chunks - 1) / p.chunks;
    p.chunks = (N + p.rows_per_chunk - 1) / p.rows_per_chunk;              // no empty chunk
    return p;
}

// out (C) = each column of partial (chunks, C) summed in chunk order; nothing when out is undefined.
template <typename T>
void sum_chunks(const Tensor& out, const Tensor& partial, const ColumnChunks& plan, int64_t C) {
    if (!out.defined()) return;
    sum_chunks_kernel<T><<<grid_for(C), kBlockSize, 0, current_stream()>>>(
        device_ptr<T>(out), device_ptr<const device_compute_t<T>>(partial), plan.chunks, C);
    CUDA_CHECK(cudaGetLastError());
}

template <typename T>
const T* ptr_or_null(const Tensor& t) { return t.defined() ? static_cast<const T*>(t.raw_data()) : nullptr; }

// The dtype of a norm's saved statistics (mean, rstd): f64 for f64 input, else f32.
inline DType stat_dtype(const Tensor& x) { return x.dtype() == kFloat64 ? kFloat64 : kFloat32; }

}  // namespace ampgrad::cuda

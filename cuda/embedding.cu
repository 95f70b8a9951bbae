// embedding.cu: the embedding table's row gather (forward) and scatter-add (backward) on the GPU,
// the twin of cpu/embedding.cpp.
//   forward: out (N,C) = weight (V,C) rows at idx (N): one thread per output element, grid-stride.
//   backward: dweight (V,C) += dout (N,C) rows at idx. Deterministic, with no float atomics: the
//     indices are sorted with their positions by CUB's radix sort, which is stable, so equal
//     indices keep their original order (the CPU kernel's std::stable_sort order). Then one block
//     per group of equal indices (found by comparing each sorted key with its predecessor) sums
//     the group's dout rows in that order, its threads striding over the C columns, in fp32 (f64
//     for f64), and rounds once on store. Every dweight row is written by one block, in a fixed
//     order: the result does not depend on scheduling, and an f32 sum matches the CPU's bit for bit.
//     A very frequent index (a padding token) makes one long serial group; splitting long groups
//     into partial sums (as PyTorch's embedding_backward_cuda_kernel does) is not done yet.
// An index outside [0, V) cannot be reported by the host without a synchronisation: the kernel
// prints it and stops with a device trap (as PyTorch's device-side asserts do); the error
// surfaces at the next synchronising call, and the context is lost.
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <bit>
#include <cstdio>

#include "kernels/kernel_preconditions.hpp"
#include "cuda/loops.cuh"

namespace ampgrad::cuda {

namespace {

// idx[n * stride] as int64, checked against the vocabulary size V.
template <typename I>
__device__ __forceinline__ int64_t checked_index(const I* idx, int64_t stride, int64_t n, int64_t V) {
    int64_t k = static_cast<int64_t>(idx[n * stride]);
    if (k < 0 || k >= V) {
        printf("ampgrad cuda embedding: index %lld at position %lld is out of range: expected 0 <= index < %lld\n",
               static_cast<long long>(k), static_cast<long long>(n), static_cast<long long>(V));
        __trap();
    }
    return k;
}

// ---- kernels ----

// out (N,C) contiguous = weight (V,C) rows at idx (N, any stride); total = N * C
template <typename T, typename I>
__global__ void embedding_forward_kernel(int64_t total, int64_t C, int64_t V, T* out, const T* weight, const I* idx,
                                         int64_t idx_stride) {
    for (int64_t i = first_index(); i < total; i += grid_stride()) {
        int64_t n = i / C, c = i - n * C;
        out[i] = weight[checked_index(idx, idx_stride, n, V) * C + c];
    }
}

// keys (N) = idx as checked int64, positions (N) = 0..N-1: the radix sort's input
template <typename I>
__global__ void sort_input_kernel(int64_t N, int64_t V, const I* idx, int64_t idx_stride, int64_t* keys,
                                  int64_t* positions) {
    for (int64_t n = first_index(); n < N; n += grid_stride()) {
        keys[n] = checked_index(idx, idx_stride, n, V);
        positions[n] = n;
    }
}

// dweight (V,C) += sum of the dout (N,C) rows of each group of equal sorted keys. Block b takes
// sorted positions b, b + gridDim.x, ...; a position starts a group when its key differs from the
// previous one (the whole block sees the same key, so the branch is uniform).
template <typename T>
__global__ void embedding_backward_kernel(int64_t N, int64_t C, T* dweight, const T* dout, const int64_t* keys,
                                          const int64_t* positions) {
    using Acc = device_compute_t<T>;
    for (int64_t start = blockIdx.x; start < N; start += gridDim.x) {
        const int64_t key = keys[start];
        if (start > 0 && keys[start - 1] == key) continue;    // not the first of its group
        for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
            Acc acc = Acc(0);
            for (int64_t j = start; j < N && keys[j] == key; ++j) acc += load_compute(dout[positions[j] * C + c]);
            T& out = dweight[key * C + c];
            out = store_compute<T>(load_compute(out) + acc);
        }
    }
}

// ---- launchers ----

// Throws unless idx is 1-d int64/int32 (the CPU kernel's rule).
void check_indices(const char* op, const Tensor& idx) {
    AMPGRAD_CHECK(idx.dim() == 1, "{}: indices must be 1-d here, got {}", op, idx.describe());
    if (idx.dtype() != kInt64 && idx.dtype() != kInt32)
        throw DTypeError(fmt::format("{}: indices must be int64 or int32 but got {}", op, idx.describe()));
}

// Calls fn(I{}) with the index type of idx.
template <typename Fn>
void dispatch_index(const Tensor& idx, Fn&& fn) {
    if (idx.dtype() == kInt64) fn(int64_t{});
    else fn(int32_t{});
}

// keys and positions (N) sorted by key, stably; temporaries from the device's allocator.
struct SortedIndices {
    Tensor keys, positions;
};

SortedIndices sort_indices(const Tensor& idx, int64_t V, Device device) {
    const int64_t N = idx.numel();
    Tensor keys = make_empty({N}, kInt64, device), positions = make_empty({N}, kInt64, device);   // (N) each
    SortedIndices sorted{make_empty({N}, kInt64, device), make_empty({N}, kInt64, device)};
    // The temporaries are freed on return, on the current stream, after the work queued there
    // (cuda/allocator.cu is stream-ordered), so the sort still owns them when it runs.
    dispatch_index(idx, [&](auto tag) {
        using I = decltype(tag);
        sort_input_kernel<I><<<grid_for(N), kBlockSize, 0, current_stream()>>>(
            N, V, device_ptr<const I>(idx), idx.stride(0), device_ptr<int64_t>(keys), device_ptr<int64_t>(positions));
        CUDA_CHECK(cudaGetLastError());
    });
    const int end_bit = std::max(1, static_cast<int>(std::bit_width(static_cast<uint64_t>(V - 1))));   // keys < V
    size_t temp_bytes = 0;
    CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, device_ptr<const int64_t>(keys),
                                               device_ptr<int64_t>(sorted.keys), device_ptr<const int64_t>(positions),
                                               device_ptr<int64_t>(sorted.positions), N, 0, end_bit,
                                               current_stream()));
    // never empty: a null temp pointer would make the second call another size query
    Tensor temp = make_empty({std::max<int64_t>(1, static_cast<int64_t>((temp_bytes + 7) / 8))}, kInt64, device);
    CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.raw_data(), temp_bytes, device_ptr<const int64_t>(keys),
                                               device_ptr<int64_t>(sorted.keys), device_ptr<const int64_t>(positions),
                                               device_ptr<int64_t>(sorted.positions), N, 0, end_bit,
                                               current_stream()));
    return sorted;
}

}  // namespace

void embedding(const Tensor& out, const Tensor& idx, const Tensor& weight) {
    check_embedding_shapes(out, idx, weight);
    check_indices("embedding", idx);
    const int index = weight.device().index;
    require_on_device("embedding", index, {&out, &idx, &weight});
    const int64_t total = out.numel(), V = weight.size(0), C = weight.size(1);
    if (total == 0) return;
    DeviceGuard guard(index);
    dispatch_float(weight.dtype(), "embedding", [&](auto tag) {
        using T = decltype(tag);
        dispatch_index(idx, [&](auto index_tag) {
            using I = decltype(index_tag);
            embedding_forward_kernel<T, I><<<grid_for(total), kBlockSize, 0, current_stream()>>>(
                total, C, V, device_ptr<T>(out), device_ptr<const T>(weight), device_ptr<const I>(idx), idx.stride(0));
            CUDA_CHECK(cudaGetLastError());
        });
    });
}

void embedding_backward(const Tensor& dweight, const Tensor& idx, const Tensor& dout) {
    AMPGRAD_CHECK(dweight.dim() == 2 && dweight.is_contiguous() && dout.is_contiguous() &&
                      dout.dtype() == dweight.dtype() && dout.numel() == idx.numel() * dweight.size(1),
                  "embedding_backward kernel: dweight {} / dout {} / idx {} do not fit", dweight.describe(),
                  dout.describe(), idx.describe());
    check_indices("embedding_backward", idx);
    const int index = dweight.device().index;
    require_on_device("embedding_backward", index, {&dweight, &idx, &dout});
    const int64_t N = idx.numel(), V = dweight.size(0), C = dweight.size(1);
    if (dout.numel() == 0) return;
    DeviceGuard guard(index);
    SortedIndices sorted = sort_indices(idx, V, dweight.device());
    dispatch_float(dweight.dtype(), "embedding_backward", [&](auto tag) {
        using T = decltype(tag);
        const int blocks = static_cast<int>(std::min<int64_t>(N, kMaxBlocks));
        embedding_backward_kernel<T><<<blocks, kBlockSize, 0, current_stream()>>>(
            N, C, device_ptr<T>(dweight), device_ptr<const T>(dout), device_ptr<const int64_t>(sorted.keys),
            device_ptr<const int64_t>(sorted.positions));
        CUDA_CHECK(cudaGetLastError());
    });
}

AMPGRAD_REGISTER_KERNEL(kernels::embedding, kCUDA, embedding);
AMPGRAD_REGISTER_KERNEL(kernels::embedding_backward, kCUDA, embedding_backward);

}  // namespace ampgrad::cuda

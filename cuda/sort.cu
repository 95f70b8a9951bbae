// sort.cu: the GPU twin of cpu/sort.cpp: a stable sort of each row of (R,N), and the gather
// (take_along_last) and inverse scatter (put_along_last) along the last dim. The order is
// core/scalar_math.hpp's SortBefore. The sort is a rank sort: one thread per element counts the
// elements of its row that go before it (ties broken by index, so the result is stable) and writes
// itself at that rank. O(N^2) work per row but no synchronisation or scratch memory: simple and
// correct first; a segmented radix sort (cub::DeviceSegmentedSort) is the fast path left for later.
#include "core/kernel_preconditions.hpp"
#include "core/scalar_math.hpp"
#include "cuda/loops.cuh"

namespace ampgrad::cuda {

namespace {

template <typename T> using compare_t = std::conditional_t<std::is_same_v<T, bool>, bool, device_compute_t<T>>;

// The index of row r, column j of an (R,K) or shared (1,K) index, checked against N.
__device__ __forceinline__ int64_t checked_index(const int64_t* index, bool shared, int64_t K, int64_t r, int64_t j,
                                                 int64_t N) {
    int64_t k = index[(shared ? 0 : r * K) + j];
    if (k < 0 || k >= N) {
        printf("ampgrad cuda take/put_along_last: index %lld is out of range for a dim of size %lld\n",
               static_cast<long long>(k), static_cast<long long>(N));
        __trap();
    }
    return k;
}

// ---- kernels ----

// values, indices (R,N) = each row of in (R,N) stably sorted; one thread per element of in
template <typename T>
__global__ void rank_sort_kernel(int64_t R, int64_t N, bool descending, T* values, int64_t* indices, const T* in) {
    using C = compare_t<T>;
    for (int64_t i = first_index(); i < R * N; i += grid_stride()) {
        const int64_t r = i / N, j = i % N;
        const T* row = in + r * N;
        const C mine = static_cast<C>(load_compute(row[j]));
        int64_t rank = 0;
        for (int64_t m = 0; m < N; ++m) {
            const C other = static_cast<C>(load_compute(row[m]));
            const bool before = formulas::SortBefore::value(other, mine, descending);
            const bool tie_before = m < j && !formulas::SortBefore::value(mine, other, descending);
            rank += (before || tie_before) ? 1 : 0;
        }
        values[r * N + rank] = row[j];
        indices[r * N + rank] = j;
    }
}

// out (R,K) = in (R,N) at index
template <typename T>
__global__ void take_kernel(int64_t R, int64_t K, int64_t N, bool shared, T* out, const T* in, const int64_t* index) {
    for (int64_t i = first_index(); i < R * K; i += grid_stride()) {
        const int64_t r = i / K, j = i % K;
        out[i] = in[r * N + checked_index(index, shared, K, r, j, N)];
    }
}

// out (R,N) at index = src (R,K)
template <typename T>
__global__ void put_kernel(int64_t R, int64_t K, int64_t N, bool shared, T* out, const T* src, const int64_t* index) {
    for (int64_t i = first_index(); i < R * K; i += grid_stride()) {
        const int64_t r = i / K, j = i % K;
        out[r * N + checked_index(index, shared, K, r, j, N)] = src[i];
    }
}

}  // namespace

// ---- launchers ----

void sort(const Tensor& values, const Tensor& indices, const Tensor& in, bool descending) {
    const int device = in.device().index;
    require_on_device("sort", device, {&values, &indices, &in});
    check_sort_rows(values, indices, in);
    const int64_t R = in.size(0), N = in.size(1);
    if (R * N == 0) return;
    DeviceGuard guard(device);
    dispatch_all(in.dtype(), "sort", [&](auto tag) {
        using T = decltype(tag);
        rank_sort_kernel<T><<<grid_for(R * N), kBlockSize, 0, current_stream()>>>(
            R, N, descending, device_ptr<T>(values), device_ptr<int64_t>(indices), device_ptr<const T>(in));
        CUDA_CHECK(cudaGetLastError());
    });
}

void take_along_last(const Tensor& out, const Tensor& in, const Tensor& index) {
    const int device = in.device().index;
    require_on_device("take_along_last", device, {&out, &in, &index});
    check_along_last("take_along_last", in, out, index);
    const int64_t R = out.size(0), K = out.size(1), N = in.size(1);
    if (R * K == 0) return;
    const bool shared = index.size(0) == 1 && R != 1;
    DeviceGuard guard(device);
    dispatch_all(in.dtype(), "take_along_last", [&](auto tag) {
        using T = decltype(tag);
        take_kernel<T><<<grid_for(R * K), kBlockSize, 0, current_stream()>>>(
            R, K, N, shared, device_ptr<T>(out), device_ptr<const T>(in), device_ptr<const int64_t>(index));
        CUDA_CHECK(cudaGetLastError());
    });
}

void put_along_last(const Tensor& out, const Tensor& src, const Tensor& index) {
    const int device = out.device().index;
    require_on_device("put_along_last", device, {&out, &src, &index});
    check_along_last("put_along_last", out, src, index);
    const int64_t R = src.size(0), K = src.size(1), N = out.size(1);
    if (R * K == 0) return;
    const bool shared = index.size(0) == 1 && R != 1;
    DeviceGuard guard(device);
    dispatch_all(out.dtype(), "put_along_last", [&](auto tag) {
        using T = decltype(tag);
        put_kernel<T><<<grid_for(R * K), kBlockSize, 0, current_stream()>>>(
            R, K, N, shared, device_ptr<T>(out), device_ptr<const T>(src), device_ptr<const int64_t>(index));
        CUDA_CHECK(cudaGetLastError());
    });
}

AMPGRAD_REGISTER_KERNEL(kernels::sort, kCUDA, sort);
AMPGRAD_REGISTER_KERNEL(kernels::take_along_last, kCUDA, take_along_last);
AMPGRAD_REGISTER_KERNEL(kernels::put_along_last, kCUDA, put_along_last);

}  // namespace ampgrad::cuda

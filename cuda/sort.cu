// sort.cu: the GPU twin of cpu/sort.cpp: a stable sort of each row of (R,N), and the gather
// (take_along_last) and inverse scatter (put_along_last) along the last dim. The order is
// kernels/scalar_math.hpp's SortBefore, on both paths:
//  - rows of up to kRankSortMax elements: a rank sort, one thread per element counting the elements
//    of its row that go before it (ties broken by index, so stable) and writing itself at that rank.
//    O(N^2) per row, but no synchronisation or scratch memory: the right tool for many short rows.
//  - longer rows: CUB's stable merge sort (cub::DeviceMergeSort::StableSortKeys) over the R*N
//    positions, ordered by row and then by SortBefore of their values, so equal values keep their
//    index order; a gather then writes values and indices. O(N log N); the values are first widened
//    to one key type per family (float, double or int64), so CUB's sort is compiled three times.
#include <cub/device/device_merge_sort.cuh>

#include "kernels/kernel_preconditions.hpp"
#include "kernels/scalar_math.hpp"
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

// Rows longer than this take the merge sort.
constexpr int64_t kRankSortMax = 128;

// The merge sort's key: the compare type widened to float, double or int64 (integers and bool).
template <typename T>
using sort_key_t = std::conditional_t<std::is_floating_point_v<compare_t<T>>, compare_t<T>, int64_t>;

// keys (R*N) = in widened to the key type; positions (R*N) = 0, 1, 2, ...
template <typename T>
__global__ void sort_keys_kernel(int64_t n, sort_key_t<T>* keys, int64_t* positions, const T* in) {
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        keys[i] = static_cast<sort_key_t<T>>(static_cast<compare_t<T>>(load_compute(in[i])));
        positions[i] = i;
    }
}

// The merge sort's order of two positions of (R,N): by row, then SortBefore of their values (CUB's
// stable sort keeps equal values in position order, which within a row is index order).
template <typename K>
struct RowThenValueBefore {
    const K* keys;
    int64_t N;
    bool descending;
    __device__ bool operator()(int64_t a, int64_t b) const {
        const int64_t row_a = a / N, row_b = b / N;
        if (row_a != row_b) return row_a < row_b;
        return formulas::SortBefore::value(keys[a], keys[b], descending);
    }
};

// values, indices (R,N) from the sorted positions: element i of the output is in's element positions[i]
template <typename T>
__global__ void gather_sorted_kernel(int64_t R, int64_t N, T* values, int64_t* indices, const T* in,
                                     const int64_t* positions) {
    for (int64_t i = first_index(); i < R * N; i += grid_stride()) {
        const int64_t p = positions[i];
        values[i] = in[p];
        indices[i] = p - (i / N) * N;                              // p is in row i / N
    }
}

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

// The merge-sort path of sort(): keys and positions, CUB's stable sort of the positions, the gather.
// The temporaries are freed on return on the current stream, after the work queued there
// (cuda/allocator.cu is stream-ordered), so the sort still owns them when it runs.
template <typename T>
void merge_sort_rows(const Tensor& values, const Tensor& indices, const Tensor& in, int64_t R, int64_t N,
                     bool descending) {
    using K = sort_key_t<T>;
    const Device device = in.device();
    const int64_t n = R * N;
    Tensor keys = make_empty({n}, dtype_of<K>(), device), positions = make_empty({n}, kInt64, device);   // (R*N)
    sort_keys_kernel<T><<<grid_for(n), kBlockSize, 0, current_stream()>>>(
        n, static_cast<K*>(keys.raw_data()), device_ptr<int64_t>(positions), device_ptr<const T>(in));
    CUDA_CHECK(cudaGetLastError());
    const RowThenValueBefore<K> before{static_cast<const K*>(keys.raw_data()), N, descending};
    size_t temp_bytes = 0;
    CUDA_CHECK(cub::DeviceMergeSort::StableSortKeys(nullptr, temp_bytes, device_ptr<int64_t>(positions), n, before,
                                                    current_stream()));
    // never empty: a null temp pointer would make the second call another size query
    Tensor temp = make_empty({std::max<int64_t>(1, static_cast<int64_t>((temp_bytes + 7) / 8))}, kInt64, device);
    CUDA_CHECK(cub::DeviceMergeSort::StableSortKeys(temp.raw_data(), temp_bytes, device_ptr<int64_t>(positions), n,
                                                    before, current_stream()));
    gather_sorted_kernel<T><<<grid_for(n), kBlockSize, 0, current_stream()>>>(
        R, N, device_ptr<T>(values), device_ptr<int64_t>(indices), device_ptr<const T>(in),
        device_ptr<const int64_t>(positions));
    CUDA_CHECK(cudaGetLastError());
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
        if (N <= kRankSortMax) {
            rank_sort_kernel<T><<<grid_for(R * N), kBlockSize, 0, current_stream()>>>(
                R, N, descending, device_ptr<T>(values), device_ptr<int64_t>(indices), device_ptr<const T>(in));
            CUDA_CHECK(cudaGetLastError());
        } else {
            merge_sort_rows<T>(values, indices, in, R, N, descending);
        }
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

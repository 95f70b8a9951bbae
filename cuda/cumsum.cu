// cumsum.cu: the GPU twin of cpu/cumsum.cpp: running sums along the last dim of contiguous rows
// (R,N), accumulated in the compute type (fp32 for f16/bf16) and rounded once per stored element.
// One thread scans one row, in the same order as the CPU, so both round identically. Rows are
// model-sized (positions, a vocabulary); a block-wide parallel scan is the fast path left for later.
#include "cuda/loops.cuh"

namespace ampgrad::cuda {

namespace {

// ---- kernels ----

// out (R,N) = running sums of in (R,N); one thread per row
template <typename T>
__global__ void cumsum_rows_kernel(int64_t R, int64_t N, T* out, const T* in) {
    using Acc = device_compute_t<T>;
    for (int64_t r = first_index(); r < R; r += grid_stride()) {
        Acc running = Acc(0);
        for (int64_t j = 0; j < N; ++j) {
            running += load_compute(in[r * N + j]);
            out[r * N + j] = store_compute<T>(running);
        }
    }
}

}  // namespace

// ---- launchers ----

void cumsum(const Tensor& out, const Tensor& in) {
    const int device = in.device().index;
    require_on_device("cumsum", device, {&out, &in});
    AMPGRAD_CHECK(in.dim() == 2 && in.is_contiguous() && out.is_contiguous() && out.sizes() == in.sizes() &&
                      out.dtype() == in.dtype(),
                  "cumsum: expected contiguous rows (R,N) of one dtype, got out {}, in {}", out.describe(), in.describe());
    const int64_t R = in.size(0), N = in.size(1);
    if (R * N == 0) return;
    if (in.dtype() == kBool) throw DTypeError(fmt::format("cumsum: the kernel does not take bool, got {}", in.describe()));
    DeviceGuard guard(device);
    dispatch_all(in.dtype(), "cumsum", [&](auto tag) {
        using T = decltype(tag);
        if constexpr (!std::is_same_v<T, bool>) {
            cumsum_rows_kernel<T><<<grid_for(R), kBlockSize, 0, current_stream()>>>(R, N, device_ptr<T>(out),
                                                                                     device_ptr<const T>(in));
            CUDA_CHECK(cudaGetLastError());
        }
    });
}

AMPGRAD_REGISTER_KERNEL(kernels::cumsum, kCUDA, cumsum);

}  // namespace ampgrad::cuda

// cumsum.cpp: running sums along the last dim of contiguous rows (R,N), the kernel behind cumsum
// (and, on reversed rows, its backward). Each row is a sequential scan accumulated in the compute
// type (fp32 for f16/bf16, int64 stays int64) and rounded once per stored element, as PyTorch's CPU
// cumsum. The GPU twin is cuda/cumsum.cu.
#include "kernels/kernels.hpp"
#include "cpu/loops.hpp"
#include "cpu/rows.hpp"

namespace ampgrad::cpu {

namespace {

// out (R,N) = running sums of in (R,N)
template <typename T>
void cumsum_rows(T* out, const T* in, int64_t R, int64_t N) {
    using Acc = compute_t<T>;
    parallel_for(R, row_grain(N), [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
            Acc running = Acc(0);
            for (int64_t j = 0; j < N; ++j) {
                running += static_cast<Acc>(in[r * N + j]);
                out[r * N + j] = static_cast<T>(running);
            }
        }
    });
}

}  // namespace

void cumsum(const Tensor& out, const Tensor& in) {
    AMPGRAD_CHECK(in.dim() == 2 && in.is_contiguous() && out.is_contiguous() && out.sizes() == in.sizes() &&
                      out.dtype() == in.dtype(),
                  "cumsum: expected contiguous rows (R,N) of one dtype, got out {}, in {}", out.describe(), in.describe());
    if (in.numel() == 0) return;
    if (in.dtype() == kBool) throw DTypeError(fmt::format("cumsum: the kernel does not take bool, got {}", in.describe()));
    dispatch_all(in.dtype(), "cumsum", [&](auto tag) {
        using T = decltype(tag);
        if constexpr (!std::is_same_v<T, bool>)
            cumsum_rows(static_cast<T*>(out.raw_data()), static_cast<const T*>(in.raw_data()), in.size(0), in.size(1));
    });
}

AMPGRAD_REGISTER_KERNEL(kernels::cumsum, kCPU, cumsum);

}  // namespace ampgrad::cpu

// rotary.cu: the rotary embedding kernel, the GPU twin of cpu/rotary.cpp: out = x cos + R(x) sin (or
// its transpose, the backward's dx), a thread per pair. kernels/rotary_layout.hpp splits the operands
// into pair views; the pair formula is kernels/scalar_math.hpp's Rotary. Loads go to
// device_compute_t<T> (fp32 for f16/bf16) and each output rounds once. Derivation: docs/ops/rotary.md.
#include "kernels/rotary_layout.hpp"
#include "kernels/scalar_math.hpp"
#include "cuda/loops.cuh"

namespace ampgrad::cuda {

namespace {

// partner: elements from each operand's pair start to the pair's second element
struct Partners { int64_t at[4]; };

template <typename T>
__global__ void rotary_kernel(int64_t n, OffsetCalc<4> calc, Partners partner, bool transpose, T* out, const T* x,
                              const T* cos, const T* sin) {
    using C = device_compute_t<T>;
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        Offsets<4> o = calc.get(i);
        const C x1 = load_compute(x[o.at[1]]), x2 = load_compute(x[o.at[1] + partner.at[1]]);
        const C c1 = load_compute(cos[o.at[2]]), c2 = load_compute(cos[o.at[2] + partner.at[2]]);
        const C s1 = load_compute(sin[o.at[3]]), s2 = load_compute(sin[o.at[3] + partner.at[3]]);
        C o1, o2;
        if (transpose) formulas::Rotary::transpose(x1, x2, c1, c2, s1, s2, o1, o2);
        else formulas::Rotary::forward(x1, x2, c1, c2, s1, s2, o1, o2);
        out[o.at[0]] = store_compute<T>(o1);
        out[o.at[0] + partner.at[0]] = store_compute<T>(o2);
    }
}

}  // namespace

void rotary_embedding(const Tensor& out, const Tensor& x, const Tensor& cos, const Tensor& sin, bool interleaved,
                      bool transpose) {
    const int index = out.device().index;
    require_on_device("rotary_embedding", index, {&out, &x, &cos, &sin});
    RotaryPairs pairs = rotary_pairs("rotary_embedding", out, x, cos, sin, interleaved);
    const int64_t n = pairs.first[0].numel();
    if (n == 0) return;
    Partners partner;
    for (int k = 0; k < 4; ++k) partner.at[k] = pairs.partner[k];
    OffsetCalc<4> calc = make_offset_calc<4>({&pairs.first[0], &pairs.first[1], &pairs.first[2], &pairs.first[3]});
    DeviceGuard guard(index);
    dispatch_float(out.dtype(), "rotary_embedding", [&](auto tag) {
        using T = decltype(tag);
        rotary_kernel<T><<<grid_for(n), kBlockSize, 0, current_stream()>>>(
            n, calc, partner, transpose, device_ptr<T>(pairs.first[0]), device_ptr<const T>(pairs.first[1]),
            device_ptr<const T>(pairs.first[2]), device_ptr<const T>(pairs.first[3]));
        CUDA_CHECK(cudaGetLastError());
    });
}

AMPGRAD_REGISTER_KERNEL(kernels::rotary_embedding, kCUDA, rotary_embedding);

}  // namespace ampgrad::cuda

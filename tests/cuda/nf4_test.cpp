// nf4_test.cpp: the NF4 kernels on the GPU (cuda/nf4.cu) against the CPU's (cpu/nf4.cpp, which the
// fixtures tie to bitsandbytes: tests/autograd/ops/nf4_test.cpp): codes, absmax and the double
// quantisation's bytes equal, dequantised weights equal bit for bit in every float dtype, and
// F::nf4_linear's forward and backward within the GEMM's rounding.
#include <cstring>

#include "tests/cuda/cuda_test_util.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

bool same_bytes(const Tensor& a, const Tensor& b) {
    Tensor ha = to_host(a).contiguous(), hb = to_host(b).contiguous();
    return ha.dtype() == hb.dtype() && ha.numel() == hb.numel() &&
           std::memcmp(ha.raw_data(), hb.raw_data(), static_cast<size_t>(ha.numel()) * ha.element_size()) == 0;
}

// w (R,C) with a zero block, a tie-rich block and extremes, besides normal values, in `dtype`. The
// large extreme stays finite in that dtype (3e38 would be inf in f16: an inf absmax makes 0 * inf NaNs,
// whose bit patterns differ by device, x86's 0xFFC00000 against CUDA's 0x7FFFFFFF).
Tensor awkward_weight(int64_t rows, int64_t cols, DType dtype = kFloat32) {
    manual_seed(37);
    Tensor w = randn({rows, cols}) * 0.05;
    std::vector<float> v = w.to_vector<float>();
    for (int64_t i = 0; i < 64 && i < static_cast<int64_t>(v.size()); ++i) v[static_cast<size_t>(i)] = 0.0f;
    for (int64_t i = 64; i < 128 && i < static_cast<int64_t>(v.size()); ++i)
        v[static_cast<size_t>(i)] = static_cast<float>((i % 16) - 8) / 8.0f;
    if (v.size() > 200) v[200] = dtype == kFloat16 ? 6e4f : 3e38f, v[201] = -1e-40f;
    return tensor(v, {rows, cols}).to(dtype);
}

}  // namespace

TEST_CASE("cuda nf4: quantisation on the GPU gives the CPU's bytes" * skip_without_gpu()) {
    for (DType dtype : kFloatDTypes) {
        for (bool double_quant : {false, true}) {
            CAPTURE(dtype_name(dtype));
            CAPTURE(double_quant);
            Tensor w = awkward_weight(37, 96, dtype);                       // 3552: 55 blocks and a tail of 32
            const NF4Options options{.block_size = 64, .double_quant = double_quant};
            const NF4Tensor cpu = quantize_nf4(w, options);
            const NF4Tensor gpu = quantize_nf4(to_gpu(w), options);
            CHECK(gpu.device().is_cuda());
            CHECK(same_bytes(gpu.codes, cpu.codes));
            if (double_quant) {
                CHECK(same_bytes(gpu.absmax_codes, cpu.absmax_codes));
                CHECK(same_bytes(gpu.absmax2, cpu.absmax2));
            } else {
                CHECK(same_bytes(gpu.absmax, cpu.absmax));
            }
            for (DType out : kFloatDTypes) {
                CAPTURE(dtype_name(out));
                CHECK(same_bytes(dequantize_nf4(gpu, out), dequantize_nf4(cpu, out)));
            }
        }
    }
}

TEST_CASE("cuda nf4: nf4_linear forward and backward agree with the CPU" * skip_without_gpu()) {
    const NF4Tensor w_cpu = quantize_nf4(awkward_weight(48, 128));
    const NF4Tensor w_gpu = quantize_nf4(to_gpu(awkward_weight(48, 128)));
    for (DType dtype : {kFloat32, kBFloat16}) {
        CAPTURE(dtype_name(dtype));
        Tensor x = (randn({6, 128}) * 0.5).to(dtype);
        Tensor b = randn({48}).to(dtype);
        Tensor dy = randn({6, 48}).to(dtype);
        Tensor xc = x.detach().requires_grad_(true), bc = b.detach().requires_grad_(true);
        Tensor xg = to_gpu(x).requires_grad_(true), bg = to_gpu(b).requires_grad_(true);
        Tensor yc = F::nf4_linear(xc, w_cpu, bc), yg = F::nf4_linear(xg, w_gpu, bg);
        CHECK_CLOSE(to_host(yg).to(kFloat32), yc.to(kFloat32), tol_for(dtype, 64));
        yc.backward(dy);
        yg.backward(to_gpu(dy));
        CHECK_CLOSE(to_host(xg.grad()).to(kFloat32), xc.grad().to(kFloat32), tol_for(dtype, 64));
        CHECK_CLOSE(to_host(bg.grad()).to(kFloat32), bc.grad().to(kFloat32), tol_for(dtype, 16));
    }
}

// float8_test.cpp: the fp8 dtypes and F::scaled_mm on the GPU against the CPU (which the fixtures tie
// to PyTorch bit for bit: tests/core/float8_test.cpp). Casts must agree exactly, byte for byte;
// scaled_mm (cuBLASLt) exactly where the f32 sums are exact, else within the accumulation bound.
#include <cstring>

#include "amp/float8_scaling.hpp"
#include "tests/cuda/cuda_test_util.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// 2^20 f32 bit patterns: half near fp8's range (exponents 2^-26 .. 2^18, ties included by chance of
// the low bits), half any pattern at all (NaNs, infs, f32 subnormals, huge values).
Tensor f32_patterns() {
    const int64_t n = int64_t(1) << 20;
    std::vector<uint32_t> bits(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
        const uint64_t u = mix64(static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull + 38);
        const uint32_t low = static_cast<uint32_t>(u);
        const uint32_t exp = 127 - 26 + (low >> 23) % 45;
        bits[static_cast<size_t>(i)] = (u >> 63) ? low : ((low & 0x807FFFFFu) | (exp << 23));
    }
    Tensor t = make_empty({n}, kFloat32, kHost);
    std::memcpy(t.raw_data(), bits.data(), bits.size() * 4);
    return t;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
    Tensor ha = to_host(a).contiguous(), hb = to_host(b).contiguous();
    return ha.dtype() == hb.dtype() && ha.numel() == hb.numel() &&
           std::memcmp(ha.raw_data(), hb.raw_data(), static_cast<size_t>(ha.numel()) * ha.element_size()) == 0;
}

}  // namespace

TEST_CASE("cuda float8: casts on the GPU match the CPU byte for byte" * skip_without_gpu()) {
    Tensor x = f32_patterns();                                                                      // (2^20) f32
    Tensor xg = to_gpu(x);
    for (DType dtype : {kFloat8_e4m3fn, kFloat8_e5m2}) {
        CAPTURE(dtype_name(dtype));
        CHECK(same_bytes(xg.to(dtype), x.to(dtype)));                                                // PyTorch's .to()
        CHECK(same_bytes(to_float8_saturated(xg, dtype), to_float8_saturated(x, dtype)));           // saturating
        // Through a wider dtype, NaNs compare as values: CUDA's f32 -> f16/bf16 conversions give the
        // canonical NaN 0x7FFF (the sign dropped), the CPU's keep the sign (as c10's do; PyTorch's two
        // devices differ alike), so a negative NaN may land on fp8 0xFF on one side and 0x7F on the other.
        for (DType wide : {kFloat16, kBFloat16, kFloat64}) {
            CAPTURE(dtype_name(wide));
            CHECK_EXACT(xg.to(wide).to(dtype), x.to(wide).to(dtype));
        }
        Tensor codes = make_empty({256}, dtype, kHost);                                             // every code
        for (int i = 0; i < 256; ++i) static_cast<uint8_t*>(codes.raw_data())[i] = static_cast<uint8_t>(i);
        for (DType wide : {kFloat32, kFloat16, kBFloat16, kFloat64}) {              // NaN codes: as above
            CAPTURE(dtype_name(wide));
            CHECK_EXACT(to_gpu(codes).to(wide), codes.to(wide));
            CHECK(std::signbit(host_values(to_gpu(codes).to(wide))[0x80]));               // -0 stays -0
        }
        Tensor filled = full({5}, 0.3, TensorOptions(dtype).device(kGpu));
        CHECK(same_bytes(filled, full({5}, 0.3, TensorOptions(dtype))));
    }
}

TEST_CASE("cuda float8: scaled_mm on cuBLASLt matches the CPU emulation" * skip_without_gpu()) {
    manual_seed(38);
    const int64_t M = 64, K = 128, N = 96;
    // Small integers: every f32 partial sum is exact, so both devices must agree exactly.
    Tensor a = (floor(rand({M, K}) * 9.0) - 4.0).to(kFloat8_e4m3fn);                                 // (M,K)
    Tensor b = (floor(rand({N, K}) * 9.0) - 4.0).to(kFloat8_e5m2).t();                              // (K,N) col-major
    Tensor sa = full({}, 0.5), sb = full({}, 4.0);
    Tensor amax_cpu = zeros({}), amax_gpu = zeros({}, TensorOptions().device(kGpu));
    Tensor ag = to_gpu(a), bg = to_gpu(b.t()).t();                                                   // same layouts
    Tensor out_cpu = F::scaled_mm(a, b, sa, sb, kFloat32, {}, amax_cpu);
    Tensor out_gpu = F::scaled_mm(ag, bg, to_gpu(sa), to_gpu(sb), kFloat32, {}, amax_gpu);
    CHECK_EXACT(to_host(out_gpu), out_cpu);
    CHECK(amax_gpu.item<float>() == amax_cpu.item<float>());

    // bf16 out with amax (of the stored output, no AMAX_D: cuBLAS computes that for fp8 outputs only),
    // and the same product from views 16 bytes past a block's start (the heuristic must be told).
    Tensor bias16 = (floor(rand({N}) * 5.0) - 2.0).to(kBFloat16);
    Tensor half_cpu = F::scaled_mm(a, b, sa, sb, kBFloat16, bias16, amax_cpu);
    Tensor padded = make_empty({16 + M * K}, kFloat8_e4m3fn, kGpu);                               // a at +16 bytes
    padded.narrow(0, 16, M * K).copy_(to_gpu(a).reshape({M * K}));
    Tensor half_gpu = F::scaled_mm(padded.narrow(0, 16, M * K).view({M, K}), bg, to_gpu(sa), to_gpu(sb), kBFloat16,
                                   to_gpu(bias16), amax_gpu);
    CHECK_EXACT(to_host(half_gpu), half_cpu);
    CHECK(amax_gpu.item<float>() == amax_cpu.item<float>());

    // K = 0: the bias in every row, on both devices, without cuBLASLt.
    Tensor a0 = zeros({M, 0}).to(kFloat8_e4m3fn), b0 = zeros({N, 0}).to(kFloat8_e4m3fn).t();
    Tensor empty_cpu = F::scaled_mm(a0, b0, sa, sb, kBFloat16, bias16, amax_cpu);
    Tensor empty_gpu = F::scaled_mm(to_gpu(a0), to_gpu(b0.t()).t(), to_gpu(sa), to_gpu(sb), kBFloat16, to_gpu(bias16), amax_gpu);
    CHECK_EXACT(to_host(empty_gpu), empty_cpu);
    CHECK(amax_gpu.item<float>() == amax_cpu.item<float>());

    // Random values, rowwise scales, a bias, bf16 out: within bf16's rounding of the same f32 result.
    Tensor ar = (randn({M, K}) * 30.0).to(kFloat8_e4m3fn), br = (randn({N, K}) * 0.05).to(kFloat8_e4m3fn).t();
    Tensor ra = rand({M, 1}) + 0.5, rb = rand({1, N}) + 0.5, bias = randn({N}).to(kBFloat16);
    Tensor row_cpu = F::scaled_mm(ar, br, ra, rb, kBFloat16, bias);
    Tensor row_gpu = F::scaled_mm(to_gpu(ar), to_gpu(br.t()).t(), to_gpu(ra), to_gpu(rb), kBFloat16, to_gpu(bias));
    CHECK_CLOSE(to_host(row_gpu).to(kFloat32), row_cpu.to(kFloat32), tol_for(kBFloat16, 2.0));
}

TEST_CASE("cuda float8: current scaling quantizes as on the CPU, and its fp8 linear agrees" * skip_without_gpu()) {
    manual_seed(5);
    Tensor x = randn({32, 64}) * 3.0, w = randn({48, 64}) * 0.1;                                  // (M,K), (N,K)
    for (amp::Float8Scaling scaling : {amp::Float8Scaling::kTensorwise, amp::Float8Scaling::kRowwise}) {
        amp::Float8Tensor cpu = amp::quantize_float8(x, kFloat8_e4m3fn, scaling);
        amp::Float8Tensor gpu = amp::quantize_float8(to_gpu(x), kFloat8_e4m3fn, scaling);
        CHECK(same_bytes(gpu.data, cpu.data));
        CHECK(same_bytes(gpu.scale, cpu.scale));
        const DType out_dtype = scaling == amp::Float8Scaling::kRowwise ? kBFloat16 : kFloat32;
        Tensor y_cpu = amp::linear_float8(x, w, scaling, out_dtype);
        Tensor y_gpu = amp::linear_float8(to_gpu(x), to_gpu(w), scaling, out_dtype);
        // bf16's tolerance for the f32 output too: Hopper's fp8 tensor cores keep fewer bits than f32 in
        // their running sums (DeepSeek-V3's report, section 3.3.2: about 14), the CPU emulation all of them.
        CHECK_CLOSE(to_host(y_gpu).to(kFloat32), y_cpu.to(kFloat32), tol_for(kBFloat16, 2.0));
    }
}

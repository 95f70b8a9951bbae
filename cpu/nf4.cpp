// nf4.cpp: the NF4 kernels on the CPU (the GPU twin: cuda/nf4.cu): blockwise absmax and 4-bit
// codes, their dequantisation, and the 8-bit dynamic map of the double quantisation. Every value
// goes through kernels/nf4.hpp's formulas; this file only loops over blocks. The op checks shapes and
// dtypes (autograd/ops/nf4.cpp).
#include <algorithm>
#include <cmath>

#include "kernels/kernels.hpp"
#include "kernels/nf4.hpp"
#include "cpu/loops.hpp"

namespace ampgrad::cpu {

namespace {

// One block [begin, end) of w: its absmax, then the codes of its elements into `codes`. Blocks are
// even-sized except the last, so a byte never straddles two blocks written by two threads.
template <typename T>
void quantize_block(uint8_t* codes, float* absmax, const T* w, int64_t begin, int64_t end, int64_t n,
                    int64_t block_size) {
    float amax = 0.0f;
    for (int64_t i = begin; i < end; ++i) amax = std::max(amax, std::fabs(static_cast<float>(w[i])));
    absmax[begin / block_size] = amax;
    const bool tail = end - begin < block_size;
    for (int64_t i = begin; i < end; i += 2) {
        const uint8_t first = nf4::encode(nf4::scale_into_unit(static_cast<float>(w[i]), amax, tail));
        // an odd count pads the last byte with the code of 0 (scaled 0), as bitsandbytes pads
        const float second_value = i + 1 < n ? static_cast<float>(w[i + 1]) : 0.0f;
        const uint8_t second = nf4::encode(nf4::scale_into_unit(second_value, amax, tail));
        codes[i / 2] = nf4::pack(first, second);
    }
}

}  // namespace

void nf4_quantize(const Tensor& codes, const Tensor& absmax, const Tensor& w, int64_t block_size) {
    const int64_t n = w.numel();
    const int64_t blocks = (n + block_size - 1) / block_size;
    auto* code_ptr = static_cast<uint8_t*>(codes.raw_data());
    auto* absmax_ptr = static_cast<float*>(absmax.raw_data());
    dispatch_float(w.dtype(), "nf4_quantize", [&](auto tag) {
        using T = decltype(tag);
        const auto* w_ptr = static_cast<const T*>(w.raw_data());
        parallel_for(blocks, 16, [&](int64_t b0, int64_t b1) {
            for (int64_t b = b0; b < b1; ++b)
                quantize_block(code_ptr, absmax_ptr, w_ptr, b * block_size, std::min(n, (b + 1) * block_size), n,
                               block_size);
        });
    });
}

void nf4_dequantize(const Tensor& out, const Tensor& codes, const Tensor& absmax, int64_t block_size) {
    const int64_t n = out.numel();
    const auto* code_ptr = static_cast<const uint8_t*>(codes.raw_data());
    const auto* absmax_ptr = static_cast<const float*>(absmax.raw_data());
    dispatch_float(out.dtype(), "nf4_dequantize", [&](auto tag) {
        using T = decltype(tag);
        auto* out_ptr = static_cast<T*>(out.raw_data());
        parallel_for(n, 4096, [&](int64_t i0, int64_t i1) {
            for (int64_t i = i0; i < i1; ++i) {
                const uint8_t code = nf4::unpack(code_ptr[i / 2], i);
                out_ptr[i] = static_cast<T>(nf4::decode(code, absmax_ptr[i / block_size]));   // f32, rounded once
            }
        });
    });
}

void dynamic_quantize(const Tensor& codes, const Tensor& absmax, const Tensor& x, int64_t block_size) {
    const int64_t m = x.numel();
    const int64_t blocks = (m + block_size - 1) / block_size;
    auto* code_ptr = static_cast<uint8_t*>(codes.raw_data());
    auto* absmax_ptr = static_cast<float*>(absmax.raw_data());
    const auto* x_ptr = static_cast<const float*>(x.raw_data());
    for (int64_t b = 0; b < blocks; ++b) {
        const int64_t begin = b * block_size, end = std::min(m, begin + block_size);
        float amax = 0.0f;
        for (int64_t i = begin; i < end; ++i) amax = std::max(amax, std::fabs(x_ptr[i]));
        absmax_ptr[b] = amax;
        const bool tail = end - begin < block_size;
        for (int64_t i = begin; i < end; ++i)
            code_ptr[i] = nf4::dynamic_encode(nf4::scale_into_unit(x_ptr[i], amax, tail));
    }
}

void dynamic_dequantize(const Tensor& out, const Tensor& codes, const Tensor& absmax, const Tensor& offset,
                        int64_t block_size) {
    const int64_t m = out.numel();
    auto* out_ptr = static_cast<float*>(out.raw_data());
    const auto* code_ptr = static_cast<const uint8_t*>(codes.raw_data());
    const auto* absmax_ptr = static_cast<const float*>(absmax.raw_data());
    const float shift = *static_cast<const float*>(offset.raw_data());
    for (int64_t i = 0; i < m; ++i) out_ptr[i] = nf4::dynamic_decode(code_ptr[i], absmax_ptr[i / block_size], shift);
}

AMPGRAD_REGISTER_KERNEL(kernels::nf4_quantize, kCPU, nf4_quantize);
AMPGRAD_REGISTER_KERNEL(kernels::nf4_dequantize, kCPU, nf4_dequantize);
AMPGRAD_REGISTER_KERNEL(kernels::dynamic_quantize, kCPU, dynamic_quantize);
AMPGRAD_REGISTER_KERNEL(kernels::dynamic_dequantize, kCPU, dynamic_dequantize);

}  // namespace ampgrad::cpu

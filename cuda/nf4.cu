// nf4.cu: the NF4 kernels on the GPU, the twin of cpu/nf4.cpp: blockwise absmax and 4-bit codes,
// their dequantisation, and the 8-bit dynamic map of the double quantisation. Every value goes
// through kernels/nf4.hpp's formulas, so the codes are those of the CPU bit for bit
// (tests/cuda/nf4_test.cpp). One thread per block in the quantisers (blocks are small: 64, 256),
// one thread per element in the dequantisers.
#include "kernels/nf4.hpp"
#include "cuda/loops.cuh"

namespace ampgrad::cuda {

namespace {

// ---- kernels ----

// Thread b: block b's absmax, then its codes, two a byte (blocks are even-sized but the last).
template <typename T>
__global__ void nf4_quantize_kernel(int64_t n, int64_t blocks, int64_t block_size, uint8_t* codes, float* absmax,
                                    const T* w) {
    for (int64_t b = first_index(); b < blocks; b += grid_stride()) {
        const int64_t begin = b * block_size;
        const int64_t end = begin + block_size < n ? begin + block_size : n;
        float amax = 0.0f;
        for (int64_t i = begin; i < end; ++i) amax = fmaxf(amax, fabsf(static_cast<float>(load_compute(w[i]))));
        absmax[b] = amax;
        const bool tail = end - begin < block_size;
        for (int64_t i = begin; i < end; i += 2) {
            const float first = static_cast<float>(load_compute(w[i]));
            const float second = i + 1 < n ? static_cast<float>(load_compute(w[i + 1])) : 0.0f;   // pad: code of 0
            codes[i / 2] = nf4::pack(nf4::encode(nf4::scale_into_unit(first, amax, tail)),
                                     nf4::encode(nf4::scale_into_unit(second, amax, tail)));
        }
    }
}

template <typename T>
__global__ void nf4_dequantize_kernel(int64_t n, int64_t block_size, T* out, const uint8_t* codes, const float* absmax) {
    for (int64_t i = first_index(); i < n; i += grid_stride())
        out[i] = store_compute<T>(nf4::decode(nf4::unpack(codes[i / 2], i), absmax[i / block_size]));
}

__global__ void dynamic_quantize_kernel(int64_t m, int64_t blocks, int64_t block_size, uint8_t* codes, float* absmax,
                                        const float* x) {
    for (int64_t b = first_index(); b < blocks; b += grid_stride()) {
        const int64_t begin = b * block_size;
        const int64_t end = begin + block_size < m ? begin + block_size : m;
        float amax = 0.0f;
        for (int64_t i = begin; i < end; ++i) amax = fmaxf(amax, fabsf(x[i]));
        absmax[b] = amax;
        const bool tail = end - begin < block_size;
        for (int64_t i = begin; i < end; ++i) codes[i] = nf4::dynamic_encode(nf4::scale_into_unit(x[i], amax, tail));
    }
}

__global__ void dynamic_dequantize_kernel(int64_t m, int64_t block_size, float* out, const uint8_t* codes,
                                          const float* absmax, const float* offset) {
    for (int64_t i = first_index(); i < m; i += grid_stride())
        out[i] = nf4::dynamic_decode(codes[i], absmax[i / block_size], offset[0]);
}

}  // namespace

// ---- launchers ----

void nf4_quantize(const Tensor& codes, const Tensor& absmax, const Tensor& w, int64_t block_size) {
    const int index = w.device().index;
    require_on_device("nf4_quantize", index, {&codes, &absmax, &w});
    const int64_t n = w.numel();
    if (n == 0) return;
    const int64_t blocks = (n + block_size - 1) / block_size;
    DeviceGuard guard(index);
    dispatch_float(w.dtype(), "nf4_quantize", [&](auto tag) {
        using T = decltype(tag);
        nf4_quantize_kernel<T><<<grid_for(blocks), kBlockSize, 0, current_stream()>>>(
            n, blocks, block_size, device_ptr<uint8_t>(codes), device_ptr<float>(absmax), device_ptr<const T>(w));
        CUDA_CHECK(cudaGetLastError());
    });
}

void nf4_dequantize(const Tensor& out, const Tensor& codes, const Tensor& absmax, int64_t block_size) {
    const int index = out.device().index;
    require_on_device("nf4_dequantize", index, {&out, &codes, &absmax});
    const int64_t n = out.numel();
    if (n == 0) return;
    DeviceGuard guard(index);
    dispatch_float(out.dtype(), "nf4_dequantize", [&](auto tag) {
        using T = decltype(tag);
        nf4_dequantize_kernel<T><<<grid_for(n), kBlockSize, 0, current_stream()>>>(
            n, block_size, device_ptr<T>(out), device_ptr<const uint8_t>(codes), device_ptr<const float>(absmax));
        CUDA_CHECK(cudaGetLastError());
    });
}

void dynamic_quantize(const Tensor& codes, const Tensor& absmax, const Tensor& x, int64_t block_size) {
    const int index = x.device().index;
    require_on_device("dynamic_quantize", index, {&codes, &absmax, &x});
    const int64_t m = x.numel();
    if (m == 0) return;
    const int64_t blocks = (m + block_size - 1) / block_size;
    DeviceGuard guard(index);
    dynamic_quantize_kernel<<<grid_for(blocks), kBlockSize, 0, current_stream()>>>(
        m, blocks, block_size, device_ptr<uint8_t>(codes), device_ptr<float>(absmax), device_ptr<const float>(x));
    CUDA_CHECK(cudaGetLastError());
}

void dynamic_dequantize(const Tensor& out, const Tensor& codes, const Tensor& absmax, const Tensor& offset,
                        int64_t block_size) {
    const int index = out.device().index;
    require_on_device("dynamic_dequantize", index, {&out, &codes, &absmax, &offset});
    const int64_t m = out.numel();
    if (m == 0) return;
    DeviceGuard guard(index);
    dynamic_dequantize_kernel<<<grid_for(m), kBlockSize, 0, current_stream()>>>(
        m, block_size, device_ptr<float>(out), device_ptr<const uint8_t>(codes), device_ptr<const float>(absmax),
        device_ptr<const float>(offset));
    CUDA_CHECK(cudaGetLastError());
}

AMPGRAD_REGISTER_KERNEL(kernels::nf4_quantize, kCUDA, nf4_quantize);
AMPGRAD_REGISTER_KERNEL(kernels::nf4_dequantize, kCUDA, nf4_dequantize);
AMPGRAD_REGISTER_KERNEL(kernels::dynamic_quantize, kCUDA, dynamic_quantize);
AMPGRAD_REGISTER_KERNEL(kernels::dynamic_dequantize, kCUDA, dynamic_dequantize);

}  // namespace ampgrad::cuda

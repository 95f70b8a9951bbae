// copy.cu: copies between host and GPU and within a GPU (strided gather with dtype conversion),
// and fill. Conversions follow cpu/copy.cpp exactly: to f16/bf16 via fp32 with round to nearest
// even; to and from the fp8 dtypes through fp32 with the one formula of core/float8.hpp (saturating
// in copy_saturating); to bool tests != 0; float to int truncates toward zero.
// Host transfers are staged through contiguous buffers: the host side converts and gathers with
// the CPU backend, the device side with copy_kernel, and cudaMemcpyAsync moves dense bytes only.
// Every transfer is ordered on the current stream. Host memory is pageable (no pinned staging yet),
// so a host-to-device copy returns once CUDA has taken the bytes (the host buffer may then be freed),
// and a device-to-host copy synchronizes its stream before the host reads the result: that is the
// one place item(), to_vector() and .to(kCPU) wait for the device.
#include <cstring>

#include "core/host_sync.hpp"
#include "cuda/loops.cuh"

namespace ampgrad::cuda {

namespace {

// ---- kernels ----

template <typename T>
constexpr bool is_float8_v = std::is_same_v<T, Float8_e4m3fn> || std::is_same_v<T, Float8_e5m2>;

template <typename To, typename From>
__device__ __forceinline__ To convert_value(From v) {
    if constexpr (std::is_same_v<To, From>) {
        return v;
    } else if constexpr (is_float8_v<From>) {
        return convert_value<To>(static_cast<float>(v));                        // fp8 -> f32 is exact
    } else if constexpr (is_float8_v<To>) {
        return To(static_cast<float>(load_compute(v)));                        // f64 rounds to f32 first, as torch
    } else if constexpr (std::is_same_v<To, bool>) {
        return load_compute(v) != device_compute_t<From>(0);
    } else if constexpr (std::is_same_v<To, __half> || std::is_same_v<To, __nv_bfloat16>) {
        return store_compute<To>(static_cast<float>(load_compute(v)));
    } else {
        return static_cast<To>(load_compute(v));
    }
}

// Saturating: finite values past fp8's range, and ±inf, become ±max (NaN stays NaN).
template <typename To, typename From>
__device__ __forceinline__ To convert_saturating(From v) {
    if constexpr (is_float8_v<To> && !is_float8_v<From>) {
        return To::saturated(static_cast<float>(load_compute(v)));
    } else {
        return convert_value<To>(v);
    }
}

// dst[i] = convert(src[i]) over any strides (stride 0 in src broadcasts)
template <typename To, typename From, bool Saturate>
__global__ void copy_kernel(int64_t n, OffsetCalc<2> calc, To* dst, const From* src) {
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        Offsets<2> o = calc.get(i);
        dst[o.at[0]] = Saturate ? convert_saturating<To>(src[o.at[1]]) : convert_value<To>(src[o.at[1]]);
    }
}

// Every dtype, the fp8 ones included (core/dispatch.hpp).
template <typename Fn>
decltype(auto) dispatch_with_float8(DType dtype, const char* kernel, Fn&& fn) {
    return dispatch_all_with_float8_as<DeviceStorage>(dtype, "cuda ", kernel, std::forward<Fn>(fn));
}

// Bits is an unsigned integer as wide as the element: fill only moves bytes.
template <typename Bits>
__global__ void fill_kernel(int64_t n, OffsetCalc<1> calc, Bits* dst, Bits value) {
    for (int64_t i = first_index(); i < n; i += grid_stride()) dst[calc.get(i).at[0]] = value;
}

// ---- launchers ----

bool is_dense_copy(const Tensor& dst, const Tensor& src) {
    return dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous();
}

// dst = src with both on the same GPU (the current device); Saturate: copy_saturating's casts to fp8.
template <bool Saturate = false>
void copy_on_device(const Tensor& dst, const Tensor& src) {
    int64_t n = dst.numel();
    if (is_dense_copy(dst, src)) {
        CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), static_cast<size_t>(n) * dst.element_size(),
                                   cudaMemcpyDeviceToDevice, current_stream()));
        return;
    }
    OffsetCalc<2> calc = make_offset_calc<2>({&dst, &src});
    dispatch_with_float8(dst.dtype(), "copy", [&](auto to) {
        dispatch_with_float8(src.dtype(), "copy", [&](auto from) {
            using To = decltype(to);
            using From = decltype(from);
            copy_kernel<To, From, Saturate><<<grid_for(n), kBlockSize, 0, current_stream()>>>(
                n, calc, device_ptr<To>(dst), device_ptr<const From>(src));
            CUDA_CHECK(cudaGetLastError());
        });
    });
}

// Host -> GPU: convert and gather on the host into dst's dtype, move the dense bytes, scatter on the GPU.
// A contiguous pinned source in another dtype goes up as it is and is converted on the GPU instead:
// a conversion on the host would stage through pageable memory, and the copy would sync.
void copy_host_to_device(const Tensor& dst, const Tensor& src) {
    if (!is_dense_copy(dst, src) && src.is_pinned() && src.is_contiguous()) {
        Tensor uploaded = make_empty(src.sizes(), src.dtype(), dst.device());   // freed in stream order
        copy_host_to_device(uploaded, src);
        copy_on_device(dst, uploaded);
        return;
    }
    Tensor host = src;                                                        // dense, in dst's dtype
    if (!is_dense_copy(dst, src)) {
        host = make_empty(dst.sizes(), dst.dtype(), Device(kCPU));
        kernels::copy(host, src);
    }
    Tensor staging = dst.is_contiguous() ? dst : make_empty(dst.sizes(), dst.dtype(), dst.device());
    // From pageable memory the driver first waits for the stream, and the call returns once the
    // bytes are staged, so `host` may die after it. That wait is a host sync: counted as one.
    // From pinned memory the copy is only queued: the block is recorded on the stream, so the pinned
    // allocator does not hand it out again before the copy has read it (to_device waits unless
    // non_blocking, so the caller may also overwrite it).
    if (!host.is_pinned()) note_host_sync(HostSync::kPageableCopyToDevice, dst.device());
    CUDA_CHECK(cudaMemcpyAsync(staging.raw_data(), host.raw_data(),
                               static_cast<size_t>(dst.numel()) * dst.element_size(), cudaMemcpyHostToDevice,
                               current_stream()));
    if (host.is_pinned()) host.record_stream(::ampgrad::current_stream(dst.device()));
    if (!staging.is_same(dst)) copy_on_device(dst, staging);
}

// GPU -> host: convert and gather on the GPU into dst's dtype, move the dense bytes, scatter on the host.
// The copy runs after the work already on the current stream; the explicit synchronize makes the
// host wait for it before anything reads `host` (async copies into pageable memory may return early).
void copy_device_to_host(const Tensor& dst, const Tensor& src) {
    Tensor dense = src;                                                       // on src's GPU, dst's dtype
    if (!is_dense_copy(dst, src)) {
        dense = make_empty(dst.sizes(), dst.dtype(), src.device());
        copy_on_device(dense, src);
    }
    Tensor host = dst.is_contiguous() ? dst : make_empty(dst.sizes(), dst.dtype(), Device(kCPU));
    cudaStream_t stream = current_stream();
    CUDA_CHECK(cudaMemcpyAsync(host.raw_data(), dense.raw_data(),
                               static_cast<size_t>(dst.numel()) * dst.element_size(), cudaMemcpyDeviceToHost, stream));
    note_host_sync(HostSync::kCopyToHost, src.device());
    CUDA_CHECK(cudaStreamSynchronize(stream));                                // HOST SYNC: the host reads next
    if (!host.is_same(dst)) kernels::copy(dst, host);
}

// GPU a -> GPU b: make src dense in dst's dtype on its own GPU, then a peer copy, then scatter on b.
// The peer copy runs on b's current stream after a's current stream has produced `dense`, and a's
// stream then waits for the copy, so neither side's later work (or frees) can overtake it.
void copy_between_devices(const Tensor& dst, const Tensor& src) {
    Stream src_stream = ::ampgrad::current_stream(src.device()), dst_stream = ::ampgrad::current_stream(dst.device());
    Tensor dense = src;
    if (!is_dense_copy(dst, src)) {
        DeviceGuard guard(src.device().index);
        dense = make_empty(dst.sizes(), dst.dtype(), src.device());
        copy_on_device(dense, src);
    }
    Event src_ready;
    src_ready.record(src_stream);
    src_ready.wait(dst_stream);
    {
        DeviceGuard guard(dst.device().index);
        Tensor staging = dst.is_contiguous() ? dst : make_empty(dst.sizes(), dst.dtype(), dst.device());
        CUDA_CHECK(cudaMemcpyPeerAsync(staging.raw_data(), dst.device().index, dense.raw_data(), src.device().index,
                                       static_cast<size_t>(dst.numel()) * dst.element_size(), current_stream()));
        if (!staging.is_same(dst)) copy_on_device(dst, staging);
    }
    Event copied;
    copied.record(dst_stream);
    copied.wait(src_stream);
}

// The bytes of `value` stored as `dtype` (in the low bytes; x86 and GPUs are little-endian),
// converted exactly as cpu/copy.cpp's convert<T>(double).
uint64_t fill_bits(DType dtype, double value) {
    uint64_t bits = 0;
    auto put = [&bits](auto v) { std::memcpy(&bits, &v, sizeof(v)); };
    switch (dtype) {
        case kFloat32: put(static_cast<float>(value)); break;
        case kFloat64: put(value); break;
        case kFloat16: put(Half(static_cast<float>(value)).bits); break;
        case kBFloat16: put(BFloat16(static_cast<float>(value)).bits); break;
        case kInt64: put(static_cast<int64_t>(value)); break;
        case kInt32: put(static_cast<int32_t>(value)); break;
        case kBool: put(static_cast<uint8_t>(value != 0.0)); break;
        case kFloat8_e4m3fn: put(Float8_e4m3fn(static_cast<float>(value)).bits); break;
        case kFloat8_e5m2: put(Float8_e5m2(static_cast<float>(value)).bits); break;
        case kUInt8: put(static_cast<uint8_t>(value)); break;
    }
    return bits;
}

template <typename Bits>
void fill_typed(const Tensor& dst, double value) {
    int64_t n = dst.numel();
    Bits bits = static_cast<Bits>(fill_bits(dst.dtype(), value));
    if (bits == 0 && dst.is_contiguous()) {                         // zeros: a memset
        CUDA_CHECK(cudaMemsetAsync(dst.raw_data(), 0, static_cast<size_t>(n) * sizeof(Bits), current_stream()));
        return;
    }
    OffsetCalc<1> calc = make_offset_calc<1>({&dst});
    fill_kernel<Bits><<<grid_for(n), kBlockSize, 0, current_stream()>>>(n, calc, device_ptr<Bits>(dst), bits);
    CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void copy(const Tensor& dst, const Tensor& src) {
    AMPGRAD_CHECK(dst.sizes() == src.sizes(), "copy of {} into {}", src.describe(), dst.describe());
    AMPGRAD_CHECK(dst.device().is_cuda() || src.device().is_cuda(), "cuda copy got {} <- {}", dst.describe(),
                  src.describe());
    if (dst.numel() == 0) return;
    if (src.device().is_cpu()) {
        DeviceGuard guard(dst.device().index);
        copy_host_to_device(dst, src);
    } else if (dst.device().is_cpu()) {
        DeviceGuard guard(src.device().index);
        copy_device_to_host(dst, src);
    } else if (dst.device() == src.device()) {
        DeviceGuard guard(dst.device().index);
        copy_on_device(dst, src);
    } else {
        copy_between_devices(dst, src);
    }
}

void fill(const Tensor& dst, double value) {
    const int index = dst.device().index;
    require_on_device("fill", index, {&dst});
    if (dst.numel() == 0) return;
    DeviceGuard guard(index);
    switch (dst.element_size()) {
        case 1: return fill_typed<uint8_t>(dst, value);
        case 2: return fill_typed<uint16_t>(dst, value);
        case 4: return fill_typed<uint32_t>(dst, value);
        case 8: return fill_typed<uint64_t>(dst, value);
    }
    throw_bad_dtype("fill", dst.dtype(), "a known dtype");
}

// Same device only (the op layer casts on the tensor's own device).
void copy_saturating(const Tensor& dst, const Tensor& src) {
    AMPGRAD_CHECK(dst.sizes() == src.sizes(), "copy_saturating of {} into {}", src.describe(), dst.describe());
    const int index = dst.device().index;
    require_on_device("copy_saturating", index, {&dst, &src});
    if (dst.numel() == 0) return;
    DeviceGuard guard(index);
    copy_on_device<true>(dst, src);
}

AMPGRAD_REGISTER_KERNEL(kernels::copy, kCUDA, copy);
AMPGRAD_REGISTER_KERNEL(kernels::fill, kCUDA, fill);
AMPGRAD_REGISTER_KERNEL(kernels::copy_saturating, kCUDA, copy_saturating);

}  // namespace ampgrad::cuda

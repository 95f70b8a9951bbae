// tensor_copy.cpp: the Tensor methods that move data through a kernel (kernels::copy), so they live
// one layer above core/: pin_memory, to_vector, item. core/tensor.hpp declares them; the kernel
// table (kernels/kernels.hpp) is what makes them work on any device.
#include <fmt/format.h>

#include "core/device_registry.hpp"
#include "core/error.hpp"
#include "core/host_sync.hpp"
#include "core/tensor.hpp"
#include "kernels/kernels.hpp"

namespace ampgrad {

bool Tensor::is_pinned() const { return impl_->storage->is_pinned(); }

Tensor Tensor::pin_memory(DeviceType accelerator) const {
    if (!device().is_cpu())
        throw DeviceError(fmt::format("pin_memory: only CPU tensors can be pinned, got {}", describe()));
    if (is_pinned()) return *this;
    Allocator& pinned = pinned_host_allocator(accelerator);
    size_t nbytes = static_cast<size_t>(numel()) * ::ampgrad::element_size(dtype());
    auto storage = std::make_shared<StorageImpl>(nbytes, pinned);
    Tensor out(std::make_shared<TensorImpl>(std::move(storage), sizes(), contiguous_strides(sizes()), 0, dtype(),
                                            std::make_shared<VersionCounter>()));
    kernels::copy(out, *this);
    return out;
}

// A copy to the host returns once the data is there: the device-to-host copy synchronizes with
// the stream it runs on (cuda/copy.cu), so item() and to_vector() read finished values.
template <typename T>
std::vector<T> Tensor::to_vector() const {
    note_host_sync(HostSync::kHostRead, device());
    Tensor host = make_empty(sizes(), dtype_of<T>(), Device(kCPU));
    kernels::copy(host, *this);
    const T* p = host.data_ptr<T>();
    return std::vector<T>(p, p + host.numel());
}

double Tensor::item_double() const {
    if (numel() != 1)
        throw ValueError(fmt::format("item: a Tensor with {} elements cannot be converted to Scalar ({})", numel(),
                                     describe()));
    return to_vector<double>()[0];
}

template <typename T>
T Tensor::item() const {
    if (numel() != 1)
        throw ValueError(fmt::format("item: a Tensor with {} elements cannot be converted to Scalar ({})", numel(),
                                     describe()));
    return to_vector<T>()[0];
}

#define AMPGRAD_INSTANTIATE(T)                              \
    template std::vector<T> Tensor::to_vector<T>() const;   \
    template T Tensor::item<T>() const;
AMPGRAD_INSTANTIATE(float)
AMPGRAD_INSTANTIATE(double)
AMPGRAD_INSTANTIATE(Half)
AMPGRAD_INSTANTIATE(BFloat16)
AMPGRAD_INSTANTIATE(int64_t)
AMPGRAD_INSTANTIATE(int32_t)
AMPGRAD_INSTANTIATE(bool)
AMPGRAD_INSTANTIATE(Float8_e4m3fn)
AMPGRAD_INSTANTIATE(Float8_e5m2)
AMPGRAD_INSTANTIATE(uint8_t)
#undef AMPGRAD_INSTANTIATE

// long long is int64_t's twin type on LP64 (int64_t is long): item<long long>() must link too.
static_assert(sizeof(long long) == sizeof(int64_t));
template <>
std::vector<long long> Tensor::to_vector<long long>() const {
    std::vector<int64_t> values = to_vector<int64_t>();
    return std::vector<long long>(values.begin(), values.end());
}
template <>
long long Tensor::item<long long>() const { return item<int64_t>(); }

}  // namespace ampgrad

// tensor.cpp: TensorImpl and the non-autograd parts of Tensor: queries, raw data access, host
// copies. Autograd accessors are in autograd/tensor_autograd.cpp; math methods forward to
// autograd/ops/ (tensor_methods.cpp).
#include "core/tensor.hpp"

#include <numeric>

#include "core/error.hpp"
#include "core/device_registry.hpp"
#include "core/host_sync.hpp"

namespace ampgrad {

TensorImpl::TensorImpl(Storage s, Shape sz, Shape st, int64_t off, DType dt, std::shared_ptr<VersionCounter> v)
    : storage(std::move(s)), sizes(std::move(sz)), strides(std::move(st)), offset(off), dtype(dt),
      version(std::move(v)) {}

// The autograd state's own destructor releases a long grad_fn chain iteratively (autograd_meta.hpp).
TensorImpl::~TensorImpl() = default;

Shape contiguous_strides(const Shape& sizes) {
    Shape strides(sizes.size());
    int64_t s = 1;
    for (size_t i = sizes.size(); i-- > 0;) {
        strides[i] = s;
        s *= std::max<int64_t>(sizes[i], 1);
    }
    return strides;
}

int64_t shape_numel(const Shape& sizes) {
    return std::accumulate(sizes.begin(), sizes.end(), int64_t{1}, std::multiplies<>());
}

std::string shape_str(const Shape& sizes) {
    std::string s = "(";
    for (size_t i = 0; i < sizes.size(); ++i) s += fmt::format("{}{}", i ? "," : "", sizes[i]);
    return s + ")";
}

Tensor make_empty(const Shape& sizes, DType dtype, Device device) {
    // The byte count, checked: a shape whose product wraps (a corrupt file's size, say (2^62, 8))
    // must not become a small allocation under a huge shape. PyTorch: "Storage size calculation overflowed".
    int64_t nbytes = static_cast<int64_t>(element_size(dtype));
    for (int64_t s : sizes) {
        if (s < 0) throw ShapeError(fmt::format("empty: negative dimension in shape {}", shape_str(sizes)));
        if (__builtin_mul_overflow(nbytes, s, &nbytes))
            throw ShapeError(fmt::format("empty: the storage size of shape {} in {} overflows 64 bits", shape_str(sizes),
                                         dtype_name(dtype)));
    }
    auto storage = std::make_shared<StorageImpl>(static_cast<size_t>(nbytes), device);
    return Tensor(std::make_shared<TensorImpl>(std::move(storage), sizes, contiguous_strides(sizes), 0, dtype,
                                               std::make_shared<VersionCounter>()));
}

Tensor make_view(const Tensor& base, Shape sizes, Shape strides, int64_t offset) {
    const TensorImpl* b = base.impl();
    return Tensor(std::make_shared<TensorImpl>(b->storage, std::move(sizes), std::move(strides), offset, b->dtype,
                                               b->version));
}

std::optional<Shape> view_strides(const Tensor& x, const Shape& shape) {
    if (x.is_contiguous()) return contiguous_strides(shape);
    const Shape& old_sizes = x.sizes();
    const Shape& old_strides = x.strides();
    Shape new_strides(shape.size(), 0);
    int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
    int64_t chunk_base_stride = old_strides.empty() ? 1 : old_strides.back();
    int64_t tensor_numel = 1, view_numel = 1;
    for (int64_t d = static_cast<int64_t>(old_sizes.size()) - 1; d >= 0; --d) {
        tensor_numel *= old_sizes[d];
        if (d == 0 || (old_sizes[d - 1] != 1 && old_strides[d - 1] != tensor_numel * chunk_base_stride)) {
            while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
                new_strides[view_d] = view_numel * chunk_base_stride;
                view_numel *= shape[view_d];
                --view_d;
            }
            if (view_numel != tensor_numel) return std::nullopt;
            if (d > 0) {
                chunk_base_stride = old_strides[d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    if (view_d != -1) return std::nullopt;
    return new_strides;
}

// A default-constructed Tensor has no sizes, dtype or data: asking for them is a ValueError naming the
// query (libtorch's c10::Error), never a crash. Its autograd queries answer as libtorch's do
// (requires_grad() false, is_leaf() true, grad() and grad_fn() empty: autograd/tensor_autograd.cpp).
static const TensorImpl& defined_impl(const std::shared_ptr<TensorImpl>& impl, const char* query) {
    if (!impl) [[unlikely]]
        throw ValueError(fmt::format("Tensor::{}: the tensor is undefined (a default-constructed Tensor holds "
                                     "no data)", query));
    return *impl;
}

const Shape& Tensor::sizes() const { return defined_impl(impl_, "sizes()").sizes; }
const Shape& Tensor::strides() const { return defined_impl(impl_, "strides()").strides; }
int64_t Tensor::dim() const { return static_cast<int64_t>(defined_impl(impl_, "dim()").sizes.size()); }
int64_t Tensor::numel() const { return shape_numel(defined_impl(impl_, "numel()").sizes); }
int64_t Tensor::storage_offset() const { return defined_impl(impl_, "storage_offset()").offset; }
DType Tensor::dtype() const { return defined_impl(impl_, "dtype()").dtype; }
Device Tensor::device() const { return defined_impl(impl_, "device()").storage->device(); }
uint32_t Tensor::_version() const {
    return defined_impl(impl_, "_version()").version->version.load(std::memory_order_relaxed);
}
void Tensor::bump_version() const {
    defined_impl(impl_, "bump_version()").version->version.fetch_add(1, std::memory_order_relaxed);
}

static int64_t wrap_dim(int64_t d, int64_t ndim, const char* op) {
    int64_t n = std::max<int64_t>(ndim, 1);
    if (d < -n || d >= n)
        throw IndexError(fmt::format("{}: dimension {} out of range for a tensor of {} dims", op, d, ndim));
    return d < 0 ? d + n : d;
}

int64_t Tensor::size(int64_t d) const {
    if (dim() == 0) throw IndexError("size: a 0-dim tensor has no dimensions");
    return impl_->sizes[wrap_dim(d, dim(), "size")];
}
int64_t Tensor::stride(int64_t d) const {
    if (dim() == 0) throw IndexError("stride: a 0-dim tensor has no dimensions");
    return impl_->strides[wrap_dim(d, dim(), "stride")];
}

bool Tensor::is_contiguous() const {
    if (numel() == 0) return true;                  // as in PyTorch: nothing to lay out
    int64_t expected = 1;
    for (size_t i = impl_->sizes.size(); i-- > 0;) {
        if (impl_->sizes[i] == 1) continue;
        if (impl_->strides[i] != expected) return false;
        expected *= impl_->sizes[i];
    }
    return true;
}

std::string Tensor::shape_str() const { return defined() ? ampgrad::shape_str(sizes()) : "undefined"; }

std::string Tensor::describe() const {
    if (!defined()) return "undefined";
    return fmt::format("{} {} {}", shape_str(), dtype_name(dtype()), device().str());
}

void* Tensor::raw_data() const {
    defined_impl(impl_, "data_ptr()");
    return static_cast<char*>(impl_->storage->data()) + impl_->offset * static_cast<int64_t>(element_size());
}

template <typename T>
T* Tensor::data_ptr() const {
    if (dtype_of<T>() != dtype())
        throw DTypeError(fmt::format("data_ptr: requested {} but the tensor is {}", dtype_name(dtype_of<T>()),
                                     describe()));
    return static_cast<T*>(raw_data());
}

void Tensor::record_stream(const Stream& stream) const {
    defined_impl(impl_, "record_stream()").storage->record_stream(stream);
}

#define AMPGRAD_INSTANTIATE(T) template T* Tensor::data_ptr<T>() const;
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

}  // namespace ampgrad

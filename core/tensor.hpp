// tensor.hpp: ampgrad::Tensor, a cheap reference-counted handle to a TensorImpl
// (storage + sizes/strides/offset + dtype + version counter + autograd metadata).
//
//   Tensor x = ampgrad::randn({4, 3}, TensorOptions().requires_grad(true));   // (4,3)
//   Tensor y = (x * 2.0).relu().sum();                                        // ()
//   y.backward();                                  // x.grad() is now (4,3)
//
// The math methods are thin forwards to the free functions in autograd/ops/ops.hpp, which
// record the graph; the kernels they call are declared in kernels/kernels.hpp and implemented in
// cpu/ and cuda/.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/device.hpp"
#include "core/dtype.hpp"
#include "core/storage.hpp"

namespace ampgrad {

using Shape = std::vector<int64_t>;
class Tensor;
using tensor_list = std::vector<Tensor>;

namespace autograd {
class Node;
class RemovableHandle;
}  // namespace autograd

// The autograd state a tensor may carry; autograd::AutogradMeta (autograd/autograd_meta.hpp)
// derives from it. Core only owns and destroys it, so core never includes autograd/ (the same
// split as PyTorch's c10::AutogradMetaInterface).
struct AutogradMetaInterface {
    virtual ~AutogradMetaInterface() = default;
};

template <typename T> constexpr DType dtype_of();   // C++ type -> DType (specialised below)

// What a factory makes: dtype, device, requires_grad. Each is either set or left to the factory, as in
// libtorch: zeros() of options with no dtype is f32, but tensor(std::vector<int64_t>) is int64,
// arange(5) int64 and zeros_like(t) t's dtype. The getters answer the default for an unset field.
class TensorOptions {
public:
    TensorOptions() = default;
    TensorOptions(DType d) : dtype_(d) {}          // NOLINT: zeros({2}, kFloat64) reads well
    TensorOptions(Device d) : device_(d) {}        // NOLINT
    TensorOptions(DeviceType d) : device_(d) {}    // NOLINT
    TensorOptions dtype(DType d) const { auto o = *this; o.dtype_ = d; return o; }
    template <typename T> TensorOptions dtype() const { return dtype(dtype_of<T>()); }
    TensorOptions device(Device d) const { auto o = *this; o.device_ = d; return o; }
    TensorOptions device(DeviceType type, int index) const { return device(Device(type, index)); }
    TensorOptions requires_grad(bool r) const { auto o = *this; o.requires_grad_ = r; return o; }
    DType dtype() const { return dtype_.value_or(kFloat32); }
    Device device() const { return device_.value_or(Device()); }
    bool requires_grad() const { return requires_grad_.value_or(false); }
    bool has_dtype() const { return dtype_.has_value(); }
    bool has_device() const { return device_.has_value(); }
    bool has_requires_grad() const { return requires_grad_.has_value(); }
    // These options with every field that `other` sets taken from it (libtorch's merge_in):
    // zeros_like(t, opts) makes t.options().merge_in(opts).
    TensorOptions merge_in(const TensorOptions& other) const {
        auto o = *this;
        if (other.dtype_) o.dtype_ = other.dtype_;
        if (other.device_) o.device_ = other.device_;
        if (other.requires_grad_) o.requires_grad_ = other.requires_grad_;
        return o;
    }

private:
    std::optional<DType> dtype_;
    std::optional<Device> device_;
    std::optional<bool> requires_grad_;
};

// libtorch's shorthands: zeros({2}, ampgrad::dtype(kFloat64).requires_grad(true)).
inline TensorOptions dtype(DType d) { return TensorOptions().dtype(d); }
template <typename T> TensorOptions dtype() { return TensorOptions().dtype<T>(); }
inline TensorOptions device(Device d) { return TensorOptions().device(d); }
inline TensorOptions requires_grad(bool r = true) { return TensorOptions().requires_grad(r); }

// Shared by a tensor and all its views; bumped by every in-place write (see autograd/saved_variable).
struct VersionCounter { std::atomic<uint32_t> version{0}; };

struct TensorImpl {
    TensorImpl(Storage storage, Shape sizes, Shape strides, int64_t offset, DType dtype,
               std::shared_ptr<VersionCounter> version);
    ~TensorImpl();

    Storage storage;
    Shape sizes;
    Shape strides;                     // in elements
    int64_t offset = 0;                // in elements
    DType dtype = kFloat32;
    std::shared_ptr<VersionCounter> version;
    std::unique_ptr<AutogradMetaInterface> autograd_meta;    // null until autograd needs it
};

class Tensor {
public:
    Tensor() = default;
    explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

    // ---- queries ----
    bool defined() const { return impl_ != nullptr; }
    const Shape& sizes() const;
    const Shape& strides() const;
    int64_t size(int64_t dim) const;          // negative dims count from the end
    int64_t stride(int64_t dim) const;
    int64_t dim() const;
    int64_t numel() const;
    int64_t storage_offset() const;
    DType dtype() const;
    DType scalar_type() const { return dtype(); }
    Device device() const;
    bool is_contiguous() const;
    bool is_floating_point() const { return is_floating(dtype()); }
    bool is_cpu() const { return device().is_cpu(); }
    bool is_cuda() const { return device().is_cuda(); }
    size_t element_size() const { return ampgrad::element_size(dtype()); }
    std::string shape_str() const;            // "(2,3)"
    std::string describe() const;             // "(2,3) f32 cpu", used in every error message
    TensorImpl* impl() const { return impl_.get(); }
    const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
    bool is_same(const Tensor& o) const { return impl_ == o.impl_; }
    uint32_t _version() const;
    void bump_version() const;
    TensorOptions options() const { return TensorOptions().dtype(dtype()).device(device()); }

    // Raw access to the first element (CPU only). T must match dtype().
    template <typename T> T* data_ptr() const;
    void* raw_data() const;                   // any device: address of element 0
    void* data_ptr() const { return raw_data(); }
    template <typename T> T item() const;     // one-element tensors; converts from any dtype
    template <typename T> std::vector<T> to_vector() const;   // host copy, row-major
    double item_double() const;
    // This tensor's memory is also used on `stream` (not the one it was allocated on): the allocator
    // keeps it until the work issued on `stream` so far has finished (PyTorch's Tensor.record_stream).
    void record_stream(const Stream& stream) const;

    // ---- autograd ----
    bool requires_grad() const;
    Tensor& requires_grad_(bool required = true);
    bool is_leaf() const;
    const Tensor& grad() const;
    Tensor& mutable_grad() const;
    void set_grad(const Tensor& g) const;
    const std::shared_ptr<autograd::Node>& grad_fn() const;
    uint32_t output_nr() const;
    void backward(const Tensor& gradient = {}, std::optional<bool> retain_graph = std::nullopt,
                  bool create_graph = false, const tensor_list& inputs = {}) const;
    autograd::RemovableHandle register_hook(std::function<Tensor(const Tensor&)> hook) const;
    // A hook that returns nothing only looks (libtorch accepts both kinds): it keeps the gradient.
    // Defined in autograd/hooks.hpp, where RemovableHandle is complete.
    template <typename F, typename Handle = autograd::RemovableHandle>
        requires std::is_void_v<std::invoke_result_t<F&, const Tensor&>>
    Handle register_hook(F hook) const;
    autograd::RemovableHandle register_post_accumulate_grad_hook(std::function<void(Tensor&)> hook) const;
    void retain_grad() const;
    bool retains_grad() const;
    Tensor detach() const;
    Tensor& detach_();
    void set_name(std::string name) const;   // used by anomaly mode and the scaler's overflow provenance
    std::string name() const;

    // ---- conversions ----
    Tensor to(DType dtype) const;
    Tensor to(Device device) const;
    // non_blocking: with pinned host memory on the other side, return once the copy is queued (as
    // PyTorch's non_blocking=True); the host must not touch that memory until the stream gets there.
    Tensor to(Device device, bool non_blocking) const;
    // A copy in page-locked host memory (this tensor if already pinned), from which copies to the
    // device run asynchronously (PyTorch's Tensor.pin_memory()). CPU tensors only; needs the
    // accelerator: DeviceError without one.
    Tensor pin_memory(DeviceType accelerator = kCUDA) const;
    bool is_pinned() const;
    Tensor to(DeviceType device) const { return to(Device(device)); }
    Tensor contiguous() const;
    Tensor clone() const;

    // ---- views ----
    Tensor view(const Shape& shape) const;
    Tensor reshape(const Shape& shape) const;
    // x.view(-1), x.reshape(n): one integer is a 1-d shape, as libtorch's IntArrayRef takes it
    template <typename I> requires(std::is_integral_v<I> && !std::is_same_v<I, bool>)
    Tensor view(I n) const { return view(Shape{static_cast<int64_t>(n)}); }
    template <typename I> requires(std::is_integral_v<I> && !std::is_same_v<I, bool>)
    Tensor reshape(I n) const { return reshape(Shape{static_cast<int64_t>(n)}); }
    Tensor transpose(int64_t d0, int64_t d1) const;
    Tensor t() const { return transpose(0, 1); }
    Tensor permute(const Shape& dims) const;
    Tensor unsqueeze(int64_t d) const;
    Tensor squeeze(int64_t d) const;
    Tensor squeeze() const;
    Tensor expand(const Shape& shape) const;
    Tensor expand_as(const Tensor& o) const { return expand(o.sizes()); }
    Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
    Tensor select(int64_t dim, int64_t index) const;
    tensor_list split(int64_t split_size, int64_t dim = 0) const;
    tensor_list chunk(int64_t chunks, int64_t dim = 0) const;
    Tensor masked_fill(const Tensor& mask, double value) const;
    Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
    Tensor slice(int64_t dim = 0, std::optional<int64_t> start = std::nullopt,
                 std::optional<int64_t> end = std::nullopt, int64_t step = 1) const;

    // ---- reordering copies and sorting ----
    Tensor repeat(const Shape& repeats) const;
    Tensor flip(const Shape& dims) const;
    Tensor roll(const Shape& shifts, const Shape& dims = {}) const;
    Tensor cumsum(int64_t dim, std::optional<DType> dtype = std::nullopt) const;
    std::pair<Tensor, Tensor> sort(int64_t dim = -1, bool descending = false, bool stable = false) const;
    Tensor argsort(int64_t dim = -1, bool descending = false, bool stable = false) const;
    std::pair<Tensor, Tensor> topk(int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true) const;

    // ---- math (broadcasting) ----
    Tensor pow(double exponent) const;
    Tensor pow(const Tensor& exponent) const;
    Tensor exp() const;
    Tensor log() const;
    Tensor sqrt() const;
    Tensor rsqrt() const;
    Tensor abs() const;
    Tensor tanh() const;
    Tensor sigmoid() const;
    Tensor relu() const;
    Tensor gelu(bool tanh_approximation = false) const;
    Tensor gelu(const char* approximate) const;          // "none" or "tanh", as torch::gelu
    Tensor gelu(std::string_view approximate) const;
    Tensor silu() const;
    Tensor neg() const;
    Tensor clamp(std::optional<double> lo, std::optional<double> hi = std::nullopt) const;
    Tensor clamp_min(double lo) const { return clamp(lo, std::nullopt); }
    Tensor clamp_max(double hi) const { return clamp(std::nullopt, hi); }
    Tensor maximum(const Tensor& o) const;
    Tensor minimum(const Tensor& o) const;
    Tensor sin() const;
    Tensor cos() const;
    Tensor exp2() const;
    Tensor log1p() const;
    Tensor expm1() const;
    Tensor erf() const;
    Tensor sign() const;
    Tensor floor() const;
    Tensor ceil() const;
    Tensor round() const;
    Tensor trunc() const;
    Tensor fmod(const Tensor& o) const;
    Tensor fmod(double o) const;
    Tensor remainder(const Tensor& o) const;
    Tensor remainder(double o) const;
    Tensor atan2(const Tensor& o) const;
    Tensor lerp(const Tensor& end, const Tensor& weight) const;
    Tensor lerp(const Tensor& end, double weight) const;
    Tensor logical_and(const Tensor& o) const;
    Tensor logical_or(const Tensor& o) const;
    Tensor logical_xor(const Tensor& o) const;
    Tensor logical_not() const;
    // arithmetic and comparisons as methods (the operators in ops.hpp are the same ops)
    Tensor add(const Tensor& o, double alpha = 1.0) const;
    Tensor add(double s) const;
    Tensor sub(const Tensor& o, double alpha = 1.0) const;
    Tensor sub(double s) const;
    Tensor mul(const Tensor& o) const;
    Tensor mul(double s) const;
    Tensor div(const Tensor& o) const;
    Tensor div(double s) const;
    Tensor eq(const Tensor& o) const;
    Tensor eq(double s) const;
    Tensor ne(const Tensor& o) const;
    Tensor ne(double s) const;
    Tensor lt(const Tensor& o) const;
    Tensor lt(double s) const;
    Tensor le(const Tensor& o) const;
    Tensor le(double s) const;
    Tensor gt(const Tensor& o) const;
    Tensor gt(double s) const;
    Tensor ge(const Tensor& o) const;
    Tensor ge(double s) const;
    Tensor softmax(int64_t dim) const;
    Tensor log_softmax(int64_t dim) const;

    // ---- reductions ----
    Tensor sum() const;
    Tensor sum(const Shape& dims, bool keepdim = false) const;
    Tensor sum(int64_t dim, bool keepdim = false) const { return sum(Shape{dim}, keepdim); }
    Tensor mean() const;
    Tensor mean(const Shape& dims, bool keepdim = false) const;
    Tensor mean(int64_t dim, bool keepdim = false) const { return mean(Shape{dim}, keepdim); }
    std::pair<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;   // values, indices
    Tensor max() const;
    Tensor amax(const Shape& dims, bool keepdim = false) const;
    Tensor amax(int64_t dim, bool keepdim = false) const { return amax(Shape{dim}, keepdim); }
    Tensor logsumexp(int64_t dim, bool keepdim = false) const;
    Tensor norm() const;                                                       // L2 over all
    Tensor var(int64_t dim, bool unbiased = true, bool keepdim = false) const;
    Tensor argmax(int64_t dim, bool keepdim = false) const;
    std::pair<Tensor, Tensor> min(int64_t dim, bool keepdim = false) const;
    Tensor min() const;
    Tensor amin(const Shape& dims, bool keepdim = false) const;
    Tensor amin(int64_t dim, bool keepdim = false) const { return amin(Shape{dim}, keepdim); }
    Tensor argmin(int64_t dim, bool keepdim = false) const;
    Tensor prod() const;
    Tensor all() const;                                       // kBool (): every element nonzero
    Tensor all(int64_t dim, bool keepdim = false) const;
    Tensor any() const;                                       // kBool (): some element nonzero
    Tensor any(int64_t dim, bool keepdim = false) const;
    Tensor prod(int64_t dim, bool keepdim = false) const;
    Tensor var(const Shape& dims, double correction, bool keepdim = false) const;
    Tensor std(const Shape& dims = {}, double correction = 1.0, bool keepdim = false) const;
    Tensor logsumexp(const Shape& dims, bool keepdim = false) const;
    Tensor norm(double p, const Shape& dims = {}, bool keepdim = false) const;

    // ---- linear algebra ----
    Tensor matmul(const Tensor& o) const;
    Tensor mm(const Tensor& o) const;
    Tensor bmm(const Tensor& o) const;

    // ---- indexing along one dim (autograd/ops/index.cpp) ----
    Tensor gather(int64_t dim, const Tensor& index) const;
    Tensor scatter(int64_t dim, const Tensor& index, const Tensor& src) const;
    Tensor scatter(int64_t dim, const Tensor& index, double value) const;
    Tensor scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const;
    Tensor index_select(int64_t dim, const Tensor& index) const;
    Tensor index_add(int64_t dim, const Tensor& index, const Tensor& source, double alpha = 1.0) const;
    Tensor take_along_dim(const Tensor& indices, std::optional<int64_t> dim = std::nullopt) const;
    Tensor repeat_interleave(const Tensor& repeats, std::optional<int64_t> dim = std::nullopt,
                             std::optional<int64_t> output_size = std::nullopt) const;
    // (*) int64 class indices -> (*,num_classes) int64 (-1: max + 1), as F::one_hot (torch.nn.functional.one_hot)
    Tensor one_hot(int64_t num_classes = -1) const;

    // ---- in place (bump the version counter) ----
    // const, as libtorch's: a Tensor is a handle, and these change the values it points to, never the
    // handle (so x.grad().zero_() and a loop over const Tensor& parameters work).
    Tensor& add_(const Tensor& o, double alpha = 1.0) const;
    Tensor& add_(double s) const;
    Tensor& sub_(const Tensor& o, double alpha = 1.0) const { return add_(o, -alpha); }
    Tensor& sub_(double s) const { return add_(-s); }
    Tensor& mul_(const Tensor& o) const;
    Tensor& mul_(double s) const;
    Tensor& zero_() const;
    Tensor& fill_(double value) const;
    Tensor& copy_(const Tensor& src) const;
    Tensor& clamp_(std::optional<double> lo, std::optional<double> hi = std::nullopt) const;
    Tensor& scatter_(int64_t dim, const Tensor& index, const Tensor& src) const;
    Tensor& scatter_(int64_t dim, const Tensor& index, double value) const;
    Tensor& scatter_add_(int64_t dim, const Tensor& index, const Tensor& src) const;
    Tensor& index_add_(int64_t dim, const Tensor& index, const Tensor& source, double alpha = 1.0) const;

private:
    Tensor& self() const { return const_cast<Tensor&>(*this); }   // for the const in-place methods
    std::shared_ptr<TensorImpl> impl_;
};

// C++ type <-> DType
template <> constexpr DType dtype_of<float>() { return kFloat32; }
template <> constexpr DType dtype_of<double>() { return kFloat64; }
template <> constexpr DType dtype_of<Half>() { return kFloat16; }
template <> constexpr DType dtype_of<BFloat16>() { return kBFloat16; }
template <> constexpr DType dtype_of<int64_t>() { return kInt64; }
template <> constexpr DType dtype_of<int32_t>() { return kInt32; }
template <> constexpr DType dtype_of<bool>() { return kBool; }
template <> constexpr DType dtype_of<Float8_e4m3fn>() { return kFloat8_e4m3fn; }
template <> constexpr DType dtype_of<Float8_e5m2>() { return kFloat8_e5m2; }
template <> constexpr DType dtype_of<uint8_t>() { return kUInt8; }

// ---- tensor construction that does not record autograd (used by ops and factories) ----
Shape contiguous_strides(const Shape& sizes);
int64_t shape_numel(const Shape& sizes);
std::string shape_str(const Shape& sizes);
Tensor make_empty(const Shape& sizes, DType dtype, Device device);     // contiguous, uninitialised
Tensor make_view(const Tensor& base, Shape sizes, Shape strides, int64_t offset);  // shares storage+version
// The strides that view x as `shape` (same numel) without copying, or nullopt when one dimension of
// `shape` would span two non-contiguous subspaces of x (PyTorch's computeStride).
std::optional<Shape> view_strides(const Tensor& x, const Shape& shape);

}  // namespace ampgrad

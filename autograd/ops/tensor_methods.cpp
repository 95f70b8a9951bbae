// tensor_methods.cpp: Tensor's math/view/reduction methods, each a one-line forward to the free
// function of the same name in autograd/ops/ops.hpp.
#include "autograd/ops/ops.hpp"

namespace ampgrad {

Tensor Tensor::to(DType d) const { return to_dtype(*this, d); }
Tensor Tensor::to(Device d) const { return to_device(*this, d); }
Tensor Tensor::to(Device d, bool non_blocking) const { return to_device(*this, d, non_blocking); }
Tensor Tensor::contiguous() const { return ampgrad::contiguous(*this); }
Tensor Tensor::clone() const { return ampgrad::clone(*this); }

Tensor Tensor::view(const Shape& s) const { return ampgrad::view(*this, s); }
Tensor Tensor::reshape(const Shape& s) const { return ampgrad::reshape(*this, s); }
Tensor Tensor::transpose(int64_t a, int64_t b) const { return ampgrad::transpose(*this, a, b); }
Tensor Tensor::permute(const Shape& d) const { return ampgrad::permute(*this, d); }
Tensor Tensor::unsqueeze(int64_t d) const { return ampgrad::unsqueeze(*this, d); }
Tensor Tensor::squeeze(int64_t d) const { return ampgrad::squeeze(*this, d); }
Tensor Tensor::squeeze() const {
    Shape s;
    for (int64_t v : sizes()) if (v != 1) s.push_back(v);
    return ampgrad::reshape(*this, s);
}
Tensor Tensor::expand(const Shape& s) const { return ampgrad::expand(*this, s); }
Tensor Tensor::narrow(int64_t d, int64_t start, int64_t len) const { return ampgrad::narrow(*this, d, start, len); }
Tensor Tensor::select(int64_t d, int64_t i) const { return ampgrad::select(*this, d, i); }
tensor_list Tensor::split(int64_t size, int64_t d) const { return ampgrad::split(*this, size, d); }
tensor_list Tensor::chunk(int64_t chunks, int64_t d) const { return ampgrad::chunk(*this, chunks, d); }
Tensor Tensor::masked_fill(const Tensor& mask, double value) const { return ampgrad::masked_fill(*this, mask, value); }
Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
    int64_t n = dim();
    if (n == 0) return reshape({1});
    int64_t s = start_dim < 0 ? start_dim + n : start_dim, e = end_dim < 0 ? end_dim + n : end_dim;
    Shape out(sizes().begin(), sizes().begin() + s);
    int64_t m = 1;
    for (int64_t i = s; i <= e; ++i) m *= sizes()[i];
    out.push_back(m);
    out.insert(out.end(), sizes().begin() + e + 1, sizes().end());
    return reshape(out);
}

Tensor Tensor::slice(int64_t d, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step) const {
    return ampgrad::slice(*this, d, start, end, step);
}
Tensor Tensor::repeat(const Shape& r) const { return ampgrad::repeat(*this, r); }
Tensor Tensor::flip(const Shape& d) const { return ampgrad::flip(*this, d); }
Tensor Tensor::roll(const Shape& s, const Shape& d) const { return ampgrad::roll(*this, s, d); }
Tensor Tensor::cumsum(int64_t d, std::optional<DType> dtype) const { return ampgrad::cumsum(*this, d, dtype); }
std::pair<Tensor, Tensor> Tensor::sort(int64_t d, bool desc, bool stable) const { return ampgrad::sort(*this, d, desc, stable); }
Tensor Tensor::argsort(int64_t d, bool desc, bool stable) const { return ampgrad::argsort(*this, d, desc, stable); }
std::pair<Tensor, Tensor> Tensor::topk(int64_t k, int64_t d, bool largest, bool sorted) const {
    return ampgrad::topk(*this, k, d, largest, sorted);
}

Tensor Tensor::pow(double e) const { return ampgrad::pow(*this, e); }
Tensor Tensor::pow(const Tensor& e) const { return ampgrad::pow(*this, e); }
Tensor Tensor::exp() const { return ampgrad::exp(*this); }
Tensor Tensor::log() const { return ampgrad::log(*this); }
Tensor Tensor::sqrt() const { return ampgrad::sqrt(*this); }
Tensor Tensor::rsqrt() const { return ampgrad::rsqrt(*this); }
Tensor Tensor::abs() const { return ampgrad::abs(*this); }
Tensor Tensor::tanh() const { return ampgrad::tanh(*this); }
Tensor Tensor::sigmoid() const { return ampgrad::sigmoid(*this); }
Tensor Tensor::relu() const { return ampgrad::relu(*this); }
Tensor Tensor::gelu(bool approx) const { return ampgrad::gelu(*this, approx); }
Tensor Tensor::gelu(const char* approximate) const { return ampgrad::gelu(*this, approximate); }
Tensor Tensor::gelu(std::string_view approximate) const { return ampgrad::gelu(*this, approximate); }
Tensor Tensor::silu() const { return ampgrad::silu(*this); }
Tensor Tensor::neg() const { return ampgrad::neg(*this); }
Tensor Tensor::clamp(std::optional<double> lo, std::optional<double> hi) const { return ampgrad::clamp(*this, lo, hi); }
Tensor Tensor::maximum(const Tensor& o) const { return ampgrad::maximum(*this, o); }
Tensor Tensor::minimum(const Tensor& o) const { return ampgrad::minimum(*this, o); }
Tensor Tensor::sin() const { return ampgrad::sin(*this); }
Tensor Tensor::cos() const { return ampgrad::cos(*this); }
Tensor Tensor::exp2() const { return ampgrad::exp2(*this); }
Tensor Tensor::log1p() const { return ampgrad::log1p(*this); }
Tensor Tensor::expm1() const { return ampgrad::expm1(*this); }
Tensor Tensor::erf() const { return ampgrad::erf(*this); }
Tensor Tensor::sign() const { return ampgrad::sign(*this); }
Tensor Tensor::floor() const { return ampgrad::floor(*this); }
Tensor Tensor::ceil() const { return ampgrad::ceil(*this); }
Tensor Tensor::round() const { return ampgrad::round(*this); }
Tensor Tensor::trunc() const { return ampgrad::trunc(*this); }
Tensor Tensor::fmod(const Tensor& o) const { return ampgrad::fmod(*this, o); }
Tensor Tensor::fmod(double o) const { return ampgrad::fmod(*this, o); }
Tensor Tensor::remainder(const Tensor& o) const { return ampgrad::remainder(*this, o); }
Tensor Tensor::remainder(double o) const { return ampgrad::remainder(*this, o); }
Tensor Tensor::atan2(const Tensor& o) const { return ampgrad::atan2(*this, o); }
Tensor Tensor::lerp(const Tensor& end, const Tensor& w) const { return ampgrad::lerp(*this, end, w); }
Tensor Tensor::lerp(const Tensor& end, double w) const { return ampgrad::lerp(*this, end, w); }
Tensor Tensor::logical_and(const Tensor& o) const { return ampgrad::logical_and(*this, o); }
Tensor Tensor::logical_or(const Tensor& o) const { return ampgrad::logical_or(*this, o); }
Tensor Tensor::logical_xor(const Tensor& o) const { return ampgrad::logical_xor(*this, o); }
Tensor Tensor::logical_not() const { return ampgrad::logical_not(*this); }
Tensor Tensor::add(const Tensor& o, double alpha) const { return ampgrad::add(*this, o, alpha); }
Tensor Tensor::add(double s) const { return ampgrad::add(*this, s); }
Tensor Tensor::sub(const Tensor& o, double alpha) const { return ampgrad::sub(*this, o, alpha); }
Tensor Tensor::sub(double s) const { return *this - s; }
Tensor Tensor::mul(const Tensor& o) const { return ampgrad::mul(*this, o); }
Tensor Tensor::mul(double s) const { return ampgrad::mul(*this, s); }
Tensor Tensor::div(const Tensor& o) const { return ampgrad::div(*this, o); }
Tensor Tensor::div(double s) const { return ampgrad::div(*this, s); }
Tensor Tensor::eq(const Tensor& o) const { return ampgrad::eq(*this, o); }
Tensor Tensor::eq(double s) const { return ampgrad::eq(*this, s); }
Tensor Tensor::ne(const Tensor& o) const { return ampgrad::ne(*this, o); }
Tensor Tensor::ne(double s) const { return ampgrad::ne(*this, s); }
Tensor Tensor::lt(const Tensor& o) const { return ampgrad::lt(*this, o); }
Tensor Tensor::lt(double s) const { return ampgrad::lt(*this, s); }
Tensor Tensor::le(const Tensor& o) const { return ampgrad::le(*this, o); }
Tensor Tensor::le(double s) const { return ampgrad::le(*this, s); }
Tensor Tensor::gt(const Tensor& o) const { return ampgrad::gt(*this, o); }
Tensor Tensor::gt(double s) const { return ampgrad::gt(*this, s); }
Tensor Tensor::ge(const Tensor& o) const { return ampgrad::ge(*this, o); }
Tensor Tensor::ge(double s) const { return ampgrad::ge(*this, s); }
Tensor Tensor::softmax(int64_t d) const { return F::softmax(*this, d); }
Tensor Tensor::log_softmax(int64_t d) const { return F::log_softmax(*this, d); }

Tensor Tensor::sum() const { return ampgrad::sum(*this); }
Tensor Tensor::sum(const Shape& d, bool k) const { return ampgrad::sum(*this, d, k); }
Tensor Tensor::mean() const { return ampgrad::mean(*this); }
Tensor Tensor::mean(const Shape& d, bool k) const { return ampgrad::mean(*this, d, k); }
std::pair<Tensor, Tensor> Tensor::max(int64_t d, bool k) const { return ampgrad::max(*this, d, k); }
Tensor Tensor::max() const { return ampgrad::max(*this); }
Tensor Tensor::amax(const Shape& d, bool k) const { return ampgrad::amax(*this, d, k); }
Tensor Tensor::logsumexp(int64_t d, bool k) const { return ampgrad::logsumexp(*this, d, k); }
Tensor Tensor::norm() const { return ampgrad::norm(*this); }
Tensor Tensor::var(int64_t d, bool unbiased, bool k) const { return ampgrad::var(*this, d, unbiased, k); }
Tensor Tensor::argmax(int64_t d, bool k) const { return ampgrad::argmax(*this, d, k); }
std::pair<Tensor, Tensor> Tensor::min(int64_t d, bool k) const { return ampgrad::min(*this, d, k); }
Tensor Tensor::min() const { return ampgrad::min(*this); }
Tensor Tensor::amin(const Shape& d, bool k) const { return ampgrad::amin(*this, d, k); }
Tensor Tensor::argmin(int64_t d, bool k) const { return ampgrad::argmin(*this, d, k); }
Tensor Tensor::prod() const { return ampgrad::prod(*this); }
Tensor Tensor::prod(int64_t d, bool k) const { return ampgrad::prod(*this, d, k); }
Tensor Tensor::var(const Shape& d, double c, bool k) const { return ampgrad::var(*this, d, c, k); }
Tensor Tensor::std(const Shape& d, double c, bool k) const { return ampgrad::std(*this, d, c, k); }
Tensor Tensor::logsumexp(const Shape& d, bool k) const { return ampgrad::logsumexp(*this, d, k); }
Tensor Tensor::norm(double p, const Shape& d, bool k) const { return ampgrad::norm(*this, p, d, k); }

Tensor Tensor::matmul(const Tensor& o) const { return ampgrad::matmul(*this, o); }
Tensor Tensor::mm(const Tensor& o) const { return ampgrad::mm(*this, o); }
Tensor Tensor::bmm(const Tensor& o) const { return ampgrad::bmm(*this, o); }

Tensor Tensor::gather(int64_t d, const Tensor& i) const { return ampgrad::gather(*this, d, i); }
Tensor Tensor::scatter(int64_t d, const Tensor& i, const Tensor& s) const { return ampgrad::scatter(*this, d, i, s); }
Tensor Tensor::scatter(int64_t d, const Tensor& i, double v) const { return ampgrad::scatter(*this, d, i, v); }
Tensor Tensor::scatter_add(int64_t d, const Tensor& i, const Tensor& s) const {
    return ampgrad::scatter_add(*this, d, i, s);
}
Tensor Tensor::index_select(int64_t d, const Tensor& i) const { return ampgrad::index_select(*this, d, i); }
Tensor Tensor::one_hot(int64_t num_classes) const { return F::one_hot(*this, num_classes); }
Tensor Tensor::index_add(int64_t d, const Tensor& i, const Tensor& s, double alpha) const {
    return ampgrad::index_add(*this, d, i, s, alpha);
}
Tensor Tensor::take_along_dim(const Tensor& i, std::optional<int64_t> d) const {
    return ampgrad::take_along_dim(*this, i, d);
}
Tensor Tensor::repeat_interleave(const Tensor& r, std::optional<int64_t> d, std::optional<int64_t> n) const {
    return ampgrad::repeat_interleave(*this, r, d, n);
}

// The in-place methods are const (Tensor is a handle): `self()` is the same handle, for the free
// functions' Tensor& parameter.
Tensor& Tensor::add_(const Tensor& o, double alpha) const { return ampgrad::add_(self(), o, alpha); }
Tensor& Tensor::add_(double s) const { return ampgrad::add_(self(), s); }
Tensor& Tensor::mul_(const Tensor& o) const { return ampgrad::mul_(self(), o); }
Tensor& Tensor::mul_(double s) const { return ampgrad::mul_(self(), s); }
Tensor& Tensor::zero_() const { return ampgrad::zero_(self()); }
Tensor& Tensor::fill_(double v) const { return ampgrad::fill_(self(), v); }
Tensor& Tensor::copy_(const Tensor& src) const { return ampgrad::copy_(self(), src); }
Tensor& Tensor::clamp_(std::optional<double> lo, std::optional<double> hi) const {
    return ampgrad::clamp_(self(), lo, hi);
}
Tensor& Tensor::scatter_(int64_t d, const Tensor& i, const Tensor& s) const {
    return ampgrad::scatter_(self(), d, i, s);
}
Tensor& Tensor::scatter_(int64_t d, const Tensor& i, double v) const { return ampgrad::scatter_(self(), d, i, v); }
Tensor& Tensor::scatter_add_(int64_t d, const Tensor& i, const Tensor& s) const {
    return ampgrad::scatter_add_(self(), d, i, s);
}
Tensor& Tensor::index_add_(int64_t d, const Tensor& i, const Tensor& s, double alpha) const {
    return ampgrad::index_add_(self(), d, i, s, alpha);
}

}  // namespace ampgrad
